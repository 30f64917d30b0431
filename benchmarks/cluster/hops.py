"""What the Ray hops add to one call: a single node against engram on Ray at one client, search and Write,
optionally against engram on Ray built from other checkouts (``--before DIR``, e.g. a ``git worktree`` of an
earlier commit; ``--variant NAME=DIR``), all up at once and measured in alternating rounds so that load on the
machine hits each alike; ``--single-bucket`` adds a single node whose logs are in the bucket (no Ray), so that
a Write's extra splits into the bucket's share (its conditional PUTs) and the hops'.

Each Ray side is its own ``engram serve --ray`` edge that starts its own local Ray (two TenantShard
replicas, one Encoder replica) from its checkout (its ``PYTHONPATH`` reaches every Ray worker), its logs in
its own prefix of one ``weed mini`` bucket. Same defaults as ``benchmarks.cluster.run`` (e5, no reranker,
embedding cache off). Per side: p50 / p95 of the client's latency, and the engine's own ``total_ns`` and
``embed_ns`` (server-side, from the replies), so that what the hops add is the client's latency minus what
the engine spent.

    .venv/bin/python -m benchmarks.cluster.hops --lock /tmp/engram-cpu.lock [--before /tmp/engram-before]

Results: ``hops.json`` and ``hops.png`` under benchmarks/results/cluster/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.cluster.run import CpuLock, EngramProcess, seed
from benchmarks.cluster.stack import BUCKET, RESULTS, ROOT, S3_ENV, bucket
from benchmarks.cluster.writes import run_writes
from benchmarks.ingest.run import command_line, cpu_model
from benchmarks.serving.build import ADMIN_KEY, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import run_load, touch_tenants

log = logging.getLogger("benchmarks.cluster.hops")


def start_sides(workdir: Path, endpoint: str, variants: dict[str, Path],
                envs: dict[str, dict[str, str]], *, single_bucket: bool = False) -> dict[str, EngramProcess]:
    """The single node, engram on Ray from this checkout and from each of ``variants`` (name: checkout), each
    side with its ``envs`` on top; ``single_bucket``: also a single node whose logs are in the bucket (no Ray),
    which tells the bucket's share of a Write's extra from the hops'."""
    sides = {"single": EngramProcess("single", workdir=workdir, env=envs.get("single", {}))}
    if single_bucket:
        sides["single_bucket"] = EngramProcess("single_bucket", workdir=workdir, env={
            "ENGRAM_OBJECT_STORE__BUCKET": BUCKET, "ENGRAM_OBJECT_STORE__ENDPOINT": endpoint,
            "ENGRAM_OBJECT_STORE__PREFIX": "single_bucket/", **S3_ENV, **envs.get("single_bucket", {})})
    roots = {"ray": ROOT, **{name: root.resolve() for name, root in variants.items()}}
    for name, root in roots.items():
        env = {"ENGRAM_OBJECT_STORE__BUCKET": BUCKET, "ENGRAM_OBJECT_STORE__ENDPOINT": endpoint,
               "ENGRAM_OBJECT_STORE__PREFIX": f"{name}/", "ENGRAM_CLUSTER__REPLICAS": "2",
               "ENGRAM_CLUSTER__SHARD_CPUS": "1", "ENGRAM_CLUSTER__ENCODER_CPUS": "1", **S3_ENV, **envs.get(name, {})}
        sides[name] = EngramProcess(name, workdir=workdir, env=env, ray_local=True, root=root)
    return sides


def _stage_means(rows: list[dict[str, Any]], stage: str) -> float:
    means = [r["server_stage_mean_ms"].get(stage, 0.0) for r in rows]
    return round(float(np.mean(means)), 2) if means else 0.0


