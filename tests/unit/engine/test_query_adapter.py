"""The query adapter's map, its loading, and the dense scores a mapped search keeps (server/engine/query_adapter.py,
TieredDenseIndex.scores_of)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from server.engine.query_adapter import MATRIX, PROVENANCE, QueryAdapter, load_query_adapter
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
