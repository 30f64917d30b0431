"""Analysis for the lexical index: fields, analyzers and bag-of-words queries.

Every memory is indexed into two text fields:

* ``en`` — Anserini's ``DefaultEnglishAnalyzer`` (StandardTokenizer, lowercase, Lucene's
  English stopwords, Porter stemming): the analysis behind Anserini's BM25 baselines.
* ``cjk`` — Lucene's ``CJKAnalyzer`` chain (StandardTokenizer, CJK width folding,
  lowercase, CJK bigrams, English stopwords) with unigrams kept beside the bigrams:
  Han/Kana/Hangul runs become every character and every overlapping pair; Latin/number
  tokens are kept lowercased and unstemmed. Unigrams let a paraphrased query match on
  shared characters where no bigram is shared (zh/en memory set, BM25 nDCG@10 0.469 with
  bigrams only → 0.501 with both; see benchmarks/quality).

A query that contains any CJK character searches ``cjk`` only; any other query
searches ``en`` only. Scores never mix fields, so BM25 statistics stay per field.
Both analyzers split on the same UAX#29 word boundaries, so a code such as
``XJ-2026-0421`` becomes ``xj 2026 0421`` in both fields and is found from an
English query ("project code XJ-2026-0421") and from a Chinese one
("项目编号XJ-2026-0421是什么", where the tokenizer also breaks between Han and Latin).

Both analyzers split codes at ``-``: a memory with "XJ-2025-0421" shares two of three
terms with a query for "XJ-2026-0421". So a third field, ``code``, holds each code-like
token whole and lowercased (letters/digits joined by ``- _ . /``, at least one digit, no
word of 6+ letters: ``xj-2026-0421``, ``v1.2.3``, ``inv_0042``); :func:`code_tokens` finds them for
documents and queries alike. A query with code-like tokens adds one SHOULD clause per
code on that field, boosted by ``CODE_BOOST``, to the text-field query: the exact code
outranks near misses, while every other query is unchanged.

Queries are built like Anserini's ``BagOfWordsQueryGenerator``: the query text goes
through the field's analyzer, and each distinct term becomes a SHOULD ``TermQuery``
boosted by its count. No query parser is involved, so no user input is syntax.

With :data:`QUERY_FUNCTION_WORDS` (off by default), a query's **function words** (question
words, pronouns, auxiliaries: "what", "my", "did"; "我", "什么") are left out of it: Lucene's
stop set keeps them, and a question whose content words match nothing ("what's my salary?"
over "I earn 42k a year") ranks the shortest memories holding "my" first, a list rank fusion
weighs like a real match. A query of function words alone then has no BM25 list. The index is
the same either way: documents keep every word. Measured on LoCoMo's dev conversations it
costs single-hop questions more than it gives multi-hop and temporal ones
(docs/concepts/retrieval.md), so it stays off. With :data:`CONTENT_MATCH` (on) a document
must match one of the query's other words when it has any: the function words still score
with them, so a document that matches a content word scores exactly as before, and one that
matches function words alone is no hit.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from server.lexical.jvm import jcall, jclass
from server.text import code_tokens, has_cjk

FIELD_EN = "en"
FIELD_CJK = "cjk"
FIELD_CODE = "code"  # code-like tokens, whole and lowercased, whitespace-joined
CODE_BOOST = 2.0  # weight of an exact code match against the text field's clauses
# Indexed + stored keyword (decimal string): the update/delete key, and what Anserini's
# ScoredDocs reads back per hit (it reads the stored field named "id").
FIELD_ID = "id"
FIELD_ID_NUM = "id_num"  # NumericDocValues: tie-break sort key and hit id
FIELD_WINDOW = "window"  # unstored keyword "1" on a long memory's window documents (windows.py)

# With QUERY_FUNCTION_WORDS, left out of a query's terms (analysed as the field analyses them, so stems match): the
# words a question is made of, not what it asks about. Not "may" (a month); "will" and "can" are Lucene stop words or
# nouns. Off: LoCoMo dev R@5 / block 0.768 / 0.775 with the function words, 0.762 / 0.772 without.
QUERY_FUNCTION_WORDS = False
# A hit must match a word of the query that is not a function word (when it has one); its score is unchanged.
CONTENT_MATCH = True
_EN_FUNCTION = """what which who whom whose where when why how i me my mine myself you your yours yourself we us
our ours ourselves he him his himself she her hers herself its itself them themselves do does did done doing am were
been being have has had having could would should shall might must""".split()
_CJK_FUNCTION = "我 你 您 他 她 的 了 吗 呢 吧 么 什 哪 谁 怎 什么 怎么 哪里 哪个 哪些 我的 你的".split()

_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def java_text(text: str) -> str:
    """``text`` made encodable for Java: surrogate pairs joined, lone surrogates -> U+FFFD.

    pyjnius raises ``UnicodeEncodeError`` on a lone surrogate, which arbitrary user
    input (e.g. JSON with a broken escape) can contain.
    """
    if _SURROGATE_RE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def _cjk_analyzer() -> Any:
    """``CJKAnalyzer``'s chain with ``outputUnigrams``; the stop filter's default set is English."""
    JCustomAnalyzer = jclass("org.apache.lucene.analysis.custom.CustomAnalyzer")
    JHashMap = jclass("java.util.HashMap")
    builder = JCustomAnalyzer.builder()
    steps: list[tuple[str, dict[str, str]]] = [
        ("cjkWidth", {}), ("lowercase", {}), ("cjkBigram", {"outputUnigrams": "true"}), ("stop", {}),
    ]
    params = JHashMap()
    builder = jcall(builder, "withTokenizer", "standard", params)
    for name, values in steps:
        params = JHashMap()  # the builder keeps each map: one per step
        for key, value in values.items():
            jcall(params, "put", key, value)
        builder = jcall(builder, "addTokenFilter", name, params)
    return jcall(builder, "build")


@dataclass(frozen=True)
class Analysis:
    """The Java analysis objects one index uses (Lucene analyzers are thread-safe)."""

    english: Any
    cjk: Any
    per_field: Any  # PerFieldAnalyzerWrapper handed to the IndexWriter

    @classmethod
    def create(cls) -> Analysis:
        JDefaultEnglishAnalyzer = jclass("io.anserini.analysis.DefaultEnglishAnalyzer")
        JPerFieldAnalyzerWrapper = jclass(
            "org.apache.lucene.analysis.miscellaneous.PerFieldAnalyzerWrapper"
        )
        JWhitespaceAnalyzer = jclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")
        JHashMap = jclass("java.util.HashMap")
        english = JDefaultEnglishAnalyzer.newDefaultInstance()
        cjk = _cjk_analyzer()
        whitespace = JWhitespaceAnalyzer()
        by_field = JHashMap()
        jcall(by_field, "put", FIELD_CJK, cjk)
        jcall(by_field, "put", FIELD_CODE, whitespace)
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
        return [str(t) for t in jcall(tokens, "toArray")]


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
        self._MUST_NOT = jclass("org.apache.lucene.search.BooleanClause$Occur").MUST_NOT
        self._MUST = jclass("org.apache.lucene.search.BooleanClause$Occur").MUST
        # Analysed terms as they are (the content-match query rebuilds its two parts from them)
        self._terms_analyzer = jclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")()
        self._max_terms = int(jclass("org.apache.lucene.search.IndexSearcher").getMaxClauseCount())
        self._bag_of_words = jclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self._function = {field: frozenset(analysis.terms(field, " ".join(words)))
                          for field, words in ((FIELD_EN, _EN_FUNCTION), (FIELD_CJK, _CJK_FUNCTION))}

    def build(self, query: str) -> Any | None:
        """The Lucene query for ``query``, or ``None`` when no term survives analysis (nor the function words'
        removal, with :data:`QUERY_FUNCTION_WORDS`) and the query holds no code. With :data:`CONTENT_MATCH` a query
        holding both function words and other words needs a hit to match one of the others."""
        query = java_text(query)
        field = self._analysis.field_for(query)
        tokens = self._analysis.terms(field, query)
        codes = weighted_terms(code_tokens(query), max_terms=self._max_terms // 2)
        content = [t for t in tokens if t not in self._function[field]]
        limit = self._max_terms - len(codes)
        text_query = None
        if QUERY_FUNCTION_WORDS and len(content) < len(tokens):
            text_query = self._build_clauses(field, weighted_terms(content, max_terms=limit)) if content else None
        elif CONTENT_MATCH and content and len(content) < len(tokens) and len(set(tokens)) <= limit:
            # (content words, at least one) + function words: the same sum of clause scores as the flat query. The
            # analysed terms go through the generator again split on spaces only (one call a part, counts kept).
            function = [t for t in tokens if t in self._function[field]]
            builder = self._JBooleanQueryBuilder()
            must, should = self._MUST, self._SHOULD
            terms = self._terms_analyzer
            jcall(builder, "add", jcall(self._bag_of_words, "buildQuery", field, terms, " ".join(content)), must)
            jcall(builder, "add", jcall(self._bag_of_words, "buildQuery", field, terms, " ".join(function)), should)
            text_query = jcall(builder, "build")
        elif tokens and len(set(tokens)) + len(codes) <= self._max_terms:
            analyzer = self._analysis.analyzer_for(field)  # bind before the call (jvm.py)
            text_query = jcall(self._bag_of_words, "buildQuery", field, analyzer, query)
        elif tokens:
            text_query = self._build_clauses(field, weighted_terms(tokens, max_terms=limit))
        if not codes:
            return text_query
        if text_query is None:
            return self._build_clauses(FIELD_CODE, codes, boost=CODE_BOOST)
        builder = self._JBooleanQueryBuilder()
        should = self._SHOULD
        jcall(builder, "add", text_query, should)
        return self._build_clauses(FIELD_CODE, codes, boost=CODE_BOOST, builder=builder)

    def without_windows(self, query: Any) -> Any:
        """``query`` matching a memory's own document only, never its windows' (windows.py)."""
        builder = self._JBooleanQueryBuilder()
        should, must_not = self._SHOULD, self._MUST_NOT
        marker = self._JTerm(FIELD_WINDOW, "1")
        window = self._JTermQuery(marker)
        jcall(builder, "add", query, should)
        jcall(builder, "add", window, must_not)
        return jcall(builder, "build")

    def _build_clauses(self, field: str, terms: list[tuple[str, int]], *, boost: float = 1.0,
                       builder: Any = None) -> Any:
        builder = self._JBooleanQueryBuilder() if builder is None else builder
        for term, count in terms:
            jterm = self._JTerm(field, term)
            clause: Any = self._JTermQuery(jterm)
            if count * boost != 1.0:
                clause = self._JBoostQuery(clause, float(count * boost))
            should = self._SHOULD
            jcall(builder, "add", clause, should)
        return jcall(builder, "build")
