"""Lexical (BM25) retrieval on Lucene; the only package that touches the JVM. :func:`start` is its one
entry at startup: it starts the JVM and warms Lucene up."""

from __future__ import annotations

from server.lexical.jvm import detach_current_thread, jvm_started, start_jvm
from server.lexical.lucene import LexicalIndexClosedError, LuceneIndex, warm_up


def start(*, heap_mb: int = 1024) -> None:
    """Start the process's JVM (once; later calls wait for the first, then return) and run every Java call of
    the lexical index once on this thread before any other thread calls Java (see ``jvm.start_jvm``)."""
    start_jvm(heap_mb=heap_mb, warm_up=warm_up)


__all__ = [
    "LexicalIndexClosedError",
    "LuceneIndex",
    "detach_current_thread",
    "jvm_started",
    "start",
]
