"""Listwise fine-tuning of a cross-encoder: softmax over (1 positive + k hard negatives) per group.

The network starts from an encoder a registry package ships (the packaged all-MiniLM-L6-v2, cut to
its first ``layers`` layers so that reranking fits a CPU latency budget) plus a fresh one-logit head.
Everything that draws random numbers is seeded; torch runs with deterministic algorithms and a fixed
number of CPU threads, so the same inputs give the same weights.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models._hf import PROVENANCE_FILE
from models.devices import cpu_has_native_bf16
from training.data import Group

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainConfig:
    layers: int = 6              # encoder layers kept (0 = all)
    max_length: int = 128        # tokens per (query, passage) pair while training
    groups_per_step: int = 4     # a step sees groups_per_step × (1 + negatives) pairs
    # Two passes over 4,285 groups of 1 + 7 (SciFact train claims + 3,500 self-supervised sentences) in
    # bfloat16 autocast: 35 min here (run 3). Against run 2 (one float32 pass over 2,785 groups, 23 min)
    # the model alone on BM25 top-20 SciFact test went 0.641 -> 0.659 nDCG@10 and fused with BM25 (blend
    # 1) 0.677 -> 0.691; benchmarks/results/reranker/run{1,2,3}_*.json.
    epochs: int = 2
    # all-MiniLM-L6-v2 was trained with mean pooling: its [CLS] state is nearly the same for every input
    # (relative spread ~1e-3), and BERT's classification head reads [CLS]; see init_model.
    lr: float = 1e-4
    head_lr: float = 1e-3        # the fresh head learns faster than the pretrained body
    weight_decay: float = 0.01
    warmup_share: float = 0.05
    seed: int = 13
    threads: int = 2
    log_every: int = 10
    uniform_last_attention: bool = True  # see init_model
    # Matrix products in bfloat16 under autocast (weights, optimizer and loss stay float32). "auto":
    # bfloat16 where the CPU has native bfloat16 (models.devices.cpu_has_native_bf16), else float32. On
    # this project's AVX512_BF16 CPUs a step of 32 pairs x 128 tokens takes 0.78 s instead of 1.74 s.
    precision: str = "auto"
    # Attention as plain matrix products ("eager") rather than torch's fused scaled_dot_product_attention:
    # with attention dropout on (training), a step of 32 pairs x 128 tokens took 0.77 s against 0.92 s here
    # (forward 0.44 vs 0.51 s, backward 0.29 vs 0.37 s). Same network and dropout rates; "sdpa" is the other choice.
    attention: str = "eager"


def autocast_dtype(precision: str) -> torch.dtype | None:
    """The autocast dtype for ``precision`` (None = plain float32)."""
    choice = precision.lower()
    if choice == "auto":
        return torch.bfloat16 if cpu_has_native_bf16() else None
    if choice in ("bfloat16", "bf16"):
        return torch.bfloat16
    if choice in ("float32", "fp32"):
        return None
    raise ValueError(f"precision must be auto, bfloat16 or float32, not {precision!r}")


def seed_everything(seed: int, *, threads: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


def init_model(init_path: Path, *, layers: int, seed: int, uniform_last_attention: bool = True,
               attention: str = "eager") -> tuple[Any, Any]:
    """(tokenizer, model): the encoder's weights, its first ``layers`` layers, a fresh seeded head."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the "classifier newly initialized" report is expected
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(init_path), use_fast=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(init_path), num_labels=1, dtype=torch.float32,
                                                               attn_implementation=attention)
    encoder = model.base_model.encoder
    if 0 < layers < len(encoder.layer):
        encoder.layer = encoder.layer[:layers]
        model.config.num_hidden_layers = layers
    if uniform_last_attention:
        # The head reads only the last layer's [CLS]; with zero queries there, [CLS] attends to every
        # token alike and starts as a mean-pooled summary of the pair (what this encoder was trained
        # to produce) instead of a near-constant vector. The queries learn from zero.
        attention = encoder.layer[-1].attention.self
        with torch.no_grad():
            attention.query.weight.zero_()
            attention.query.bias.zero_()
    return tokenizer, model


def _batches(groups: Sequence[Group], size: int) -> list[Sequence[Group]]:
    return [groups[i:i + size] for i in range(0, len(groups), size)]


