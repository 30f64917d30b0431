"""Exact dense search as one GEMM + top-k in torch: the GPU flat index when FAISS-GPU is absent, and
its CPU twin (the same code on ``device="cpu"``, tested against FAISS ``IndexFlatIP``).

Same contract as :class:`server.index.dense.FlatDenseIndex` (``search(queries, k) -> (scores, ids)``,
missing slots id -1, tenant-local int64 ids). Vectors live in one preallocated device buffer that
doubles when full; a removal moves the last row into the hole, so the live rows stay contiguous.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import torch


class TorchFlatIndex:
    tier = "flat"

    def __init__(self, dim: int, *, device: str = "cpu", dtype: torch.dtype = torch.float32,
                 initial_capacity: int = 1024) -> None:
        self.dim = dim
        self.device = torch.device(device)
        self.dtype = dtype
        self.description = f"torch-flat-{self.device.type}-{str(dtype).removeprefix('torch.')}"
        self._vectors = torch.empty((max(1, initial_capacity), dim), dtype=dtype, device=self.device)
        self._ids = np.empty(max(1, initial_capacity), dtype=np.int64)
        self._row: dict[int, int] = {}
        self._n = 0
        self._lock = threading.RLock()

    def __len__(self) -> int:
        return self._n

    def _reserve(self, n: int) -> None:
        capacity = self._vectors.shape[0]
        if n <= capacity:
            return
        while capacity < n:
            capacity *= 2
        grown = torch.empty((capacity, self.dim), dtype=self.dtype, device=self.device)
        grown[: self._n] = self._vectors[: self._n]
        self._vectors = grown
        ids = np.empty(capacity, dtype=np.int64)
        ids[: self._n] = self._ids[: self._n]
        self._ids = ids

    def add(self, ids: Sequence[int] | np.ndarray, vectors: np.ndarray) -> None:
        if len(ids) == 0:
            return
        ids_np = np.asarray(ids, dtype=np.int64)
        vecs = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(ids_np), self.dim)
        with self._lock:
            self.remove([i for i in ids_np.tolist() if i in self._row])   # re-adding an id replaces it
            self._reserve(self._n + len(ids_np))
            start = self._n
            self._vectors[start:start + len(ids_np)] = torch.from_numpy(vecs).to(self.device, self.dtype)
            self._ids[start:start + len(ids_np)] = ids_np
            for offset, doc in enumerate(ids_np.tolist()):
                self._row[doc] = start + offset
            self._n += len(ids_np)

    def remove(self, ids: Sequence[int] | np.ndarray) -> int:
        removed = 0
        with self._lock:
            for doc in np.asarray(ids, dtype=np.int64).tolist():
                row = self._row.pop(doc, None)
                if row is None:
                    continue
                last = self._n - 1
                if row != last:
                    self._vectors[row] = self._vectors[last]
                    moved = int(self._ids[last])
                    self._ids[row] = moved
                    self._row[moved] = row
                self._n -= 1
                removed += 1
        return removed

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q_np = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        nq, k = len(q_np), max(k, 0)
        scores = np.full((nq, k), -np.inf, dtype=np.float32)
        ids = np.full((nq, k), -1, dtype=np.int64)
        with self._lock:
            n = self._n
            if n == 0 or k == 0 or nq == 0:
                return scores, ids
            take = min(k, n)
            with torch.inference_mode():
                q = torch.from_numpy(q_np).to(self.device, self.dtype)
                sims = q @ self._vectors[:n].T
                top_scores, top_rows = torch.topk(sims, take, dim=1, largest=True, sorted=True)
                top_scores_np = top_scores.float().cpu().numpy()
                rows = top_rows.cpu().numpy()
            scores[:, :take] = top_scores_np
            ids[:, :take] = self._ids[rows]
        return scores, ids

    def export(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            return self._ids[: self._n].copy(), self._vectors[: self._n].float().cpu().numpy()

    def reconstruct(self, doc_id: int) -> np.ndarray:
        return self.reconstruct_batch([doc_id])[0]

    def reconstruct_batch(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The stored vectors of ``ids``, (len(ids), dim); an id not held raises KeyError."""
        with self._lock:
            rows = [self._row[int(d)] for d in np.asarray(ids, dtype=np.int64).tolist()]
            if not rows:
                return np.empty((0, self.dim), dtype=np.float32)
            return self._vectors[rows].float().cpu().numpy()

    def ram_bytes(self) -> int:
        return self._n * (self.dim * self._vectors.element_size() + 8 + 16)
