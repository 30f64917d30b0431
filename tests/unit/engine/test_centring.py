"""CJK query centring (server/engine/centring.py): the arithmetic, the anchors, and that only a CJK query's dense
search takes it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from server.config import SearchConfig
from server.domain import SearchQuery
from server.engine.candidates import SearchItem
from server.engine.centring import ANCHORS, Centring, read_anchors
from server.engine.search import SearchPipeline
from server.index.dense import FlatDenseIndex
from server.text import has_cjk

DATA = Path(__file__).resolve().parents[3] / "benchmarks" / "quality" / "data"


def _unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def test_scores_are_the_cosine_with_the_shared_part_replaced_and_rank_as_the_renormalised_vector() -> None:
    rng = np.random.default_rng(0)
    anchors, docs, query = _unit(rng.normal(size=(16, 8)) + 2.0), _unit(rng.normal(size=(50, 8))), _unit(rng.normal(size=(1, 8)))[0]
    c = Centring.measure(lambda texts: anchors, ["x"] * 16)
    mean = anchors.mean(axis=0)
    np.testing.assert_allclose(c.mean, mean, rtol=1e-6)
    assert abs(c.offset - float(mean @ mean)) < 1e-6
    got = c.scores(docs @ c.search_vector(query))
    np.testing.assert_allclose(got, docs @ query - docs @ mean + mean @ mean, atol=1e-5)
    renormalised = (query - mean) / np.linalg.norm(query - mean)
    assert list(np.argsort(-got, kind="stable")) == list(np.argsort(-(docs @ renormalised), kind="stable"))
    assert np.isneginf(c.scores(np.array([-np.inf]))[0])   # an index's padding stays padding


def test_anchors_are_chinese_and_none_comes_from_an_evaluation_set() -> None:
    anchors = read_anchors()
    assert len(anchors) == 64 == len(set(anchors)) and all(has_cjk(a) for a in anchors)
    assert ANCHORS.read_text(encoding="utf-8").count("\n") == 64
    evaluated = set()
    for name, field in (("zh_memories.jsonl", "content"), ("zh_queries.jsonl", "query"),
                        ("recency_memories.jsonl", "content"), ("recency_queries.jsonl", "text")):
        evaluated |= {json.loads(line)[field] for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line}
    assert not evaluated & set(anchors)


def _pipeline(centring: Centring | None, *, centre_cjk: bool = True) -> SimpleNamespace:
    """What SearchPipeline._dense_stage reads."""
    ns = SimpleNamespace(cfg=SearchConfig(centre_cjk=centre_cjk), centring=centring, depth=lambda query: 3,
                         query_adapter=None)
    ns._centred = lambda it: SearchPipeline._centred(ns, it)  # type: ignore[arg-type]
    return ns


def test_only_a_cjk_query_searches_with_the_centred_vector() -> None:
    rng = np.random.default_rng(1)
    docs = _unit(rng.normal(size=(20, 8)))
    index = FlatDenseIndex(8)
    index.add(np.arange(20, dtype=np.int64), docs)
    shard = SimpleNamespace(dense=index)
    query = _unit(rng.normal(size=(1, 8)))[0]
    mean = 0.9 * _unit((query + rng.normal(size=8))[None, :])[0]   # a shared part the query leans toward
    centring = Centring(mean=mean, offset=float(mean @ mean))
    items = [SearchItem(shard=shard, query=SearchQuery(text=text), now_ms=0, vector=query)  # type: ignore[arg-type]
             for text in ("项目预算是多少", "what is the budget")]
    cjk, english = SearchPipeline._dense_stage(_pipeline(centring), items)  # type: ignore[arg-type]
    expected = centring.scores(docs @ centring.search_vector(query))
    assert list(cjk[1]) == list(np.argsort(-expected)[:3])
    np.testing.assert_allclose(cjk[0], np.sort(expected)[::-1][:3], atol=1e-5)
    raw = docs @ query
    assert list(english[1]) == list(np.argsort(-raw)[:3])
    np.testing.assert_allclose(english[0], np.sort(raw)[::-1][:3], atol=1e-5)
    assert list(cjk[1]) != list(english[1])   # the centring moved this query's list
    off, _ = SearchPipeline._dense_stage(_pipeline(centring, centre_cjk=False), items)  # type: ignore[arg-type]
    assert list(off[1]) == list(english[1])
    assert SearchConfig().centre_cjk   # on by default
