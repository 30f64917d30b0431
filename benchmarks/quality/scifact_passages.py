"""SciFact test at the server defaults with the cross-encoder reading a long memory's best passage (the default,
server/engine/passages.py) against its first tokens, side by side on one ingested tenant; ``--margins`` adds the
passage rule at other margins (a later window read only when it holds that many more query terms than the first),
``--splits train,test`` runs the train claims too (the corpus is shared, so one ingest serves both): choose on train,
report test.

SciFact abstracts are long memories (most exceed ``PASSAGE_CHARS``), so the passage rule changes what the
cross-encoder reads for nearly every SciFact pair. This run checks that the rule, chosen on long chat turns, does
not cost the held-out SciFact test split. The alternative is the same process with the rerank stage's text
function swapped for :func:`server.text.memory_text` (what every memory read before the rule), alternating
variants so neither has the warmer caches; the pair-score cache is keyed by the pair's text, so each variant's
pairs are scored by the model.

The dense side: every variant but one reads a memory's passage vectors (server/index/memory_vectors.py, the
default); "main vector only" searches the same index with its first-window vectors alone (``tiered.SEARCH_PASSAGES``
off in process: what the dense side read before passage vectors). ``--docs N`` ingests a subset of the corpus: every
abstract judged for the chosen splits' claims and a seeded sample of the others, N in all (an ingest of the whole
corpus with passage vectors takes longer than a CPU-lock hold on a 2-core machine).

``--windows 0/8`` ingests the abstracts again under each WIDTH/LIMIT of dense passage windows
(``advanced.passage_tokens``, 0 = the embedder's window / ``advanced.passage_vectors``), set on the running server's
write stage, and searches that tenant at the defaults beside the default one (only the default variant runs then);
``--rests 32,64`` the same under each ``models.embedder.PASSAGE_MIN_REST`` (the tokens a text must run past the model's
window before it gets passage vectors).

    .venv/bin/python -m benchmarks.quality.scifact_passages [--rounds 1] [--margins 2,3] [--splits train,test]
                                                            [--docs 1500] [--bm25-windows] [--windows 0/8]
                                                            [--rests 32,64]

Writes ``benchmarks/results/quality/scifact_passages.json``.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import platform
import random
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks.quality.datasets import load_scifact, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.suites import FIXED_NOW_MS, _scores
from engram_proto.v1 import messages_pb2 as pb
from server.engine import passages
from server.engine.passages import PASSAGE_CHARS
from server.index import tiered
from server.lexical import lucene
from server.text import memory_text

log = logging.getLogger(__name__)
EVERY_WORD = "best passage chosen by every word (the rule before)"


def _cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                platform.processor())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--margins", default="", help="comma-separated PASSAGE_MARGIN values to run beside the default")
    parser.add_argument("--splits", default="test", help="comma-separated: test, train")
    parser.add_argument("--docs", type=int, default=0, help="ingest N abstracts (the judged ones first); 0 = all")
    parser.add_argument("--discounts", default="", help="comma-separated tiered.PASSAGE_DISCOUNT values to add")
    parser.add_argument("--ce-windows", default="", help="comma-separated cross-encoder windows (characters) to run "
                        "beside the default, alone")
    parser.add_argument("--bm25-windows", action="store_true",
                        help="run only the default and BM25 without long memories' windows (lucene.SEARCH_WINDOWS)")
    parser.add_argument("--rests", default="", help="comma-separated PASSAGE_MIN_REST values (models/embedder.py): "
                        "one more tenant each, beside the default")
    parser.add_argument("--windows", default="", help="comma-separated WIDTH/LIMIT dense passage windows: one more "
                        "tenant each, searched at the defaults beside the default")
    parser.add_argument("--every-word", action="store_true",
                        help="the default beside the best passage chosen by every query word, function words too "
                             "(passages.SKIP_FUNCTION_WORDS off, the rule before)")
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality"
                        / "scifact_passages.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    sets = {split: load_scifact(split=split) for split in splits}   # type: ignore[arg-type]
    test = sets[splits[0]]
    docs = list(test.docs)
    if args.docs:
        judged = {d for data in sets.values() for rels in data.qrels.values() for d in rels}
        rest = [d for d in docs if d.id not in judged]
        keep = judged | {d.id for d in random.Random(7).sample(rest, max(0, min(len(rest), args.docs - len(judged))))}
        docs = [d for d in docs if d.id in keep]
    long_docs = sum(len(d.text) > PASSAGE_CHARS for d in docs)
    items = [(d.id, pb.MemoryInput(content=d.text, type=pb.MEMORY_TYPE_SEMANTIC, source_ref=d.id)) for d in docs]
    default = passages.rerank_text
    margin = passages.PASSAGE_MARGIN
    discount = tiered.PASSAGE_DISCOUNT
    # (rerank text, margin, passage vectors searched, passage discount, BM25 reads long memories' windows)
    variants = {f"best passage (default, margin {margin})": (default, margin, True, discount, True),
                "best passage, main vector only (before passage vectors)": (default, margin, False, discount, True),
                "first tokens": (lambda _query, memory: memory_text(memory), margin, True, discount, True),
                **{f"best passage, margin {m}": (default, int(m), True, discount, True) for m in args.margins.split(",")
                   if m.strip() and int(m) != margin},
                **{f"best passage, passage discount {d}": (default, margin, True, float(d), True)
                   for d in args.discounts.split(",") if d.strip() and float(d) != discount}}
    if args.ce_windows:   # the default beside the cross-encoder reading windows of other sizes (passages.PASSAGE_WINDOW)
        variants = {f"best passage (default, margin {margin})": variants[f"best passage (default, margin {margin})"],
                    **{f"cross-encoder window {w}": (functools.partial(default, window=int(w)), margin, True, discount,
                                                     True) for w in args.ce_windows.split(",") if w.strip()}}
    if args.bm25_windows:   # the default beside BM25 without windows (server/lexical/windows.py) alone
        variants = {f"best passage (default, margin {margin})": variants[f"best passage (default, margin {margin})"],
                    "BM25 without windows": (default, margin, True, discount, False)}
    if args.every_word:   # the default beside the window chosen by every query word (passages.SKIP_FUNCTION_WORDS)
        variants = {f"best passage (default, margin {margin})": variants[f"best passage (default, margin {margin})"],
                    EVERY_WORD: variants[f"best passage (default, margin {margin})"]}
    sweep = [tuple(int(x) for x in pair.split("/")) for pair in args.windows.split(",") if pair.strip()]
    rests = [int(x) for x in args.rests.split(",") if x.strip()]
    if sweep or rests:   # the default beside other dense passage windows, each on its own tenant
        variants = {f"best passage (default, margin {margin})": variants[f"best passage (default, margin {margin})"]}
    results: dict[str, dict[str, list[dict]]] = {split: {name: [] for name in variants} for split in splits}
    with tempfile.TemporaryDirectory() as tmp, EvalServer(Path(tmp)) as server:
        tenant = server.ingest("scifact", items)
        registry = server._app.engine.registry   # type: ignore[union-attr]
        stage = server._app.engine.write_stage   # type: ignore[union-attr]
        shard = registry.shard("scifact")
        ingest = {"seconds": round(tenant.seconds, 1), "memories_per_s": round(len(items) / tenant.seconds, 2),
                  "passage_vectors": shard.dense.passage_vectors, "passage_tokens": stage.embedder.passage_tokens,
                  "passage_limit": stage.passages}
        others = {}
        for width, limit in sweep:
            saved = (stage.embedder.passage_tokens, stage.passages)
            stage.embedder.passage_tokens, stage.passages = width, limit
            try:
                others[f"{width}/{limit}"] = server.ingest(f"scifact-{width}-{limit}", items)
            finally:
                stage.embedder.passage_tokens, stage.passages = saved
            other = others[f"{width}/{limit}"]
            ingest[f"{width}/{limit}"] = {"seconds": round(other.seconds, 1),
                                          "memories_per_s": round(len(items) / other.seconds, 2),
                                          "passage_vectors": registry.shard(other.tenant).dense.passage_vectors}
        for min_rest in rests:
            saved_rest = stage.embedder.passage_min_rest
            stage.embedder.passage_min_rest = min_rest
            try:
                others[f"min rest {min_rest}"] = other = server.ingest(f"scifact-rest-{min_rest}", items)
            finally:
                stage.embedder.passage_min_rest = saved_rest
            ingest[f"min rest {min_rest}"] = {"seconds": round(other.seconds, 1),
                                               "memories_per_s": round(len(items) / other.seconds, 2),
                                               "passage_vectors": registry.shard(other.tenant).dense.passage_vectors}
        ingest["passage_min_rest"] = stage.embedder.passage_min_rest
        for split, data in sets.items():
            for name, other in others.items():
                t0 = time.perf_counter()
                run = server.search(other, data.queries, DEFAULTS, now_ms=FIXED_NOW_MS, top_k=100)
                scores = _scores(run, data.qrels, (10, 100))
                results[split][f"passage windows {name}"] = [{**scores,
                                                              "seconds": round(time.perf_counter() - t0, 1)}]
                log.info("%s passage windows %s: %s", split, name, scores)
            for r in range(args.rounds):
                order = list(variants) if r % 2 == 0 else list(reversed(variants))
                for name in order:
                    (passages.rerank_text, passages.PASSAGE_MARGIN, tiered.SEARCH_PASSAGES,
                     tiered.PASSAGE_DISCOUNT, lucene.SEARCH_WINDOWS) = variants[name]
                    passages.SKIP_FUNCTION_WORDS = name != EVERY_WORD
                    try:
                        t0 = time.perf_counter()
                        run = server.search(tenant, data.queries, DEFAULTS, now_ms=FIXED_NOW_MS, top_k=100)
                        seconds = time.perf_counter() - t0
                    finally:
                        passages.rerank_text, passages.PASSAGE_MARGIN = default, margin
                        tiered.SEARCH_PASSAGES, tiered.PASSAGE_DISCOUNT, lucene.SEARCH_WINDOWS = True, discount, True
                        passages.SKIP_FUNCTION_WORDS = True
                    scores = _scores(run, data.qrels, (10, 100))
                    results[split][name].append({**scores, "seconds": round(seconds, 1)})
                    log.info("%s %s round %d: %s", split, name, r, scores)
    out = {"date": time.strftime("%Y-%m-%d"), "machine": _cpu(), "cores": __import__("os").cpu_count(),
           "command": "python -m benchmarks.quality.scifact_passages --rounds %d --margins %s --splits %s --docs %d "
                      "--discounts %s%s" % (args.rounds, args.margins, args.splits, args.docs, args.discounts,
                                               " --bm25-windows" if args.bm25_windows else "")
                      + (" --every-word" if args.every_word else "")
                      + (f" --ce-windows {args.ce_windows}" if args.ce_windows else "")
                      + (f" --windows {args.windows}" if args.windows else "")
                      + (f" --rests {args.rests}" if args.rests else ""),
           "docs": len(docs), "docs_over_passage_chars": long_docs, "passage_chars": PASSAGE_CHARS, "ingest": ingest,
           "queries": {split: len(data.queries) for split, data in sets.items()},
           "variants": results["test"] if splits == ["test"] else results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
