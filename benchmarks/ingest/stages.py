"""Wall time of each step of a Write, per Write: the server runs in a child process with timers wrapped around the
write path's functions (nothing else changes), one client sends Writes of ``--batch`` one at a time to an idle
server, and the child reports, per Write, the milliseconds spent in each step. With one sequential client only
the forward pass runs on several threads; every other step is on the Write's critical path, so the steps outside
``embed: device step`` are what keeps the server below its embedder's rate.

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.stages --kind short --n 2048
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import json
import signal
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

WRITE_RPC = "rpc: Write handler"
# (module, attribute path, label): the steps timed, outermost first. Nested steps are inside their parents.
STEPS: tuple[tuple[str, str, str], ...] = (
    ("server.grpc.servicer", "MemoryServicer.Write", WRITE_RPC),
    ("server.engine.engine", "Engine.write", "engine.write"),
    ("server.engine.idempotent", "write_call", "idempotency: fingerprint"),
    ("server.engine.ingest", "normalise_input", "normalise"),
    ("server.engine.ingest", "validate_memories", "validate"),
    ("server.hygiene.writes", "SaliencePolicy.prepare", "salience"),
    ("server.engine.ingest", "thread_contexts", "thread contexts"),
    ("server.engine.ingest", "indexed_text", "indexed text"),
    ("server.engine.ingest", "EmbedStage.device", "embed: device step"),
    ("server.engine.ingest", "EmbedStage._forward", "embed: forward passes (summed over lanes)"),
    ("server.engine.ingest", "Ingest._commit", "commit (write lock)"),
    ("server.engine.write", "batch_neighbours", "commit: dedupe search"),
    ("server.engine.write", "_link_update", "commit: update links (texts analysed, neighbours judged)"),
    ("server.tenants.shard", "TenantShard.apply", "commit: apply (log group, indexes)"),
    ("server.engine.write", "Staging.near_duplicates", "commit: near-duplicate rows"),
    ("server.store.memory_store", "TenantStore.commit", "commit: log group + fsync"),
    ("server.index.tiered", "TieredDenseIndex.add", "commit: FAISS add"),
    ("server.tenants.lexical_slot", "LexicalSlot.write", "commit: Lucene add (+ refresh where it is not behind)"),
    ("server.engine.memories", "Memories.after_write_locked", "commit: after write (audit, cap)"),
    ("server.hygiene.writes", "SaliencePolicy.assemble", "answer"),
    # Off the Write's path (a thread of its own, behind the acknowledgement), but on the same two cores:
    ("server.tenants.lexical_slot", "LexicalSlot._refresh", "Lucene refresh (behind the acknowledgement)"),
)
REFRESH = "Lucene refresh (behind the acknowledgement)"


def _install(totals: dict[str, float], counts: dict[str, int], writes: list[tuple[float, float]]) -> None:
    """Wraps each step of STEPS in a timer; ``writes`` gets each Write RPC's (end, seconds), end in epoch s."""
    lock = threading.Lock()

    def record(label: str, seconds: float) -> None:
        with lock:
            totals[label] += seconds
            counts[label] += 1
            if label == WRITE_RPC:
                writes.append((round(time.time(), 3), round(seconds, 4)))

    for module_name, path, label in STEPS:
        if not path:
            continue
        module = importlib.import_module(module_name)
        owner: Any = module
        *parents, name = path.split(".")
        for part in parents:
            owner = getattr(owner, part)
        fn = getattr(owner, name)
        if asyncio.iscoroutinefunction(fn):
            async def timed_async(*a: Any, _fn: Any = fn, _label: str = label, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return await _fn(*a, **k)
                finally:
                    record(_label, time.perf_counter() - t0)
            wrapped: Any = functools.wraps(fn)(timed_async)
        else:
            def timed(*a: Any, _fn: Any = fn, _label: str = label, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return _fn(*a, **k)
                finally:
                    record(_label, time.perf_counter() - t0)
            wrapped = functools.wraps(fn)(timed)
        if isinstance(vars(owner).get(name) if isinstance(owner, type) else None, staticmethod):
            wrapped = staticmethod(wrapped)
        setattr(owner, name, wrapped)


def serve(out: Path) -> int:
    """The child: ``engram serve`` (argv after ``--``) with the timers in; at SIGUSR1 writes the totals to ``out``."""
    from collections import Counter

    totals: dict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    writes: list[tuple[float, float]] = []
    _install(totals, counts, writes)

    def dump(*_: Any) -> None:
        out.write_text(json.dumps({"seconds": totals, "calls": counts, "writes": writes}))

    signal.signal(signal.SIGUSR1, dump)
    from engram_cli import main as cli_main

    return cli_main(sys.argv[sys.argv.index("--") + 1:])


def per_write(before: dict[str, Any], after: dict[str, Any], writes: int) -> dict[str, float]:
    """Milliseconds per Write in each step between two totals (Server.stage_totals)."""
    return {label: round(1000 * (after["seconds"].get(label, 0.0) - before["seconds"].get(label, 0.0)) / writes, 2)
            for _, _, label in STEPS if label}


def run(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.ingest.big import Server
    from benchmarks.ingest.run import command_line, cpu_model, write_all
    from benchmarks.ingest.texts import long_turns, short_turns

    texts = long_turns(args.n) if args.kind == "long" else short_turns(args.n)
    with tempfile.TemporaryDirectory(prefix="engram-stages-") as tmp:
        env: dict[str, str] = {}
        if args.tiny_encoder:
            from benchmarks.ingest.run import TINY_SERVER_ENV
            from models.testing import build_tiny_encoder

            env = {"ENGRAM_MODELS__EMBEDDER": str(build_tiny_encoder(Path(tmp) / "tiny")), **TINY_SERVER_ENV}
        server = Server(Path(tmp) / "data", Path(tmp) / "server.log", timed=Path(tmp) / "stages.json", env=env)
        try:
            server.wait_ready()
            with server.client() as client:
                client.create_tenant("warm")
                write_all(client, "warm", texts[:args.batch] * 2, batch=args.batch)
                warm = server.stage_totals()
                client.create_tenant("timed")
                rate = write_all(client, "timed", texts, batch=args.batch, in_flight=args.in_flight)
                done = server.stage_totals()
        finally:
            server.stop()
    writes = -(-len(texts) // args.batch)
    return {"kind": args.kind, "n": len(texts), "batch": args.batch, "in_flight": args.in_flight,
            "embedder": "tiny random encoder (2 layers, 32 wide): the write path without its forward pass"
            if args.tiny_encoder else "the server's default", "machine": cpu_model(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "command": command_line(),
            "ingest": rate, "client_wall_ms_per_write": round(1000 * rate["seconds"] / writes, 2),
            "ms_per_write": per_write(warm, done, writes),
            "lucene_refreshes_per_write": round((done["calls"].get(REFRESH, 0) - warm["calls"].get(REFRESH, 0)) / writes,
                                                3)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--serve-out" in argv:
        return serve(Path(argv[argv.index("--serve-out") + 1]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kind", choices=("long", "short"), default="short")
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--in-flight", type=int, default=1, help="Writes in flight (one client, threads)")
    p.add_argument("--tiny-encoder", action="store_true",
                   help="a 2-layer, 32-wide random encoder: what the write path costs beside a near-free forward pass "
                        "(what a GPU leaves); near-duplicate merges and update links set above random similarities")
    p.add_argument("--name", default="")
    args = p.parse_args(argv)
    result = run(args)
    if args.name:
        from benchmarks.ingest.run import RESULTS

        (RESULTS / f"stages_{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
