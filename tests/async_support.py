"""Test support for asyncio code without pytest-asyncio: run a coroutine test on its own loop."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any


def run_async(test: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    @functools.wraps(test)
    def wrapper() -> None:
        asyncio.run(asyncio.wait_for(test(), timeout=20))
    return wrapper
