"""Code-like tokens (XJ-2026-0421) are indexed whole, so the exact code outranks near misses."""

from __future__ import annotations

import pytest

from server.lexical.lucene import LuceneIndex
from server.text import code_tokens, has_code


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("project number XJ-2026-0421.", ["xj-2026-0421"]),
        ("用户项目编号是XJ-2026-0421，提交工单", ["xj-2026-0421"]),
        ("release v1.2.3 and INV_0042 and a/b/7", ["v1.2.3", "inv_0042", "a/b/7"]),
        ("TDP-43 and 4-PBA, dated 2026-04-21", ["tdp-43", "4-pba", "2026-04-21"]),
        ("anti-interleukin-2 and 0-dimensional biomaterials", []),  # hyphenated words
        ("state-of-the-art e.g. and/or", []),  # no digit
        ("plain words 2026 and 0421", []),  # no separator
        ("", []),
    ],
)
def test_code_tokens(text: str, expected: list[str]) -> None:
    assert code_tokens(text) == expected
    assert has_code(text) is bool(expected)


NEAR_MISSES = [
    (1, "Project number XJ-2025-0421 was cancelled last year"),
    (2, "The pilot's project number is XJ-2026-0241"),
    (3, "User's old project number was XJ-2026-0412, closed in March"),
    (4, "Ticket SUP-2026-0421 was about a login bug"),
]
EXACT = (9, "用户项目编号是XJ-2026-0421")


@pytest.mark.parametrize("query", ["project number XJ-2026-0421", "项目编号XJ-2026-0421是什么", "xj-2026-0421"])
def test_exact_code_outranks_near_misses(index: LuceneIndex, query: str) -> None:
    index.upsert([*NEAR_MISSES, EXACT])
    _, ids = index.search(query, 5)
    assert ids[0] == EXACT[0]


def test_query_without_codes_matches_text_fields_only(index: LuceneIndex) -> None:
    # "project number" matches three near misses in the English field; the Chinese memory holds a code
    # but no English word of the query, and the code field adds no clause to a query without codes.
    index.upsert([*NEAR_MISSES, EXACT])
    _, ids = index.search("project number", 5)
    assert sorted(ids.tolist()) == [1, 2, 3]
