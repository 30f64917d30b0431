"""Lexical (BM25) retrieval on Lucene; the only package that touches the JVM."""

from __future__ import annotations

from server.lexical.jvm import detach_current_thread, jvm_started, start_jvm
from server.lexical.lucene import LexicalIndexClosedError, LuceneIndex

__all__ = [
    "LexicalIndexClosedError",
    "LuceneIndex",
    "detach_current_thread",
    "jvm_started",
    "start_jvm",
]
