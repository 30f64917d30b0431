"""Two trees' servers side by side: each tree (a checkout: ``git worktree add`` or ``git archive`` of a commit, with
the repository's .venv) runs its own ``engram serve``; one client writes short turns in Writes of 128 to each in
alternating rounds (order ABBA), and the embedder alone (length-sorted chunks on every core, as the write stage
runs them) is timed before and after each round, so the machine's drift falls on all three alike. A change of a
few percent shows here where two separate ``benchmarks.ingest.run`` runs move by more than that between them.

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
from benchmarks.ingest.run import RESULTS, chunked_rate, client_for, cpu_model
from benchmarks.ingest.texts import short_turns

BATCH = 128
WARM = 512


def run(trees: dict[str, Path], *, rounds: int, per_round: int) -> dict[str, Any]:
    from server.app import load_embedder
    from server.config import load_config

    texts = short_turns(WARM + per_round * rounds)
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
            model = load_embedder(load_config(env={**os.environ, "ENGRAM_MODELS__DEVICE": "cpu"}), "cpu")
            model.warmup()
            clients = {name: client_for(server) for name, server in servers.items()}
            for client in clients.values():
                client.create_tenant("warm")
                client.create_tenant("ab")
                for i in range(0, WARM, BATCH):
                    client.write("warm", [{"content": t, "type": "semantic"} for t in texts[i:i + BATCH]])

            def embed(part: list[str]) -> float:
                return round(chunked_rate(model, [model.passage_prefix + t for t in part], batch=BATCH, lanes=2), 2)

            embed(texts[:2 * BATCH])
            names = list(trees)
            for r in range(rounds):
                part = texts[WARM + r * per_round:WARM + (r + 1) * per_round]
                order = names if r % 2 == 0 else names[::-1]
                row: dict[str, Any] = {"round": r, "order": order, "embed": embed(part)}
                for name in order:
                    t0 = time.perf_counter()
                    for i in range(0, per_round, BATCH):
                        clients[name].write("ab", [{"content": t, "type": "semantic"} for t in part[i:i + BATCH]])
                    row[name] = round(per_round / (time.perf_counter() - t0), 2)
                row["embed2"] = embed(part)
                print(json.dumps(row), flush=True)
                rows.append(row)
            for client in clients.values():
                client.close()
        finally:
            for server in servers.values():
                server.stop()
    out: dict[str, Any] = {"machine": cpu_model(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "command": " ".join(sys.argv), "trees": {k: str(v) for k, v in trees.items()}, "rounds": rows}
    embed_s = sum(per_round / row[k] for row in rows for k in ("embed", "embed2")) / 2
    out["embed_chunked_rate"] = round(per_round * len(rows) / embed_s, 2)
    for name in trees:   # memories over seconds, all rounds together
        out[f"{name}_rate"] = round(per_round * len(rows) / sum(per_round / row[name] for row in rows), 2)
        out[f"ratio_{name}"] = round(out[f"{name}_rate"] / out["embed_chunked_rate"], 3)
    a, b = list(trees)
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
    ax.plot(x, [(row["embed"] + row["embed2"]) / 2 for row in rows], "k--", label="embedder alone (chunked)")
    for name in result["trees"]:
        ax.plot(x, [row[name] for row in rows], "o-",
                label=f"server {name}: {result[f'{name}_rate']}/s, {result[f'ratio_{name}']}x")
    ax.set_xlabel("round (Writes of 128 short turns; order ABBA)")
    ax.set_ylabel("memories / s")
    ax.legend()
    ax.set_title(f"ingest A/B: {result['machine']}, {result['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, required=True)
    p.add_argument("--after", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--per-round", type=int, default=256, help="memories a server takes each round")
    p.add_argument("--name", default="ab_short")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    result = run({"before": args.before.resolve(), "after": args.after.resolve()}, rounds=args.rounds,
                 per_round=args.per_round)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    plot(result, args.out / f"{args.name}.png")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
