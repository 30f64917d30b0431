"""The crash workload and its checks: workers write, supersede and delete through a real server until it is
SIGKILLed; each keeps a model of what was acknowledged and of the one operation in flight at the kill.

After a restart, ``verify`` asserts: every acknowledged write is present (same content) and searchable;
every acknowledged delete is gone; every acknowledged supersede holds; an operation in flight at the kill
is all-or-nothing (every memory of a write group, and its supersede links, or none of them); the store
holds nothing the workload did not send.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from support import Client

from engram_proto.v1 import messages_pb2 as pb
from engram_proto.v1 import service_pb2 as spb

WORDS = ("river mountain ledger violin copper harbor meadow lantern orbit quartz saffron tundra velvet walnut "
         "yacht zephyr anchor bramble cactus dagger ember falcon glacier hazel iris jasmine kettle lotus maple "
         "nectar oyster pepper quill raven sierra thistle umber vortex willow xenon yarrow zinc amber basil "
         "cobalt delta fern garnet heron indigo juniper koala lilac marble nutmeg olive pebble quince rustic").split()
SUPERSEDED = pb.MEMORY_STATUS_SUPERSEDED
# Retrieval, not ranking: access counts and a configured reranker must not push the memory out of the top.
RELEVANCE_ONLY = pb.Scoring(disable_decay=True, disable_importance=True)


def token(worker: int, n: int) -> str:
    """A word no other memory contains, made of letters only so every analyzer keeps it whole."""
    letters = "bcdfghjkmnpqrstvwxz"
    out = [letters[worker % len(letters)]]
    for _ in range(4):  # n in base 19: unique for the first 130,321 writes of a worker
        n, digit = divmod(n, len(letters))
        out.append(letters[digit])
    return "zq" + "".join(out) + "zq"


@dataclass
class InFlight:
    """The operation a worker had sent when the server died: it may or may not have been applied."""

    kind: str                                           # write | delete
    tokens: list[str] = field(default_factory=list)     # write: one token per memory of the group
    supersedes: list[str] = field(default_factory=list)
    key: str = ""
    ids: list[str] = field(default_factory=list)        # delete


@dataclass
class WorkerModel:
    tenant: str
    live: dict[str, str] = field(default_factory=dict)          # acked memory id → content
    tokens: dict[str, str] = field(default_factory=dict)        # token → acked memory id
    deleted: set[str] = field(default_factory=set)              # acked deletes
    superseded_by: dict[str, str] = field(default_factory=dict)  # acked: old id → new id
    keyed: dict[str, str] = field(default_factory=dict)         # key → acked live id holding it
    in_flight: InFlight | None = None
    sent_tokens: set[str] = field(default_factory=set)
    acked_ops: int = 0


class Worker(threading.Thread):
    # Operations are named _op_*: threading.Thread has private methods (e.g. _delete, run at thread exit)
    # that a plain _delete would override.
    def __init__(self, *, index: int, client: Client, model: WorkerModel, seed: int, first_n: int) -> None:
        super().__init__(name=f"crash-worker-{index}", daemon=True)
        self.index = index
        self.client = client
        self.model = model
        self.rng = random.Random(seed)
        self.n = first_n
        self.stop = threading.Event()

    def _content(self) -> str:
        tok = token(self.index, self.n)
        self.n += 1
        self.model.sent_tokens.add(tok)
        # The write's number in digits too: seven of seventy words drawn at random make pairs that share most of
        # them, which e5's crowded cosines can put past the near-duplicate threshold; texts that differ in a
        # number are never merged (server/engine/write.py _duplicate_of), so every write is CREATED.
        return " ".join([tok, *self.rng.sample(WORDS, 7), f"no. {self.index}-{self.n}"])

    def run(self) -> None:
        ops: list[tuple[float, Callable[[], None]]] = [(0.5, self._op_write), (0.2, self._op_keyed),
                                                       (0.15, self._op_supersede), (0.15, self._op_delete)]
        while not self.stop.is_set():
            op = self.rng.choices([o for _, o in ops], weights=[w for w, _ in ops])[0]
            try:
                op()
            except grpc.RpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED,
                                  grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN):
                    return  # the server died: keep in_flight as it is
                raise
            self.model.in_flight = None
            self.model.acked_ops += 1

    def _send_write(self, inputs: list[pb.MemoryInput], flight: InFlight) -> spb.WriteResponse:
        self.model.in_flight = flight
        return self.client.memory.Write(spb.WriteRequest(tenant_id=self.model.tenant, memories=inputs),
                                        metadata=self.client.metadata, timeout=30)

    def _record(self, reply: spb.WriteResponse, contents: list[str]) -> None:
        for result, content in zip(reply.results, contents, strict=True):
            assert result.outcome == spb.WRITE_OUTCOME_CREATED, result
            self.model.live[result.memory_id] = content
            self.model.tokens[content.split()[0]] = result.memory_id
            for old in result.superseded:
                self.model.superseded_by[old] = result.memory_id

    def _op_write(self) -> None:
        contents = [self._content() for _ in range(self.rng.randint(1, 3))]
        flight = InFlight("write", tokens=[c.split()[0] for c in contents])
        self._record(self._send_write([pb.MemoryInput(content=c) for c in contents], flight), contents)

    def _op_keyed(self) -> None:
        key = f"w{self.index}slot{self.rng.randint(0, 3)}"  # slots are per worker: no cross-worker races
        content = self._content()
        flight = InFlight("write", tokens=[content.split()[0]], key=key,
                          supersedes=[self.model.keyed[key]] if key in self.model.keyed else [])
        reply = self._send_write([pb.MemoryInput(content=content, key=key)], flight)
        self._record(reply, [content])
        assert list(reply.results[0].superseded) == flight.supersedes, (reply, flight)
        self.model.keyed[key] = reply.results[0].memory_id

    def _candidates(self) -> list[str]:
        return sorted(i for i in self.model.live if i not in self.model.superseded_by and i not in self.model.deleted
                      and i not in self.model.keyed.values())

    def _op_supersede(self) -> None:
        candidates = self._candidates()
        if not candidates:
            return self._op_write()
        old = self.rng.choice(candidates)
        content = self._content()
        flight = InFlight("write", tokens=[content.split()[0]], supersedes=[old])
        self._record(self._send_write([pb.MemoryInput(content=content, supersedes=[old])], flight), [content])

    def _op_delete(self) -> None:
        # Not the newer side of a supersede: what deleting it does to the older one's link is not modelled.
        keep = set(self.model.keyed.values()) | set(self.model.superseded_by.values())
        candidates = [i for i in self.model.live if i not in self.model.deleted and i not in keep]
        if not candidates:
            return self._op_write()
        ids = self.rng.sample(sorted(candidates), min(len(candidates), self.rng.randint(1, 2)))
        self.model.in_flight = InFlight("delete", ids=ids)
        reply = self.client.memory.Delete(spb.DeleteRequest(tenant_id=self.model.tenant, memory_ids=ids),
                                          metadata=self.client.metadata, timeout=30)
        assert reply.deleted == len(ids) and not reply.missing
        self.model.deleted.update(ids)


def verify(client: Client, models: list[WorkerModel]) -> dict[str, int]:
    """Checks a restarted server against the workers' models; returns counts of what it checked."""
    counts = {"present": 0, "searched": 0, "deleted": 0, "superseded": 0, "in_flight": 0}
    by_tenant: dict[str, dict[str, pb.Memory]] = {}
    for tenant in {m.tenant for m in models}:
        by_tenant[tenant] = {m.memory_id: m for m in client.list_all(tenant)}
    for model in models:
        stored = by_tenant[model.tenant]
        by_token = {m.content.split()[0]: m for m in stored.values()}
        flight = model.in_flight
        maybe_deleted = set(flight.ids) if flight and flight.kind == "delete" else set()
        for memory_id, content in model.live.items():
            if memory_id in model.deleted:
                assert memory_id not in stored, f"acknowledged delete of {memory_id} undone"
                counts["deleted"] += 1
                continue
            if memory_id in maybe_deleted and memory_id not in stored:
                continue
            assert memory_id in stored, f"acknowledged write {memory_id} lost"
            assert stored[memory_id].content == content
            counts["present"] += 1
            if memory_id in model.superseded_by:
                assert stored[memory_id].status == SUPERSEDED
                assert stored[memory_id].superseded_by == model.superseded_by[memory_id]
                counts["superseded"] += 1
        if maybe_deleted:  # a delete group is all-or-nothing
            gone = [i for i in flight.ids if i not in stored]  # type: ignore[union-attr]
            assert len(gone) in (0, len(maybe_deleted)), f"delete half-applied: {gone} of {flight.ids}"
            counts["in_flight"] += 1
        if flight and flight.kind == "write":
            present = [by_token[t] for t in flight.tokens if t in by_token]
            assert len(present) in (0, len(flight.tokens)), f"write group half-applied: {flight.tokens}"
            for old in flight.supersedes:
                if old in stored and old not in model.superseded_by:
                    linked = stored[old].status == SUPERSEDED
                    assert linked == bool(present), f"supersede of {old} half-applied"
                    if linked:
                        assert stored[old].superseded_by == present[0].memory_id
            counts["in_flight"] += 1
    for tenant, stored in by_tenant.items():
        sent = set().union(*(m.sent_tokens for m in models if m.tenant == tenant))
        phantom = [m.memory_id for m in stored.values() if m.content.split()[0] not in sent]
        assert not phantom, f"memories nobody sent: {phantom}"
        for memory in stored.values():
            if memory.status == SUPERSEDED:
                assert memory.superseded_by in stored, f"{memory.memory_id} superseded by a missing memory"
    # Searchable: the unique token finds the memory through the lexical and the dense index.
    rng = random.Random(len(counts))
    for model in models:
        acked = [i for i in model.live if i not in model.deleted and i in by_tenant[model.tenant]]
        for memory_id in rng.sample(acked, min(len(acked), 8)):
            content = model.live[memory_id]
            for mode in ({"lexical_only": True}, {"dense_only": True}):
                hits = client.search(model.tenant, content, top_k=5, include_history=True, include_pending=True,
                                     scoring=RELEVANCE_ONLY, rerank_depth=-1, **mode).hits
                assert memory_id in [h.memory.memory_id for h in hits], (
                    memory_id, mode, by_tenant[model.tenant][memory_id], [(h.memory.memory_id, h.memory.status,
                                                                           h.breakdown) for h in hits])
            counts["searched"] += 1
    return counts


def settle(client: Client, models: list[WorkerModel]) -> None:
    """Folds the outcome of each in-flight operation (now known) into its model, for the next round."""
    for model in models:
        flight, model.in_flight = model.in_flight, None
        if flight is None:
            continue
        stored = {m.memory_id: m for m in client.list_all(model.tenant)}
        if flight.kind == "delete":
            model.deleted.update(i for i in flight.ids if i not in stored)
            continue
        by_token = {m.content.split()[0]: m for m in stored.values()}
        for tok in flight.tokens:
            if tok in by_token:
                memory = by_token[tok]
                model.live[memory.memory_id] = memory.content
                model.tokens[tok] = memory.memory_id
                for old in flight.supersedes:
                    model.superseded_by[old] = memory.memory_id
                if flight.key:
                    model.keyed[flight.key] = memory.memory_id