def bench(args: argparse.Namespace, workdir: Path, endpoint: str) -> dict[str, Any]:
    names = [tenant_name(i) for i in range(args.tenants)]
    write_tenant = tenant_name(args.tenants)
    queries = query_texts(5000)
    lock = CpuLock(args.lock)
    lock.shared()
    servers = start_sides(workdir, endpoint, args.variants, args.envs, single_bucket=args.single_bucket)
    out: dict[str, Any] = {"sides": list(servers), "search": {s: [] for s in servers},
                           "writes": {s: [] for s in servers}, "search_ms": {s: [] for s in servers},
                           "write_ms": {s: [] for s in servers}}
    try:
        for side, server in servers.items():
            server.wait_ready()
            seed(server.address, tenants=args.tenants, per_tenant=args.per_tenant)
            log.info("%s up and seeded", side)
        lock.exclusive()
        out["loadavg_1m_timed_start"] = round(os.getloadavg()[0], 2)
        for side, server in servers.items():
            asyncio.run(touch_tenants(server.address, ADMIN_KEY, names, queries[0]))
            asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=1,
                                 seconds=args.warmup, seed=98))
            asyncio.run(run_writes(server.address, ADMIN_KEY, tenant=write_tenant, concurrency=1,
                                   seconds=args.warmup, tag=f"{side}-warm"))
        for r in range(args.rounds):
            for side, server in servers.items():
                res = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=names, queries=queries, concurrency=1,
                                           seconds=args.seconds, seed=r))
                out["search"][side].append(res.summary())
                out["search_ms"][side] += res.latencies_ms
                wres = asyncio.run(run_writes(server.address, ADMIN_KEY, tenant=write_tenant, concurrency=1,
                                              seconds=args.seconds, tag=f"{side}-{r}"))
                out["writes"][side].append(wres.summary())
                out["write_ms"][side] += wres.latencies_ms
                log.info("round %d %s: search p50 %.1f, write p50 %.1f", r, side, res.summary()["p50_ms"],
                         wres.summary()["p50_ms"])
    finally:
        for server in servers.values():
            server.stop()
    out["summary"] = summarise(out)
    for key in ("search_ms", "write_ms"):   # kept short: the summary has what the table needs
        out[key] = {s: [round(x, 2) for x in v] for s, v in out[key].items()}
    return out


