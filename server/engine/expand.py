"""A second hop for questions whose evidence is spread over turns: from the first round's best hits to the turns
beside them in their conversation, fused so that it can never push a strong first-round hit out.

The first round (dense + BM25, RRF, the cross-encoder, calibration) finds the turn that names what the question asks;
the answer is often the turn beside it ("Did you go?" / "Yes, to Paris in May"), which shares none of the question's
words. After the rerank, :func:`adjacent_turns` reads, for the ``EXPAND_SEEDS`` most relevant first-round candidates
that are EPISODIC turns, the turns written just before and after each in the same scope within the conversation window
(doc ids grow in write order; the store's columns give type, status and time without building ``Memory`` objects).
:func:`second_hop` gives each such turn the relevance ``HOP × its seed's`` when that is more than its own (the chance
that the seed answers, times the chance that its neighbour holds what the seed leads to), never more than the lowest
relevance among the first round's confident hits (``CONFIDENT``: they keep their places), and adds it to the
candidates when neither list found it. No model runs: the second hop costs a few array reads per query.

Pure functions over arrays and the store's read-only views; the search pipeline runs them on its CPU pool. The
constants were chosen on the LoCoMo dev conversations (docs/concepts/retrieval.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from server.domain import MemoryStatus, MemoryType
from server.engine.candidates import Candidates
from server.fusion.calibration import Calibration, fused_features
from server.store.memory_store import TenantStore

EXPAND_SEEDS = 2        # the most relevant first-round candidates whose neighbouring turns are read
HOP = 0.2               # a neighbour's relevance: at least HOP × its seed's
CONFIDENT = 0.5         # a first-round hit at or above this relevance is never outranked by a second-hop turn
_SCAN = 8               # docs scanned either side of a seed for its scope's neighbours (other scopes interleave)
_TURN = int(MemoryType.EPISODIC)
_LIVE = (int(MemoryStatus.ACTIVE), int(MemoryStatus.PENDING))


def adjacent_turns(store: TenantStore, seeds: Sequence[int], *, radius: int, window_ms: int) -> list[tuple[int, int]]:
    """``(doc id, index of its seed)`` for the live EPISODIC turns beside each seed (``radius`` each side, nearest
    first) in the same scope, keyless, no more than ``window_ms`` apart in time from it; seeds that are not turns add
    nothing. Seeds and repeats are left out (a turn beside two seeds belongs to the first); order: by seed, then
    before/after alternating outward."""
    cols = store.columns()
    n = len(cols)
    out: list[tuple[int, int]] = []
    taken = {int(s) for s in seeds}
    for si, seed in enumerate(int(s) for s in seeds):
        if not 0 <= seed < n or cols.type[seed] != _TURN or cols.status[seed] not in _LIVE:
            continue
        memory = store.by_doc(seed)
        if memory is None:
            continue
        created = int(cols.created_ms[seed])
        sides: list[list[int]] = []
        for step in (-1, 1):
            found: list[int] = []
            doc = seed + step
            while 0 <= doc < n and abs(doc - seed) <= _SCAN and len(found) < radius:
                if (cols.type[doc] == _TURN and cols.status[doc] in _LIVE
                        and abs(int(cols.created_ms[doc]) - created) <= window_ms):
                    other = store.by_doc(doc)
                    if other is not None and other.scope == memory.scope and not other.key:
                        found.append(doc)
                doc += step
            sides.append(found)
        for i in range(radius):
            for side in sides:
                if i < len(side) and side[i] not in taken:
                    taken.add(side[i])
                    out.append((side[i], si))
    return out


def hop_relevance(seed_relevance: np.ndarray, first_relevance: np.ndarray, *, hop: float | None = None,
                  confident: float | None = None) -> np.ndarray:
    """What a second-hop turn may reach: ``hop × its seed's relevance``, below the lowest of the first round's
    relevances at or above ``confident`` (none there: no bound)."""
    hop = HOP if hop is None else hop
    confident = CONFIDENT if confident is None else confident
    reach = hop * np.asarray(seed_relevance, dtype=np.float64)
    strong = first_relevance[first_relevance >= confident]
    return np.minimum(reach, np.nextafter(float(strong.min()), -np.inf)) if len(strong) else reach


def seeds_of(cand: Candidates, *, n: int | None = None) -> np.ndarray:
    """Positions in ``cand`` of its ``n`` most relevant candidates with a relevance above 0 (ties: fused order)."""
    n = EXPAND_SEEDS if n is None else n
    order = np.argsort(-cand.relevance, kind="stable")[:n]
    return order[cand.relevance[order] > 0]


def second_hop(cand: Candidates, turns: Sequence[tuple[int, int]], seeds: np.ndarray, *,
               calibration: Calibration) -> Candidates:
    """``cand`` (its relevance final: after the rerank) with each second-hop turn ``(doc, seed index)`` raised to
    :func:`hop_relevance` where that is more than its own, and added (RRF 0, the calibration's features) where neither
    list found it; ``second`` marks the turns the hop raised or added."""
    if not turns:
        return cand
    reach = hop_relevance(cand.relevance[seeds[[si for _, si in turns]]], cand.relevance)
    where = {d: i for i, d in enumerate(cand.ids.tolist())}
    new = [(d, r) for (d, _), r in zip(turns, reach.tolist(), strict=True) if d not in where]
    ids, relevance = cand.ids, cand.relevance.copy()
    rrf, rrf_norm, rerank, features = cand.rrf, cand.rrf_norm, cand.rerank, cand.features
    if new:
        added = np.asarray([d for d, _ in new], dtype=np.int64)
        ids = np.concatenate([ids, added])
        rrf, rrf_norm = (np.concatenate([v, np.zeros(len(new))]) for v in (rrf, rrf_norm))
        rerank = np.concatenate([rerank, np.full(len(new), np.nan)])
        features = fused_features(ids, rrf_norm, cand.dense_ids, cand.dense_scores, cand.lexical_ids,
                                  cand.lexical_scores)
        relevance = np.concatenate([relevance, np.zeros(len(new))])
        where.update({d: len(cand.ids) + i for i, (d, _) in enumerate(new)})
    second = np.zeros(len(ids), dtype=np.bool_)
    for (d, _), r in zip(turns, reach.tolist(), strict=True):
        j = where[d]
        if r > relevance[j]:
            relevance[j], second[j] = r, True
    return dataclasses.replace(cand, ids=ids, rrf=rrf, rrf_norm=rrf_norm, rerank=rerank, features=features,
                               relevance=relevance, second=second)
