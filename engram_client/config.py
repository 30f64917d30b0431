"""Where a client finds the server and its key: flags ← ENGRAM_ADDRESS / ENGRAM_KEY (or ENGRAM_ADMIN_KEY) /
ENGRAM_TIMEOUT_S ← defaults. The server never reads these variables (``server.config`` skips them)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ClientConfig:
    address: str = "127.0.0.1:50051"
    key: str = ""
    timeout_s: float = 30.0


def load_client_config(*, env: Mapping[str, str] | None = None, address: str | None = None,
                       key: str | None = None, timeout_s: float | None = None) -> ClientConfig:
    """A bad timeout raises ``ValueError`` (the CLI reports it and exits 2)."""
    env = os.environ if env is None else env
    base = ClientConfig()
    try:
        timeout = timeout_s if timeout_s is not None else float(env.get("ENGRAM_TIMEOUT_S") or base.timeout_s)
    except ValueError as exc:
        raise ValueError(f"ENGRAM_TIMEOUT_S is not a number: {env.get('ENGRAM_TIMEOUT_S')!r}") from exc
    if timeout <= 0:
        raise ValueError("the client timeout must be > 0")
    return ClientConfig(address=address or env.get("ENGRAM_ADDRESS") or base.address,
                        key=key or env.get("ENGRAM_KEY") or env.get("ENGRAM_ADMIN_KEY") or "", timeout_s=timeout)
