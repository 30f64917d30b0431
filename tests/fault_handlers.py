"""Keep the process's C-level fault signal handlers across a call that resets them.

Ray replaces them twice in a test process. ``ray.init()`` installs its core worker's handlers over whatever
the process had, and ``ray.shutdown()`` sets SIGSEGV (and the other fault signals it handled) back to SIG_DFL.
In a process that has started the JVM (an in-process server or edge: ``server.lexical.start``) the handler
lost is HotSpot's, which the JVM needs for its own routine faults (implicit null checks, stack banging,
safepoint polls); without it such a fault kills the process with signal 11 and no hs_err file. Seen in
``make test-slow`` (rc 139, at tests/reliability/test_tenant_isolation.py, which passes alone): a second Ray
module's ``ray.init`` ran after the first module's edge had started the JVM, and from then on every test
ran with Ray's handler on SIGSEGV (read at each test's start with :func:`native_handler` and ``dladdr``:
``_raylet.so`` where it had been ``libjvm.so``).

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


class _DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                ("saddr", ctypes.c_void_p)]


def handler_library(signum: int) -> str:
    """The file name of the shared object whose code handles ``signum`` (``libjvm.so``, ``_raylet.so``,
    ``libpython3.11.so.1.0`` for faulthandler), "SIG_DFL" / "SIG_IGN", or "" where this cannot be read."""
    address = native_handler(signum)
    if address in (0, 1):
        return ("SIG_DFL", "SIG_IGN")[address]
    libc = _libc()
    info = _DlInfo()
    if address < 0 or libc is None or not libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)):
        return ""
    return (info.fname or b"").decode(errors="replace").rsplit("/", 1)[-1]


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
