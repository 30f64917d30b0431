"""A big tenant built through the front door: N memories written with ``Write``, then searched, restarted, measured.

``build``: starts ``engram serve`` on ``DIR/data`` (kept between runs) and writes N memories into tenant ``big`` in
Writes of ``--batch`` (128), ``--in-flight`` at once (2). Each Write has the idempotency key ``big-<kind>-<i>`` and
the memories of Write i are a pure function of i, so a build that was stopped (killed, the machine needed) is run
again with the same command and continues: Writes already applied are answered from the server's record. Every
Write's latency goes to ``DIR/writes.csv`` (wall time, index, seconds) and the tenant's Stats every 5 s to
``DIR/stats.csv`` (memories, state, dense index): the flat -> IVF-HNSW promotion and its rebuilds show there, and
the Writes around them show whether they stalled the import. ``DIR/pids`` names the server and this process, so
``benchmarks/ingest/gate.sh`` can pause them while someone measures (SIGSTOP while /tmp/engram-cpu.lock is held).

``measure`` (under the CPU lock): restarts the server on the built data directory (time until the first search of
the tenant is answered), then search p50 / p95 at 1 and 32 clients (top 10, the default rerank depth), the server's
RSS and the data directory's size; ``DIR/measure.json``. ``report`` writes the build's rate and the latency of the
Writes around each promotion, with a PNG, to benchmarks/results/ingest/.

Memories: ``short`` are generated LoCoMo-sized turns, each with a number of its own (an order, a room, a day), so no
two are near-duplicates by the server's merge rule (texts differing in a number are different facts) and the tenant
ends with exactly N; ``long`` are ~1.2 KB: turns of two runs of consecutive LoCoMo turns
(benchmarks.ingest.texts.long_turns) under a numbered first line.

    nice -n 19 .venv/bin/python -m benchmarks.ingest.big build --dir /work/big/short --kind short --n 1000000 &
    benchmarks/ingest/gate.sh /work/big/short/pids &
    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.big measure --dir /work/big/short
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from benchmarks.ingest.texts import long_turns, synthetic_lines
from benchmarks.serving.build import ADMIN_KEY
from benchmarks.serving.run import ROOT, free_port

log = logging.getLogger("benchmarks.ingest.big")
TENANT = "big"
RESULTS = ROOT / "benchmarks" / "results" / "ingest"
_SENTENCES = sorted({s for lines in synthetic_lines(conversations=80, turns=60, seed=9)
                     for line in lines for s in [line.split(": ", 1)[1]]})
_NUMBERED = ("order {n} arrived", "room {n} is booked", "ticket {n} is still open", "day {n} of the streak",
             "invoice {n} was paid", "locker {n} is ours", "flight {n} moved")


def short_memory(i: int) -> str:
    """Memory i of a short build: a speaker, a generated turn and a number of its own (~110 characters)."""
    rng = random.Random(i)
    speaker = ("Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hiro")[rng.randrange(8)]
    turn = _SENTENCES[rng.randrange(len(_SENTENCES))].split(". ")[0].rstrip(".")
    return f"{speaker}: {turn}. Also, {rng.choice(_NUMBERED).format(n=i)}."


class LongMemories:
    """Memory i of a long build (~1.2 KB): the first turns of one run of LoCoMo turns (past 550 characters) and the
    first turns of another (past 1,100 in all), from a pool of 2,000 runs (long_turns; 4M pairs), under a numbered
    line."""

    def __init__(self, pool: int = 2000) -> None:
        self.pool = [run.split("\n") for run in long_turns(pool, seed=21)]

    def __call__(self, i: int) -> str:
        rng = random.Random(i)
        lines = [f"Note {i}:"]
        for limit in (550, 1100):
            for line in self.pool[rng.randrange(len(self.pool))]:
                lines.append(line)
                if sum(len(x) + 1 for x in lines) >= limit:
                    break
        return "\n".join(lines)


class Server:
    """``engram serve`` in a child process on ``data`` (kept). ``timed``: through benchmarks.ingest.stages, which
    times the write path's steps and writes their totals to that file at :meth:`stage_totals`."""

    def __init__(self, data: Path, log_path: Path, *, nice: int = 0, env: dict[str, str] | None = None,
                 timed: Path | None = None) -> None:
        self.port = free_port()
        self.timed = timed
        child_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ENGRAM_ADMIN_KEY": ADMIN_KEY,
                     "ENGRAM_LOG_LEVEL": "WARNING", "ENGRAM_BATCHING__QUERY_CACHE_TTL_MS": "0",
                     "PYTHONPATH": str(ROOT), **(env or {})}
        module = ["engram_cli"] if timed is None else ["benchmarks.ingest.stages", "--serve-out", str(timed), "--"]
        command = [sys.executable, "-m", *module, "serve", "--listen", self.address, "--data-dir", str(data)]
        self.started = time.perf_counter()
        self.proc = subprocess.Popen((["nice", "-n", str(nice)] if nice else []) + command, cwd=ROOT, env=child_env,
                                     stdout=log_path.open("a"), stderr=subprocess.STDOUT)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> Any:
        from engram_client import EngramClient

        return EngramClient(self.address, key=ADMIN_KEY, timeout_s=24 * 3600)

    def wait_ready(self, timeout_s: float = 3600) -> float:
        """Seconds from the start until Info answers."""
        import grpc

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited ({self.proc.returncode})")
            try:
                with self.client() as client:
                    client.info(timeout_s=2)
                return time.perf_counter() - self.started
            except grpc.RpcError:
                time.sleep(0.2)
        raise TimeoutError("server not ready")

    def rss_mb(self) -> dict[str, float]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = {line.split(":")[0]: int(line.split()[1]) / 1024 for line in status.splitlines()
                  if line.startswith(("VmRSS", "VmHWM"))}
        return {"rss_mb": round(fields.get("VmRSS", 0.0), 1), "peak_rss_mb": round(fields.get("VmHWM", 0.0), 1)}

    def stage_totals(self) -> dict[str, Any]:
        """A timed server's totals so far: {"seconds": {step: s}, "calls": {step: n}} (SIGUSR1, then the file)."""
        assert self.timed is not None
        before = self.timed.stat().st_mtime_ns if self.timed.exists() else 0
        self.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.timed.exists() and self.timed.stat().st_mtime_ns != before:
                time.sleep(0.1)
                return dict(json.loads(self.timed.read_text()))
            time.sleep(0.05)
        raise TimeoutError("the timed server wrote no totals")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(300)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _tenant_stats(client: Any, tenant: str = TENANT) -> Any:
    return client.stats(tenant).tenants[0]


