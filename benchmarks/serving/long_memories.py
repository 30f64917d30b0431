"""Long memories against the latency target: one tenant of ~1 KB conversation turns, one client, an idle server,
the defaults (bundled reranker, ``search.latency_target_ms`` 250), for two or more checkouts side by side.

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.serving.long_memories \\
        --tree before=/tmp/engram-before --tree after=. --rounds 2

The memories are LoCoMo turns (``/work/shared/data/locomo``, never committed) joined eight at a time into one
user/assistant exchange of ~1 KB, 480 of them in one tenant; a second tenant holds 480 single turns (~130 bytes).
The data directory is written once through the first tree's server and copied for every run. Each run starts
``engram serve`` from its tree, warms it with 10 queries per tenant, then asks 40 LoCoMo questions of the long
tenant and 20 of the short one, one at a time, and records the client latency and ``Timings.rerank_depth_used``
of each. Trees alternate round by round. Writes JSON and a PNG under benchmarks/results/serving/. Both tenants are
SEMANTIC memories unless ``--memory-type episodic`` writes them as chat turns (a long one then gets its turn windows
at write time and the cross-encoder's sentence reads at search time).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.serving.build import ADMIN_KEY
from benchmarks.serving.run import RESULTS, ROOT, free_port
from engram_client.client import EngramClient

LOCOMO = Path("/work/shared/data/locomo/locomo_dev5.json")
LONG, SHORT = "bench/long", "bench/short"
TURNS_PER_MEMORY, STRIDE, MEMORIES = 8, 5, 480


def conversation_texts() -> tuple[list[str], list[str], list[str]]:
    """(long memories, short memories, questions): turns joined eight at a time (stride five), single turns, and
    the LoCoMo questions (adversarial category 5 left out), interleaved across the conversations."""
    samples = json.loads(LOCOMO.read_text())
    long: list[str] = []
    short: list[str] = []
    per_sample: list[list[str]] = []
    for sample in samples:
        conv = sample["conversation"]
        turns = [f"{t['speaker']}: {t['text']}" for key in sorted((k for k in conv if k.startswith("session_")
                                                                   and isinstance(conv[k], list)),
                                                                  key=lambda k: int(k.split("_")[1]))
                 for t in conv[key]]
        long += [" ".join(turns[i:i + TURNS_PER_MEMORY]) for i in range(0, len(turns) - TURNS_PER_MEMORY, STRIDE)]
        short += turns
        per_sample.append([qa["question"] for qa in sample["qa"] if qa.get("category") != 5])
    questions = [q for group in zip(*per_sample, strict=False) for q in group]
    step_long, step_short = max(1, len(long) // MEMORIES), max(1, len(short) // MEMORIES)
    return long[::step_long][:MEMORIES], short[::step_short][:MEMORIES], questions


class Server:
    def __init__(self, tree: Path, data: Path, log: Path) -> None:
        self.port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ENGRAM_ADMIN_KEY": ADMIN_KEY,
               "ENGRAM_LOG_LEVEL": "WARNING",
               "ENGRAM_MODELS__RERANKER": str(ROOT / "models" / "weights" / "engram-reranker-v1"),
               "PYTHONPATH": str(tree)}
        self.proc = subprocess.Popen([sys.executable, "-m", "engram_cli", "serve", "--listen",
                                      f"127.0.0.1:{self.port}", "--data-dir", str(data)], cwd=tree, env=env,
                                     stdout=log.open("w"), stderr=subprocess.STDOUT)
        self.client = EngramClient(f"127.0.0.1:{self.port}", key=ADMIN_KEY)
        deadline = time.monotonic() + 600
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited; see {log}")
            try:
                self.client.list_tenants(timeout_s=2)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(60)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def summary(rows: list[dict[str, float]]) -> dict[str, float]:
    ms = [r["ms"] for r in rows]
    depths = [r["depth"] for r in rows]
    return {"queries": len(rows), "p50_ms": round(_pct(ms, 0.5), 1), "p95_ms": round(_pct(ms, 0.95), 1),
            "max_ms": round(max(ms), 1), "mean_depth": round(statistics.mean(depths), 2), "min_depth": min(depths),
            "full_depth_share": round(sum(d == max(depths) for d in depths) / len(depths), 3),
            "rerank_ms_mean": round(statistics.mean(r["rerank_ms"] for r in rows), 1)}


def ask(client: EngramClient, tenant: str, questions: list[str]) -> list[dict[str, float]]:
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        result = client.search(tenant, q, top_k=10)
        rows.append({"ms": (time.perf_counter() - t0) * 1e3, "depth": result.timings.rerank_depth_used,
                     "rerank_ms": result.timings.rerank_ns / 1e6, "server_ms": result.timings.total_ns / 1e6})
    return rows


def controller_state(client: EngramClient) -> dict[str, Any]:
    """The rerank controller's cost model as Info reports it (read after a phase, outside the timed queries)."""
    try:
        control = client.info().rerank_control
    except Exception:   # noqa: BLE001 - an older tree's server: the figures are optional
        return {}
    return {k: getattr(control, k) for k in ("depth", "ms_per_pair", "ms_per_pair_wide", "ms_per_query",
                                             "batches_full", "batches_reduced", "batches_skipped", "batches_wide",
                                             "load_scale", "tail_p95_ms") if hasattr(control, k)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout to serve from")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--name", default="long_memories")
    p.add_argument("--memory-type", default="semantic", choices=("semantic", "episodic"),
                   help="the type both tenants are written as (episodic: chat turns, read as a chat turn is read)")
    args = p.parse_args(argv)
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    long, short, questions = conversation_texts()
    warm, measured_long, measured_short = questions[:10], questions[10:50], questions[50:70]
    work = Path(tempfile.mkdtemp(prefix="engram-long-"))
    base = work / "data"
    server = Server(trees[0][1], base, work / "build.log")
    try:
        for tenant, texts in ((LONG, long), (SHORT, short)):
            server.client.create_tenant(tenant)
            for i in range(0, len(texts), 32):
                server.client.write(tenant, texts[i:i + 32], timeout_s=300, type=args.memory_type)
    finally:
        server.stop()
    runs: list[dict[str, Any]] = []
    for rnd in range(args.rounds):
        for name, tree in trees:
            data = work / f"{name}-{rnd}"
            shutil.copytree(base, data)
            server = Server(tree, data, work / f"{name}-{rnd}.log")
            try:
                ask(server.client, LONG, warm)
                ask(server.client, SHORT, warm)
                rows_long = ask(server.client, LONG, measured_long)
                control_long = controller_state(server.client)
                rows_short = ask(server.client, SHORT, measured_short)
                control_short = controller_state(server.client)
            finally:
                server.stop()
            runs.append({"variant": name, "round": rnd, "long": summary(rows_long), "short": summary(rows_short),
                         "control_after_long": control_long, "control_after_short": control_short,
                         "rows_long": rows_long, "rows_short": rows_short})
            print(name, rnd, json.dumps(runs[-1]["long"]), json.dumps(runs[-1]["short"]), flush=True)
    pooled = {name: {kind: summary([r for run in runs if run["variant"] == name for r in run[f"rows_{kind}"]])
                     for kind in ("long", "short")} for name, _ in trees}
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu, "cpus": os.cpu_count(),
           "command": "python -m benchmarks.serving.long_memories " + " ".join(sys.argv[1:] if argv is None else argv),
           "trees": {name: str(tree) for name, tree in trees},
           "trees_commit": {name: _commit(tree) for name, tree in trees}, "memory_type": args.memory_type,
           "memories": {"long": len(long), "long_mean_bytes": round(statistics.mean(len(t.encode()) for t in long)),
                        "short": len(short), "short_mean_bytes": round(statistics.mean(len(t.encode()) for t in short))},
           "pooled": pooled, "runs": runs}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    plot(out, RESULTS / f"{args.name}.png")
    print(json.dumps(pooled, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _commit(tree: Path) -> str:
    """The tree's commit, and ``+modified`` where its checkout differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tree, text=True, capture_output=True).stdout.rstrip()

    changed = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "--short", "HEAD") + (f" +modified ({', '.join(line[3:] for line in changed.splitlines())})"
                                                  if changed else "")


def plot(out: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (lat, dep) = plt.subplots(1, 2, figsize=(11, 4))
    for name in out["pooled"]:
        for kind, style in (("long", "-"), ("short", ":")):
            ms = sorted(r["ms"] for run in out["runs"] if run["variant"] == name for r in run[f"rows_{kind}"])
            lat.plot(ms, [(i + 1) / len(ms) for i in range(len(ms))], style, label=f"{name}, {kind} memories")
            depths = [r["depth"] for run in out["runs"] if run["variant"] == name for r in run[f"rows_{kind}"]]
            dep.hist(depths, bins=range(0, 22), alpha=0.5, histtype="stepfilled" if kind == "long" else "step",
                     label=f"{name}, {kind}")
    lat.axvline(250, color="grey", linewidth=0.8)
    lat.set(xlabel="client latency, ms (one client, idle server)", ylabel="share of queries",
            title="~1 KB LoCoMo memories vs single turns")
    dep.set(xlabel="rerank depth used", ylabel="queries", title="depth the controller gave")
    lat.legend(fontsize=7)
    dep.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
