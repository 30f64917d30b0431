"""One CJK check for every routing decision (#17: three checks with three ranges once sent a Hangul-jamo, CJK
Ext-B or half-width-kana query to the CJK BM25 field with full dense weight, reranked by the English model):
``server.text.has_cjk``, the lexical field a query searches, the search stage's dense weight and rerank
decision, and the recall gate all follow the same answer."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from server.config import SearchConfig
from server.domain import SearchQuery
from server.engine.candidates import SearchItem
from server.engine.search import DENSE_WEIGHT, SearchPipeline
from server.hygiene import gate
from server.lexical.analysis import FIELD_CJK, FIELD_EN, Analysis
from server.text import has_cjk

SERVER = Path(__file__).resolve().parents[3] / "server"

CASES = [
    ("what did we plan for the budget", False),
    ("café naïve résumé", False),              # Latin with diacritics
    ("Ｆｕｌｌ－ｗｉｄｔｈ Latin", False),          # full-width Latin is not CJK script
    ("项目预算是多少", True),                    # Han (BMP)
    ("\U00020000\U0002a6d6 ext-b", True),      # CJK Extension B, outside the BMP
    ("\u1100\u1161\u11a8 jamo", True),          # Hangul jamo (conjoining), not syllables
    ("\u3131\u314f compatibility jamo", True),  # Hangul compatibility jamo
    ("한국어 예산", True),                        # Hangul syllables
    ("ｶﾀｶﾅ half-width", True),                 # half-width katakana
    ("ひらがな and カタカナ", True),              # hiragana, katakana
]


def _item(text: str) -> SearchItem:
    return SearchItem(shard=None, query=SearchQuery(text=text), now_ms=0)  # type: ignore[arg-type]


def _stage(*, rerank_cjk: bool = False) -> SimpleNamespace:
    """What SearchPipeline's routing decisions read: its search config, a reranker, the default depth and the dense
    list's fusion weight."""
    return SimpleNamespace(cfg=SearchConfig(rerank_cjk=rerank_cjk), reranker=object(), default_rerank_depth=20,
                           dense_weight=DENSE_WEIGHT)


@pytest.mark.parametrize(("text", "cjk"), CASES)
def test_has_cjk(text: str, cjk: bool) -> None:
    assert has_cjk(text) is cjk


@pytest.mark.parametrize(("text", "cjk"), CASES)
def test_lexical_field_follows_the_one_check(jvm: None, text: str, cjk: bool) -> None:
    assert Analysis.create().field_for(text) == (FIELD_CJK if cjk else FIELD_EN)


@pytest.mark.parametrize(("text", "cjk"), CASES)
def test_search_stage_dense_weight_and_rerank_follow_the_one_check(text: str, cjk: bool) -> None:
    item = _item(text)
    assert item.cjk is cjk
    english = _item("x" * len(text))  # same length, no CJK and no code: the base weights
    weights = SearchPipeline._weights(_stage(), item)  # type: ignore[arg-type]
    assert (weights != SearchPipeline._weights(_stage(), english)) is cjk  # type: ignore[arg-type]
    # the bundled cross-encoder reads English: a CJK query keeps the fused order unless rerank_cjk
    assert SearchPipeline.rerank_depth(_stage(), item) == (0 if cjk else 20)  # type: ignore[arg-type]
    assert SearchPipeline.rerank_depth(_stage(rerank_cjk=True), item) == 20  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["谢谢", "你好！", "好的 谢谢", "嗯嗯"])
def test_gate_small_talk_in_cjk(text: str) -> None:
    assert gate.needs_memory(text) == (False, "small talk")


@pytest.mark.parametrize("text", ["ｶﾀｶﾅ", "\u1100\u1161\u11a8", "\U00020000", "한국어 예산"])
def test_gate_reads_cjk_content_words(text: str) -> None:
    assert gate.needs_memory(text) == (True, "has content words")


def test_no_other_cjk_range_in_the_server() -> None:
    """Only server/text.py spells CJK code points: any other range would be a second, diverging check. The one
    exception is no check: salience's tokenizer counts each Han character as a word, a feature its fitted
    weights (server/hygiene/salience.json) were fitted with."""
    han = re.compile(r"\\u4e00|\\u3400|\\u3040|\\uac00|\\U00020000")
    others = sorted(str(p.relative_to(SERVER)) for p in SERVER.rglob("*.py")
                    if han.search(p.read_text(encoding="utf-8")))
    assert others == ["hygiene/salience.py", "text.py"]
