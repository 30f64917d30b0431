"""What consolidation's rule folds among longer chat texts: runs of consecutive LoCoMo turns of one session joined
until they pass a size (no filler, no overlap: each turn in one text), each an EPISODIC memory dated by its session,
read by the server's embedder and the rule's pure part (``server.hygiene.consolidate``: ``candidates`` then
``find_clusters``), with and without ``MAX_CHARS``, beside the single turns.

    flock /tmp/engram-cpu.lock .venv/bin/python -m benchmarks.hygiene.long_consolidation

For each conversation and size: texts, clusters, members, and members that share under half of their words with
their cluster's representative (a default search returns the representative's text in their place). Dev
conversations only. Writes benchmarks/results/hygiene/long_consolidation.{json,png}.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.ingest.run import command_line, cpu_model
from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo, repo_root
from server.domain import Memory, MemoryStatus, MemoryType
from server.hygiene import consolidate

RESULTS = repo_root() / "benchmarks" / "results" / "hygiene"
SIZES = (0, 250, 450, 900)   # 0: single turns; else a run ends once it passes this many characters
_WORD = re.compile(r"\w+")


def runs(turns: Sequence[Any], size: int) -> list[tuple[str, int]]:
    """(text, created_at_ms) of each run: consecutive turns of one session, ``"<speaker>: <text>"`` joined by spaces,
    closed once past ``size`` characters (0: every turn alone)."""
    out: list[tuple[str, int]] = []
    cur: list[Any] = []

    def close() -> None:
        if cur:
            out.append((" ".join(f"{t.speaker}: {t.text}" for t in cur), cur[0].created_at * 1000))
            cur.clear()

    for t in turns:
        if cur and (t.session != cur[0].session or sum(len(x.text) + len(x.speaker) + 2 for x in cur) > size):
            close()
        cur.append(t)
    close()
    return out


def memory(i: int, text: str, created_ms: int) -> Memory:
    return Memory(memory_id=f"m{i}", doc_id=i, content=text, type=MemoryType.EPISODIC, importance=0.5,
                  created_at_ms=created_ms, last_access_at_ms=created_ms, access_count=0, entities=(), source_ref="",
                  scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(), superseded_by="",
                  pinned=False, expires_at_ms=0, metadata={}, source_refs=(), updated_at_ms=created_ms)


def folded(memories: list[Memory], vectors: np.ndarray) -> dict[str, int]:
    """The rule as the consolidator runs it (``candidates`` then ``find_clusters``) over ``memories``."""
    row = {m.memory_id: i for i, m in enumerate(memories)}
    kept = consolidate.candidates(memories)
    clusters = consolidate.find_clusters(kept, vectors[[row[m.memory_id] for m in kept]],
                                         cosine=consolidate.CONSOLIDATE_COSINE) if len(kept) > 1 else []
    words = {m.memory_id: set(_WORD.findall(m.content.casefold())) for m in memories}
    apart = 0
    for c in clusters:
        rep = words[c.representative.memory_id]
        apart += sum(1 for m in c.members if m is not c.representative
                     and len(words[m.memory_id] & rep) / len(words[m.memory_id] | rep) < 0.5)
    return {"clusters": len(clusters), "members": sum(len(c.members) for c in clusters),
            "members_sharing_under_half_their_words": apart}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--name", default="long_consolidation")
    args = parser.parse_args(argv)
    from server.app import load_embedder
    from server.config import load_config

    emb = load_embedder(load_config(env={}), "cpu")
    limit = consolidate.MAX_CHARS
    rows = []
    for conv in (c for c in load_locomo() if c.id in LOCOMO_DEV):
        for size in SIZES:
            texts = runs(conv.turns, size)
            memories = [memory(i, t, ms) for i, (t, ms) in enumerate(texts)]
            vectors = np.concatenate([emb.embed([emb.passage_prefix + t for t, _ in texts[i:i + 32]])
                                      for i in range(0, len(texts), 32)])
            row: dict[str, Any] = {"conversation": conv.id, "size": size, "texts": len(texts),
                                   "mean_chars": round(float(np.mean([len(t) for t, _ in texts]))),
                                   "over_limit": sum(len(t) > limit for t, _ in texts)}
            try:
                consolidate.MAX_CHARS = 10**9
                row["any_length"] = folded(memories, vectors)
            finally:
                consolidate.MAX_CHARS = limit
            row["with_limit"] = folded(memories, vectors)
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpu": cpu_model(), "cpus": os.cpu_count(),
           "command": command_line(),
           "name": args.name, "max_chars": limit, "cosine": consolidate.CONSOLIDATE_COSINE, "rows": rows}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(out, indent=1) + "\n")
    plot(out)
    return 0


def plot(out: dict[str, Any]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    labels, any_len, limited = [], [], []
    for size in SIZES:
        picked = [r for r in out["rows"] if r["size"] == size]
        chars = round(float(np.mean([r["mean_chars"] for r in picked])))
        labels.append("single turns" if size == 0 else f"runs past {size} (~{chars} chars)")
        any_len.append(sum(r["any_length"]["members"] for r in picked))
        limited.append(sum(r["with_limit"]["members"] for r in picked))
    x = np.arange(len(labels))
    ax.bar(x - 0.2, any_len, 0.4, label="any length (before)")
    ax.bar(x + 0.2, limited, 0.4, label=f"members at most {out['max_chars']} chars")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("memories folded (three dev conversations)")
    ax.set_title(f"consolidation (cosine >= {out['cosine']}) on LoCoMo turns and runs of them")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{out.get('name', 'long_consolidation')}.png", dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
