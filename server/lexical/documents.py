"""Lucene documents for one memory: the id keyword and doc values, the English and CJK text fields, and the
code-like tokens (see ``analysis.py`` for the fields and their analyzers). JVM classes are looked up once."""

from __future__ import annotations

from typing import Any

from collections.abc import Sequence

from server.lexical.analysis import FIELD_CJK, FIELD_CODE, FIELD_EN, FIELD_ID, FIELD_ID_NUM, java_text
from server.lexical.jvm import batch_index_available, jcall, jclass
from server.text import code_tokens

# Field(String name, CharSequence value, IndexableFieldType type): pyjnius does not match
# a Python str to CharSequence on its own.
_FIELD_SIGNATURE = (
    "(Ljava/lang/String;Ljava/lang/CharSequence;Lorg/apache/lucene/index/IndexableFieldType;)V"
)

class DocumentFactory:
    """Builds Lucene documents (id keyword + id doc values + two text fields + codes, if any)."""

    def __init__(self) -> None:
        JFieldType = jclass("org.apache.lucene.document.FieldType")
        JIndexOptions = jclass("org.apache.lucene.index.IndexOptions")
        text_type = JFieldType()
        freqs = JIndexOptions.DOCS_AND_FREQS  # BM25 needs no positions
        jcall(text_type, "setIndexOptions", freqs)
        jcall(text_type, "setTokenized", True)
        jcall(text_type, "setStored", False)
        jcall(text_type, "freeze")
        self._text_type = text_type
        self._JDocument = jclass("org.apache.lucene.document.Document")
        self._JField = jclass("org.apache.lucene.document.Field")
        self._JStringField = jclass("org.apache.lucene.document.StringField")
        self._JNumericDocValuesField = jclass("org.apache.lucene.document.NumericDocValuesField")
        self._YES = jclass("org.apache.lucene.document.Field$Store").YES
        self._JTerm = jclass("org.apache.lucene.index.Term")
        self._JTermQuery = jclass("org.apache.lucene.search.TermQuery")
        self._JBatchIndex = jclass("engram.BatchIndex") if batch_index_available() else None

    def update_all(self, writer: Any, docs: Sequence[tuple[int, str]]) -> None:
        """``writer.updateDocument`` of each (doc id, text)'s document: in one JNI call with the BatchIndex helper
        (java/engram/BatchIndex.java, the fields of :meth:`document`), else a document at a time."""
        if not docs:
            return
        ids = [check_id(doc_id) for doc_id, _ in docs]
        texts = [java_text(str(text)) for _, text in docs]
        if self._JBatchIndex is None:
            for value, text in zip(ids, texts, strict=True):
                term = self.id_term(value)
                doc = self.document(value, text)
                jcall(writer, "updateDocument", term, doc)
            return
        codes = [" ".join(code_tokens(text)) for text in texts]
        self._JBatchIndex.update(writer, self._text_type, FIELD_ID, FIELD_ID_NUM, [FIELD_EN, FIELD_CJK], FIELD_CODE,
                                 ids, texts, codes)

    def id_term(self, doc_id: int) -> Any:
        return self._JTerm(FIELD_ID, str(doc_id))

    def id_query(self, doc_id: int) -> Any:
        return self._JTermQuery(self.id_term(doc_id))

    def document(self, doc_id: int, text: str) -> Any:
        # Build every field first, then add: no Java call inside a Java call's
        # argument list (see jvm.py on pyjnius method binding).
        key = self._JStringField(FIELD_ID, str(doc_id), self._YES)
        key_num = self._JNumericDocValuesField(FIELD_ID_NUM, doc_id)
        english = self._JField(FIELD_EN, text, self._text_type, signature=_FIELD_SIGNATURE)
        cjk = self._JField(FIELD_CJK, text, self._text_type, signature=_FIELD_SIGNATURE)
        doc = self._JDocument()
        for field in (key, key_num, english, cjk):
            jcall(doc, "add", field)
        codes = code_tokens(text)
        if codes:
            code = self._JField(FIELD_CODE, " ".join(codes), self._text_type, signature=_FIELD_SIGNATURE)
            jcall(doc, "add", code)
        return doc


def check_id(doc_id: int) -> int:
    value = int(doc_id)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"doc id {doc_id} does not fit in int64")
    return value
