"""The query adapter's map, its loading, and the dense scores a mapped search keeps (server/engine/query_adapter.py,
TieredDenseIndex.scores_of)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from server.config import SearchConfig
from server.domain import SearchQuery
from server.engine.candidates import SearchItem
from server.engine.query_adapter import MATRIX, PROVENANCE, QueryAdapter, load_query_adapter
from server.engine.search import SearchPipeline
from server.index.tiered import TieredDenseIndex
from server.index.tiers import TierRules


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def write_adapter(folder, matrix: np.ndarray, embedder: str = "e5") -> None:  # type: ignore[no-untyped-def]
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / MATRIX, matrix.astype(np.float32))
    (folder / PROVENANCE).write_text(json.dumps({"embedder": embedder}))


def test_the_map_is_the_normalised_query_plus_its_image() -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 8)).astype(np.float32) * 0.1
    q = unit(rng.normal(size=8))
    out = QueryAdapter(matrix=w, embedder="e5", sha256="").apply(q)
    assert np.allclose(out, unit(q + q @ w), atol=1e-6)
    assert np.allclose(QueryAdapter(matrix=np.zeros((8, 8), np.float32), embedder="e5", sha256="").apply(q), q)


def test_an_adapter_loads_only_for_the_embedder_it_was_fitted_for(tmp_path) -> None:  # type: ignore[no-untyped-def]
    write_adapter(tmp_path / "a", np.eye(4))
    loaded = load_query_adapter(tmp_path / "a", embedder="e5", dim=4)
    assert loaded is not None and loaded.matrix.shape == (4, 4) and len(loaded.sha256) == 64
    assert load_query_adapter(tmp_path / "a", embedder="minilm", dim=4) is None
    assert load_query_adapter(tmp_path / "missing", embedder="e5", dim=4) is None
    with pytest.raises(ValueError, match="expected a finite"):
        load_query_adapter(tmp_path / "a", embedder="e5", dim=8)
    write_adapter(tmp_path / "b", np.full((4, 4), np.nan))
    with pytest.raises(ValueError, match="expected a finite"):
        load_query_adapter(tmp_path / "b", embedder="e5", dim=4)


def test_scores_of_are_the_scores_search_gives_each_memory_passages_included() -> None:
    rng = np.random.default_rng(1)
    index = TieredDenseIndex(16, rules=TierRules())
    docs = list(range(1, 31))
    vectors = [unit(rng.normal(size=(1 + (d % 3), 16))) for d in docs]   # some memories carry 1-2 passages
    index.add(docs, vectors)
    for _ in range(5):
        q = unit(rng.normal(size=16))
        scores, ids = index.search(q[None, :], 10)
        assert np.allclose(index.scores_of(q, ids[0]), scores[0], atol=1e-5)
    # a memory the query did not find still gets its best vector's score
    q = unit(rng.normal(size=16))
    assert index.scores_of(q, [3])[0] == pytest.approx(float(np.max(vectors[2] @ q)), abs=1e-5)


def test_a_memory_removed_since_the_search_scores_minus_infinity_and_leaves_the_dense_list() -> None:
    rng = np.random.default_rng(2)
    index = TieredDenseIndex(16, rules=TierRules())
    docs = list(range(1, 21))
    vectors = [unit(rng.normal(size=(1 + (d % 2), 16))) for d in docs]
    index.add(docs, vectors)
    q = unit(rng.normal(size=16))
    scores, ids = index.search(q[None, :], 8)
    gone = int(ids[0][3])
    index.remove([gone])   # a Delete or a forgetting pass between the mapped search and the scores
    got = index.scores_of(q, ids[0])
    assert np.isneginf(got[3]) and np.isfinite(np.delete(got, 3)).all()
    assert np.allclose(np.delete(got, 3), np.delete(scores[0], 3), atol=1e-5)
    assert np.isneginf(index.scores_of(q, [gone])).all()

    class Racing:   # the index as a concurrent writer leaves it: the search found a memory removed before scores_of
        def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
            return scores.copy(), ids.copy()

        def scores_of(self, query: np.ndarray, doc_ids: np.ndarray) -> np.ndarray:
            return index.scores_of(query, doc_ids)

    pipeline = SimpleNamespace(cfg=SearchConfig(), centring=None, depth=lambda query: 8,
                               query_adapter=QueryAdapter(matrix=np.zeros((16, 16), np.float32), embedder="e5",
                                                          sha256=""))
    pipeline._centred = lambda it: None
    shard = SimpleNamespace(dense=Racing())
    item = SearchItem(shard=shard, query=SearchQuery(text="what is the budget"), now_ms=0, vector=q)
    [(out_scores, out_ids)] = SearchPipeline._dense_stage(pipeline, [item])  # type: ignore[arg-type]
    assert gone not in out_ids.tolist() and out_ids[3] == -1 and np.isneginf(out_scores[3])
    assert [d for d in out_ids.tolist() if d >= 0] == [d for d in ids[0].tolist() if d != gone]
