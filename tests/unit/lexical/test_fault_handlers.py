"""kept_fault_handlers (tests/fault_handlers.py): the in-process JVM's SIGSEGV handler survives a call that
resets it, as ``ray.shutdown()`` does in the Ray fixtures' teardown."""

from __future__ import annotations

import ctypes
import signal
import sys

import pytest
from fault_handlers import FAULT_SIGNALS, kept_fault_handlers, native_handler

from server.lexical.lucene import LuceneIndex

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads struct sigaction (Linux)")


def _reset_to_default(signums: tuple[int, ...]) -> None:
    """What ray.shutdown does to the fault signals (checked: SIGSEGV is SIG_DFL after it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal.restype = ctypes.c_void_p
    for signum in signums:
        libc.signal(int(signum), ctypes.c_void_p(0))


def test_the_jvms_fault_handlers_survive_a_reset_inside_the_block(index: LuceneIndex) -> None:
    before = {s: native_handler(s) for s in FAULT_SIGNALS}
    assert before[signal.SIGSEGV] not in (0, -1)          # HotSpot's, installed by lexical.start
    with kept_fault_handlers():                           # whatever happens below, the session's JVM keeps them
        with kept_fault_handlers():                       # the one under test
            _reset_to_default(FAULT_SIGNALS)
            assert native_handler(signal.SIGSEGV) == 0    # the reset took effect: this test can fail
        assert {s: native_handler(s) for s in FAULT_SIGNALS} == before
        index.upsert([(1, "the harbour light at dusk"), (2, "a quiet morning")])   # the JVM still serves
        _, ids = index.search("harbour", 10)
        assert ids.tolist() == [1]
