"""Array-module dispatch without importing CuPy unless a CuPy array is already in hand."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np


def array_module(*arrays: Any) -> Any:
    """``cupy`` if any argument is a CuPy array, else ``numpy`` (like ``cupy.get_array_module``).

    Never imports CuPy: a CuPy array can only exist once CuPy has been imported.
    """
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.get_array_module(*arrays)
    return np
