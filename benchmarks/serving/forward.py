"""Padded vs unpadded (packed-token) forward passes, side by side, one CPU thread.

    .venv/bin/python -m benchmarks.serving.forward [--seconds 2] [--reranker PATH]

Embeds the serving benchmark's query texts (``benchmarks.serving.corpus``) in batches of 1, 4, 12 and 32
with the packaged MiniLM, traced, in the server's dtype, once padding each batch to its longest text and
once on packed tokens (``models.unpad``); with a cross-encoder (``--reranker``, default the bundled one
when present) scores 20 (query, memory) pairs per call the same two ways. Variants alternate in rounds
so machine load falls on both alike. Writes ``benchmarks/results/serving/forward_unpad.{json,png}``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.datasets import repo_root
from benchmarks.serving.corpus import memories, query_texts, sentence_pool

BATCHES = (1, 4, 12, 32)
RERANK_PAIRS = 20


def _rate(fn: Any, items: list[Any], size: int, seconds: float) -> float:
    """Milliseconds per item over ``seconds`` of calls on consecutive slices of ``items``."""
    done, at, started = 0, 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        if at + size > len(items):
            at = 0
        fn(items[at:at + size])
        at += size
        done += size
    return (time.perf_counter() - started) / done * 1000


def measure(*, seconds: float, rounds: int, reranker: str) -> dict[str, Any]:
    import torch

    from models.embedder import HFEmbedder
    from models.packaged import MINILM_NAME, minilm_path
    from models.reranker import HFCrossEncoder
    from models.threads import set_cpu_threads

    set_cpu_threads(1)
    queries = query_texts(4000)
    embedders = {name: HFEmbedder.load(minilm_path(), name=MINILM_NAME, trace=True, unpad=unpad)
                 for name, unpad in (("padded", False), ("unpadded", True))}
    out: dict[str, Any] = {"threads": torch.get_num_threads(), "dtype": embedders["padded"].describe()["dtype"],
                           "platform": platform.platform(), "seconds_per_cell": seconds, "rounds": rounds,
                           "embed_ms_per_text": {}}
    cells: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):
        for size in BATCHES:
            for name, model in embedders.items():
                cells.setdefault((name, size), []).append(_rate(model.embed, queries, size, seconds))
    for (name, size), values in cells.items():
        out["embed_ms_per_text"].setdefault(name, {})[str(size)] = round(float(np.median(values)), 3)
    if reranker:
        texts = [text for text, _ in memories(2000, sentence_pool(6000), seed=5)]  # 10-60 words, as served
        pairs = [(queries[i % len(queries)], text) for i, text in enumerate(texts)]
        rerankers = {name: HFCrossEncoder.load(reranker, trace=True, max_length=256, unpad=unpad)
                     for name, unpad in (("padded", False), ("unpadded", True))}
        per: dict[str, list[float]] = {}
        for _ in range(rounds):
            for name, model in rerankers.items():
                per.setdefault(name, []).append(_rate(model.score, pairs, RERANK_PAIRS, seconds))
        out["rerank"] = {"model": rerankers["padded"].name, "path": reranker, "pairs_per_call": RERANK_PAIRS,
                         "ms_per_pair": {k: round(float(np.median(v)), 3) for k, v in per.items()}}
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.38
    xs = np.arange(len(BATCHES))
    for i, name in enumerate(("padded", "unpadded")):
        values = [result["embed_ms_per_text"][name][str(b)] for b in BATCHES]
        ax.bar(xs + (i - 0.5) * width, values, width, label=name)
    ax.set_xticks(xs, [str(b) for b in BATCHES])
    ax.set_xlabel("texts per forward pass")
    ax.set_ylabel("ms per text (1 thread)")
    ax.set_title(f"MiniLM query embedding, {result['dtype']}, traced")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from server.config import bundled_reranker

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--reranker", default=None, help="cross-encoder folder ('' = none; default: the bundled one)")
    args = p.parse_args(argv)
    reranker = bundled_reranker() if args.reranker is None else args.reranker
    result = measure(seconds=args.seconds, rounds=args.rounds, reranker=reranker)
    out = repo_root() / "benchmarks" / "results" / "serving"
    out.mkdir(parents=True, exist_ok=True)
    (out / "forward_unpad.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, out / "forward_unpad.png")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
