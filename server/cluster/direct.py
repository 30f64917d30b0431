"""The direct data path of ``engram serve --ray``: the steady state's calls without a Ray actor call.

A Serve handle call is a Ray actor call: pickling, the raylet / core-worker path and several thread wake-ups on
each side, ~10 ms on two busy cores. So every TenantShard, Encoder and Reranker replica also answers calls on a
TCP port of its own, bytes in and bytes out (length-prefixed frames, server/cluster/frames.py), behind a random
token the replica makes at start (checked before anything else is read):

- edge -> TenantShard: the call the edge already authorized, pickled as the Serve call's arguments, over
  asyncio streams on both event loops (:class:`server.cluster.streams.StreamServer`); the replica runs exactly
  its Serve method's code on it, or answers :class:`Refused` when the tenant is not loaded there or another
  replica took its log (the edge then takes the Serve path, which loads it / fails over as it always did). A
  replica publishes its address and token with its figures (server/cluster/board.py); the edge sends a tenant's
  call there only when the consistent-hash ring of its own Serve handle names that replica and the edge reached
  it (:class:`server.cluster.streams.ShardLinks`).
- TenantShard -> Encoder / Reranker: a forward's items in, its rows of the model replica's pass out as raw
  float32 bytes, a blocking call from the caller's thread answered on the connection's own thread on the model
  replica (:class:`server.cluster.frames.FrameServer`); the same passes form across tenants, replicas and the
  Serve path's calls (server/cluster/passes.py).

Whatever goes wrong on a direct call that cannot have changed anything falls back to the Serve path; a
mutating call lost after it was sent answers UNAVAILABLE, as a lost Serve call does. The token keeps anyone
else on the network from calling (nothing is unpickled before it matched); it travels only over Ray and
through the bucket, both of which a cluster already trusts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.cluster.frames import HopFailed, Target

__all__ = ["Crashed", "HopFailed", "Refused", "Target", "node_host", "ring_owner"]


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
