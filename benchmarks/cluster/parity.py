"""Parity of engram on Ray with a single node: the quality harness's server
(benchmarks/quality/harness.py) ingests a data set and answers its queries, once as a single node and once
as engram on Ray (a local Ray, two TenantShard replicas, one Encoder and one Reranker replica, the logs in a
SeaweedFS bucket, engram's gRPC edge), at the server defaults; every query's top-10 ids are compared, not
only the means.

    .venv/bin/python -m benchmarks.cluster.parity --suite locomo --side single
    .venv/bin/python -m benchmarks.cluster.parity --suite locomo --side ray
    .venv/bin/python -m benchmarks.cluster.parity --compare      # -> benchmarks/results/cluster/parity.json

Each side writes ``parity-runs/<suite>-<side>.json`` (per query: the top-10 eval ids and final scores of each
stage; per tenant: memories and near-duplicate merges). Stages: the defaults (hybrid + rerank + decay, as of a
fixed time) and the hybrid, dense and BM25 lists; the live stage is left out (its scores follow the clock).
SciFact's ingest (5k abstracts, the e5 embedder) takes 10-30 min per side on 2 cores: run it under
``flock -s /tmp/lead/cpu.lock nice -n 5``.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import subprocess
import tempfile
import time
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from benchmarks.cluster.stack import RESULTS, ROOT, bucket, cluster_overrides, stop_ray
from benchmarks.quality.datasets import Query, evaluate, load_locomo, load_scifact
from benchmarks.quality.harness import BM25, DEFAULTS, DENSE, HYBRID, EvalServer, Ingested, Stage, docs_of_hit
from benchmarks.quality.suites import FIXED_NOW_MS, locomo_inputs
from engram_proto.v1 import messages_pb2 as pb

log = logging.getLogger("benchmarks.cluster.parity")

STAGES: tuple[Stage, ...] = (DEFAULTS, HYBRID, DENSE, BM25)
RUNS = RESULTS / "parity-runs"
TOP = 10


class RayEvalServer(EvalServer):
    """The harness's server as engram on Ray: the edge in this process, the Serve application on a local Ray."""

    async def _start_app(self) -> Any:
        from server.cluster.ingress import build_cluster_app

        app = await build_cluster_app(self.config)
        await app.start()
        return app

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        stop_ray()


def _record(server: EvalServer, tenant: Ingested, queries: Sequence[Query], *, now_ms: int, top_k: int,
            out: dict[str, Any]) -> None:
    for stage in STAGES:
        hits = server.search_hits(tenant, queries, stage, now_ms=now_ms, top_k=top_k)
        runs = out.setdefault(stage.name, {})
        for qid, hs in hits.items():
            runs[qid] = {"ids": [d for h in hs for d in docs_of_hit(tenant, h)],
                         "final": [round(h.breakdown.final, 6) for h in hs[:TOP]]}


def _ingest_and_search(server: EvalServer, suite: str, *, conversations: int, stages: dict[str, dict[str, Any]],
                       tenants: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Ingests the suite's data as the quality harness does and records every stage's hits (each LoCoMo
    conversation's right after its ingest); returns the qrels."""
    def searched(tenant: Ingested, queries: Sequence[Query], *, now_ms: int, top_k: int) -> None:
        tenants[tenant.tenant] = {"memories": tenant.memories, "merged": tenant.merged,
                                  "ingest_s": round(tenant.seconds, 1)}
        _record(server, tenant, queries, now_ms=now_ms, top_k=top_k, out=stages)

    if suite == "scifact":
        test = load_scifact(split="test")
        items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id)) for d in test.docs]
        searched(server.ingest("scifact", items), test.queries, now_ms=FIXED_NOW_MS, top_k=100)
        return {q: dict(r) for q, r in test.qrels.items()}
    qrels: dict[str, dict[str, int]] = {}
    for conv in load_locomo()[:conversations or None]:
        tenant = server.ingest(f"locomo-speaker-{conv.id}", locomo_inputs(conv, "speaker"))
        qrels.update({q.id: {dia: 1 for dia in q.evidence} for q in conv.questions})
        searched(tenant, [Query(id=q.id, text=q.text) for q in conv.questions], now_ms=conv.now * 1000, top_k=TOP)
    return qrels


