"""The shared evaluation-data loader: metrics, the Chinese set's integrity, LoCoMo and SciFact."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from pathlib import Path

import pytest

from benchmarks.quality import datasets as ds


def _data_or_skip(loader):
    try:
        return loader()
    except ds.DataMissing as exc:
        pytest.skip(str(exc))


# --- metrics ------------------------------------------------------------------------------------


def test_ndcg_binary_hand_computed():
    # relevant a, b; ranking x a y b → DCG = 1/log2(3) + 1/log2(5); IDCG = 1 + 1/log2(3)
    got = ds.ndcg_at_k(["x", "a", "y", "b"], {"a": 1, "b": 1}, 10)
    want = (1 / math.log2(3) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert got == pytest.approx(want)
    assert got == pytest.approx(0.6509209298071326)


def test_ndcg_graded_uses_linear_gain_and_ideal_from_qrels():
    qrels = {"a": 2, "b": 1, "c": 1}
    # ranking b a: DCG = 1 + 2/log2(3); ideal top-2 = 2, 1 → 2 + 1/log2(3)
    got = ds.ndcg_at_k(["b", "a"], qrels, 2)
    assert got == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert ds.ndcg_at_k(["a", "b", "c"], qrels, 3) == pytest.approx(1.0)
    # an unretrieved relevant doc still counts in the ideal
    assert ds.ndcg_at_k(["a"], qrels, 3) < 1.0


def test_ndcg_cutoff_and_edge_cases():
    assert ds.ndcg_at_k(["x", "y", "a"], {"a": 1}, 2) == 0.0
    assert ds.ndcg_at_k(["x", "y", "a"], {"a": 1}, 3) == pytest.approx(0.5)
    assert ds.ndcg_at_k(["a"], {"a": 0}, 10) == 0.0  # nothing relevant
    assert ds.ndcg_at_k([], {"a": 1}, 10) == 0.0
    # a repeated id is counted once
    assert ds.ndcg_at_k(["a", "a"], {"a": 1, "b": 1}, 2) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    with pytest.raises(ValueError):
        ds.ndcg_at_k(["a"], {"a": 1}, 0)


def test_recall_at_k():
    qrels = {"a": 1, "b": 2, "c": 1, "z": 0}
    assert ds.recall_at_k(["a", "x", "b", "c"], qrels, 2) == pytest.approx(1 / 3)
    assert ds.recall_at_k(["a", "x", "b", "c"], qrels, 4) == pytest.approx(1.0)
    assert ds.recall_at_k(["z"], qrels, 1) == 0.0  # grade 0 is not relevant
    assert ds.recall_at_k(["a", "a", "b"], qrels, 2) == pytest.approx(2 / 3)
    assert ds.recall_at_k(["a"], {}, 5) == 0.0


def test_evaluate_means_over_judged_queries_and_scores_missing_as_zero():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": ["a", "b"], "q3": ["c"]}
    out = ds.evaluate(run, qrels, ks=(1, 10))
    assert out["queries"] == 2.0  # q3 has no relevant doc
    assert out["ndcg@1"] == pytest.approx(0.5)
    assert out["recall@10"] == pytest.approx(0.5)
    only_q1 = ds.evaluate(run, qrels, ks=(1,), query_ids=["q1"])
    assert only_q1["ndcg@1"] == pytest.approx(1.0)


# --- Chinese agent-memory set -------------------------------------------------------------------


@pytest.fixture(scope="module")
def zh() -> ds.ChineseSet:
    return ds.load_chinese()


def test_chinese_set_counts_and_unique_ids(zh):
    ids = [m.id for m in zh.memories]
    assert len(ids) == len(set(ids)) >= 180
    qids = [q.id for q in zh.queries]
    assert len(qids) == len(set(qids)) >= 70
    english = sum(m.lang == "en" for m in zh.memories)
    assert 0.15 <= english / len(ids) <= 0.35
    assert sum(lang == "en" for lang in zh.query_lang.values()) >= 5


def test_chinese_set_judgments_point_at_existing_memories(zh):
    ids = {m.id for m in zh.memories}
    for q in zh.queries:
        rel = zh.qrels[q.id]
        assert rel, q.id
        assert set(rel) <= ids, (q.id, set(rel) - ids)
        assert set(rel.values()) <= {1, 2}, q.id
        assert 2 in rel.values(), q.id  # every query has a memory that answers it


def test_chinese_set_fields(zh):
    for m in zh.memories:
        assert m.type in ("episodic", "semantic", "procedural"), m.id
        assert 0.0 <= m.importance <= 1.0, m.id
        assert m.created_at.startswith("2026-"), m.id
        assert m.created_at_unix == int(
            datetime.fromisoformat(m.created_at).replace(tzinfo=timezone.utc).timestamp()
        )
        assert m.content.strip(), m.id
    contents = [m.content for m in zh.memories]
    assert len(contents) == len(set(contents))
    budgets = {m.scope for m in zh.memories if m.key == "budget"}
    assert {"初始版本", "含扩展"} <= budgets
    assert any(m.pinned and m.key == "allergy" for m in zh.memories)


def test_chinese_set_missing_dir_raises_data_missing(tmp_path: Path):
    with pytest.raises(ds.DataMissing, match="zh|Chinese"):
        ds.load_chinese(tmp_path)


def test_chinese_eval_set_shape(zh):
    es = zh.eval_set()
    assert len(es.docs) == len(zh.memories)
    assert set(es.qrels) == {q.id for q in es.queries}


# --- LoCoMo parsing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "iso"),
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00+00:00"),
        ("12:09 am on 13 September, 2023", "2023-09-13T00:09:00+00:00"),
        ("12:30 pm on 1 January, 2024", "2024-01-01T12:30:00+00:00"),
        ("10:04 am on 19 December, 2023", "2023-12-19T10:04:00+00:00"),
    ],
)
def test_parse_locomo_datetime(text, iso):
    assert ds.parse_locomo_datetime(text) == int(datetime.fromisoformat(iso).timestamp())


@pytest.mark.parametrize("bad", ["", "13:00 pm on 8 May, 2023", "1:56 pm on 8 Mai, 2023", "8 May 2023"])
def test_parse_locomo_datetime_rejects_garbage(bad):
    with pytest.raises(ValueError):
        ds.parse_locomo_datetime(bad)


@pytest.mark.parametrize(
    ("raw", "ids", "malformed"),
    [
        ("D1:3", ["D1:3"], False),
        ("D8:6; D9:17", ["D8:6", "D9:17"], True),
        ("D:11:26", ["D11:26"], True),
        (" D2:4 ", ["D2:4"], True),
        ("D", [], True),
    ],
)
def test_normalise_evidence(raw, ids, malformed):
    assert ds.normalise_evidence(raw) == (ids, malformed)


def test_contextualise():
    turn = ds.Turn(id="D1:1", text="Hi!", speaker="Caroline", session=1,
                   created_at=ds.parse_locomo_datetime("1:56 pm on 8 May, 2023"), image_caption="a cat")
    assert ds.contextualise(turn) == "[8 May 2023] Caroline: Hi!"
    assert ds.contextualise(turn, with_caption=True) == "[8 May 2023] Caroline: Hi! [shares a cat]"


# --- shared data (skipped when absent) ----------------------------------------------------------


def test_missing_shared_dir_raises_data_missing(tmp_path: Path):
    with pytest.raises(ds.DataMissing, match="SciFact"):
        ds.load_scifact(tmp_path)
    with pytest.raises(ds.DataMissing, match="LoCoMo"):
        ds.load_locomo(tmp_path)


def test_load_scifact():
    test = _data_or_skip(lambda: ds.load_scifact(split="test"))
    assert len(test.docs) == 5183
    assert len(test.queries) == 300
    assert sum(len(r) for r in test.qrels.values()) == 339
    doc_ids = {d.id for d in test.docs}
    assert all(set(r) <= doc_ids for r in test.qrels.values())
    train = ds.load_scifact(split="train")
    assert sum(len(r) for r in train.qrels.values()) == 919
    assert {q.id for q in train.queries} <= set(train.qrels)
    with pytest.raises(ValueError):
        ds.load_scifact(split="dev")  # type: ignore[arg-type]


def test_load_locomo():
    convs = _data_or_skip(ds.load_locomo)
    assert [c.id for c in convs] == ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]
    for c in convs:
        turn_ids = [t.id for t in c.turns]
        assert len(turn_ids) == len(set(turn_ids))
        assert c.now == max(t.created_at for t in c.turns)
        assert all(q.category in (1, 2, 3, 4) and q.evidence for q in c.questions)
        assert all(set(q.evidence) <= set(turn_ids) for q in c.questions)
    first = convs[0]
    assert first.turns[0].created_at == ds.parse_locomo_datetime("1:56 pm on 8 May, 2023")
    assert first.speakers == ("Caroline", "Melanie")
    assert sum(c.evidence_stats.malformed for c in convs) >= 3
    es = ds.locomo_eval_set(first, contextualised=True)
    assert es.docs[0].text.startswith("[8 May 2023] Caroline: ")
