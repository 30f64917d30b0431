"""The cross-encoder's head by calibrated relevance (server/engine/candidates.py ``by_relevance``): every per-candidate
column moves together, the per-list columns stay, ties keep the fused order."""

from __future__ import annotations

import numpy as np

from server.engine.candidates import Candidates, by_relevance
from server.fusion.calibration import fused_features


def fused(relevance: list[float]) -> Candidates:
    ids = np.asarray([10, 11, 12, 13, 14], dtype=np.int64)
    rrf = np.linspace(1.0, 0.2, 5)
    dense_ids, dense_scores = ids[::-1].copy(), np.linspace(0.9, 0.5, 5)
    return Candidates(ids=ids, rrf=rrf * 0.1, rrf_norm=rrf, relevance=np.asarray(relevance),
                      features=fused_features(ids, rrf, dense_ids, dense_scores, ids[:2], np.asarray([7.0, 3.0])),
                      rerank=np.asarray([np.nan, 1.5, np.nan, np.nan, -2.0]), dense_ids=dense_ids,
                      dense_scores=dense_scores, lexical_ids=ids[:2], lexical_scores=np.asarray([7.0, 3.0]),
                      second=np.asarray([False, False, True, False, False]))


def test_each_candidates_columns_move_with_it() -> None:
    cand = fused([0.2, 0.1, 0.6, 0.05, 0.4])
    out = by_relevance(cand)
    assert out.ids.tolist() == [12, 14, 10, 11, 13]
    assert out.relevance.tolist() == [0.6, 0.4, 0.2, 0.1, 0.05]
    where = {d: i for i, d in enumerate(cand.ids.tolist())}
    for j, doc in enumerate(out.ids.tolist()):   # a row read from the output is the same row of the input
        i = where[doc]
        assert out.rrf[j] == cand.rrf[i] and out.rrf_norm[j] == cand.rrf_norm[i]
        assert np.array_equal(out.rerank[j], cand.rerank[i], equal_nan=True)
        assert out.second[j] == cand.second[i]
        assert all(out.features[f][j] == cand.features[f][i] for f in cand.features)
    # The lists as retrieval returned them are not candidates' columns: unchanged.
    assert out.dense_ids is cand.dense_ids and out.lexical_scores is cand.lexical_scores


def test_ties_keep_the_fused_order_and_an_ordered_list_is_returned_as_is() -> None:
    tied = by_relevance(fused([0.3, 0.5, 0.3, 0.5, 0.1]))
    assert tied.ids.tolist() == [11, 13, 10, 12, 14]
    ordered = fused([0.9, 0.7, 0.5, 0.3, 0.1])
    assert by_relevance(ordered) is ordered
    empty = Candidates()
    assert by_relevance(empty) is empty
