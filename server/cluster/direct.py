"""The direct data path of ``engram serve --ray``: the steady state's calls without a Ray actor call.

A Serve handle call is a Ray actor call: pickling, the raylet / core-worker path and several thread wake-ups on
each side, ~10 ms on two busy cores. So every TenantShard, Encoder and Reranker replica also serves one
``grpc.aio`` method on its own event loop (:class:`DirectServer`), bytes in and bytes out, behind a random
token the replica makes at start:

- edge -> TenantShard: the call the edge already authorized, pickled as the Serve call's arguments
  (:data:`SHARD_CALL`); the replica runs exactly its Serve method's code on it, or answers :class:`Refused`
  when the tenant is not loaded there or another replica took its log (the edge then takes the Serve path,
  which loads it / fails over as it always did). A replica publishes its address and token with its figures
  (server/cluster/board.py); the edge sends a tenant's call there only when the consistent-hash ring of its own
  Serve handle names that replica and the channel is connected (:class:`ShardChannels`).
- TenantShard -> Encoder / Reranker: a forward's items in, the ``@serve.batch`` pass's rows out as raw float32
  bytes (:data:`MODEL_CALL`); the same batches form across tenants and replicas (server/cluster/remote_models.py).

Whatever goes wrong on a direct call that cannot have changed anything falls back to the Serve path; a
mutating call lost after it was sent answers UNAVAILABLE, as a lost Serve call does. The token keeps anyone
else on the network from calling (it is checked before anything is unpickled); it travels only over Ray and
through the bucket, both of which a cluster already trusts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.grpc.hop import (
    CLIENT_OPTIONS,
    MODEL_CALL,
    SHARD_CALL,
    DirectServer,
    HopFailed,
    ShardChannels,
    Target,
    blocking_channel,
    metadata,
    send,
    send_blocking,
)

__all__ = ["CLIENT_OPTIONS", "MODEL_CALL", "SHARD_CALL", "Crashed", "DirectServer", "HopFailed", "Refused",
           "ShardChannels", "Target", "blocking_channel", "metadata", "node_host", "ring_owner", "send",
           "send_blocking"]

@dataclass(frozen=True)
class Refused:
    """A replica's answer to a direct call it will not run (the tenant is not loaded there, or was taken
    over): nothing was done; the edge takes the Serve path."""

    reason: str


@dataclass(frozen=True)
class Crashed:
    """A direct call that raised a non-domain exception on the replica (logged there with its traceback): INTERNAL
    at the edge, as the Serve path's wrapped exception is."""


def node_host() -> str:
    """The address other nodes reach this process at (Ray's node IP)."""
    import ray

    return str(ray.util.get_node_ip_address())


def ring_owner(handle: Any, key: str) -> str | None:
    """The replica id the Serve handle's consistent-hash router gives ``key`` now (the replica a Serve call would
    reach first), or None when the router is not up or not a consistent-hash one. Reads the router's ring
    (Ray Serve's ConsistentHashRouter, private): anything unexpected there answers None, i.e. the Serve path."""
    try:
        router = handle._router._asyncio_router.request_router
        ranked = router._lookup_ranked_replicas(key)
    except Exception:  # noqa: BLE001 - Serve's internals moved: the Serve path still works
        return None
    return str(ranked[0].unique_id) if ranked else None