class Stepper:
    """One optimizer step per loss (backward, gradient norm clipped to 1, step, schedule) and the loss curve:
    every ``log_every`` steps (and the last) a row of the mean loss since the last row, logged, kept in
    ``history`` and appended to ``log_path``. Shared by the recipe and :mod:`training.distill`."""

    def __init__(self, model: Any, optimizer: Any, scheduler: Any, *, steps: int, log_every: int,
                 log_path: Path | None) -> None:
        self.model, self.optimizer, self.scheduler = model, optimizer, scheduler
        self.steps, self.log_every, self.log_path = steps, log_every, log_path
        self.history: list[dict[str, float]] = []
        self.started, self.done, self._window = time.perf_counter(), 0, []

    def step(self, loss: torch.Tensor, *, epoch: int) -> None:
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.done += 1
        self._window.append(float(loss.detach()))
        if self.done % self.log_every == 0 or self.done == self.steps:
            row = {"step": self.done, "epoch": epoch, "loss": round(sum(self._window) / len(self._window), 5),
                   "lr": self.scheduler.get_last_lr()[0], "elapsed_s": round(time.perf_counter() - self.started, 1)}
            self.history.append(row)
            self._window = []
            log.info("step %d/%d loss %.4f (%.0fs)", self.done, self.steps, row["loss"], row["elapsed_s"])
            if self.log_path is not None:
                with self.log_path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")


def train(groups: Sequence[Group], *, init_path: Path, cfg: TrainConfig,
          log_path: Path | None = None) -> tuple[Any, Any, list[dict[str, float]]]:
    """Trains on ``groups`` in their given order (shuffled again per epoch by ``cfg.seed``)."""
    if not groups:
        raise ValueError("no training groups")
    width = len(groups[0].passages)
    if any(len(g.passages) != width for g in groups):
        raise ValueError("every group needs the same number of passages")
    half = autocast_dtype(cfg.precision)
    seed_everything(cfg.seed, threads=cfg.threads)
    tokenizer, model = init_model(init_path, layers=cfg.layers, seed=cfg.seed,
                                  uniform_last_attention=cfg.uniform_last_attention, attention=cfg.attention)
    head = [p for n, p in model.named_parameters() if n.startswith("classifier")]
    body = [p for n, p in model.named_parameters() if not n.startswith("classifier")]
    # fused: one kernel over all parameters (15 vs 39 ms a step on the CPU)
    optimizer = torch.optim.AdamW([{"params": body, "lr": cfg.lr}, {"params": head, "lr": cfg.head_lr}],
                                  weight_decay=cfg.weight_decay, fused=True)
    steps = cfg.epochs * math.ceil(len(groups) / cfg.groups_per_step)
    warmup = max(1, int(steps * cfg.warmup_share))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup))))
    rng = random.Random(cfg.seed)
    stepper = Stepper(model, optimizer, scheduler, steps=steps, log_every=cfg.log_every, log_path=log_path)
    log.info("training %d steps in %s", steps, half or torch.float32)
    model.train()
    for epoch in range(cfg.epochs):
        order = list(groups)
        if epoch:
            rng.shuffle(order)
        for batch in _batches(order, cfg.groups_per_step):
            queries = [g.query for g in batch for _ in g.passages]
            passages = [p for g in batch for p in g.passages]
            enc = tokenizer(queries, passages, truncation="longest_first", max_length=cfg.max_length,
                            padding=True, return_tensors="pt")
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=half is not None):
                logits = model(**enc).logits.view(len(batch), width)
            logits = logits.float()
            loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
            stepper.step(loss, epoch=epoch)
    model.eval()
    return tokenizer, model, stepper.history


def save(tokenizer: Any, model: Any, out: Path, *, max_length: int, provenance: dict[str, Any]) -> Path:
    """fp16 safetensors, config, tokenizer (its model_max_length = ``max_length``, the length trained at,
    which the server reads pairs at by default), provenance JSON."""
    out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(str(out), safe_serialization=True)
    model.float()
    tokenizer.model_max_length = max_length
    tokenizer.save_pretrained(str(out))
    meta = {"name": provenance.get("name", out.name), "random_weights": False, **provenance}
    (out / PROVENANCE_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return out


def config_dict(cfg: TrainConfig) -> dict[str, Any]:
    return asdict(cfg)
