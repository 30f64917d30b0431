"""Milliseconds per (query, memory) pair for each cross-encoder variant, at the batch shapes the server runs.

    .venv/bin/python -m benchmarks.rerank_cost.timing [--variants all] [--rounds 7] [--threads 1]

Every variant is loaded as the server loads it (:meth:`benchmarks.rerank_cost.variants.Variant.load`:
traced, packed tokens where supported, its dtype and pair length) and timed on one ``score`` call per
batch, tokenization included (the engine's rerank stage tokenizes and runs one forward pass over all the
pairs of a search batch). Shapes: one query with 20 (the default depth), 30, 50 or 100 candidates, and 8
queries x 30 candidates in one call. Two kinds of pairs: SciFact claims x abstracts (long: every pair fills
the 128 tokens) and LoCoMo questions x ``"<speaker>: <text>"`` turns (short conversational memories,
~45 tokens a pair). Each round draws fresh pairs, the same for every variant, and runs the variants in a
rotated order, so machine load (the box is shared) falls on all alike; a cell is the median over rounds of
ms/pair, and a ratio is the median over rounds of variant / reference on the same pairs. ``--threads``
defaults to 1, the torch threads the server sets on a 2-core box (half the cores).

The pair-score cache (``server/batching/pair_cache.py``) is timed the same way: a hit costs building the
keys and one lookup per pair, no model call.

Writes ``benchmarks/results/rerank_cost/timing.json``; ``--plot`` redraws ``rerank_cost.png`` from the
timing and quality JSON files.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.ingest.run import command_line, cpu_model
from benchmarks.quality.datasets import load_locomo, load_scifact
from benchmarks.rerank_cost.variants import REFERENCE, pick
from server.batching.pair_cache import PairScoreCache, pair_key

log = logging.getLogger("benchmarks.rerank_cost")

RESULTS = Path(__file__).resolve().parents[1] / "results" / "rerank_cost"
SHAPES = ((1, 20), (1, 30), (1, 50), (1, 100), (8, 30))   # (queries, candidates each) in one call


def pair_pools(seed: int = 11) -> dict[str, tuple[list[str], list[str]]]:
    """``{kind: (queries, passages)}``: SciFact train claims and abstracts; LoCoMo questions and turns."""
    scifact = load_scifact(split="train")
    conversations = load_locomo()
    rng = random.Random(seed)
    claims = [q.text for q in scifact.queries]
    abstracts = [d.text for d in scifact.docs]
    questions = [q.text for c in conversations for q in c.questions]
    turns = [f"{t.speaker}: {t.text}" for c in conversations for t in c.turns]
    for pool in (claims, abstracts, questions, turns):
        rng.shuffle(pool)
    return {"scifact": (claims, abstracts), "locomo": (questions, turns)}


def draw(pool: tuple[list[str], list[str]], shape: tuple[int, int], at: int) -> list[tuple[str, str]]:
    queries, passages = pool
    n_queries, per = shape
    return [(queries[(at + q) % len(queries)], passages[(at * 131 + q * per + i) % len(passages)])
            for q in range(n_queries) for i in range(per)]


def _ms_per_pair(fn: Any, pairs: list[tuple[str, str]]) -> float:
    t0 = time.perf_counter()
    fn(pairs)
    return (time.perf_counter() - t0) * 1000 / len(pairs)


def measure(*, variants: str, rounds: int, threads: int) -> dict[str, Any]:
    import torch

    from models.threads import set_cpu_threads

    set_cpu_threads(threads)
    chosen = pick(variants)
    models = {v.name: v.load() for v in chosen}
    described = {name: {k: m.describe()[k] for k in ("name", "dtype", "max_length", "traced", "unpadded")}
                 | {"layers": int(m._model.config.num_hidden_layers)} for name, m in models.items()}
    pools = pair_pools()
    cache = PairScoreCache(max_entries=1 << 20)

    def cached(pairs: list[tuple[str, str]]) -> None:
        cache.get_many([pair_key("t", q, p) for q, p in pairs])

    names = list(models)
    cells: dict[tuple[str, str, str], list[float]] = {}
    for model in models.values():   # warm-up: first calls allocate
        for kind, pool in pools.items():
            model.score(draw(pool, (1, 30), 0))
    started = time.perf_counter()
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for kind, pool in pools.items():
            for shape in SHAPES:
                pairs = draw(pool, shape, 1 + r * 17)
                shape_key = f"{shape[0]}x{shape[1]}"
                for name in order:
                    cells.setdefault((name, kind, shape_key), []).append(_ms_per_pair(models[name].score, pairs))
                cache.put_many([pair_key("t", q, p) for q, p in pairs], [0.0] * len(pairs))
                cells.setdefault(("pair-cache hit", kind, shape_key), []).append(_ms_per_pair(cached, pairs))
        log.info("round %d/%d done (%.0fs)", r + 1, rounds, time.perf_counter() - started)
    out: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": f"{cpu_model()}, {os.cpu_count()} cores",
        "command": command_line(),
        "threads": torch.get_num_threads(), "rounds": rounds, "platform": platform.platform(),
        "reference": REFERENCE if REFERENCE in models else names[0], "variants": described,
        "shapes": [f"{a}x{b}" for a, b in SHAPES], "ms_per_pair": {}, "ratio_to_reference": {},
        "mean_tokens_per_pair": {kind: round(float(np.mean(models[names[0]].count_tokens(draw(pool, (8, 30), 1)))), 1)
                                 for kind, pool in pools.items()},
    }
    reference = out["reference"]
    for (name, kind, shape_key), values in cells.items():
        out["ms_per_pair"].setdefault(name, {}).setdefault(kind, {})[shape_key] = round(float(np.median(values)), 4)
        ref = cells[(reference, kind, shape_key)]
        ratios = [v / b for v, b in zip(values, ref, strict=True)]
        out["ratio_to_reference"].setdefault(name, {}).setdefault(kind, {})[shape_key] = round(float(np.median(ratios)),
                                                                                               3)
    # A pair's logit alone vs among 210 other pairs in one call: bfloat16 and float32 differ by rounding only;
    # int8 quantizes activations with one scale per pass, so it scores each pair in a pass of its own (none there).
    out["batch_dependence"] = {}
    for kind, pool in pools.items():
        own, others = draw(pool, (1, 30), 5), draw(pool, (7, 30), 9)
        for name, model in models.items():
            alone = model.score(own)
            mixed = model.score(others[:105] + own + others[105:])[105:135]
            out["batch_dependence"].setdefault(name, {})[kind] = round(float(np.abs(alone - mixed).max()), 4)
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def plot(timing: dict[str, Any], quality: dict[str, Any] | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in timing["ms_per_pair"] if n != "pair-cache hit"]
    fig, axes = plt.subplots(1, 3 if quality else 2, figsize=(17 if quality else 12, 4.8))
    for ax, kind in zip(axes[:2], ("scifact", "locomo"), strict=True):
        shapes = timing["shapes"]
        x = np.arange(len(shapes))
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            ax.bar(x + i * width, [timing["ms_per_pair"][name][kind][s] for s in shapes], width, label=name,
                   color=f"C{i}")
        ax.set_xticks(x + 0.4 - width / 2, shapes)
        ax.set_xlabel("queries x candidates in one call")
        ax.set_ylabel("ms per pair (median)")
        ax.set_title(f"{kind} pairs (~{timing['mean_tokens_per_pair'][kind]:.0f} tokens), "
                     f"{timing['threads']} thread")
    axes[0].legend(fontsize=7)
    if quality:
        ax = axes[2]
        for name, row in quality["variants"].items():
            cost = timing["ms_per_pair"].get(name, {}).get("locomo", {}).get("1x20")
            if cost is None:
                continue
            ax.scatter(row["scifact_test"]["ndcg@10"], row["locomo_dev"]["all"]["recall@10"], s=20 + 8 * cost,
                       color=f"C{names.index(name)}")
            ax.annotate(f"{name}\n{cost:.1f} ms/pair", (row["scifact_test"]["ndcg@10"],
                                                        row["locomo_dev"]["all"]["recall@10"]), fontsize=7)
        if "rerank-off" in quality["variants"]:
            off = quality["variants"]["rerank-off"]
            ax.scatter(off["scifact_test"]["ndcg@10"], off["locomo_dev"]["all"]["recall@10"], marker="x", c="k")
            ax.annotate("rerank off", (off["scifact_test"]["ndcg@10"], off["locomo_dev"]["all"]["recall@10"]),
                        fontsize=7)
        ax.set_xlabel("SciFact test nDCG@10 (server defaults)")
        ax.set_ylabel("LoCoMo dev recall@10 (server defaults)")
        ax.set_title("quality (marker size: LoCoMo 1x20 ms/pair)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", default="all")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--plot", action="store_true", help="only redraw the PNG from the JSON files")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("models").setLevel(logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.plot:
        result = measure(variants=args.variants, rounds=args.rounds, threads=args.threads)
        (args.out / "timing.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(result["ratio_to_reference"], indent=2))
    timing = json.loads((args.out / "timing.json").read_text(encoding="utf-8"))
    quality_path = args.out / "quality.json"
    quality = json.loads(quality_path.read_text(encoding="utf-8")) if quality_path.is_file() else None
    plot(timing, quality, args.out / "rerank_cost.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
