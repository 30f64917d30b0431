"""Quality with the cross-encoder swapped, through the real server, on data ingested once.

    .venv/bin/python -m benchmarks.rerank_cost.quality [--variants teacher-bf16,teacher-int8,...] [--ingest-only]

Ingesting SciFact's 5,183 abstracts through the server takes 10+ minutes on the shared 2-core box, and the
reranker plays no part in a write. So the first run ingests the SciFact test corpus (one tenant) and the
LoCoMo dev conversations (one tenant each, ``"<speaker>: <text>"`` turns with ``created_at``, as
``make bench-quality``'s headline writes them) into ``benchmarks/.cache/rerank_cost/`` and keeps that data
dir. Each variant then gets a fresh server (its own copy of the data dir) with ``models.reranker``,
``models.rerank_dtype`` set for it (the embedder, fusion, calibration and
scoring stay the defaults) and answers every query "as of" a fixed time at the server defaults, the
harness's ``defaults`` stage: SciFact test nDCG@10 (top 100), LoCoMo recall@10 (categories 1-4), and with
``--dev`` the recipe's held-out SciFact dev claims (train claims ``make reranker`` never trained on). The same
first stage feeds every variant (the fused candidates do not depend on the reranker), so the rows differ
only by the cross-encoder's logits. A "defaults, rerank off" row is the floor. Also reported per variant:
how its logits of the reranked heads differ from the reference variant's (same pairs).

Writes ``benchmarks/results/rerank_cost/quality.json`` (``--only`` variants replace their own rows).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.datasets import LOCOMO_CATEGORIES, Query, evaluate, load_locomo, load_scifact, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer, Ingested, Stage, docs_of_hit
from benchmarks.quality.suites import FIXED_NOW_MS, locomo_inputs
from benchmarks.rerank_cost.variants import REFERENCE, Variant, pick
from engram_proto.v1 import messages_pb2 as pb
from training.data import is_dev
from training.recipe import DEV_SHARE

log = logging.getLogger("benchmarks.rerank_cost")

CACHE = repo_root() / "benchmarks" / ".cache" / "rerank_cost"
RESULTS = repo_root() / "benchmarks" / "results" / "rerank_cost"
NO_RERANK = Stage("defaults, rerank off", defaults=True, rerank_depth=-1)
MANIFEST = "ingested.json"


def ingest(cache: Path) -> dict[str, Any]:
    """Writes both data sets into ``cache/data`` once; returns the manifest (eval ids per memory, per tenant)."""
    manifest_path = cache / MANIFEST
    if manifest_path.is_file():
        return json.loads(manifest_path.read_text(encoding="utf-8"))
    data = cache / "data"
    if data.exists():
        shutil.rmtree(data)   # an ingest that did not finish
    cache.mkdir(parents=True, exist_ok=True)
    test = load_scifact(split="test")
    conversations = load_locomo()
    started = time.perf_counter()
    with EvalServer(data, overrides={"models": {"reranker": ""}}) as server:
        items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id))
                 for d in test.docs]
        tenants = {"scifact": server.ingest("scifact", items).docs_of}
        for conv in conversations:
            name = f"locomo-speaker-{conv.id}"
            tenants[name] = server.ingest(name, locomo_inputs(conv, "speaker")).docs_of
    manifest = {"tenants": tenants, "ingest_s": round(time.perf_counter() - started, 1)}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return manifest


def _heads(hits: dict[str, list[pb.Hit]]) -> dict[str, dict[str, float]]:
    """Per query: memory id → the cross-encoder logit of every reranked hit."""
    return {qid: {h.memory.memory_id: float(h.breakdown.rerank) for h in hs if h.breakdown.HasField("rerank")}
            for qid, hs in hits.items()}


def evaluate_variant(variant: Variant | None, manifest: dict[str, Any], cache: Path, *,
                     dev_split: bool = False) -> dict[str, Any]:
    """One fresh server over a copy of the ingested data dir; ``None`` = no reranker (the rerank-off floor)."""
    test = load_scifact(split="test")
    conversations = load_locomo()
    overrides = {"models": variant.overrides() if variant else {"reranker": ""}}
    out: dict[str, Any] = {}
    heads: dict[str, dict[str, float]] = {}
    stage = DEFAULTS if variant else NO_RERANK
    with tempfile.TemporaryDirectory(prefix="engram-rerank-cost-") as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(cache / "data", data)
        started = time.perf_counter()
        with EvalServer(data, overrides=overrides) as server:
            info = server.info()
            out["reranker"] = ({"name": info.reranker.name, "dtype": info.reranker.dtype,
                                "depth": server.default_rerank_depth} if variant else None)
            t0 = time.perf_counter()
            tenant = Ingested(tenant="scifact", docs_of=manifest["tenants"]["scifact"])
            hits = server.search_hits(tenant, test.queries, stage, now_ms=FIXED_NOW_MS, top_k=100)
            run = {qid: [d for h in hs for d in docs_of_hit(tenant, h)] for qid, hs in hits.items()}
            heads.update({f"scifact/{q}": v for q, v in _heads(hits).items()})
            out["scifact_test"] = {k: round(v, 4) for k, v in evaluate(run, test.qrels, ks=(10, 100)).items()}
            out["scifact_test"]["queries"] = len(test.queries)
            out["scifact_test"]["search_s"] = round(time.perf_counter() - t0, 1)
            if dev_split:   # the recipe's dev claims: SciFact train claims make reranker held out of training
                dev = load_scifact(split="train")
                dev_queries = [q for q in dev.queries if is_dev(q.id, dev_share=DEV_SHARE)]
                hits = server.search_hits(tenant, dev_queries, stage, now_ms=FIXED_NOW_MS, top_k=100)
                run = {qid: [d for h in hs for d in docs_of_hit(tenant, h)] for qid, hs in hits.items()}
                out["scifact_dev"] = {k: round(v, 4) for k, v in evaluate(
                    run, dev.qrels, ks=(10, 100), query_ids=[q.id for q in dev_queries]).items()}
                out["scifact_dev"]["queries"] = len(dev_queries)
            t0 = time.perf_counter()
            runs: dict[str, list[str]] = {}
            qrels: dict[str, dict[str, int]] = {}
            category: dict[str, int] = {}
            for conv in conversations:
                name = f"locomo-speaker-{conv.id}"
                tenant = Ingested(tenant=name, docs_of=manifest["tenants"][name])
                queries = [Query(id=q.id, text=q.text) for q in conv.questions]
                for q in conv.questions:
                    qrels[q.id] = {dia: 1 for dia in q.evidence}
                    category[q.id] = q.category
                hits = server.search_hits(tenant, queries, stage, now_ms=conv.now * 1000, top_k=10)
                runs.update({qid: [d for h in hs for d in docs_of_hit(tenant, h)] for qid, hs in hits.items()})
                heads.update({f"{name}/{q}": v for q, v in _heads(hits).items()})
            scores = {"all": evaluate(runs, qrels, ks=(5, 10))}
            for cat in LOCOMO_CATEGORIES:
                scores[f"cat{cat}"] = evaluate(runs, qrels, ks=(5, 10), query_ids=[q for q, c in category.items()
                                                                                   if c == cat])
            out["locomo_dev"] = {g: {k: round(v, 4) for k, v in s.items()} for g, s in scores.items()}
            out["locomo_dev"]["queries"] = len(qrels)
            out["locomo_dev"]["search_s"] = round(time.perf_counter() - t0, 1)
        out["seconds"] = round(time.perf_counter() - started, 1)
    if variant:
        heads_path = cache / f"heads-{variant.name}.json"
        heads_path.write_text(json.dumps(heads), encoding="utf-8")
    return out


def logit_agreement(name: str, cache: Path) -> dict[str, Any] | None:
    """How this variant's logits of the reranked heads differ from the reference's, on the pairs both scored
    (the top 10 returned of each LoCoMo query, the top 100 of each SciFact query, where reranked)."""
    mine, ref = cache / f"heads-{name}.json", cache / f"heads-{REFERENCE}.json"
    if name == REFERENCE or not (mine.is_file() and ref.is_file()):
        return None
    a, b = json.loads(mine.read_text()), json.loads(ref.read_text())
    diffs, rhos, top1 = [], [], []
    for key in a.keys() & b.keys():
        common = sorted(a[key].keys() & b[key].keys())
        if len(common) < 2:
            continue
        x = np.array([a[key][m] for m in common])
        y = np.array([b[key][m] for m in common])
        diffs.extend(np.abs(x - y).tolist())
        rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
        if rx.std() > 0 and ry.std() > 0:
            rhos.append(float(np.corrcoef(rx, ry)[0, 1]))
        top1.append(int(np.argmax(x) == np.argmax(y)))
    if not diffs:
        return None
    return {"pairs": len(diffs), "queries": len(top1), "mean_abs_logit_diff": round(float(np.mean(diffs)), 4),
            "p95_abs_logit_diff": round(float(np.percentile(diffs, 95)), 4),
            "max_abs_logit_diff": round(float(np.max(diffs)), 4),
            "mean_spearman_within_query": round(float(np.mean(rhos)), 4) if rhos else None,
            "same_top1": round(float(np.mean(top1)), 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="teacher-bf16,teacher-int8", help="comma-separated, or all")
    parser.add_argument("--floor", action="store_true", help="also the rerank-off row")
    parser.add_argument("--ingest-only", action="store_true")
    parser.add_argument("--dev", action="store_true", help="also the recipe's held-out SciFact dev claims")
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--out", type=Path, default=RESULTS / "quality.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("server", "models"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    manifest = ingest(args.cache)
    if args.ingest_only:
        return 0
    result: dict[str, Any] = {"variants": {}}
    if args.out.is_file():
        result = json.loads(args.out.read_text(encoding="utf-8"))
    result["meta"] = {"machine": platform.platform(), "ingest_s": manifest["ingest_s"],
                      "method": "one server per variant over one ingested data dir; the defaults stage, as of "
                                f"{FIXED_NOW_MS} ms (SciFact) / a day after each conversation's latest session (LoCoMo)",
                      "reference": REFERENCE}
    todo: list[Variant | None] = [None] if args.floor else []
    todo += [v for v in pick(args.variants) if v.batch_size is None]   # the server has no option for the others
    for variant in todo:
        name = variant.name if variant else "rerank-off"
        log.info("evaluating %s", name)
        row = evaluate_variant(variant, manifest, args.cache, dev_split=args.dev)
        result["variants"][name] = row
        log.info("%s: scifact %s locomo %s", name, row["scifact_test"], row["locomo_dev"]["all"])
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for name in result["variants"]:
        agreement = logit_agreement(name, args.cache) if name != "rerank-off" else None
        if agreement is not None:
            result["variants"][name]["logits_vs_reference"] = agreement
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({n: {"scifact_ndcg@10": r["scifact_test"]["ndcg@10"],
                          "locomo_recall@10": r["locomo_dev"]["all"]["recall@10"]}
                      for n, r in result["variants"].items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
