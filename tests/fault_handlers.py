"""Keep the process's C-level fault signal handlers across a call that resets them.

``ray.shutdown()`` sets SIGSEGV (and the other fault signals its core worker installed handlers for) back to
SIG_DFL, whoever's handler is installed by then. In a test process that has started the JVM (an in-process
server or edge: ``server.lexical.start``) that handler is HotSpot's, which the JVM needs for its own routine
faults (implicit null checks, stack banging, safepoint polls): once it is gone, the next such fault kills the
process with signal 11 and no hs_err file. Checked here: ``ray.init`` then ``lexical.start`` then
``ray.shutdown`` leaves SIGSEGV at SIG_DFL; ``make test-slow`` died that way (rc 139) in the first long
in-process test after the Ray modules (tests/reliability/test_tenant_isolation.py, which passes alone).

Python's ``signal`` module cannot save and reinstall a native handler, so this reads and writes the
``struct sigaction`` itself (Linux, glibc layout; elsewhere it does nothing)."""

from __future__ import annotations

import ctypes
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

FAULT_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL)


class _Sigaction(ctypes.Structure):
    """glibc's ``struct sigaction`` on Linux: handler, a 1024-bit mask, flags, restorer."""

    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                ("restorer", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL | None:
    return ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def native_handler(signum: int) -> int:
    """The address of the C-level handler of ``signum`` (0: SIG_DFL), or -1 where this cannot be read."""
    libc = _libc()
    if libc is None:
        return -1
    action = _Sigaction()
    if libc.sigaction(int(signum), None, ctypes.byref(action)) != 0:
        raise OSError(ctypes.get_errno(), f"sigaction({signum}) failed")
    return int(action.handler or 0)


@contextmanager
def kept_fault_handlers(signals: tuple[int, ...] = FAULT_SIGNALS) -> Iterator[None]:
    """Runs the block, then reinstalls the handlers ``signals`` had before it (their flags and masks too)."""
    libc = _libc()
    if libc is None:
        yield
        return
    saved: dict[int, _Sigaction] = {}
    for signum in signals:
        action = _Sigaction()
        if libc.sigaction(int(signum), None, ctypes.byref(action)) == 0:
            saved[int(signum)] = action
    try:
        yield
    finally:
        for signum, action in saved.items():
            if libc.sigaction(signum, ctypes.byref(action), None) != 0:
                raise OSError(ctypes.get_errno(), f"sigaction({signum}) restore failed")
