"""Noisy neighbour: one quiet client on one tenant, alone and beside 31 clients flooding another tenant.

    .venv/bin/python -m benchmarks.serving.neighbour                  # 2 x 10k, no rerank, 3 rounds of 10 s
    .venv/bin/python -m benchmarks.serving.neighbour --rounds 1 --seconds 5
    .venv/bin/python -m benchmarks.serving.neighbour --dataset locomo   # the independent probe's setup

``--dataset locomo`` reproduces an independent probe: every LoCoMo turn (/work/shared/data/locomo) written through
the server into an empty data directory, one tenant per conversation; the quiet client searches the first
conversation's tenant and the flood the second's, with the LoCoMo questions as queries (no rerank, defaults).

One ``engram serve`` at its defaults (batching on, fair share as shipped) on a copy of the cached 2 x 10k data
directory (built once, like the serving grid's). Each round measures the quiet tenant alone, then the quiet
tenant with the noisy one beside it, back to back, so that load from other processes hits both alike.
Reports, per round and pooled: the quiet tenant's p50 / p95 alone and with the neighbour (and their ratio),
the noisy tenant's QPS, its RESOURCE_EXHAUSTED answers, and the server's per-tenant rejections (Stats).
A rejected noisy client sends its next query at once (a flood does not back off). JSON under
benchmarks/results/serving/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
import numpy as np

from benchmarks.quality.datasets import load_locomo
from benchmarks.serving.build import ADMIN_KEY, build, tenant_name
from benchmarks.serving.corpus import query_texts
from benchmarks.serving.load import LoadResult, run_load, touch_tenants
from benchmarks.serving.run import RESULTS, ServerProcess, load_embedder_for_build
from engram_client import EngramClient
from engram_proto.v1 import service_pb2 as spb
from engram_proto.v1 import service_pb2_grpc as sgrpc

log = logging.getLogger("benchmarks.serving.neighbour")
QUIET, NOISY = tenant_name(0), tenant_name(1)


def rejections(address: str) -> dict[str, int]:
    """Each tenant's RESOURCE_EXHAUSTED count so far, from the server's Stats."""
    with grpc.insecure_channel(address) as channel:
        stats = sgrpc.AdminServiceStub(channel).Stats(
            spb.StatsRequest(), metadata=(("authorization", f"Bearer {ADMIN_KEY}"),), timeout=30)
    return {t.tenant_id: int(t.rejected) for t in stats.tenants}


def load_locomo_tenants(address: str) -> tuple[list[str], list[str]]:
    """Writes every LoCoMo turn, one tenant per conversation (chunks of 128 turns); returns the tenant ids (in
    the dataset's order) and the questions' texts."""
    conversations = load_locomo()
    client = EngramClient(address, key=ADMIN_KEY)
    try:
        for conv in conversations:
            tenant = f"locomo-{conv.id}"
            client.create_tenant(tenant)
            turns = [f"{t.speaker}: {t.text}" for t in conv.turns]
            for at in range(0, len(turns), 128):
                client.write(tenant, turns[at:at + 128], timeout_s=600)
    finally:
        client.close()
    return [f"locomo-{c.id}" for c in conversations], [q.text for c in conversations for q in c.questions]


def quiet_row(result: LoadResult) -> dict[str, Any]:
    s = result.summary()
    return {k: s[k] for k in ("requests", "qps", "p50_ms", "p95_ms", "p99_ms", "mean_batch_size", "errors",
                              "server_stage_mean_ms")}


async def side_by_side(address: str, queries: list[str], *, noisy_clients: int, seconds: float,
                       seed: int, quiet_tenant: str = QUIET, noisy_tenant: str = NOISY) -> tuple[LoadResult, LoadResult]:
    quiet, noisy = await asyncio.gather(
        run_load(address, ADMIN_KEY, tenants=[quiet_tenant], queries=queries, concurrency=1, seconds=seconds,
                 seed=seed),
        run_load(address, ADMIN_KEY, tenants=[noisy_tenant], queries=queries, concurrency=noisy_clients,
                 seconds=seconds, seed=seed + 1))
    return quiet, noisy


def pooled(latencies: list[float]) -> dict[str, float]:
    lat = np.asarray(latencies) if latencies else np.zeros(1)
    return {"p50_ms": round(float(np.percentile(lat, 50)), 2), "p95_ms": round(float(np.percentile(lat, 95)), 2)}


def plot(runs: dict[str, dict[str, Any]], path: Path) -> None:
    """The quiet tenant's p95 alone and beside the flood, one pair of bars per run (label → its JSON)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(runs)
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(labels), 3.6))
    alone = [runs[k]["quiet_alone"]["p95_ms"] for k in labels]
    beside = [runs[k]["quiet_with_neighbour"]["p95_ms"] for k in labels]
    ax.bar(x - 0.2, alone, 0.4, label="quiet alone")
    ax.bar(x + 0.2, beside, 0.4, label="beside 31 noisy clients")
    for i, k in enumerate(labels):
        ax.annotate(f"{runs[k]['quiet_p95_ratio']}x", (x[i] + 0.2, beside[i]), ha="center", va="bottom")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("quiet tenant p95 (ms)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--noisy-clients", type=int, default=31)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=float, default=8.0)
    p.add_argument("--per-tenant", type=int, default=10000)
    p.add_argument("--dataset", choices=("synthetic", "locomo"), default="synthetic",
                   help="synthetic: 2 x --per-tenant cached memories; locomo: every LoCoMo turn, a tenant per conversation")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the server")
    p.add_argument("--out", default="", help="default: noisy_neighbour[_locomo].json under benchmarks/results/serving")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    locomo = args.dataset == "locomo"
    out_path = Path(args.out or RESULTS / ("noisy_neighbour_locomo.json" if locomo else "noisy_neighbour.json"))
    env = {"ENGRAM_MODELS__DEVICE": "cpu", "ENGRAM_MODELS__RERANKER": "",
           **dict(kv.split("=", 1) for kv in args.env)}
    rounds: list[dict[str, Any]] = []
    alone_lat: list[float] = []
    beside_lat: list[float] = []
    with tempfile.TemporaryDirectory(prefix="engram-neighbour-") as tmp:
        if locomo:
            data = Path(tmp) / "empty"
            data.mkdir()
        else:
            data = build(load_embedder_for_build("cpu"), tenants=2, per_tenant=args.per_tenant)
        server = ServerProcess(data, batching=True, env=env, workdir=Path(tmp))
        try:
            info = server.wait_ready()
            if locomo:
                tenants, queries = load_locomo_tenants(server.address)
                quiet_t, noisy_t = tenants[0], tenants[1]
            else:
                queries, quiet_t, noisy_t = query_texts(5000), QUIET, NOISY
            asyncio.run(touch_tenants(server.address, ADMIN_KEY, [quiet_t, noisy_t], queries[0]))
            server.wait_indexes_built()
            asyncio.run(side_by_side(server.address, queries, noisy_clients=args.noisy_clients,
                                     seconds=args.warmup, seed=99, quiet_tenant=quiet_t, noisy_tenant=noisy_t))
            for r in range(args.rounds):
                alone = asyncio.run(run_load(server.address, ADMIN_KEY, tenants=[quiet_t], queries=queries,
                                             concurrency=1, seconds=args.seconds, seed=10 * r))
                before = rejections(server.address)
                quiet, noisy = asyncio.run(side_by_side(server.address, queries, noisy_clients=args.noisy_clients,
                                                        seconds=args.seconds, seed=10 * r + 1,
                                                        quiet_tenant=quiet_t, noisy_tenant=noisy_t))
                after = rejections(server.address)
                alone_lat += alone.latencies_ms
                beside_lat += quiet.latencies_ms
                ns = noisy.summary()
                row = {"round": r, "quiet_alone": quiet_row(alone), "quiet_with_neighbour": quiet_row(quiet),
                       "noisy": {k: ns[k] for k in ("requests", "qps", "p50_ms", "p95_ms", "mean_batch_size", "errors")},
                       "server_rejected": {"quiet": after.get(quiet_t, 0) - before.get(quiet_t, 0),
                                           "noisy": after.get(noisy_t, 0) - before.get(noisy_t, 0)},
                       "loadavg_1m": round(os.getloadavg()[0], 2)}
                row["quiet_p95_ratio"] = round(row["quiet_with_neighbour"]["p95_ms"] / max(1e-9, row["quiet_alone"]["p95_ms"]), 2)
                log.info("round %d: %s", r, row)
                rounds.append(row)
        finally:
            server.stop()
    alone_p, beside_p = pooled(alone_lat), pooled(beside_lat)
    out = {"what": f"1 quiet client ({quiet_t}) alone vs beside N noisy clients ({noisy_t}), no rerank, defaults",
           "dataset": args.dataset, "command": " ".join(["python -m benchmarks.serving.neighbour", *sys.argv[1:]]),
           "noisy_clients": args.noisy_clients, "seconds": args.seconds, "rounds": args.rounds,
           "memories_per_tenant": args.per_tenant, "server": info, "server_env": env, "cpus": os.cpu_count(),
           "quiet_alone": alone_p, "quiet_with_neighbour": beside_p,
           "quiet_p95_ratio": round(beside_p["p95_ms"] / max(1e-9, alone_p["p95_ms"]), 2),
           "noisy_qps_mean": round(float(np.mean([r["noisy"]["qps"] for r in rounds])), 2),
           "noisy_rejected_total": sum(r["server_rejected"]["noisy"] for r in rounds),
           "quiet_rejected_total": sum(r["server_rejected"]["quiet"] for r in rounds),
           "runs": rounds, "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2))
    plot({args.dataset: out}, out_path.with_suffix(".png"))
    sys.stdout.write(json.dumps({k: v for k, v in out.items() if k != "runs"}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
