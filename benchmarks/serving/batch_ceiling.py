"""What batching can buy on this CPU: the query embedder's forward pass per query at each batch size.

    .venv/bin/python -m benchmarks.serving.batch_ceiling [--seconds 2] [--rounds 3]

Both serving variants of ``make bench-serving`` are bound by the one device thread's forward passes at 32
clients without rerank (batched: a pass of ~16 queries; unbatched: one query a pass, the device thread busy
all the time): the batched / unbatched QPS ratio is then at most the forward pass's cost per query at batch 1
over its cost at batch 16. This measures that cost, on the thread's own CPU clock, for each embedder the
server ships (e5-small, the default, with its ``query: `` prefix; MiniLM), as the server runs them (traced,
packed tokens, the server's CPU dtype, one thread), on the serving benchmark's query texts, in alternating
rounds so machine load falls on every cell alike. Writes ``benchmarks/results/serving/batch_ceiling.{json,png}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.datasets import repo_root
from benchmarks.serving.corpus import query_texts

BATCHES = (1, 2, 4, 8, 16, 32)
SERVING_BATCH = 16   # the batched server's mean batch at 32 clients (two cohorts of 16: batching.split_above)


def _cpu_ms_per_text(fn: Any, texts: list[str], size: int, seconds: float) -> float:
    """Thread CPU milliseconds per text over ``seconds`` of calls on consecutive slices of ``texts``."""
    for at in range(0, 3 * size, size):   # warm this shape
        fn(texts[at:at + size])
    done, at, started = 0, 0, time.thread_time()
    while time.thread_time() - started < seconds:
        if at + size > len(texts):
            at = 0
        fn(texts[at:at + size])
        at += size
        done += size
    return (time.thread_time() - started) / done * 1000


def measure(*, seconds: float, rounds: int) -> dict[str, Any]:
    import torch

    from models.embedder import HFEmbedder
    from models.multilingual import E5Embedder
    from models.packaged import MINILM_NAME, minilm_path
    from models.threads import set_cpu_threads
    from server.app import CPU_SPEED

    set_cpu_threads(1)
    queries = query_texts(4000)
    embedders = {"multilingual-e5-small": E5Embedder.load(device="cpu", dtype="auto", **CPU_SPEED),
                 "all-MiniLM-L6-v2": HFEmbedder.load(minilm_path(), name=MINILM_NAME, device="cpu", dtype="auto",
                                                     **CPU_SPEED)}
    texts = {name: [model.query_prefix + q for q in queries] for name, model in embedders.items()}
    cells: dict[tuple[str, int], list[float]] = {}
    for _ in range(rounds):
        for size in BATCHES:
            for name, model in embedders.items():
                cells.setdefault((name, size), []).append(_cpu_ms_per_text(model.embed, texts[name], size, seconds))
    out: dict[str, Any] = {"threads": torch.get_num_threads(), "platform": platform.platform(),
                           "seconds_per_cell": seconds, "rounds": rounds, "models": {}}
    for name, model in embedders.items():
        tokens = [len(row) for row in model.tokenize(texts[name][:2000]).input_ids]
        per = {str(size): round(float(np.median(cells[(name, size)])), 3) for size in BATCHES}
        out["models"][name] = {
            "dtype": model.describe()["dtype"], "mean_tokens_per_query": round(float(np.mean(tokens)), 2),
            "ms_per_query": per, "all_rounds": {str(s): [round(v, 3) for v in cells[(name, s)]] for s in BATCHES},
            f"ceiling_batch1_over_batch{SERVING_BATCH}": round(per["1"] / per[str(SERVING_BATCH)], 2)}
    return out


def cpu_model() -> str:
    """The CPU's model name, family and model numbers, and whether it has AVX-512 / bfloat16 (Linux)."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return platform.processor()
    fields = dict(line.split(":", 1) for line in info.split("\n\n", 1)[0].splitlines() if ":" in line)
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    flags = set(fields.get("flags", "").split())
    return (f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')}, model {fields.get('model', '?')}; "
            f"avx512f {'avx512f' in flags}, avx512_bf16 {'avx512_bf16' in flags}, {os.cpu_count()} CPUs)")


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, row in result["models"].items():
        ys = [row["ms_per_query"][str(b)] for b in BATCHES]
        ceiling = row[f"ceiling_batch1_over_batch{SERVING_BATCH}"]
        ax.plot(BATCHES, ys, marker="o", label=f"{name} ({row['dtype']}): batch 1 / {SERVING_BATCH} = {ceiling}x")
    ax.set_xscale("log", base=2)
    ax.set_xticks(BATCHES, [str(b) for b in BATCHES])
    ax.set_xlabel("queries per forward pass")
    ax.set_ylabel("CPU ms per query (1 thread)")
    ax.set_title("Query embedding: what batching can buy (traced, packed)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--name", default="batch_ceiling", help="results file stem (one per machine kind: the CPU decides)")
    args = p.parse_args(argv)
    result = measure(seconds=args.seconds, rounds=args.rounds)
    out = repo_root() / "benchmarks" / "results" / "serving"
    out.mkdir(parents=True, exist_ok=True)
    result["cpu"] = cpu_model()
    (out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, out / f"{args.name}.png")
    print(json.dumps({k: {m: (r["ms_per_query"], r[f"ceiling_batch1_over_batch{SERVING_BATCH}"])
                          for m, r in v.items()} if k == "models" else v for k, v in result.items()}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
