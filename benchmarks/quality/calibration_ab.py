"""Relevance calibrations side by side: every quality suite at the server's defaults, one ingest, each fit in turn.

    .venv/bin/python -m benchmarks.quality.calibration_ab --fit shipped= --fit dev=/tmp/cal/dev.json \\
        [--suites scifact,zh,recency,updates,block] [--name calibration_ab]

One in-process server at its defaults. Each suite writes its memories once (a suite's second pass finds its tenant
written and searches it again), then searches with each fit in turn: the fit replaces the search pipeline's
calibration, and nothing else changes (the same index, the same candidates, the same cross-encoder logits). Every
search is "as of" a fixed time, so no pass reads the accesses an earlier one recorded, and the background
consolidation is off (``advanced.consolidate_interval_s`` 0): every ten minutes it folds a conversation's repeated
turns into semantic memories, so a pass that ran after it would search another index than the pass before.
``name=`` (an empty path) is the bundled ``server/fusion/calibration.json``. Writes
``benchmarks/results/quality/<name>.json`` and ``.png``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from benchmarks.ingest.run import cpu_model
from benchmarks.quality.datasets import repo_root
from benchmarks.quality.harness import EvalServer, Ingested
from server.fusion.calibration import BUNDLED_CALIBRATION, load_calibration

log = logging.getLogger("benchmarks.quality.calibration_ab")

SUITES = ("scifact", "zh", "recency", "updates", "block")


def _runner(name: str) -> Callable[[EvalServer], dict]:
    from benchmarks.quality import block, suites

    return {"scifact": suites.run_scifact, "zh": suites.run_chinese, "recency": suites.run_recency,
            "updates": suites.run_updates, "block": lambda s: block.run_block(s, ("defaults",))}[name]


def summary(suite: str, out: Mapping) -> dict[str, float]:
    """The figures the README and the targets quote, from one suite's output at the defaults."""
    if suite == "scifact":
        st = out["stages"]
        # Not the live stage: a fit's live searches record accesses, which the next fit's live searches read.
        return {"test ndcg@10": st["defaults"]["ndcg@10"], "test recall@10": st["defaults"]["recall@10"]}
    if suite == "zh":
        st = out["stages"]["defaults"]
        return {"ndcg@10": st["all"]["ndcg@10"], "zh ndcg@10": st["zh"]["ndcg@10"],
                "held-out half ndcg@10": st["held_out"]["ndcg@10"], "recall@5": st["all"]["recall@5"]}
    if suite == "recency":
        return {"recall@1": out["stages"]["defaults"]["all"]["recall@1"],
                "ndcg@10": out["stages"]["defaults"]["all"]["ndcg@10"],
                "held-out recall@1": out["held_out"]["stages"]["defaults"]["all"]["recall@1"]}
    if suite == "updates":
        st = out["stages"]["defaults"]
        return {f"{half}{kind} recall@1": st[f"{half}{kind}"]["recall@1"]
                for half in ("", "held_out ") for kind in ("now", "before", "first")}
    rows = out["variants"]["defaults"]
    return {f"{half} {k}": rows[half]["all"][k] for half in ("dev", "held_out") for k in ("recall@10", "recall@5",
                                                                                      "block_recall")}


def run(fits: Mapping[str, Path], suites: list[str]) -> dict:
    out: dict = {"fits": {name: _shown(path) for name, path in fits.items()}, "suites": {}}
    overrides = {"advanced": {"consolidate_interval_s": 0}}   # beside the harness's own settings
    with tempfile.TemporaryDirectory(prefix="engram-calab-") as tmp, \
            EvalServer(Path(tmp) / "data", overrides=overrides) as server:
        info = server.info()
        pipeline = server._app.engine.search_pipeline   # type: ignore[union-attr]  # the in-process server's
        calibrations = {name: load_calibration(path, embedder=info.embedder.name, reranker=info.reranker.name)
                        for name, path in fits.items()}
        written: dict[str, Ingested] = {}
        ingest = server.ingest

        def ingest_once(tenant: str, items):  # type: ignore[no-untyped-def]
            if tenant not in written:
                written[tenant] = ingest(tenant, items)
            return written[tenant]

        server.ingest = ingest_once   # type: ignore[method-assign]
        saved = pipeline.calibration
        try:
            for suite in suites:
                out["suites"][suite] = {}
                for name, calibration in calibrations.items():
                    pipeline.calibration = calibration
                    t0 = time.perf_counter()
                    result = _runner(suite)(server)
                    out["suites"][suite][name] = {"summary": summary(suite, result), "seconds": round(
                        time.perf_counter() - t0, 1), "full": result}
                    log.info("%s %s: %s", suite, name, out["suites"][suite][name]["summary"])
        finally:
            pipeline.calibration = saved
            server.ingest = ingest   # type: ignore[method-assign]
        out["embedder"], out["reranker"] = info.embedder.name, info.reranker.name
    return out


def _shown(path: Path) -> str:
    """A fit's file as a result names it: inside the repository by its relative path, else by its name alone."""
    root = repo_root()
    if path.resolve() == BUNDLED_CALIBRATION.resolve():
        return f"{BUNDLED_CALIBRATION.relative_to(root)} (bundled)"
    return str(path.resolve().relative_to(root)) if path.resolve().is_relative_to(root) else path.name


def table(out: Mapping) -> str:
    names = list(out["fits"])
    lines = ["| suite | figure | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for suite, by_fit in out["suites"].items():
        for key in by_fit[names[0]]["summary"]:
            lines.append(f"| {suite} | {key} | " + " | ".join(f"{by_fit[n]['summary'][key]:.4f}" for n in names) + " |")
    return "\n".join(lines)


def plot(out: Mapping, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(out["fits"])
    labels, values = [], {n: [] for n in names}
    for suite, by_fit in out["suites"].items():
        for key in by_fit[names[0]]["summary"]:
            labels.append(f"{suite}: {key}")
            for n in names:
                values[n].append(by_fit[n]["summary"][key])
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(labels) + 1.5))
    height = 0.8 / len(names)
    for i, n in enumerate(names):
        ax.barh([y + i * height for y in range(len(labels))], values[n], height=height, label=n)
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(labels))], labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_title(f"relevance calibrations at the defaults ({out['date']})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="append", required=True, help="name=path (an empty path: the bundled file)")
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--name", default="calibration_ab")
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for noisy in ("server", "models"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    fits = {}
    for spec in args.fit:
        name, _, path = spec.partition("=")
        fits[name] = Path(path) if path else BUNDLED_CALIBRATION
        if not fits[name].is_file():
            parser.error(f"--fit {spec}: no such file")
    suites = [s for s in args.suites.split(",") if s]
    unknown = set(suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites {sorted(unknown)}; choose from {SUITES}")
    out = run(fits, suites)
    out.update(date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               machine=f"{cpu_model()}, {os.cpu_count()} cores",
               command="python -m benchmarks.quality.calibration_ab " + " ".join(argv if argv is not None
                                                                                 else sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    plot(out, args.out / f"{args.name}.png")
    print(table(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
