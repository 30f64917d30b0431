"""Approximate dense search for a large tenant: ``IVF{K}_HNSW32`` with Flat, SQ8 or PQ codes.

Inner product over L2-normalised vectors, tenant-local int64 ids. A hash-table direct map makes
``remove`` O(removed) and lets the index hand its vectors back for a rebuild with a larger K.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import faiss
import numpy as np

from server.index.dense import FaissIdIndex, empty_result
from server.index.tiers import TierRules, choose_nlist, factory_string, training_size

log = logging.getLogger(__name__)


class IvfDenseIndex(FaissIdIndex):
    """A trained IVF index. Same contract as ``FlatDenseIndex``: ``search(queries, k) -> (scores, ids)``."""

    tier = "ivf"

    def __init__(self, index: faiss.Index, *, dim: int, nprobe: int, ef_search: int, description: str = "") -> None:
        self.dim = dim
        self._index = index
        self._ivf = faiss.extract_index_ivf(index)
        self._lock = threading.RLock()
        self.description = description or f"IVF{self.nlist}"
        self.set_search_params(nprobe=nprobe, ef_search=ef_search)

    @property
    def nlist(self) -> int:
        return int(self._ivf.nlist)

    @property
    def faiss_index(self) -> faiss.Index:
        return self._index

    def set_search_params(self, *, nprobe: int, ef_search: int) -> None:
        with self._lock:
            self._ivf.nprobe = min(nprobe, self.nlist)
            quantizer = faiss.downcast_index(self._ivf.quantizer)
            if hasattr(quantizer, "hnsw"):
                quantizer.hnsw.efSearch = max(ef_search, self._ivf.nprobe)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dim)
        with self._lock:
            if self._index.ntotal == 0 or k <= 0:
                return empty_result(len(q), k)
            scores, ids = self._index.search(q, k)
        return scores, ids

    def export(self) -> tuple[np.ndarray, np.ndarray]:
        """Every (id, vector) held, for a rebuild (vectors decoded from the codes)."""
        with self._lock:
            invlists = self._ivf.invlists
            parts = []
            for list_no in range(self.nlist):
                size = invlists.list_size(list_no)
                if size:
                    parts.append(faiss.rev_swig_ptr(invlists.get_ids(list_no), size).copy())
            ids = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
            vectors = self._index.reconstruct_batch(ids) if len(ids) else np.empty((0, self.dim), np.float32)
        return ids, np.asarray(vectors, dtype=np.float32)

    def ram_bytes(self) -> int:
        n = len(self)
        lists = n * (int(self._ivf.code_size) + 8 + 24)          # codes, ids, direct-map hash entry
        quantizer = self.nlist * (self.dim * 4 + 2 * 32 * 4 + 16)  # centroids + HNSW level-0 links
        return lists + quantizer


def build_ivf(ids: np.ndarray, vectors: np.ndarray, *, rules: TierRules, seed: int = 1234) -> IvfDenseIndex:
    """Trains and fills an ``IVF{K}_HNSW32`` index over ``vectors`` (K from N, ~30·K training vectors)."""
    started = time.perf_counter()
    n, dim = vectors.shape
    nlist = choose_nlist(n, train_per_list=rules.train_per_list)
    description = factory_string(nlist, codes=rules.codes, dim=dim)
    index = faiss.index_factory(dim, description, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.extract_index_ivf(index)
    quantizer = faiss.downcast_index(ivf.quantizer)
    if hasattr(quantizer, "hnsw"):
        quantizer.hnsw.efConstruction = rules.ef_construction
        quantizer.hnsw.efSearch = max(rules.ef_search, rules.nprobe)
    rng = np.random.default_rng(seed)
    n_train = training_size(nlist, n, train_per_list=rules.train_per_list)
    sample = vectors if n_train >= n else vectors[np.sort(rng.choice(n, size=n_train, replace=False))]
    ivf.cp.seed = seed
    ivf.cp.min_points_per_centroid = min(ivf.cp.min_points_per_centroid, rules.train_per_list)
    index.train(np.ascontiguousarray(sample, dtype=np.float32))
    ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
    out = IvfDenseIndex(index, dim=dim, nprobe=rules.nprobe, ef_search=rules.ef_search, description=description)
    step = 65536
    for start in range(0, n, step):
        out.add(ids[start:start + step], vectors[start:start + step])
    log.info("built %s over %d vectors (%d training) in %.1fs", description, n, n_train,
             time.perf_counter() - started)
    return out


def ivf_payload(index: IvfDenseIndex) -> np.ndarray:
    """The index serialised by FAISS (a uint8 array), for a snapshot."""
    with index._lock:
        return faiss.serialize_index(index.faiss_index)


def ivf_from_payload(payload: np.ndarray, *, dim: int, rules: TierRules, description: str = "") -> IvfDenseIndex:
    index = faiss.deserialize_index(payload)
    if index.d != dim:
        raise ValueError(f"snapshot index has dim {index.d}, expected {dim}")
    return IvfDenseIndex(index, dim=dim, nprobe=rules.nprobe, ef_search=rules.ef_search, description=description)