def build(args: argparse.Namespace) -> int:
    root: Path = args.dir
    (root / "data").mkdir(parents=True, exist_ok=True)
    memory = short_memory if args.kind == "short" else LongMemories()
    writes_csv, stats_csv = root / "writes.csv", root / "stats.csv"
    done: set[int] = set()
    if writes_csv.exists():
        with writes_csv.open() as f:
            done = {int(row[1]) for row in csv.reader(f) if row and row[0] != "wall"}
    total = (args.n + args.batch - 1) // args.batch
    todo = [i for i in range(total) if i not in done]
    server = Server(root / "data", root / "server.log", nice=args.nice)
    (root / "pids").write_text(f"{server.proc.pid}\n{os.getpid()}\n")
    try:   # a failed build stops its server too: an orphan would hold the data directory
        ready_s = server.wait_ready()
        log.info("server ready in %.1f s; %d of %d Writes to go", ready_s, len(todo), total)
        stop = threading.Event()
        lock = threading.Lock()
        new_files = not writes_csv.exists()
        with server.client() as client, writes_csv.open("a", newline="") as wf, stats_csv.open("a", newline="") as sf:
            writes_out, stats_out = csv.writer(wf), csv.writer(sf)
            if new_files:
                writes_out.writerow(["wall", "write", "seconds", "memories"])
                stats_out.writerow(["wall", "memories", "state", "dense_index", "ram_bytes", "log_bytes"])
            try:   # Stats lists loaded tenants only: after a restart the built tenant is on disk, not yet loaded
                client.create_tenant(TENANT)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.ALREADY_EXISTS:
                    raise

            def poll() -> None:
                while not stop.wait(5.0):
                    t = _tenant_stats(client)
                    with lock:
                        stats_out.writerow([round(time.time(), 2), t.memories, t.state, t.dense_index, t.ram_bytes,
                                            t.log_bytes])
                        sf.flush()

            def send(i: int) -> None:
                lo, hi = i * args.batch, min(args.n, (i + 1) * args.batch)
                t0 = time.perf_counter()
                client.write(TENANT, [{"content": memory(j), "type": "semantic"} for j in range(lo, hi)],
                             idempotency_key=f"big-{args.kind}-{i}")
                seconds = time.perf_counter() - t0
                with lock:
                    writes_out.writerow([round(time.time(), 3), i, round(seconds, 4), hi - lo])
                    wf.flush()

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            t0, sent = time.perf_counter(), 0
            try:
                with ThreadPoolExecutor(args.in_flight) as pool:
                    for _ in pool.map(send, todo):
                        sent += 1
                        if sent % 100 == 0:
                            log.info("%d / %d Writes, %.1f memories/s", len(done) + sent, total,
                                     sent * args.batch / (time.perf_counter() - t0))
            finally:
                stop.set()
                poller.join()
                final = _tenant_stats(client)
                log.info("tenant %s: %d memories, %s", TENANT, final.memories, final.dense_index)
                server.stop()
    finally:
        if server.proc.poll() is None:
            server.stop()
    return 0


