"""A PNG of a GPU run (benchmarks/gpu/run.sh) beside an earlier one: the device stages of one search batch per
batch size, and the embedder alone per kind of text, each from the JSON the run wrote.

    python -m benchmarks.gpu.report --run benchmarks/results/gpu --before benchmarks/results/gpu/micro-batch-64 \
        --before-label "micro-batches of 64 / 32" --out benchmarks/results/gpu/gpu.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def load(folder: Path) -> dict[str, Any]:
    names = ("device_stages_cuda", "ingest-gpu", "ingest-gpu-e5")
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in names if (folder / f"{name}.json").is_file()}


def plot(run: dict[str, Any], before: dict[str, Any], *, labels: tuple[str, str], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for data, label, style in ((before, labels[0], "--"), (run, labels[1], "-")):
        rows = data.get("device_stages_cuda", {}).get("rows", [])
        if rows:
            ax1.plot([r["batch"] for r in rows], [r["queries_per_s"] for r in rows], style, marker="o", label=label)
    ax1.set(xscale="log", xlabel="queries in one batch", ylabel="queries/s (embed + flat search + rerank 100 + decay)",
            title="device stages of a search batch, H200")
    ax1.legend()
    bars = [(f"{model} {kind}", data["embed"][kind]["best"])
            for data_label, data_all in ((labels[0], before), (labels[1], run))
            for model, name in (("MiniLM-shaped", "ingest-gpu"), ("e5-small-shaped", "ingest-gpu-e5"))
            if (data := data_all.get(name)) for kind in ("short", "long") if kind in data["embed"]]
    half = len(bars) // 2
    x = range(half)
    ax2.bar([i - 0.2 for i in x], [v for _, v in bars[:half]], 0.4, label=labels[0])
    ax2.bar([i + 0.2 for i in x], [v for _, v in bars[half:]], 0.4, label=labels[1])
    ax2.axhline(20000, color="grey", linestyle=":", label="target: 20k short memories/s")
    ax2.set_xticks(list(x), [name for name, _ in bars[:half]], rotation=15)
    ax2.set(ylabel="texts/s, embedder alone (best pass)", title="embedding for ingest, Writes of 128, H200")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True)
    p.add_argument("--before", type=Path, required=True)
    p.add_argument("--before-label", default="before")
    p.add_argument("--label", default="micro-batches of 512 (the CUDA default)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    plot(load(args.run), load(args.before), labels=(args.before_label, args.label), out=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