def summarise(out: dict[str, Any]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for side in out["sides"]:
        s, w = np.asarray(out["search_ms"][side]), np.asarray(out["write_ms"][side])
        summary[side] = {
            "search_n": len(s), "search_p50_ms": round(float(np.percentile(s, 50)), 2),
            "search_p95_ms": round(float(np.percentile(s, 95)), 2),
            "search_engine_total_mean_ms": _stage_means(out["search"][side], "total"),
            "search_engine_embed_mean_ms": _stage_means(out["search"][side], "embed"),
            "write_n": len(w), "write_p50_ms": round(float(np.percentile(w, 50)), 2),
            "write_p95_ms": round(float(np.percentile(w, 95)), 2)}
    single = summary["single"]
    for side in out["sides"][1:]:
        row = summary[side]
        for op in ("search", "write"):
            for q in ("p50", "p95"):
                row[f"{op}_added_{q}_ms"] = round(row[f"{op}_{q}_ms"] - single[f"{op}_{q}_ms"], 2)
        if "single_bucket" in summary and side != "single_bucket":   # the same durability: what the hops add
            for q in ("p50", "p95"):
                row[f"write_added_bucket_{q}_ms"] = round(row[f"write_{q}_ms"] - summary["single_bucket"][f"write_{q}_ms"], 2)
    return summary


def markdown(r: dict[str, Any]) -> str:
    sides = r["sides"]
    s = r["summary"]
    head = "| per call, 1 client | " + " | ".join(sides) + " |"
    lines = [head, "|---|" + "---:|" * len(sides)]
    for op, label in (("search", "search"), ("write", "Write of 1 memory")):
        lines.append(f"| {label}: p50 / p95 ms | " + " | ".join(
            f"{s[x][f'{op}_p50_ms']:.1f} / {s[x][f'{op}_p95_ms']:.1f}" for x in sides) + " |")
        lines.append(f"| {label}: added to the single node, p50 / p95 ms | — | " + " | ".join(
            f"{s[x][f'{op}_added_p50_ms']:+.1f} / {s[x][f'{op}_added_p95_ms']:+.1f}" for x in sides[1:]) + " |")
        one = s["single"]
        lines.append(f"| {label}: / single node, p50 / p95 | — | " + " | ".join(
            f"{s[x][f'{op}_p50_ms'] / one[f'{op}_p50_ms']:.2f}× / {s[x][f'{op}_p95_ms'] / one[f'{op}_p95_ms']:.2f}×"
            for x in sides[1:]) + " |")
    ray_sides = [x for x in sides if x not in ("single", "single_bucket")]
    if "single_bucket" in sides:
        lines.append("| Write of 1 memory: added to the single node on the same bucket, p50 / p95 ms | — | — | " + " | ".join(
            f"{s[x]['write_added_bucket_p50_ms']:+.1f} / {s[x]['write_added_bucket_p95_ms']:+.1f}" for x in ray_sides)
            + " |")
    lines.append("| search: engine's own total / embed, mean ms | " + " | ".join(
        f"{s[x]['search_engine_total_mean_ms']:.1f} / {s[x]['search_engine_embed_mean_ms']:.1f}" for x in sides) + " |")
    return "\n".join(lines) + "\n"


def plot(r: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    sides = r["sides"]
    xs = np.arange(4)
    width = 0.8 / len(sides)
    for i, side in enumerate(sides):
        row = r["summary"][side]
        ax.bar(xs + i * width, [row["search_p50_ms"], row["search_p95_ms"], row["write_p50_ms"], row["write_p95_ms"]],
               width, label=side)
    ax.set_xticks(xs + width * (len(sides) - 1) / 2, ["search p50", "search p95", "Write p50", "Write p95"])
    ax.set_ylabel("ms per call, 1 client")
    ax.legend()
    ax.set_title(f"single node vs engram on Ray, one client ({r['cpu_model']}, {r['cpus']} cores)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", type=int, default=2)
    parser.add_argument("--per-tenant", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--before", type=Path, default=None, help="another checkout, run as 'ray_before'")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                        help="another checkout, run as NAME (repeatable); NAME=. is this checkout")
    parser.add_argument("--single-bucket", action="store_true",
                        help="also a single node on the bucket (no Ray), run as 'single_bucket'")
    parser.add_argument("--env", action="append", default=[], metavar="NAME:KEY=VALUE",
                        help="an environment variable for side NAME's server (repeatable)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="hops", help="results file stem")
    parser.add_argument("--lock", default="", help="lock file: shared while preparing, exclusive while timing")
    args = parser.parse_args(argv)
    args.variants = {**({"ray_before": args.before} if args.before else {}),
                     **{v.split("=", 1)[0]: Path(v.split("=", 1)[1]) for v in args.variant}}
    args.envs = {}
    for spec in args.env:
        name, _, pair = spec.partition(":")
        key, _, value = pair.partition("=")
        args.envs.setdefault(name, {})[key] = value
    args.out.mkdir(parents=True, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="engram-hops-") as tmp, bucket(Path(tmp) / "weed") as endpoint:
        result = bench(args, Path(tmp), endpoint)
    result.update({"cpus": os.cpu_count(), "cpu_model": cpu_model(), "platform": platform.platform(),
                   "date": time.strftime("%Y-%m-%d", time.gmtime()), "command": command_line(),
                   "rounds": args.rounds, "seconds_per_run": args.seconds, "tenants": args.tenants,
                   "memories_per_tenant": args.per_tenant, "seconds": round(time.perf_counter() - started, 1)})
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    plot(result, args.out / f"{args.name}.png")
    sys.stdout.write(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
