"""Results of a quality run: the JSON, a PNG chart and the README's markdown table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.quality.block import block_table
from benchmarks.quality.sessions import SETS, sessions_table

# Published SciFact (BEIR test) nDCG@10, for comparison (see ../shared/data/README.md).
SCIFACT_REFERENCES = {
    "Lucene BM25 (flat, Anserini)": 0.679,
    "BM25 top-100 + MiniLM-L6 cross-encoder": 0.688,
    "dense + sparse RRF (a vector database's article)": 0.718,
}


def write_json(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _cell(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def _get(table: dict, stage: str, *path: str) -> float | None:
    node: Any = table.get(stage)
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


# The latency row (benchmarks/quality/latency.py) that times each quality stage: the same request shape.
LATENCY_OF = {"defaults": "defaults", "defaults (live)": "defaults", "hybrid+rerank": "defaults", "bm25": "bm25",
              "dense": "dense", "hybrid": "hybrid", "defaults + second round": "defaults + second round"}


def _latency(latency: dict[str, Any] | None, stage: str) -> str:
    row = (latency or {}).get("stages", {}).get(LATENCY_OF.get(stage, ""))
    return f"{row['p50_ms']:.0f} / {row['p95_ms']:.0f}" if row else "—"


def markdown_table(results: dict[str, Any], latency: dict[str, Any] | None = None) -> str:
    """One row per stage, the server's defaults first; columns: SciFact, LoCoMo ("<speaker>: <text>" turns and
    the same written with write_conversation), the zh/en set, the recency set, and the stage's search latency
    (p50 / p95 ms, 10k memories, one client: ``latency``, from benchmarks/quality/latency.py)."""
    sci = results.get("scifact", {}).get("stages", {})
    loc = results.get("locomo", {}).get("variants", {})
    zh = results.get("zh", {}).get("stages", {})
    rec = results.get("recency", {}).get("stages", {})
    said = loc.get("speaker", {}).get("stages", {})
    conv = loc.get("conversation", {}).get("stages", {})
    stages = list(dict.fromkeys([*sci, *said, *conv, *zh, *rec]))
    header = ("| stage | SciFact nDCG@10 | SciFact R@100 | LoCoMo R@10 | LoCoMo R@10 conversation "
              "| zh/en nDCG@10 | zh queries nDCG@10 | zh/en R@5 | recency R@1 | recency nDCG@10 | p50 / p95 ms |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for stage in stages:
        cells = [_get(sci, stage, "ndcg@10"), _get(sci, stage, "recall@100"), _get(said, stage, "all", "recall@10"),
                 _get(conv, stage, "all", "recall@10"), _get(zh, stage, "all", "ndcg@10"),
                 _get(zh, stage, "zh", "ndcg@10"), _get(zh, stage, "all", "recall@5"),
                 _get(rec, stage, "all", "recall@1"), _get(rec, stage, "all", "ndcg@10")]
        lines.append(f"| {stage} | " + " | ".join(_cell(c) for c in cells) + f" | {_latency(latency, stage)} |")
    for name, value in SCIFACT_REFERENCES.items():
        lines.append(f"| *published: {name}* | {value:.3f} | | | | | | | | | |")
    return "\n".join(lines) + "\n"


def locomo_category_table(results: dict[str, Any], variant: str = "speaker") -> str:
    variants = results.get("locomo", {}).get("variants", {})
    lines = ["| turns written as | stage | cat 1 multi-hop | cat 2 temporal | cat 3 open-domain | cat 4 single-hop | all |",
             "|---|---|---|---|---|---|---|"]
    for name, data in variants.items():
        for stage, scores in data.get("stages", {}).items():
            cells = [scores.get(f"cat{c}", {}).get("recall@10") for c in (1, 2, 3, 4)] + [scores["all"]["recall@10"]]
            lines.append(f"| {name} | {stage} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def updates_table(results: dict[str, Any]) -> str:
    """Recall@1 per stage on the knowledge-update set: "now", "before", "at first", each on the dev and held-out
    halves, and the links the writes made."""
    data = results.get("updates", {})
    groups = [f"{half} {kind}" for kind in ("now", "before", "first") for half in ("dev", "held_out")]
    lines = ["| stage | " + " | ".join(groups) + " | all |", "|---|" + "---|" * (len(groups) + 1)]
    for stage, scores in data.get("stages", {}).items():
        cells = [scores.get(g, {}).get("recall@1") for g in groups] + [scores.get("all", {}).get("recall@1")]
        lines.append(f"| {stage} | " + " | ".join(_cell(c) for c in cells) + " |")
    lines.append(f"\nUpdate links made by the writes: {data.get('links', 0)} "
                 f"(adjacent states in the set: {data.get('chains_links_expected', 0)}).")
    return "\n".join(lines) + "\n"


def write_table(results: dict[str, Any], out: Path) -> str:
    """``out/table.md`` from the results and, when present, ``out/latency.json``
    (``python -m benchmarks.quality.latency``); returns the text."""
    latency_file = out / "latency.json"
    latency = json.loads(latency_file.read_text(encoding="utf-8")) if latency_file.is_file() else None
    table = markdown_table(results, latency) + "\nLoCoMo recall@10 per category:\n\n" + locomo_category_table(results)
    if "updates" in results:   # the knowledge-update set (benchmarks/quality/make_updates.py)
        table += "\nKnowledge-update set recall@1 (dev: odd users, held out: even):\n\n" + updates_table(results)
    if "block" in results:   # benchmarks/quality/block.py
        table += "\nLoCoMo context-block evidence recall (SDK recall at its defaults):\n\n" + block_table(results)
    if any(name in results for name in SETS):   # benchmarks/quality/sessions.py
        table += "\nMulti-session and preference sets:\n\n" + sessions_table(results)
    (out / "table.md").write_text(table, encoding="utf-8")
    return table


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = []
    if "scifact" in results:
        panels.append(("SciFact nDCG@10", {s: v["ndcg@10"] for s, v in results["scifact"]["stages"].items()},
                       SCIFACT_REFERENCES))
    for variant, data in results.get("locomo", {}).get("variants", {}).items():
        panels.append((f"LoCoMo recall@10 ({variant})",
                       {s: v["all"]["recall@10"] for s, v in data["stages"].items()}, {}))
    if "zh" in results:
        panels.append(("zh/en memories nDCG@10", {s: v["all"]["ndcg@10"] for s, v in results["zh"]["stages"].items()},
                       {}))
    if "updates" in results:
        panels.append(("knowledge updates recall@1", {s: v["all"]["recall@1"] for s, v in
                                                      results["updates"]["stages"].items()}, {}))
    if "recency" in results:
        panels.append(("recency set recall@1", {s: v["all"]["recall@1"] for s, v in results["recency"]["stages"].items()},
                       {}))
    if not panels:
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), squeeze=False)
    for ax, (title, values, refs) in zip(axes[0], panels, strict=True):
        names = list(values)
        ax.bar(range(len(names)), [values[n] for n in names], color="#4c72b0")
        for i, n in enumerate(names):
            ax.text(i, values[n] + 0.01, f"{values[n]:.3f}", ha="center", fontsize=7)
        for j, (label, value) in enumerate(refs.items()):
            ax.axhline(value, linestyle="--", linewidth=0.8, color=f"C{j + 1}", label=f"{label} {value:.3f}")
        if refs:
            ax.legend(fontsize=6, loc="lower right")
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":   # python -m benchmarks.quality.report [DIR]: table.md again from results.json + latency.json
    import sys

    where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "results" / "quality"
    data = json.loads((where / "results.json").read_text(encoding="utf-8"))
    print(write_table({k: v for k, v in data.items() if k != "meta" and not (isinstance(v, dict) and "skipped" in v)},
                      where))
