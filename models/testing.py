"""Small models with random weights, built locally, that go through the real loading code.

They carry an ``engram_provenance.json`` marking them as untrained, so ``describe()`` says so wherever
they are loaded. Their tokenizer is the packaged MiniLM one (real WordPiece vocabulary, 30522 ids), or where that
package is not installed (a GPU box the weights were not carried to) the same vocabulary from the project's trained
cross-encoder.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from models._hf import PROVENANCE_FILE
from models.packaged import minilm_path

logger = logging.getLogger(__name__)



@dataclass(frozen=True)
class BertShape:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int


TINY_BERT = BertShape(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
MINILM_L6_BERT = BertShape(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
# multilingual-e5-small's encoder (12 layers of MiniLM-L6's width); its 250k-row embedding table is left out: a
# lookup, not compute, so the forward pass costs the same
E5_SMALL_BERT = BertShape(hidden_size=384, num_hidden_layers=12, num_attention_heads=12, intermediate_size=1536)
# the project's trained cross-encoder, tracked in the repository (all-MiniLM-L6-v2's WordPiece vocabulary: the tokenizer
# of random-weight models where the packaged MiniLM is absent)
TRACKED_RERANKER = Path(__file__).resolve().parent / "weights" / "engram-reranker-v1"


def tokenizer_source() -> Path:
    """A folder with the MiniLM WordPiece tokenizer: the packaged model's, else the tracked cross-encoder's."""
    try:
        return minilm_path()
    except Exception:   # noqa: BLE001 (the package is absent or incomplete: a bare GPU box)
        if (TRACKED_RERANKER / "tokenizer.json").is_file():
            return TRACKED_RERANKER
        raise


def build_tiny_cross_encoder(dest: Path, *, seed: int = 0, num_labels: int = 1) -> Path:
    """A 2-layer, 32-wide BERT with a classification head (one logit by default) and random weights."""
    return _build(
        dest, shape=TINY_BERT, head=True, seed=seed, name="engram-tiny-cross-encoder", num_labels=num_labels
    )


def build_minilm_shaped_cross_encoder(dest: Path, *, seed: int = 0) -> Path:
    """MiniLM-L6 shape (6 layers, 384 wide, 12 heads), random weights: for speed benchmarks only."""
    return _build(dest, shape=MINILM_L6_BERT, head=True, seed=seed, name="engram-minilm-shaped-cross-encoder")


def build_shaped_encoder(dest: Path, shape: BertShape, *, name: str, seed: int = 0) -> Path:
    """An encoder of ``shape`` with random weights, loadable by ``HFEmbedder.load``: for speed benchmarks only."""
    return _build(dest, shape=shape, head=False, seed=seed, name=name)


def build_tiny_encoder(dest: Path, *, seed: int = 0) -> Path:
    """A 2-layer, 32-wide BERT encoder (dim 32) with random weights, loadable by ``HFEmbedder.load``."""
    return _build(dest, shape=TINY_BERT, head=False, seed=seed, name="engram-tiny-encoder")


def _build(dest: Path, *, shape: BertShape, head: bool, seed: int, name: str, num_labels: int = 1) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertModel

    source = tokenizer_source()
    tokenizer = AutoTokenizer.from_pretrained(str(source), use_fast=True)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        max_position_embeddings=512,
        hidden_size=shape.hidden_size,
        num_hidden_layers=shape.num_hidden_layers,
        num_attention_heads=shape.num_attention_heads,
        intermediate_size=shape.intermediate_size,
    )
    config.num_labels = num_labels
    model: Any = BertForSequenceClassification(config) if head else BertModel(config)
    _randomize(model, seed=seed)
    model.eval()
    dest.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(dest))
    tokenizer.save_pretrained(str(dest))
    provenance = {
        "name": name,
        "provenance": f"random-init by engram models.testing (seed={seed}); NOT TRAINED, scores are meaningless",
        "random_weights": True,
        "shape": asdict(shape),
        "seed": seed,
    }
    (dest / PROVENANCE_FILE).write_text(json.dumps(provenance, indent=2), encoding="utf-8")
    logger.info("built %s at %s", name, dest)
    return dest


def _randomize(model: torch.nn.Module, *, seed: int) -> None:
    """Deterministic init independent of transformers' own: unit-scale activations, so logits vary."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param_name, param in sorted(model.named_parameters()):
            if "LayerNorm" in param_name or param_name.endswith("norm.weight"):
                param.fill_(1.0 if param_name.endswith("weight") else 0.0)
            elif param_name.endswith("bias"):
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
            elif param.dim() == 2 and "embeddings" not in param_name:
                param.copy_(torch.randn(param.shape, generator=generator) / math.sqrt(param.shape[1]))
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