def _search(address: str, *, tenant: str, concurrency: int, seconds: float, seed: int,
            rerank_depth: int) -> dict[str, Any]:
    """``rerank_depth`` 0: the server's default (the cross-encoder at its adaptive depth); -1: no rerank."""
    from benchmarks.serving.corpus import query_texts
    from benchmarks.serving.load import run_load

    out = asyncio.run(run_load(address, ADMIN_KEY, tenants=[tenant], queries=query_texts(5000, seed=seed),
                               concurrency=concurrency, seconds=seconds, seed=seed,
                               rerank_depth=rerank_depth)).summary()
    return {"rerank": "default" if rerank_depth == 0 else "none", **{
        k: out[k] for k in ("concurrency", "requests", "qps", "p50_ms", "p95_ms", "p99_ms", "errors",
                            "rerank_depth_used")}}


def measure(args: argparse.Namespace) -> int:
    root: Path = args.dir
    disk = int(subprocess.run(["du", "-sb", str(root / "data")], capture_output=True, text=True).stdout.split()[0])
    server = Server(root / "data", root / "server.log")
    try:
        ready_s = server.wait_ready()
        with server.client() as client:
            t0 = time.perf_counter()
            client.search(args.tenant, "what did Ana book", top_k=10)
            first_search_s = time.perf_counter() - t0
            stats = _tenant_stats(client, args.tenant)
        restart = {"ready_s": round(ready_s, 2), "first_search_s": round(first_search_s, 2),
                   "restart_s": round(ready_s + first_search_s, 2), "load_ms": round(stats.load_ms, 1)}
        log.info("restart: %s", restart)
        rss_loaded = server.rss_mb()
        searches = [_search(server.address, tenant=args.tenant, concurrency=c, seconds=args.seconds, seed=7 + c + d,
                            rerank_depth=d) for d in (-1, 0) for c in (1, 32)]
        from benchmarks.ingest.run import command_line   # run.py imports this module: read when measured

        result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": _cpu_model(),
                  "command": command_line(), "memories": stats.memories, "dense_index": stats.dense_index,
                  "restart": restart, "rss_after_load": rss_loaded, "rss_after_search": server.rss_mb(),
                  "disk_bytes": disk, "search": searches}
    finally:
        server.stop()
    (root / "measure.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


def _cpu_model() -> str:
    from benchmarks.ingest.run import cpu_model

    return cpu_model()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("build", "measure", "report"))
    p.add_argument("--dir", type=Path, required=True, help="the build's directory (data, CSVs, pids)")
    p.add_argument("--kind", choices=("short", "long"), default="short")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--nice", type=int, default=19, help="the server's niceness during a build")
    p.add_argument("--seconds", type=float, default=20.0, help="measure: seconds of each search load")
    p.add_argument("--name", default="", help="report: the results' name")
    p.add_argument("--tenant", default=TENANT, help="measure: the tenant searched (run.py --keep: imported)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.action == "build":
        return build(args)
    if args.action == "measure":
        return measure(args)
    from benchmarks.ingest.big_report import report

    return report(args.dir, name=args.name or args.dir.name)


if __name__ == "__main__":
    sys.exit(main())
