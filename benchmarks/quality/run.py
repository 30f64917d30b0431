"""``make bench-quality``: every quality number in the README, through the real gRPC server.

    .venv/bin/python -m benchmarks.quality.run [--only scifact,locomo,zh] [--reranker PATH]
        [--locomo-text raw,contextualised] [--out benchmarks/results/quality]

One in-process server (packaged embedder, FAISS, Lucene, a temp data dir that is deleted afterwards:
nothing is cached) ingests each data set and answers every stage. A reranker is used when
``--reranker`` or ``ENGRAM_MODELS__RERANKER`` names one (then a "hybrid+rerank" stage appears).
Data sets missing under ../shared/data are skipped with a message. Writes ``results.json``,
``quality.png`` and ``table.md`` under --out; with --only, the other data sets' sections of an
existing ``results.json`` there are kept.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.quality import report, suites
from benchmarks.quality.block import ADAPTER_VARIANT, DEFAULT_VARIANTS, RERANKER_VARIANT, VARIANTS, run_block
from benchmarks.quality.sessions import SETS, run_set
from benchmarks.quality.datasets import DataMissing, repo_root
from benchmarks.quality.harness import EvalServer
from server.engine.search import DENSE_WEIGHT, DENSE_WEIGHT_CJK, DENSE_WEIGHT_CODE, LEXICAL_WEIGHT, RRF_K

log = logging.getLogger("benchmarks.quality")

SUITES = ("scifact", "locomo", "zh", "recency", "block", "multisession", "preference", "requests", "order",
          "updates")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SUITES), help="comma-separated: scifact, locomo, zh, recency, updates")
    parser.add_argument("--reranker", default="", help="cross-encoder path (else ENGRAM_MODELS__RERANKER)")
    parser.add_argument("--locomo-text", default="speaker,conversation",
                        help="LoCoMo memory text: speaker (the headline), conversation, raw, contextualised")
    parser.add_argument("--block-variants", default=",".join(DEFAULT_VARIANTS),
                        help=f"the block suite's server variants, comma-separated: {', '.join(VARIANTS)}; "
                             f"'{RERANKER_VARIANT}PATH': another cross-encoder folder on the same index; "
                             f"'{ADAPTER_VARIANT}PATH': another query adapter or tower folder")
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("server", "models"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(wanted) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites: {sorted(unknown)}")

    started = time.perf_counter()
    results: dict[str, Any] = {}
    previous = args.out / "results.json"
    if set(wanted) != set(SUITES) and previous.is_file():
        # A partial run (--only) replaces its own sections of the last full results and keeps the rest.
        results = {k: v for k, v in json.loads(previous.read_text(encoding="utf-8")).items() if k != "meta"}
    with tempfile.TemporaryDirectory(prefix="engram-quality-") as tmp, EvalServer(Path(tmp) / "data",
                                                                                  reranker=args.reranker) as server:
        info = server.info()
        results["meta"] = {"suites_run": wanted,
            "embedder": info.embedder.name, "reranker": info.reranker.name if server.has_reranker else None,
            "search": {**vars(server.config.search), "rrf_k": RRF_K, "dense_weight": DENSE_WEIGHT,
                       "lexical_weight": LEXICAL_WEIGHT, "dense_weight_cjk": DENSE_WEIGHT_CJK,
                       "dense_weight_code": DENSE_WEIGHT_CODE}, "machine": platform.platform(),
        }
        for name in wanted:
            t0 = time.perf_counter()
            try:
                if name == "scifact":
                    results["scifact"] = suites.run_scifact(server)
                elif name == "locomo":
                    variants = [v.strip() for v in args.locomo_text.split(",") if v.strip()]
                    results["locomo"] = suites.run_locomo(server, variants=variants)
                elif name == "zh":
                    results["zh"] = suites.run_chinese(server)
                elif name == "block":
                    names = [v.strip() for v in args.block_variants.split(",") if v.strip()]
                    swapped = (RERANKER_VARIANT, ADAPTER_VARIANT)
                    unknown = {n for n in names if n not in VARIANTS and not n.startswith(swapped)}
                    if unknown:
                        parser.error(f"unknown block variants: {sorted(unknown)}")
                    results["block"] = run_block(server, names)
                elif name in SETS:
                    results[name] = run_set(server, name)
                elif name == "updates":
                    results["updates"] = suites.run_updates(server)
                else:
                    results["recency"] = suites.run_recency(server)
            except DataMissing as exc:
                log.warning("skipping %s: %s", name, exc)
                results[name] = {"skipped": str(exc)}
                continue
            results[name]["seconds"] = round(time.perf_counter() - t0, 1)
    results["meta"]["seconds"] = round(time.perf_counter() - started, 1)
    ran = {k: v for k, v in results.items() if not (isinstance(v, dict) and "skipped" in v)}
    report.write_json(results, args.out / "results.json")
    report.plot(ran, args.out / "quality.png")
    table = report.write_table(ran, args.out)
    log.info("quality results in %s (%.0fs)\n%s", args.out, results["meta"]["seconds"], table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
