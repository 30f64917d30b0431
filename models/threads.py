"""Torch CPU thread settings: process-wide, so set once from the composition root, never at import.

Measured on a 2-core box shared with other busy processes: with torch using every core, each of the
hundreds of per-layer ops waits at an OpenMP barrier for a thread the OS has descheduled, and MiniLM
throughput fell 10-40x (batch 1: ~120 → 3-7 texts/s); with one thread fewer than the cores it stayed
steady. Hence the default below leaves a core for gRPC, FAISS and the JVM.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger(__name__)


def default_cpu_threads() -> int:
    """One fewer than the CPUs this process may use, at least 1."""
    return max(1, process_cpus() - 1)


def set_cpu_threads(num_threads: int | None = None) -> int:
    """Set torch's intra-op CPU threads (None → :func:`default_cpu_threads`); returns the value set."""
    import torch

    threads = default_cpu_threads() if num_threads is None else num_threads
    if threads < 1:
        raise ValueError(f"num_threads must be >= 1, got {threads}")
    if torch.get_num_threads() != threads:
        logger.info("torch intra-op threads %d -> %d", torch.get_num_threads(), threads)
        torch.set_num_threads(threads)
    return threads


def process_cpus() -> int:
    """The CPUs this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """Torch's intra-op threads set to ``threads`` for the block, then back (0: unchanged). The setting is
    torch's, read by threads that start later too: only on a thread that runs forward passes (a device thread of the
    server), never on one that only searches."""
    import torch

    before = torch.get_num_threads()
    if threads <= 0 or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
