"""A long memory's windows in the BM25 index (server/lexical/windows.py): indexed as one block with the memory's
document under its id, found at its best window, replaced, deleted and reopened with it, each memory answered once."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.lexical import lucene
from server.lexical.lucene import LuceneIndex
from server.lexical.windows import WINDOW_CHARS, fold, windows
from server.text import indexed_text

FILLER = ("Here is a short overview before getting to the details of planning, budgets, routines and lists. "
          "Keeping notes of what worked and what did not makes the next attempt much smoother. ")
EVIDENCE = "Caroline said the adoption agency approved her application in June."
LONG = "assistant: " + FILLER * 20 + EVIDENCE + " " + FILLER * 6
QUERY = "when did the adoption agency approve Caroline's application"
SHORT = [(10 + i, text) for i, text in enumerate([
    "Melanie: the agency called about the application form again",
    "Caroline: my application for the pottery class was approved",
    "Melanie: the adoption fair is in June, want to come?",
    "Caroline: an agency in town does adoption counselling",
    "Melanie: approved! the application went through today",
])]


def test_windows_cover_header_and_content_never_context() -> None:
    short = indexed_text("Caroline: hi there", dated=True, created_at_ms=1_683_504_000_000,
                         context="assistant: " + FILLER * 20)
    assert windows(short) == []                              # a long context alone makes no windows
    text = indexed_text(LONG, dated=True, created_at_ms=1_683_504_000_000, context="Melanie: zebra " * 100)
    got = windows(text)
    assert len(got) >= 3 and all(len(w) <= WINDOW_CHARS for w in got)
    assert got[0].startswith("[8 May 2023] assistant:")
    assert not any("zebra" in w for w in got)
    assert any(EVIDENCE in w for w in got)                   # overlapping: the sentence lies whole in one


def test_a_very_long_text_gets_at_most_the_cap_reaching_its_end() -> None:
    text = " ".join(f"w{i:05d}" for i in range(3000))        # 18 KB
    got = windows(text, limit=8)
    assert len(got) == 8
    assert got[-1].split()[-1] == "w02999" and got[0].split()[0] == "w00000"


def test_fold_keeps_each_memory_once_at_its_best_hit() -> None:
    scores = np.array([9.0, 8.0, 7.0, 6.0, 5.0], dtype=np.float32)
    ids = np.array([4, 2, 4, 3, 2], dtype=np.int64)
    s, i = fold(scores, ids, 10)
    assert i.tolist() == [4, 2, 3] and s.tolist() == [9.0, 8.0, 6.0]
    assert fold(scores, ids, 2)[1].tolist() == [4, 2]


def test_evidence_deep_in_a_long_memory_ranks_first_by_its_window(index: LuceneIndex,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    index.upsert([*SHORT, (1, LONG)])
    scores, ids = index.search(QUERY, 10)
    assert ids[0] == 1 and len(set(ids.tolist())) == len(ids) == 6   # each memory once, k counts memories
    assert index.count() == 6 + len(windows(LONG))
    monkeypatch.setattr(lucene, "SEARCH_WINDOWS", False)             # the memory's own document alone
    assert index.search(QUERY, 10)[1][0] != 1                        # diluted by its length: below a short turn


def test_k_counts_memories_when_windows_crowd_the_hits(index: LuceneIndex) -> None:
    index.upsert([(i, LONG.replace("Caroline", f"Caroline{i}")) for i in range(1, 6)])
    index.upsert(SHORT)
    ids = index.search(QUERY, 8)[1].tolist()
    assert len(ids) == len(set(ids)) == 8


def test_replacing_or_deleting_a_memory_takes_its_windows(index: LuceneIndex) -> None:
    index.upsert([*SHORT, (1, LONG), (2, LONG.replace(EVIDENCE, "The garden needs watering."))])
    assert 1 in index.search("adoption agency approved", 10)[1].tolist()
    index.upsert([(1, "assistant: a short answer now")])             # the same id, no windows any more
    assert index.count() == len(SHORT) + 2 + len(windows(LONG))
    assert 1 not in index.search("adoption agency approved June", 10)[1].tolist()
    index.delete([2])
    assert index.count() == len(SHORT) + 1
    assert 2 not in index.search("overview planning budgets", 10)[1].tolist()


def test_windows_survive_a_restart(jvm: None, tmp_path: Path) -> None:
    index = LuceneIndex.open(tmp_path / "t")
    index.upsert([*SHORT, (1, LONG), (2, LONG)])
    index.commit(3)
    index.close()
    reopened = LuceneIndex.open(tmp_path / "t")
    try:
        ids = reopened.search("overview planning budgets routines", 10)[1].tolist()
        assert sorted(ids[:2]) == [1, 2] and len(ids) == len(set(ids))   # folded after the reopen too
    finally:
        reopened.close()


def test_the_per_document_path_writes_the_same_blocks(jvm: None, tmp_path: Path) -> None:
    batched, single = LuceneIndex.open(tmp_path / "b"), LuceneIndex.open(tmp_path / "s")
    try:
        single._docs._JBatchIndex = None
        for idx in (batched, single):
            idx.upsert([*SHORT, (1, LONG)])
            idx.upsert([(1, LONG.replace("June", "July"))])
        assert batched.count() == single.count()
        for query in (QUERY, "approved July", "overview planning"):
            (s1, i1), (s2, i2) = batched.search(query, 10), single.search(query, 10)
            assert i1.tolist() == i2.tolist() and np.allclose(s1, s2), query
    finally:
        batched.close()
        single.close()
