"""The query adapter: a learned linear map of a query's vector before the dense search.

A question and the memory that answers it are worded apart ("When did Caroline go to the support group?" / "Caroline:
I went to a LGBTQ support group yesterday"), and the embedder puts every question near every other: a linear map
``q -> normalise(q + q W)`` of the query side alone, fitted on dev data (training/query_adapter.py: the LoCoMo dev
conversations' questions and their evidence turns, the SciFact *train* claims and their abstracts), moves a question
towards what answers it. Memories, their vectors and the index are not touched, so a data dir built before it
searches as before with it on or off, and near-duplicate, update-link and merge rules (memory against memory) read
what they read.

The map chooses which memories the dense list holds and their order; each one's score stays its cosine with the
query's own vector (:meth:`server.index.tiered.TieredDenseIndex.scores_of`), the scale the relevance calibration was
fitted on. CJK queries are centred instead (server/engine/centring.py) and not mapped.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

MATRIX = "adapter.npy"
PROVENANCE = "engram_provenance.json"


@dataclass(frozen=True)
class QueryAdapter:
    matrix: np.ndarray   # (dim, dim) float32
    embedder: str        # the embedder whose query vectors it maps
    sha256: str          # of the matrix file

    def apply(self, vector: np.ndarray) -> np.ndarray:
        """``normalise(q + q W)`` of one query vector (float32)."""
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        out = q + q @ self.matrix
        norm = float(np.linalg.norm(out))
        return out / norm if norm > 0 else q

    def map_all(self, texts: Sequence[str], vectors: Sequence[np.ndarray], mapped: Sequence[bool]) -> list[np.ndarray]:
        """``vectors`` with each ``mapped`` row mapped (the texts are the query tower's to read; server/engine/
        query_tower.py has the same call)."""
        return [self.apply(v) if m else v for v, m in zip(vectors, mapped, strict=True)]


def load_query_adapter(folder: str | Path, *, embedder: str, dim: int) -> QueryAdapter | None:
    """The adapter in ``folder`` (``adapter.npy`` and its ``engram_provenance.json``) when it was fitted for
    ``embedder``; None, with a log line, when the folder holds none or another embedder's."""
    path = Path(folder)
    matrix_path, provenance_path = path / MATRIX, path / PROVENANCE
    if not matrix_path.is_file() or not provenance_path.is_file():
        log.info("no query adapter in %s: dense search reads the query's own vector", path)
        return None
    provenance = json.loads(provenance_path.read_text(encoding="utf-8"))
    if provenance.get("embedder") != embedder:
        log.info("the query adapter in %s was fitted for %r, not %r: not used", path, provenance.get("embedder"),
                 embedder)
        return None
    raw = matrix_path.read_bytes()
    matrix = np.load(matrix_path).astype(np.float32)
    if matrix.shape != (dim, dim) or not np.isfinite(matrix).all():
        raise ValueError(f"query adapter {matrix_path}: expected a finite ({dim}, {dim}) matrix, got {matrix.shape}")
    return QueryAdapter(matrix=matrix, embedder=embedder, sha256=hashlib.sha256(raw).hexdigest())
