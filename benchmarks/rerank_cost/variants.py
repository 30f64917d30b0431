"""The cross-encoder variants the rerank-cost benchmarks compare, and how the server is told to use each.

A variant is a weights folder (``models.reranker``) and the cross-encoder's dtype (``models.rerank_dtype``:
``auto`` = bfloat16 on this box's AVX512_BF16 CPUs, the server default; ``float32``; ``int8`` = dynamic
quantization of every linear layer, :func:`models.devices.quantize_int8`). The server reads a pair at the length
the model was trained at (its tokenizer's ``model_max_length``: 128 for engram's recipe, teacher and student).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.quality.datasets import repo_root

WEIGHTS = repo_root() / "models" / "weights"
TEACHER = WEIGHTS / "engram-reranker-v1"
STUDENT = WEIGHTS / "engram-reranker-v1-l3"


@dataclass(frozen=True)
class Variant:
    name: str
    path: Path
    dtype: str = "auto"
    batch_size: int | None = None   # pairs a pass takes; None: the loader's (int8: one); timing only, no server option

    def overrides(self) -> dict[str, Any]:
        """The server's ``models`` settings for this variant (the embedder keeps the server default)."""
        return {"reranker": str(self.path), "rerank_dtype": self.dtype}

    def load(self, **kwargs: Any) -> Any:
        """The cross-encoder as the server loads it (traced, packed tokens where supported)."""
        from models.reranker import HFCrossEncoder

        return HFCrossEncoder.load(self.path, dtype=self.dtype, max_length=0, trace=True, unpad=True,
                                   batch_size=self.batch_size, **kwargs)

    @property
    def available(self) -> bool:
        return (self.path / "model.safetensors").is_file()


ALL = {v.name: v for v in (
    Variant("teacher-bf16", TEACHER),                        # the shipped default
    Variant("teacher-fp32", TEACHER, dtype="float32"),
    Variant("teacher-int8", TEACHER, dtype="int8"),
    Variant("teacher-int8-shared", TEACHER, dtype="int8", batch_size=32),   # as int8 ran before: pairs share a pass
    Variant("student-bf16", STUDENT),
    Variant("student-int8", STUDENT, dtype="int8"),
)}
REFERENCE = "teacher-bf16"


def pick(names: str) -> list[Variant]:
    """Comma-separated names (``all`` = every variant whose weights exist)."""
    if names == "all":
        return [v for v in ALL.values() if v.available]
    unknown = [n for n in names.split(",") if n and n not in ALL]
    if unknown:
        raise SystemExit(f"unknown variants {unknown}; known: {sorted(ALL)}")
    return [ALL[n] for n in names.split(",") if n]
