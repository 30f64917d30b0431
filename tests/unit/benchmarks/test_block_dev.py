"""benchmarks/quality/block_dev.py: the unnamed question its dense and rerank variants read."""
from __future__ import annotations

from benchmarks.quality.block_dev import FUSE, unnamed


def test_the_named_speaker_is_taken_out_of_the_question() -> None:
    assert unnamed("What did Caroline research?", "Caroline") == "What did they research?"
    assert unnamed("What is Caroline's identity?", "Caroline") == "What is their identity?"
    assert unnamed("What did Caroline research?", "Caroline", "drop") == "What did research?"
    assert unnamed("When did Carolines meet?", "Caroline") == "When did Carolines meet?"   # not the name as a word


def test_the_variants_that_read_another_question_are_registered() -> None:
    assert {"dense_unnamed", "dense_drop", "dense_both", "rerank_unnamed", "rerank_dense_unnamed"} <= set(FUSE)
