"""The BatchIndex helper (one JNI call per Write's documents) builds the documents the per-document path builds:
two indexes of the same memories, one through each path, answer every query with the same ids and scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from server.lexical.jvm import batch_index_available
from server.lexical.lucene import LuceneIndex

DOCS = [
    (1, "Caroline went to the LGBTQ support group on 7 May 2023"),
    (2, "The deploy failed with error E-4012 on host db-07.internal"),
    (3, "我们周六在北京的咖啡馆见面了"),
    (4, "Melanie is painting a sunrise over the lake \ud800 with a lone surrogate"),
    (2**40, "ticket JIRA-1234 reopened; see invoice 998877"),
    (5, ""),
]
QUERIES = ["support group", "E-4012", "db-07.internal", "北京 咖啡", "sunrise lake", "JIRA-1234", "invoice 998877",
           "painting"]


def test_the_batch_helper_indexes_what_the_per_document_path_does(jvm: None, tmp_path: Path) -> None:
    assert batch_index_available()   # javac is on this box: the helper is built at the JVM's start
    batched, single = LuceneIndex.open(tmp_path / "batched"), LuceneIndex.open(tmp_path / "single")
    try:
        single._docs._JBatchIndex = None   # the per-document path, as on a box without javac
        for index in (batched, single):
            index.upsert(DOCS[:3])
            index.upsert(DOCS[3:])
            index.upsert([(2, "the deploy succeeded on host db-08.internal")])   # replaces doc 2 by its id
        for query in QUERIES + ["deploy succeeded", "db-08.internal"]:
            (s1, i1), (s2, i2) = batched.search(query, 10), single.search(query, 10)
            assert i1.tolist() == i2.tolist(), query
            assert np.allclose(s1, s2), query
        assert batched.search("E-4012", 10)[1].size == 0   # the replaced text is gone
        assert batched.search("db-08.internal", 10)[1].tolist() == [2]
        assert batched.search("JIRA-1234", 10)[1].tolist() == [2**40]
        assert batched.search("北京", 10)[1].tolist() == [3]
    finally:
        batched.close()
        single.close()
