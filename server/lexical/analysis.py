"""Analysis for the lexical index: fields, analyzers and bag-of-words queries.

Every memory is indexed into two text fields:

* ``en`` — Anserini's ``DefaultEnglishAnalyzer`` (StandardTokenizer, lowercase, Lucene's
  English stopwords, Porter stemming): the analysis behind Anserini's BM25 baselines.
* ``cjk`` — Lucene's ``CJKAnalyzer``: Han/Kana/Hangul runs become overlapping bigrams
  (single characters for isolated ones); Latin/number tokens are kept lowercased and
  unstemmed; the same English stopwords are dropped.

A query that contains any CJK character searches ``cjk`` only; any other query
searches ``en`` only. Scores never mix fields, so BM25 statistics stay per field.
Both analyzers split on the same UAX#29 word boundaries, so a code such as
``XJ-2026-0421`` becomes ``xj 2026 0421`` in both fields and is found from an
English query ("project code XJ-2026-0421") and from a Chinese one
("项目编号XJ-2026-0421是什么", where the tokenizer also breaks between Han and Latin).

Queries are built like Anserini's ``BagOfWordsQueryGenerator``: the query text goes
through the field's analyzer, and each distinct term becomes a SHOULD ``TermQuery``
boosted by its count. No query parser is involved, so no user input is syntax.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from server.lexical.jvm import jclass

FIELD_EN = "en"
FIELD_CJK = "cjk"
# Indexed + stored keyword (decimal string): the update/delete key, and what Anserini's
# ScoredDocs reads back per hit (it reads the stored field named "id").
FIELD_ID = "id"
FIELD_ID_NUM = "id_num"  # NumericDocValues: tie-break sort key and hit id

# Han (BMP, Ext A, compatibility, Ext B..), kana (incl. halfwidth), Hangul jamo and syllables.
_CJK_RE = re.compile(
    "[\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)


_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def java_text(text: str) -> str:
    """``text`` made encodable for Java: surrogate pairs joined, lone surrogates -> U+FFFD.

    pyjnius raises ``UnicodeEncodeError`` on a lone surrogate, which arbitrary user
    input (e.g. JSON with a broken escape) can contain.
    """
    if _SURROGATE_RE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def has_cjk(text: str) -> bool:
    """Whether ``text`` contains a Chinese, Japanese or Korean character."""
    return _CJK_RE.search(text) is not None


@dataclass(frozen=True)
class Analysis:
    """The Java analysis objects one index uses (Lucene analyzers are thread-safe)."""

    english: Any
    cjk: Any
    per_field: Any  # PerFieldAnalyzerWrapper handed to the IndexWriter

    @classmethod
    def create(cls) -> Analysis:
        JDefaultEnglishAnalyzer = jclass("io.anserini.analysis.DefaultEnglishAnalyzer")
        JCJKAnalyzer = jclass("org.apache.lucene.analysis.cjk.CJKAnalyzer")
        JPerFieldAnalyzerWrapper = jclass(
            "org.apache.lucene.analysis.miscellaneous.PerFieldAnalyzerWrapper"
        )
        JHashMap = jclass("java.util.HashMap")
        english = JDefaultEnglishAnalyzer.newDefaultInstance()
        cjk = JCJKAnalyzer()
        by_field = JHashMap()
        by_field.put(FIELD_CJK, cjk)
        return cls(english=english, cjk=cjk, per_field=JPerFieldAnalyzerWrapper(english, by_field))

    def field_for(self, query: str) -> str:
        return FIELD_CJK if has_cjk(query) else FIELD_EN

    def analyzer_for(self, field: str) -> Any:
        return self.cjk if field == FIELD_CJK else self.english

    def terms(self, field: str, text: str) -> list[str]:
        """Analyzed tokens of ``text`` as ``field`` would index them, in order."""
        if not text or text.isspace():
            return []
        text = java_text(text)
        analyzer = self.analyzer_for(field)
        tokens = jclass("io.anserini.analysis.AnalyzerUtils").analyze(analyzer, text)
        return [str(t) for t in tokens.toArray()]


def weighted_terms(terms: list[str], *, max_terms: int) -> list[tuple[str, int]]:
    """Distinct terms with their counts, in first-appearance order, at most ``max_terms``."""
    counts = Counter(terms)
    return list(counts.items())[:max_terms]


class QueryBuilder:
    """Builds bag-of-words BM25 queries (no query syntax).

    The common case is one Java call to Anserini's ``BagOfWordsQueryGenerator`` (about
    10x faster than assembling the clauses term by term through pyjnius). The query is
    analyzed once first to detect empty queries and queries with more distinct terms
    than Lucene's clause limit, which are truncated here instead of failing in search.
    """

    def __init__(self, analysis: Analysis) -> None:
        self._analysis = analysis
        self._JTerm = jclass("org.apache.lucene.index.Term")
        self._JTermQuery = jclass("org.apache.lucene.search.TermQuery")
        self._JBoostQuery = jclass("org.apache.lucene.search.BoostQuery")
        self._JBooleanQueryBuilder = jclass("org.apache.lucene.search.BooleanQuery$Builder")
        self._SHOULD = jclass("org.apache.lucene.search.BooleanClause$Occur").SHOULD
        self._max_terms = int(jclass("org.apache.lucene.search.IndexSearcher").getMaxClauseCount())
        self._bag_of_words = jclass("io.anserini.search.query.BagOfWordsQueryGenerator")()

    def build(self, query: str) -> Any | None:
        """The Lucene query for ``query``, or ``None`` when no term survives analysis."""
        query = java_text(query)
        field = self._analysis.field_for(query)
        tokens = self._analysis.terms(field, query)
        if not tokens:
            return None
        if len(set(tokens)) <= self._max_terms:
            analyzer = self._analysis.analyzer_for(field)  # bind before the call (jvm.py)
            return self._bag_of_words.buildQuery(field, analyzer, query)
        return self._build_clauses(field, weighted_terms(tokens, max_terms=self._max_terms))

    def _build_clauses(self, field: str, terms: list[tuple[str, int]]) -> Any:
        builder = self._JBooleanQueryBuilder()
        for term, count in terms:
            clause: Any = self._JTermQuery(self._JTerm(field, term))
            if count > 1:
                clause = self._JBoostQuery(clause, float(count))
            should = self._SHOULD
            builder.add(clause, should)
        return builder.build()
