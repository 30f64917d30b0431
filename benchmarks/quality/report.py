"""Results of a quality run: the JSON, a PNG chart and the README's markdown table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def markdown_table(results: dict[str, Any]) -> str:
    """One row per stage; columns: SciFact, LoCoMo (raw and contextualised text), the zh/en set."""
    sci = results.get("scifact", {}).get("stages", {})
    loc = results.get("locomo", {}).get("variants", {})
    zh = results.get("zh", {}).get("stages", {})
    stages = list(dict.fromkeys([*sci, *loc.get("raw", {}).get("stages", {}),
                                 *loc.get("contextualised", {}).get("stages", {}), *zh]))
    header = ("| stage | SciFact nDCG@10 | SciFact R@10 | SciFact R@100 | LoCoMo R@10 raw | LoCoMo R@10 ctx "
              "| LoCoMo nDCG@10 ctx | zh/en nDCG@10 | zh/en R@5 | zh queries nDCG@10 |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]

    def get(table: dict, stage: str, *path: str) -> float | None:
        node: Any = table.get(stage)
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    for stage in stages:
        raw = loc.get("raw", {}).get("stages", {})
        ctx = loc.get("contextualised", {}).get("stages", {})
        cells = [get(sci, stage, "ndcg@10"), get(sci, stage, "recall@10"), get(sci, stage, "recall@100"),
                 get(raw, stage, "all", "recall@10"), get(ctx, stage, "all", "recall@10"),
                 get(ctx, stage, "all", "ndcg@10"), get(zh, stage, "all", "ndcg@10"),
                 get(zh, stage, "all", "recall@5"), get(zh, stage, "zh", "ndcg@10")]
        lines.append(f"| {stage} | " + " | ".join(_cell(c) for c in cells) + " |")
    for name, value in SCIFACT_REFERENCES.items():
        lines.append(f"| *published: {name}* | {value:.3f} | | | | | | | | |")
    return "\n".join(lines) + "\n"


def locomo_category_table(results: dict[str, Any], variant: str = "contextualised") -> str:
    stages = results.get("locomo", {}).get("variants", {}).get(variant, {}).get("stages", {})
    lines = ["| stage | cat 1 multi-hop | cat 2 temporal | cat 3 open-domain | cat 4 single-hop | all |",
             "|---|---|---|---|---|---|"]
    for stage, scores in stages.items():
        cells = [scores.get(f"cat{c}", {}).get("recall@10") for c in (1, 2, 3, 4)] + [scores["all"]["recall@10"]]
        lines.append(f"| {stage} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


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
