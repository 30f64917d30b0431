"""What one query carries through the search stages: :class:`SearchItem` (the query, its shard, its
vector) and :class:`Candidates` (its fused candidates and what the breakdown needs)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from server.domain import SearchQuery
from server.tenants.shard import TenantShard
from server.text import has_cjk

NO_IDS = np.zeros(0, dtype=np.int64)
NO_SCORES = np.zeros(0, dtype=np.float64)


@dataclass
class SearchItem:
    shard: TenantShard
    query: SearchQuery
    now_ms: int
    vector: np.ndarray | None = None           # filled by the embed stage (or the cache)
    depth_cap: int | None = None               # the rerank-depth controller's depth for this batch (default depth only)
    rerank_budget_ms: float | None = None      # the controller's rerank budget for this batch (default depth only)
    rerank_threads: int = 0                    # the controller's torch threads for this batch's rerank pass (0: as set)
    traced: bool = False                       # its request's span is sampled: the batch records stage marks
    trace: dict[str, str] | None = None        # then its request's W3C context, passed on by the batch's Ray hops
    unnamed: dict[str, np.ndarray] | None = None   # its text's vector without a speaker's name, embedded beside it
    cjk: bool = field(init=False)              # the query text has CJK script: fusion and rerank both ask

    def __post_init__(self) -> None:
        self.cjk = has_cjk(self.query.text)


@dataclass
class Candidates:
    """One query's fused candidates, best first, with what the breakdown needs. ``ids`` are doc ids;
    ``dense_ids`` / ``lexical_ids`` are each list after filtering, best first (rank = position + 1)."""

    ids: np.ndarray = field(default_factory=lambda: NO_IDS)
    rrf: np.ndarray = field(default_factory=lambda: NO_SCORES)
    rrf_norm: np.ndarray = field(default_factory=lambda: NO_SCORES)   # rrf over its highest possible value
    relevance: np.ndarray = field(default_factory=lambda: NO_SCORES)  # calibrated probability
    features: dict[str, np.ndarray] = field(default_factory=dict)       # the calibration's inputs (fused_features)
    rerank: np.ndarray = field(default_factory=lambda: NO_SCORES)     # NaN: not reranked
    dense_ids: np.ndarray = field(default_factory=lambda: NO_IDS)
    dense_scores: np.ndarray = field(default_factory=lambda: NO_SCORES)
    lexical_ids: np.ndarray = field(default_factory=lambda: NO_IDS)
    lexical_scores: np.ndarray = field(default_factory=lambda: NO_SCORES)
    feedback_ids: np.ndarray | None = None   # the second round's dense list, when it ran
    second: np.ndarray | None = None         # the second hop's turns in ``ids`` (server/engine/expand.py), when any
