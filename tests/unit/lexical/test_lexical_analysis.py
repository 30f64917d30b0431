from __future__ import annotations

import pytest

from server.lexical.analysis import (
    FIELD_CJK,
    FIELD_EN,
    Analysis,
    java_text,
    weighted_terms,
)
from server.text import has_cjk


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("hello world", False),
        ("项目编号", True),
        ("mixed 中文 text", True),
        ("ひらがな", True),
        ("カタカナ", True),
        ("한국어", True),
        ("𠀀", True),  # CJK Extension B, outside the BMP
        ("café naïve XJ-2026-0421", False),
        ("", False),
    ],
)
def test_has_cjk(text: str, expected: bool) -> None:
    assert has_cjk(text) is expected


def test_java_text_replaces_lone_surrogates_and_joins_pairs() -> None:
    assert java_text("plain") == "plain"
    assert java_text("a\ud800b") == "a\ufffdb"
    assert java_text("\ud83d\ude00") == "\U0001f600"


def test_weighted_terms_counts_in_first_appearance_order() -> None:
    assert weighted_terms(["b", "a", "b", "c"], max_terms=10) == [("b", 2), ("a", 1), ("c", 1)]
    assert weighted_terms(["b", "a", "b", "c"], max_terms=2) == [("b", 2), ("a", 1)]


def test_english_field_uses_anserini_default_analysis(jvm: None) -> None:
    analysis = Analysis.create()
    # Porter stemming and Lucene English stopwords, as in Anserini's BM25 baselines.
    assert analysis.terms(FIELD_EN, "The memories of running cats") == ["memori", "run", "cat"]


def test_cjk_field_unigrams_and_bigrams_han_and_keeps_latin_tokens(jvm: None) -> None:
    analysis = Analysis.create()
    assert analysis.terms(FIELD_CJK, "项目编号XJ-2026-0421是什么") == [
        "项", "项目", "目", "目编", "编", "编号", "号", "xj", "2026", "0421", "是", "是什", "什", "什么", "么",
    ]
    # CJKAnalyzer's width folding, lowercasing and English stopwords are kept.
    assert analysis.terms(FIELD_CJK, "the Ｆｕｌｌ 号") == ["full", "号"]
    assert analysis.field_for("项目编号") == FIELD_CJK
    assert analysis.field_for("project code") == FIELD_EN
