"""Two trees' servers side by side: each tree (a checkout: ``git worktree add`` or ``git archive`` of a commit, with
the repository's .venv) runs its own ``engram serve``; one client writes turns (``--kind``: LoCoMo-sized short ones,
or ~1 KB long ones) in Writes of 128 to each in alternating rounds (order ABBA), and the embedder alone
(length-sorted chunks on every core, as the write stage runs them) is timed before and after each round, so the
machine's drift falls on all of them alike. A change of a few percent shows here where two separate
``benchmarks.ingest.run`` runs move by more than that between them.

The embedder alone embeds each text's first window (``embed``: what the target of 0.85x is set against) and, for
long turns, also the rows the server embeds: the first window and the passage windows of each text cut at it
(``embed_rows``, the write stage's own tokenization at this tree's ``advanced.passage_vectors``).

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.ingest.ab --before /tmp/t/before --after /tmp/t/after
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchmarks.serving.run as serving
from benchmarks.ingest.run import RESULTS, chunked_rate, client_for, command_line, cpu_model
from benchmarks.ingest.texts import long_turns, short_turns

BATCH = 128
WARM = 512


def run(trees: dict[str, Path], *, rounds: int, per_round: int, kind: str = "short") -> dict[str, Any]:
    from server.app import load_embedder
    from server.config import load_config

    warm = WARM if kind == "short" else BATCH
    texts = (short_turns if kind == "short" else long_turns)(warm + per_round * rounds)
    servers: dict[str, serving.ServerProcess] = {}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="engram-ab-") as tmp:
        work = Path(tmp)
        try:
            for name, root in trees.items():
                serving.ROOT = root   # the child runs `engram serve` from its own tree
                empty = work / f"empty-{name}"
                empty.mkdir()
                servers[name] = serving.ServerProcess(empty, batching=True, workdir=work, name=name,
                                                      env={"ENGRAM_MODELS__DEVICE": "cpu"})
            for server in servers.values():
                server.wait_ready()
            config = load_config(env={**os.environ, "ENGRAM_MODELS__DEVICE": "cpu"})
            model = load_embedder(config, "cpu")
            passages = config.models.passage_vectors if kind == "long" else 0
            model.warmup()
            clients = {name: client_for(server) for name, server in servers.items()}
            for client in clients.values():
                client.create_tenant("warm")
                client.create_tenant("ab")
                for i in range(0, warm, BATCH):
                    client.write("warm", [{"content": t, "type": "semantic"} for t in texts[i:i + BATCH]])

            def embed(part: list[str], rows: int = 0) -> float:
                return round(chunked_rate(model, [model.passage_prefix + t for t in part], batch=BATCH, lanes=2,
                                          passages=rows), 2)

            embed(texts[:2 * BATCH])
            names = list(trees)
            for r in range(rounds):
                part = texts[warm + r * per_round:warm + (r + 1) * per_round]
                order = names if r % 2 == 0 else names[::-1]
                row: dict[str, Any] = {"round": r, "order": order, "embed": embed(part)}
                if passages:
                    row["embed_rows"] = embed(part, passages)
                for name in order:
                    t0 = time.perf_counter()
                    for i in range(0, per_round, BATCH):
                        clients[name].write("ab", [{"content": t, "type": "semantic"} for t in part[i:i + BATCH]])
                    row[name] = round(per_round / (time.perf_counter() - t0), 2)
                row["embed2"] = embed(part)
                if passages:
                    row["embed_rows2"] = embed(part, passages)
                print(json.dumps(row), flush=True)
                rows.append(row)
            for client in clients.values():
                client.close()
        finally:
            for server in servers.values():
                server.stop()
    out: dict[str, Any] = {"machine": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "command": command_line(), "kind": kind, "passage_vectors": passages,
                           "trees": {k: str(v) for k, v in trees.items()}, "rounds": rows}
    embed_s = sum(per_round / row[k] for row in rows for k in ("embed", "embed2")) / 2
    out["embed_chunked_rate"] = round(per_round * len(rows) / embed_s, 2)
    if passages:
        rows_s = sum(per_round / row[k] for row in rows for k in ("embed_rows", "embed_rows2")) / 2
        out["embed_rows_rate"] = round(per_round * len(rows) / rows_s, 2)
    for name in trees:   # memories over seconds, all rounds together
        out[f"{name}_rate"] = round(per_round * len(rows) / sum(per_round / row[name] for row in rows), 2)
        out[f"ratio_{name}"] = round(out[f"{name}_rate"] / out["embed_chunked_rate"], 3)
        if passages:
            out[f"ratio_rows_{name}"] = round(out[f"{name}_rate"] / out["embed_rows_rate"], 3)
    a, *others = list(trees)
    for b in others:
        out[f"{b}_over_{a}"] = round(out[f"{b}_rate"] / out[f"{a}_rate"], 3)
        out[f"{b}_over_{a}_median_round"] = round(statistics.median(row[b] / row[a] for row in rows), 3)
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rounds"]
    x = [row["round"] for row in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(x, [(row["embed"] + row["embed2"]) / 2 for row in rows], "k--", label="embedder alone, first windows")
    if "embed_rows_rate" in result:
        ax.plot(x, [(row["embed_rows"] + row["embed_rows2"]) / 2 for row in rows], "k:",
                label="embedder alone, the server's rows (first + passage windows)")
    for name in result["trees"]:
        rows_ratio = f" ({result[f'ratio_rows_{name}']}x of its rows)" if f"ratio_rows_{name}" in result else ""
        ax.plot(x, [row[name] for row in rows], "o-",
                label=f"server {name}: {result[f'{name}_rate']}/s, {result[f'ratio_{name}']}x{rows_ratio}")
    ax.set_xlabel(f"round (Writes of 128 {result.get('kind', 'short')} turns; order ABBA)")
    ax.set_ylabel("memories / s")
    ax.legend()
    ax.set_title(f"ingest A/B: {result['machine']}, {result['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, required=True)
    p.add_argument("--after", type=Path, required=True)
    p.add_argument("--also", action="append", default=[], metavar="NAME=TREE",
                   help="a further tree between the two (each compared with --before), e.g. a first step of a change")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--per-round", type=int, default=256, help="memories a server takes each round")
    p.add_argument("--kind", choices=("short", "long"), default="short",
                   help="LoCoMo-sized turns, or ~1 KB turns (the server also embeds their passage windows)")
    p.add_argument("--name", default="")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    also = {name: Path(tree).resolve() for name, tree in (a.split("=", 1) for a in args.also)}
    result = run({"before": args.before.resolve(), **also, "after": args.after.resolve()}, rounds=args.rounds,
                 per_round=args.per_round, kind=args.kind)
    args.name = args.name or f"ab_{args.kind}"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, args.out / f"{args.name}.png")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
