from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.lexical.lucene import LexicalIndexClosedError, LuceneIndex

DOCS = [
    (1, "The cat sat on the mat"),
    (2, "Dogs are running in the park"),
    (3, "我喜欢在公园里散步"),
    (4, "The project code XJ-2026-0421 belongs to the Xinjiang survey"),
    (5, "明天下午三点开会讨论预算"),
]


def ids_of(result: tuple[np.ndarray, np.ndarray]) -> list[int]:
    return [int(i) for i in result[1]]


def test_empty_index_search_returns_typed_empty_arrays(index: LuceneIndex) -> None:
    scores, ids = index.search("anything at all", 10)
    assert scores.dtype == np.float32 and ids.dtype == np.int64
    assert scores.shape == (0,) and ids.shape == (0,)
    assert index.count() == 0
    assert index.committed_seq() == 0


def test_upsert_is_visible_to_the_next_search(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    assert index.count() == len(DOCS)
    scores, ids = index.search("cat", 10)
    assert ids.tolist() == [1]
    assert scores.dtype == np.float32 and scores[0] > 0
    assert ids_of(index.search("running dogs", 10)) == [2]  # Porter: running -> run


def test_results_are_best_first_and_capped_at_k(index: LuceneIndex) -> None:
    index.upsert([(i, "apple " * i + "filler words here") for i in range(1, 8)])
    scores, ids = index.search("apple", 3)
    assert len(ids) == 3
    assert np.all(np.diff(scores) <= 0)
    assert ids.tolist() == [7, 6, 5]  # higher tf scores higher, same length class aside


def test_ties_break_by_ascending_id(index: LuceneIndex) -> None:
    # Insert in descending id order so Lucene's internal doc order is the reverse.
    index.upsert([(i, "identical text about zebras") for i in (50, 40, 30, 20, 10)])
    scores, ids = index.search("zebras", 3)
    assert ids.tolist() == [10, 20, 30]
    assert len(set(scores.tolist())) == 1


def test_int64_extremes_round_trip(index: LuceneIndex) -> None:
    big, small = 2**63 - 1, -(2**63)
    index.upsert([(big, "extreme identifiers"), (small, "extreme identifiers")])
    assert ids_of(index.search("extreme", 10)) == [small, big]
    with pytest.raises(ValueError):
        index.upsert([(2**63, "too big")])


def test_delete_is_honoured(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    index.delete([1, 999])  # unknown ids are ignored
    assert index.search("cat", 10)[1].size == 0
    assert index.count() == len(DOCS) - 1
    assert ids_of(index.search("running", 10)) == [2]


def test_delete_all(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    index.delete_all()
    assert index.count() == 0
    assert index.search("cat", 10)[1].size == 0


def test_update_replaces_the_document(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    index.upsert([(1, "A parrot talks all day")])
    assert index.count() == len(DOCS)
    assert index.search("cat", 10)[1].size == 0
    assert ids_of(index.search("parrot", 10)) == [1]
    index.upsert([(1, "A parrot talks all day")])  # replay is idempotent
    assert index.count() == len(DOCS)


def test_refresh_false_defers_visibility_until_refresh(index: LuceneIndex) -> None:
    index.upsert([(1, "visible later")], refresh=False)
    assert index.search("visible", 10)[1].size == 0
    index.refresh()
    assert ids_of(index.search("visible", 10)) == [1]


def test_commit_and_reopen_keep_docs_and_seq(jvm: None, tmp_path: Path) -> None:
    path = tmp_path / "tenant"
    index = LuceneIndex.open(path)
    index.upsert(DOCS)
    index.delete([2])
    index.commit(42)
    assert index.committed_seq() == 42
    index.upsert([(9, "uncommitted hedgehog")])
    index.close()

    reopened = LuceneIndex.open(path)
    try:
        assert reopened.committed_seq() == 42
        assert reopened.count() == len(DOCS) - 1
        assert ids_of(reopened.search("cat", 10)) == [1]
        assert reopened.search("running", 10)[1].size == 0
        # close() does not commit: the index is exactly the last commit.
        assert reopened.search("hedgehog", 10)[1].size == 0
        reopened.commit(43)
        assert reopened.committed_seq() == 43
    finally:
        reopened.close()


def test_second_writer_on_same_directory_fails(index: LuceneIndex, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="(?i)lock"):
        LuceneIndex.open(tmp_path / "tenant")


def test_chinese_query_finds_chinese_doc(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    assert ids_of(index.search("公园散步", 10)) == [3]
    assert ids_of(index.search("开会", 10)) == [5]
    assert index.search("雨伞", 10)[1].size == 0  # no character in common with any doc
    # Unigrams are indexed too: one shared character (预) is a weak match, below a shared word (预算).
    weak, strong = index.search("天气预报", 10), index.search("预算", 10)
    assert ids_of(weak) == ids_of(strong) == [5] and weak[0][0] < strong[0][0]


def test_code_is_found_from_english_and_chinese_queries(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    index.upsert([(6, "项目编号XJ-2026-0421的负责人是王伟")])
    english = ids_of(index.search("project code XJ-2026-0421", 10))
    chinese = ids_of(index.search("项目编号XJ-2026-0421是什么", 10))
    assert english[0] == 4 and 6 in english
    assert chinese[0] == 6 and 4 in chinese
    assert 1 not in english and 1 not in chinese


def test_supplementary_characters_survive_indexing(index: LuceneIndex) -> None:
    index.upsert([(1, "rare 𠀀𠀁 characters"), (2, "emoji 😀 party")])
    assert ids_of(index.search("𠀀𠀁", 10)) == [1]
    assert ids_of(index.search("😀", 10)) == [2]


@pytest.mark.parametrize(
    "query",
    [
        "",
        "   \t\n",
        "the of and a",  # stopwords only
        "a:b (\" OR",
        "title:foo AND (bar OR baz~2) NOT qux^3 \"unterminated",
        "*:* ? * [1 TO 5] {a TO b} /regex.*/ \\ && || ! + -",
        "lone \ud800 surrogate",
        "nul\x00byte",
        "。，、！？",
        "x" * 100_000,
        " ".join(f"term{i}" for i in range(3000)),  # more distinct terms than clauses allowed
        "项目 " * 2000,
    ],
)
def test_hostile_queries_do_not_raise(index: LuceneIndex, query: str) -> None:
    index.upsert(DOCS + [(7, "term1 term2 term2999 nul byte")])
    scores, ids = index.search(query, 5)
    assert scores.dtype == np.float32 and ids.dtype == np.int64
    assert len(scores) == len(ids) <= 5


def test_many_distinct_terms_still_match(index: LuceneIndex) -> None:
    index.upsert([(1, "term5 appears here")])
    query = " ".join(f"term{i}" for i in range(3000))
    assert ids_of(index.search(query, 5)) == [1]


def test_hostile_document_text_is_indexed(index: LuceneIndex) -> None:
    index.upsert([(1, "broken \ud800 text with walrus"), (2, "")])
    assert ids_of(index.search("walrus", 10)) == [1]
    assert index.count() == 2


def test_search_many_matches_search(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    queries = ["cat", "公园", "", "project code"]
    many = index.search_many(queries, 3)
    assert len(many) == len(queries)
    for query, (scores, ids) in zip(queries, many):
        single_scores, single_ids = index.search(query, 3)
        np.testing.assert_array_equal(ids, single_ids)
        np.testing.assert_array_equal(scores, single_scores)


def test_huge_k_is_capped(index: LuceneIndex) -> None:
    index.upsert(DOCS)
    assert ids_of(index.search("cat", 2**40)) == [1]


def test_invalid_arguments(index: LuceneIndex) -> None:
    with pytest.raises(ValueError):
        index.search("cat", 0)
    with pytest.raises(ValueError):
        index.commit(-1)


def test_bm25_parameters_change_scores(jvm: None, tmp_path: Path) -> None:
    docs = [(1, "cat"), (2, "cat dog bird fish lion tiger bear")]
    default = LuceneIndex.open(tmp_path / "a")
    no_length_norm = LuceneIndex.open(tmp_path / "b", k1=1.2, b=0.0)
    try:
        default.upsert(docs)
        no_length_norm.upsert(docs)
        d_scores, _ = default.search("cat", 2)
        n_scores, _ = no_length_norm.search("cat", 2)
        assert d_scores[0] > d_scores[1]  # b=0.4 penalises the long doc
        assert n_scores[0] == pytest.approx(n_scores[1])  # b=0: length ignored
    finally:
        default.close()
        no_length_norm.close()


def test_closed_index_refuses_calls(jvm: None, tmp_path: Path) -> None:
    index = LuceneIndex.open(tmp_path / "tenant")
    index.upsert(DOCS)
    index.close()
    index.close()  # idempotent
    with pytest.raises(LexicalIndexClosedError):
        index.search("cat", 10)
    with pytest.raises(LexicalIndexClosedError):
        index.upsert([(1, "x")])


def test_size_estimates(index: LuceneIndex) -> None:
    index.upsert(DOCS, refresh=False)
    assert index.ram_bytes() > 0
    index.commit(1)
    assert index.disk_bytes() > 0


def test_the_batch_helper_is_built_where_a_jdk_is_present(jvm: None) -> None:
    """CI has a javac (Debian's JDK 17): there the one-call-per-batch path must be the one that runs."""
    from server.lexical.jvm import _javac, batch_search_available

    assert batch_search_available() == (_javac() is not None)


def test_batch_and_per_query_paths_give_identical_hits(index: LuceneIndex) -> None:
    """The batch helper reads ids from the sort values; the per-query path from stored fields."""
    import random

    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "omega", "kappa", "sigma", "tau", "预算", "会议"]
    docs = [(rng.randrange(-2**62, 2**62), " ".join(rng.choices(words, k=rng.randint(1, 12)))) for _ in range(300)]
    index.upsert(docs)
    queries = [" ".join(rng.choices(words, k=rng.randint(1, 4))) for _ in range(40)] + ["", "?!", "zzz 预算"]
    if index._batch is None:
        pytest.skip("no javac >= 17 here: only the per-query path exists")
    got = index.search_many(queries, 50)
    with index._searcher() as searcher:
        want = [index._search_one(searcher, q, 50) for q in queries]
    for (gs, gi), (ws, wi) in zip(got, want, strict=True):
        assert gs.dtype == ws.dtype == np.float32 and gi.dtype == wi.dtype == np.int64
        assert gi.tolist() == wi.tolist() and gs.tolist() == ws.tolist()
    assert any(len(ids) == 50 for _, ids in got) and any(len(ids) == 0 for _, ids in got)


def test_a_hit_must_match_a_word_that_is_not_a_function_word(index: LuceneIndex,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """'what', 'my', 'do' (and '我', '什么') alone make no hit: a question whose content words match nothing has no
    BM25 list. A hit that matches a content word scores as under the flat bag of words, function words included."""
    from server.lexical import analysis
    index.upsert([(1, "My manager is Priya"), (2, "I earn 42k a year"), (3, "My salary review is in May"),
                  (4, "我的领导是王经理"), (5, "我喝咖啡加糖"), (6, "The salary is paid monthly")])
    required = index.search("what's my salary?", 10)
    assert ids_of(required) == [3, 6]
    assert ids_of(index.search("what's his salary?", 10)) == [6, 3]   # shorter, no 'my': BM25 as ever
    assert ids_of(index.search("我喝什么咖啡？", 10)) == [5]
    assert index.search("what do I do?", 10)[1].size > 0   # function words alone: the query as it was
    monkeypatch.setattr(analysis, "CONTENT_MATCH", False)
    flat = index.search("what's my salary?", 10)
    assert set(ids_of(flat)) == {1, 3, 6} and 4 in ids_of(index.search("我喝什么咖啡？", 10))
    assert [s for s, i in zip(*flat, strict=True) if i in (3, 6)] == pytest.approx(list(required[0]))
    monkeypatch.setattr(analysis, "QUERY_FUNCTION_WORDS", True)   # left out: 'my' no longer lifts the third
    assert ids_of(index.search("what's my salary?", 10)) == [6, 3]
    assert index.search("what do I do?", 10)[1].size == 0
    assert ids_of(index.search("我喝什么咖啡？", 10)) == [5]
