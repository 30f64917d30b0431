"""The start's indexing warm-up (lucene.warm_up): its generated turns reach every field's analyzer, and the warm-up
leaves nothing behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

from server.lexical.lucene import WARM_UP_DOCS, warm_up, warm_up_texts
from server.text import code_tokens, has_cjk


def test_the_warm_up_turns_are_deterministic_distinct_and_reach_every_field() -> None:
    texts = warm_up_texts(WARM_UP_DOCS)
    assert texts == warm_up_texts(WARM_UP_DOCS)
    assert len(set(texts)) == len(texts) == WARM_UP_DOCS
    assert all(": " in t and 20 < len(t) < 300 for t in texts)   # "<speaker>: <text>", chat-turn sized
    assert sum(has_cjk(t) for t in texts) >= WARM_UP_DOCS // 10      # the CJK field's analyzer
    assert sum(bool(code_tokens(t)) for t in texts) >= WARM_UP_DOCS // 20   # the code field's


def test_the_warm_up_runs_again_and_removes_its_index(jvm: None) -> None:
    before = set(Path(tempfile.gettempdir()).glob("engram-jvm-warm-up-*"))
    warm_up(docs=300)
    assert set(Path(tempfile.gettempdir()).glob("engram-jvm-warm-up-*")) == before
