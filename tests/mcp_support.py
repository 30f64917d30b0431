"""Test support for ``engram mcp``: the command as a subprocess (stdio or streamable HTTP) and an MCP client
of the official SDK for each transport."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
ENGRAM = str(Path(sys.executable).with_name("engram"))


def mcp_args(address: str, *, key: str = "", tenant: str = "", transport: str = "stdio") -> list[str]:
    args = ["mcp", "--address", address, "--transport", transport]
    if key:
        args += ["--key", key]
    if tenant:
        args += ["--tenant", tenant]
    return args


@asynccontextmanager
async def stdio_client(address: str, *, key: str, tenant: str = "") -> AsyncIterator[Client]:
    """``engram mcp`` over stdio, started by the MCP SDK's client as a desktop agent would start it."""
    params = StdioServerParameters(command=ENGRAM, args=mcp_args(address, key=key, tenant=tenant), cwd=str(ROOT))
    async with Client(params) as client:
        yield client


@contextmanager
def http_server(address: str, *, tenant: str = "") -> Iterator[str]:
    """``engram mcp --transport http --listen 127.0.0.1:0``; yields its URL. The process gets no key."""
    proc = subprocess.Popen([ENGRAM, *mcp_args(address, tenant=tenant, transport="http"), "--listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=str(ROOT))
    lines: queue.Queue[str] = queue.Queue()
    stderr = proc.stderr
    assert stderr is not None
    threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True).start()
    try:
        while True:
            line = lines.get(timeout=60)
            if "streamable HTTP at " in line:
                yield line.split("streamable HTTP at ")[1].strip()
                break
    finally:
        proc.terminate()
        proc.wait(30)


@asynccontextmanager
async def http_client(url: str, *, key: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, the structured result or the error text)."""
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text if result.content else ""
    if result.is_error:
        return True, text
    assert json.loads(text) == result.structured_content  # the text block mirrors the structured one
    return False, result.structured_content


async def ok(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    failed, data = await call(client, tool, arguments)
    assert not failed, f"{tool}: {data}"
    return data


async def error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    failed, data = await call(client, tool, arguments)
    assert failed, f"{tool} {arguments} should have failed: {data}"
    return str(data)
