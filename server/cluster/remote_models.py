"""The embedder and the cross-encoder as a TenantShard replica sees them: the model contract of
:mod:`models.base`, answered by the Encoder / Reranker deployments.

The engine calls ``tokenize`` on a CPU thread and ``forward`` on its device thread; here ``tokenize`` only
keeps the inputs (the deployment tokenizes them, next to its model) and ``forward`` sends them in one
handle call. The embedder's inputs ride in a :class:`models.base.TokenBatch` as their UTF-8 bytes (the write
stage splits a batch into chunks by its ``lengths``, here byte counts, and ``forward`` gets each chunk's
rows), which the deployment's forward passes (server/cluster/passes.py) join with every other tenant's and
replica's. Both run on executor threads, never on the replica's event loop, so the blocking calls are allowed.

A forward goes to a model replica's direct method (server/cluster/frames.py: JSON in, raw float32 rows out, a
blocking call on a connection of the calling thread's own) when one is known, else, and on any failure of it (a
forward changes nothing, so it is simply sent again), through the Serve handle.

No multiplexed model id is ever set on these calls: Serve splits batches by model id.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.base import TextPair, TokenBatch
from server.cluster.direct import HopFailed, Target
from server.cluster.frames import FrameClient
from server.tracing import hop_traces

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 120.0   # one forward pass queued behind others on a loaded 2-core box; the edge's deadline is shorter
REFRESH_S = 30.0         # how often the model replicas' direct targets are asked for again (scaled, replaced)
RETRY_S = 2.0            # ... when none is known
# A direct forward's own limit, then through Serve: a model replica that stopped answering without closing its
# connections (its node lost, the process not yet gone) would otherwise hold each forward for CALL_TIMEOUT_S,
# while Serve knows the replica died. Under load a forward waits for the passes queued before it (~1-2 s here).
DIRECT_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Pending:
    """What ``tokenize`` hands ``forward``: the inputs, tokenized by the deployment."""

    items: tuple[Any, ...]

    def __len__(self) -> int:
        return len(self.items)


def model_info(model: Any) -> dict[str, Any]:
    """What a remote stand-in needs to know of a model (the deployments answer it)."""
    info = {"name": model.name, "device": str(model.device), "max_length": int(model.max_length),
            "describe": model.describe()}
    for attr in ("dim", "query_prefix", "passage_prefix", "near_duplicate_cosine"):
        if hasattr(model, attr):
            info[attr] = getattr(model, attr)
    return info


class ModelTargets:
    """A TenantShard replica's channels to the model replicas' direct methods, used in turn. ``discover`` asks the
    deployment for its replicas' targets (blocking: on a thread of its own, never a forward's, every
    :data:`REFRESH_S`, or :data:`RETRY_S` after one failed or when none is left); a target whose call failed is
    dropped until then."""

    def __init__(self, discover: Callable[[], Sequence[Target]], *, found: Sequence[Target] = ()) -> None:
        self._discover = discover
        self._lock = threading.Lock()
        self._clients: list[FrameClient] = []
        self._turn = 0
        self._found_s = float("-inf")
        if found:
            self._use(found)

    def _use(self, targets: Sequence[Target]) -> None:
        old = {c.target: c for c in self._clients}
        self._clients = [old.pop(t, None) or FrameClient(t) for t in dict.fromkeys(targets)]
        self._found_s = time.monotonic()
        for client in old.values():
            client.close()

    def _refresh(self) -> None:
        try:
            self._use(self._discover())
        except Exception as exc:  # noqa: BLE001 - the Serve path still works; asked again later
            self._found_s = time.monotonic()
            log.info("could not learn the model replicas' direct targets (%s: %s)", type(exc).__name__, exc)
        finally:
            self._lock.release()

    def pick(self) -> FrameClient | None:
        due_s = REFRESH_S if self._clients else RETRY_S
        if time.monotonic() - self._found_s >= due_s and self._lock.acquire(blocking=False):
            threading.Thread(target=self._refresh, name="model-targets", daemon=True).start()
        clients = self._clients
        if not clients:
            return None
        self._turn += 1
        return clients[self._turn % len(clients)]

    def drop(self, client: FrameClient) -> None:
        self._clients = [c for c in self._clients if c is not client]
        client.close()
        if not self._clients:
            self._found_s = time.monotonic()   # the replica is likely being replaced: asked again after RETRY_S


class _Remote:
    def __init__(self, handle: Any, method: str, info: dict[str, Any], targets: ModelTargets | None = None) -> None:
        self._call = getattr(handle, method)
        self._targets = targets
        self._info = info
        self.name: str = info["name"]
        self.device: str = info["device"]
        self.max_length: int = info["max_length"]

    def tokenize(self, items: Sequence[Any]) -> Pending | TokenBatch:
        return Pending(tuple(items))

    def forward(self, batch: Pending | TokenBatch) -> np.ndarray:
        if isinstance(batch, TokenBatch):
            return self._send([bytes(ids.astype(np.uint8)).decode() for ids in batch.input_ids])
        return self._send(list(batch.items))

    def _send(self, items: list[Any]) -> np.ndarray:
        if not items:
            return np.zeros((0,), dtype=np.float32)
        # The traced requests' W3C contexts ride along (empty when none is traced): each gets the deployment's span.
        traces = hop_traces()
        client = self._targets.pick() if self._targets is not None else None
        if client is not None:
            try:
                raw = client.call(json.dumps([items, traces]).encode(), timeout=DIRECT_TIMEOUT_S)
                return self._rows(np.frombuffer(raw, dtype=np.float32).copy(), len(items))
            except HopFailed as exc:
                self._targets.drop(client)   # type: ignore[union-attr]
                log.info("model replica %s: direct call failed (%s); through Serve", client.target.address, exc.code)
        return np.asarray(self._call.remote(items, traces).result(timeout_s=CALL_TIMEOUT_S), dtype=np.float32)

    def _rows(self, flat: np.ndarray, n: int) -> np.ndarray:
        return flat

    def count_tokens(self, items: Sequence[Any]) -> list[int]:   # only the deployment has the tokenizer
        return [min(self.max_length, len(str(i)) // 3 + 2) for i in items]

    def warmup(self) -> None:
        pass   # the deployment warmed its model up

    def describe(self) -> dict[str, Any]:
        return {**self._info["describe"], "served_by": "ray serve deployment"}


class RemoteEmbedder(_Remote):
    def __init__(self, handle: Any, info: dict[str, Any], targets: ModelTargets | None = None) -> None:
        super().__init__(handle, "embed", info, targets)
        self._dim = int(info["dim"])
        self.query_prefix: str = info.get("query_prefix", "")
        self.passage_prefix: str = info.get("passage_prefix", "")
        if "near_duplicate_cosine" in info:
            self.near_duplicate_cosine = float(info["near_duplicate_cosine"])

    @property
    def dim(self) -> int:
        return self._dim

    def _rows(self, flat: np.ndarray, n: int) -> np.ndarray:
        return flat.reshape(n, self._dim)

    def tokenize(self, items: Sequence[Any]) -> TokenBatch:
        ids = tuple(np.frombuffer(str(t).encode(), dtype=np.uint8).astype(np.int64) for t in items)
        return TokenBatch(input_ids=ids, token_type_ids=tuple(np.zeros(0, dtype=np.int64) for _ in ids))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._send(list(texts))
        return vectors.reshape(len(texts), self._dim)


class RemoteReranker(_Remote):
    def __init__(self, handle: Any, info: dict[str, Any], targets: ModelTargets | None = None) -> None:
        super().__init__(handle, "score", info, targets)

    def score(self, pairs: Sequence[TextPair]) -> np.ndarray:
        return self._send(list(pairs))


def split(flat: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """One batched forward pass's output cut back into each request's rows."""
    out, start = [], 0
    for n in sizes:
        out.append(flat[start:start + n])
        start += n
    return out
