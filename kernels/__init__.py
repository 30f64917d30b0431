"""Numeric kernels: each CuPy kernel has a NumPy reference with the same signature and semantics.

Nothing here imports CuPy at import time; :func:`get_decay_ranker` decides once, at startup.
"""

from __future__ import annotations

import logging

from kernels._xp import array_module
from kernels.decay import DecayRanked, DecayRanker

logger = logging.getLogger(__name__)

__all__ = ["DecayRanked", "DecayRanker", "array_module", "cuda_available", "get_decay_ranker"]


def cuda_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        import cupy  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return False
    try:
        return int(cupy.cuda.runtime.getDeviceCount()) > 0
    except Exception:  # CUDARuntimeError when no driver or device; its type lives in cupy
        return False


def get_decay_ranker(device: str) -> DecayRanker:
    """The CuPy ranker for ``"cuda"``/``"cuda:N"`` when CuPy and a device exist, else the NumPy one.

    The CuPy ranker runs on CuPy's current device; returns NumPy arrays either way.
    """
    from kernels import decay

    if device.startswith("cuda"):
        if cuda_available():
            from kernels import decay_cupy

            logger.info("decay ranking on GPU (CuPy)")
            return decay_cupy.decay_rank
        logger.warning("decay ranking asked for %r but CuPy/CUDA is unavailable; using NumPy", device)
    elif device != "cpu":
        raise ValueError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'")
    return decay.decay_rank