def run_side(suite: str, side: str, *, threads: int, conversations: int = 0) -> dict[str, Any]:
    overrides: dict[str, Any] = {"models": {"cpu_threads": threads}}
    stages: dict[str, dict[str, Any]] = {}
    tenants: dict[str, Any] = {}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"engram-parity-{side}-") as tmp, (
            bucket(Path(tmp) / "weed") if side == "ray" else nullcontext("")) as endpoint:
        if side == "ray":
            overrides.update(cluster_overrides(endpoint))
        with (RayEvalServer if side == "ray" else EvalServer)(Path(tmp) / "data", overrides=overrides) as server:
            info = server.info()
            meta = {"embedder": info.embedder.name, "reranker": info.reranker.name if server.has_reranker else None}
            qrels = _ingest_and_search(server, suite, conversations=conversations, stages=stages, tenants=tenants)
    ks = (10, 100) if suite == "scifact" else (5, 10)
    metrics = {name: {k: round(v, 4) for k, v in evaluate({q: r["ids"] for q, r in runs.items()}, qrels, ks=ks).items()}
               for name, runs in stages.items()}
    for runs in stages.values():
        for r in runs.values():
            r["ids"] = r["ids"][:TOP]
    head = subprocess.run(["git", "rev-parse", "HEAD"], check=False, cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    return {"suite": suite, "side": side, **meta, "cpu_threads": threads, "machine": platform.platform(), "head": head,
            "seconds": round(time.perf_counter() - started, 1), "tenants": tenants, "metrics": metrics,
            "stages": stages}


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per stage: queries whose top-10 ids are the same in the same order, the same as a set, and the largest
    final-score difference; the metrics of both sides; the write path's memories and merges per tenant."""
    out: dict[str, Any] = {"tenants": {t: {"single": a["tenants"][t], "ray": b["tenants"].get(t)} for t in a["tenants"]},
           "write_path_equal": all({k: v for k, v in a["tenants"][t].items() if k != "ingest_s"}
                                   == {k: v for k, v in b["tenants"].get(t, {}).items() if k != "ingest_s"}
                                   for t in a["tenants"]),
           "stages": {}}
    for name, runs in a["stages"].items():
        other = b["stages"][name]
        same_order = same_set = 0
        max_diff = 0.0
        differing: list[dict[str, Any]] = []
        for qid, r in runs.items():
            o = other[qid]
            same_order += r["ids"] == o["ids"]
            same_set += set(r["ids"]) == set(o["ids"])
            if len(r["final"]) == len(o["final"]):
                max_diff = max([max_diff, *(abs(x - y) for x, y in zip(r["final"], o["final"], strict=True))])
            if r["ids"] != o["ids"] and len(differing) < 10:
                differing.append({"query": qid, "single": r["ids"], "ray": o["ids"],
                                  "single_final": r["final"], "ray_final": o["final"]})
        out["stages"][name] = {"queries": len(runs), "same_top10_in_order": same_order, "same_top10_as_set": same_set,
                               "max_abs_final_diff": round(max_diff, 6), "metrics_single": a["metrics"][name],
                               "metrics_ray": b["metrics"][name], "first_differing": differing}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", choices=("locomo", "scifact"))
    parser.add_argument("--side", choices=("single", "ray"))
    parser.add_argument("--threads", type=int, default=2, help="models.cpu_threads on both sides")
    parser.add_argument("--conversations", type=int, default=0, help="LoCoMo: the first N only (a smoke run)")
    parser.add_argument("--compare", action="store_true", help="compare the saved runs -> parity.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("server", "models", "ray"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    RUNS.mkdir(parents=True, exist_ok=True)
    if args.compare:
        report: dict[str, Any] = {}
        for suite in ("locomo", "scifact"):
            paths = [RUNS / f"{suite}-{side}.json" for side in ("single", "ray")]
            if all(p.is_file() for p in paths):
                single, ray = (json.loads(p.read_text()) for p in paths)
                report[suite] = compare(single, ray)
                log.info("%s: %s", suite, {k: (v["queries"], v["same_top10_in_order"], v["same_top10_as_set"],
                                               v["max_abs_final_diff"]) for k, v in report[suite]["stages"].items()})
        (RESULTS / "parity.json").write_text(json.dumps(report, indent=1))
        return 0
    if not (args.suite and args.side):
        parser.error("--suite and --side (or --compare)")
    result = run_side(args.suite, args.side, threads=args.threads, conversations=args.conversations)
    (RUNS / f"{args.suite}-{args.side}.json").write_text(json.dumps(result))
    log.info("%s on %s: %s (%.0fs)", args.suite, args.side, result["metrics"], result["seconds"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
