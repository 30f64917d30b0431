"""How a framework class reaches engram: SDK clients handed in, or an address and key to make them from.

The blocking client serves the sync path. The asyncio client serves the async path; one made here is
made inside the running event loop, once per loop (grpc.aio channels belong to one loop). With neither
an asyncio client nor an address, the async path runs the blocking client on a worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from engram_client import AsyncEngramClient, EngramClient

T = TypeVar("T")


class Clients:
    def __init__(self, *, client: EngramClient | None = None, async_client: AsyncEngramClient | None = None,
                 address: str = "", key: str = "", timeout_s: float = 30.0) -> None:
        if client is None and async_client is None and not address:
            raise ValueError("give an engram client (client= / async_client=) or an address (and key)")
        self._client = client
        self._async_client = async_client
        self._address, self._key, self._timeout_s = address, key, timeout_s
        self._per_loop: dict[int, tuple[asyncio.AbstractEventLoop, AsyncEngramClient]] = {}

    def sync(self) -> EngramClient:
        if self._client is None:
            if not self._address:
                raise RuntimeError("this integration was given only an asyncio client: use its async methods")
            self._client = EngramClient(self._address, key=self._key, timeout_s=self._timeout_s)
        return self._client

    def aio(self) -> AsyncEngramClient | None:
        """The asyncio client for the running loop, or None when the async path should use a thread."""
        if self._async_client is not None:
            return self._async_client
        if not self._address:
            return None
        loop = asyncio.get_running_loop()
        held = self._per_loop.get(id(loop))
        if held is None or held[0] is not loop:
            self._per_loop = {i: h for i, h in self._per_loop.items() if not h[0].is_closed()}
            held = (loop, AsyncEngramClient(self._address, key=self._key, timeout_s=self._timeout_s))
            self._per_loop[id(loop)] = held
        return held[1]

    async def run(self, sync_call: Callable[[EngramClient], T], async_call: Callable[[AsyncEngramClient], Any]) -> T:
        """``async_call`` on the asyncio client, else ``sync_call`` on a worker thread."""
        client = self.aio()
        if client is not None:
            return await async_call(client)  # type: ignore[no-any-return]
        sync = self.sync()
        return await asyncio.get_running_loop().run_in_executor(None, sync_call, sync)

    def close(self) -> None:
        """Closes the blocking client made here (clients handed in are the caller's to close)."""
        if self._address and self._client is not None:
            self._client.close()
            self._client = None
