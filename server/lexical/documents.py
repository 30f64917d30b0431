"""Lucene documents for one memory: the id keyword and doc values, the English and CJK text fields, and the
code-like tokens (see ``analysis.py`` for the fields and their analyzers); a long memory's windows follow it in one
block under the same id (``windows.py``). JVM classes are looked up once."""

from __future__ import annotations

from typing import Any

from collections.abc import Sequence

from server.lexical.analysis import FIELD_CJK, FIELD_CODE, FIELD_EN, FIELD_ID, FIELD_ID_NUM, FIELD_WINDOW, java_text
from server.lexical.jvm import batch_index_available, jcall, jclass
from server.lexical.windows import windows
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
        self._NO = jclass("org.apache.lucene.document.Field$Store").NO
        self._JArrayList = jclass("java.util.ArrayList")
        self._JTerm = jclass("org.apache.lucene.index.Term")
        self._JTermQuery = jclass("org.apache.lucene.search.TermQuery")
        self._JBatchIndex = jclass("engram.BatchIndex") if batch_index_available() else None

    def update_all(self, writer: Any, docs: Sequence[tuple[int, str]]) -> int:
        """``writer.updateDocument`` of each (doc id, text)'s document, or ``updateDocuments`` of it and its windows
        as one block when the text is long (every document of the id replaced either way): in one JNI call with the
        BatchIndex helper (java/engram/BatchIndex.java, the fields of :meth:`document`), else a document at a time.
        Returns the windows written."""
        if not docs:
            return 0
        ids: list[int] = []
        texts: list[str] = []
        counts: list[int] = []
        for doc_id, text in docs:
            value, text = check_id(doc_id), java_text(str(text))
            extra = [java_text(w) for w in windows(text)]
            ids += [value] * (1 + len(extra))
            texts += [text, *extra]
            counts += [len(extra)] + [0] * len(extra)
        if self._JBatchIndex is None:
            at = 0
            while at < len(ids):
                size = 1 + counts[at]
                block = [self.document(ids[at], texts[j], window=j > at) for j in range(at, at + size)]
                term = self.id_term(ids[at])
                if size == 1:
                    jcall(writer, "updateDocument", term, block[0])
                else:
                    listed = self._JArrayList()
                    for doc in block:
                        jcall(listed, "add", doc)
                    jcall(writer, "updateDocuments", term, listed)
                at += size
            return len(ids) - len(docs)
        codes = [" ".join(code_tokens(text)) for text in texts]
        self._JBatchIndex.updateBlocks(writer, self._text_type, FIELD_ID, FIELD_ID_NUM, [FIELD_EN, FIELD_CJK],
                                       FIELD_CODE, FIELD_WINDOW, ids, texts, codes, counts)
        return len(ids) - len(docs)

    def id_term(self, doc_id: int) -> Any:
        return self._JTerm(FIELD_ID, str(doc_id))

    def id_query(self, doc_id: int) -> Any:
        return self._JTermQuery(self.id_term(doc_id))

    def document(self, doc_id: int, text: str, *, window: bool = False) -> Any:
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
        if window:   # a long memory's window (windows.py): the same id, marked
            marker = self._JStringField(FIELD_WINDOW, "1", self._NO)
            jcall(doc, "add", marker)
        return doc


def check_id(doc_id: int) -> int:
    value = int(doc_id)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"doc id {doc_id} does not fit in int64")
    return value
