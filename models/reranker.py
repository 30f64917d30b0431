"""Cross-encoder reranker: any Hugging Face ``AutoModelForSequenceClassification`` scoring (query, passage)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from models._hf import HFRunner, load_parts
from models.base import ModelLoadError, TextPair
from models.unpadded import supports

logger = logging.getLogger(__name__)


class HFCrossEncoder(HFRunner[TextPair]):
    """Implements :class:`models.base.Reranker`. Build with :meth:`load`.

    Scores are raw logits: the single logit of a one-label head, else the logit of ``positive_label``
    (default 1 for a two-label head). Higher is more relevant; no sigmoid is applied.
    """

    kind = "cross-encoder"
    cpu_batch_size = 32

    def __init__(self, *, positive_label: int, **kwargs: Any) -> None:
        self.num_labels = int(kwargs["model"].config.num_labels)  # before the base class's load-time checks
        self.positive_label = positive_label
        super().__init__(**kwargs)

    @classmethod
    def load(
        cls,
        path_or_id: str | Path,
        *,
        device: str = "cpu",
        dtype: torch.dtype | str | None = None,
        max_length: int = 512,
        batch_size: int | None = None,
        positive_label: int | None = None,
        num_threads: int | None = None,
        name: str | None = None,
        provenance: str | None = None,
        trace: bool = False,
        unpad: bool = False,
    ) -> HFCrossEncoder:
        """Load tokenizer and classification model from a local folder (or a hub id where a network exists).

        ``dtype`` None → float16 on CUDA; bfloat16 on a CPU with native bfloat16, else float32. In half
        precision the output layer still runs in float32 (see :func:`_float32_output_layer`).
        ``num_threads`` sets torch's process-wide CPU threads when given (None leaves them alone).
        """
        from transformers import AutoModelForSequenceClassification

        parts = load_parts(AutoModelForSequenceClassification, path_or_id, device=device, dtype=dtype,
                           num_threads=num_threads, name=name, provenance=provenance)
        model = parts.model
        if parts.dtype in (torch.float16, torch.bfloat16):
            _float32_output_layer(model)
        return cls(
            tokenizer=parts.tokenizer,
            model=model,
            origin=parts.origin,
            device=parts.device,
            dtype=parts.dtype,
            max_length=max_length,
            # int8 scores each pair in a pass of its own: dynamic quantization takes one activation scale per pass,
            # so in a shared pass a logit moved with its batch-mates (by up to 1.4), other tenants' pairs included.
            # Alone it is the pair's own. On an AVX2 CPU, two threads: short LoCoMo pairs cost 6.8 ms each against
            # 9.7 shared (no padding), 128-token SciFact pairs 16.8 against 13.9 (docs/benchmarks/reranker.md).
            batch_size=1 if batch_size is None and parts.dtype == torch.qint8 else batch_size,
            positive_label=_positive_label(int(model.config.num_labels), positive_label),
            trace=trace,
            unpad=unpad,
        )

    def score(self, pairs: Sequence[TextPair]) -> npt.NDArray[np.float32]:
        """``(len(pairs),)`` float32 logits in the order of ``pairs``."""
        return self.forward(self.tokenize(pairs))

    def _encode(self, items: Sequence[TextPair]) -> Any:
        return self._tokenizer(
            [query for query, _ in items],
            [passage for _, passage in items],
            truncation="longest_first",
            max_length=self.max_length,
            padding=False,
            return_attention_mask=False,
            return_token_type_ids=True,
        )

    def _run(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return self._call(inputs)[:, self.positive_label]

    def _unpadded_supported(self) -> bool:
        return type(self._model).__name__ == "BertForSequenceClassification" and supports(self._model)

    def _run_packed(self, hidden: torch.Tensor, packed: dict[str, torch.Tensor]) -> torch.Tensor:
        """BERT's sequence-classification head on each sequence's first ([CLS]) token."""
        model = self._model
        first = hidden[packed["starts"]].unsqueeze(1)
        pooler = model.base_model.pooler
        pooled = pooler(first) if pooler is not None else first[:, 0]
        return model.classifier(model.dropout(pooled))[:, self.positive_label]

    def _empty_output(self) -> npt.NDArray[np.float32]:
        return np.zeros((0,), dtype=np.float32)

    def _warmup_items(self) -> list[TextPair]:
        long_passage = " ".join(["memory"] * self.max_length)
        return [("warm up", "a short passage"), ("warm up query", long_passage), ("q", "p")]

    def _describe_extra(self) -> dict[str, Any]:
        return {"num_labels": self.num_labels, "positive_label": self.positive_label}


class _Float32Linear(torch.nn.Module):
    """A linear layer run in float32 on its upcast input."""

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.linear = linear.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x.float())


def _float32_output_layer(model: Any) -> None:
    """Runs the classification head's output projection (the last ``nn.Linear`` with ``num_labels``
    outputs) in float32. A half-precision logit has 8 (bfloat16) or 11 (float16) significant bits: near
    a logit of 5 bfloat16 can only say 4.97 or 5.0, so close candidates would tie and the rerank order
    would turn on rounding. The body stays in half precision; the head is one small matrix."""
    num_labels = int(model.config.num_labels)
    last = None
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and module.out_features == num_labels:
            last = name
    if last is None:
        logger.warning("no %d-output linear layer found; the logits stay in %s", num_labels, model.dtype)
        return
    parent_name, _, attr = last.rpartition(".")
    parent = model.get_submodule(parent_name)
    setattr(parent, attr, _Float32Linear(getattr(parent, attr)))


def _positive_label(num_labels: int, requested: int | None) -> int:
    if requested is not None:
        if not 0 <= requested < num_labels:
            raise ModelLoadError(f"positive_label {requested} out of range for {num_labels} labels")
        return requested
    if num_labels == 1:
        return 0
    if num_labels == 2:
        return 1
    raise ModelLoadError(f"model has {num_labels} labels; pass positive_label to pick the relevance logit")
