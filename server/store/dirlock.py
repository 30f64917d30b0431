"""One server per data directory: ``engram serve`` holds an exclusive ``flock`` on ``<data_dir>/serve.lock`` for
its whole life, taken before any model loads or any file of the directory is opened. A second server started on
the same directory (a restarted process whose predecessor still runs, a second ``make serve`` in another shell)
would otherwise replay the same logs and append to them from two processes; it stops at once with a message that
names the holder. The lock is the kernel's: it goes with the process, however that ends (SIGKILL included), so a
crash never leaves a stale lock behind. The file keeps the holder's pid, for the message only.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from server.errors import ConfigError

LOCK_FILE = "serve.lock"


def hold_data_dir(data_dir: Path) -> IO[str]:
    """Takes the data directory's lock and returns the open file that holds it (keep it open: closing it releases
    the lock). Raises :class:`ConfigError` when another process holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    f = open(data_dir / LOCK_FILE, "a+", encoding="utf-8")   # "a+": never truncates the holder's pid
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().strip() or "unknown"
        f.close()
        raise ConfigError(f"{data_dir} is in use by another engram server (pid {holder}); stop it first, or give "
                          "this one another --data-dir") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()}\n")
    f.flush()
    return f
