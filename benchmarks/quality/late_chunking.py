"""Passage vectors of long chat turns by independent windows (the server's rule: 48-token model inputs, up to 16 a
turn) against the same windows pooled from token states ("late chunking": no extra forward pass for the spans inside
the main pass), on the dense side alone (each memory scored at its best vector; recall@10 of the evidence turns), on
the long-turn set of benchmarks/quality/long_turns.py. Measured to decide whether late chunking could replace the
windows' extra forward passes (they halve the ingest rate of ~1 KB turns: docs/benchmarks/ingest.md).

    .venv/bin/python -m benchmarks.quality.late_chunking [--split dev|held_out] [--filler 500,100,400] [--strides 1.0]

Variants: ``main`` (the main vector alone), ``windows`` (the server's), ``late_main`` (the spans pooled from the main
pass over the first ``embed_max_length`` tokens; spans past it as independent windows), ``late_full`` (the spans
pooled from one pass over the whole turn, up to 512 tokens); ``--strides`` adds the independent windows at other
strides (``windows_stride_X``, a share of the window; the server's is 0.5). Writes
benchmarks/results/quality/late_chunking*.json (``--name``: another name).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sys
from typing import Any

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo, repo_root
from benchmarks.quality.long_turns import FILLER_CHARS, inputs

WIDTH, LIMIT = 48, 16   # advanced.turn_passage_tokens, advanced.turn_passage_vectors
VARIANTS = ("main", "windows", "late_main", "late_full")


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def token_states(emb: Any, rows: list[np.ndarray]) -> list[np.ndarray]:
    """The last layer's states of each row's tokens (one forward pass a row, untraced)."""
    import torch

    from models.base import TokenBatch

    batch = TokenBatch(input_ids=tuple(rows), token_type_ids=tuple(np.zeros_like(r) for r in rows))
    with torch.inference_mode():
        return [emb._model(**emb._pad(batch, np.array([i])))[0][0].float().numpy() for i in range(len(rows))]


def stride_vectors(emb: Any, texts: list[str], long: list[int], stride: float) -> tuple[list[list[np.ndarray]], int]:
    """The independent windows again with another stride (``models.embedder.PASSAGE_STRIDE``, a share of the
    window): each long text's window vectors, and the tokens embedded."""
    import models.embedder as embedder_module
    from models.base import TokenBatch

    default = embedder_module.PASSAGE_STRIDE
    embedder_module.PASSAGE_STRIDE = stride
    try:
        wins = emb.passage_windows([texts[i] for i in long], limit=LIMIT, width=WIDTH)
    finally:
        embedder_module.PASSAGE_STRIDE = default
    flat = [w for ws in wins for w in ws]
    vectors = iter(emb.forward(TokenBatch(input_ids=tuple(flat), token_type_ids=tuple(np.zeros_like(w) for w in flat)))
                   if flat else [])
    return [[next(vectors) for _ in ws] for ws in wins], sum(len(w) for w in flat)


def conversation_vectors(emb: Any, texts: list[str], cost: dict[str, int],
                         strides: tuple[float, ...] = ()) -> dict[str, list[list[np.ndarray]]]:
    """Each variant's vectors of each text (the main vector first)."""
    from models.base import TokenBatch

    tok = emb.tokenize(texts)
    main = emb.forward(tok)
    cost["main"] += int(tok.lengths.sum())
    vecs: dict[str, list[list[np.ndarray]]] = {k: [[main[i]] for i in range(len(texts))]
                                                for k in (*VARIANTS, *(f"windows_stride_{x}" for x in strides))}
    long = [i for i, n in enumerate(tok.lengths) if n > emb.windows_from(WIDTH)]
    for x in strides:
        name = f"windows_stride_{x}"
        windows, tokens = stride_vectors(emb, texts, long, x)
        cost[name] = cost.get(name, 0) + tokens
        for i, ws in zip(long, windows, strict=True):
            vecs[name][i].extend(ws)
    wins = emb.passage_windows([texts[i] for i in long], limit=LIMIT, width=WIDTH)
    flat = [w for ws in wins for w in ws]
    if not flat:
        return vecs
    window_vectors = iter(emb.forward(TokenBatch(input_ids=tuple(flat),
                                                 token_type_ids=tuple(np.zeros_like(w) for w in flat))))
    cost["windows"] += sum(len(w) for w in flat)
    full_rows = emb._encode_full([texts[i] for i in long])
    keep = len(emb._encode_full([emb.passage_prefix.strip()])[0]) - 2 if emb.passage_prefix.strip() else 0
    main_states = token_states(emb, [tok.input_ids[i] for i in long])
    full = [np.asarray(r[:511] + r[-1:], dtype=np.int64) for r in full_rows]
    full_states = token_states(emb, full)
    cost["late_full"] += sum(len(f) for f in full)
    for k, (i, ws, row) in enumerate(zip(long, wins, full_rows, strict=True)):
        body = np.asarray(row[1 + keep:-1])
        for w in ws:
            independent = next(window_vectors)
            vecs["windows"][i].append(independent)
            span = w[1 + keep:-1]   # the window's body tokens, found in the whole text
            s = next(s for s in range(len(body) - len(span) + 1) if np.array_equal(body[s:s + len(span)], span))
            a, b = 1 + keep + s, 1 + keep + s + len(span)
            if b <= len(main_states[k]) - 1:
                vecs["late_main"][i].append(unit(main_states[k][a:b].mean(0)))
            else:   # past the main pass: an independent window
                vecs["late_main"][i].append(independent)
                cost["late_main"] += len(w)
            if b <= len(full_states[k]) - 1:
                vecs["late_full"][i].append(unit(full_states[k][a:b].mean(0)))
    return vecs


def run(split: str, filler: tuple[int, int, int], strides: tuple[float, ...] = ()) -> dict[str, Any]:
    from server.app import load_embedder
    from server.config import load_config

    emb = load_embedder(load_config(env={}), "cpu")
    rng = random.Random(20260101)   # long_turns.py's seed: the same set
    names = (*VARIANTS, *(f"windows_stride_{x}" for x in strides))
    recalls: dict[str, list[float]] = {k: [] for k in names}
    cost = dict.fromkeys(names, 0)
    for conv in [c for c in load_locomo() if (c.id in LOCOMO_DEV) == (split == "dev")]:
        items = inputs(conv, rng, {d for q in conv.questions for d in q.evidence}, filler)
        ids = [i for i, _ in items]
        vecs = conversation_vectors(emb, [emb.passage_prefix + m.content for _, m in items], cost, strides)
        questions = [q for q in conv.questions if q.evidence]
        qv = emb.embed([emb.query_prefix + q.text for q in questions])
        for name in names:
            mats = [np.stack(v) for v in vecs[name]]
            owner = np.concatenate([[i] * len(m) for i, m in enumerate(mats)])
            sims = qv @ np.concatenate(mats).T
            for q, s in zip(questions, sims, strict=True):
                best = np.full(len(ids), -9.0)
                np.maximum.at(best, owner, s)
                top = {ids[i] for i in np.argsort(-best)[:10]}
                recalls[name].append(len(set(q.evidence) & top) / len(q.evidence))
    return {"split": split, "filler_chars": list(filler), "questions": len(recalls["main"]), "window_tokens": WIDTH,
            "windows_at_most": LIMIT, "recall_at_10": {k: round(float(np.mean(v)), 4) for k, v in recalls.items()},
            "tokens_embedded_beyond_the_main_pass": {k: v for k, v in cost.items() if k != "main"},
            "tokens_of_the_main_pass": cost["main"]}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=("dev", "held_out"), default="dev")
    p.add_argument("--filler", default=",".join(map(str, FILLER_CHARS)))
    p.add_argument("--strides", default="", help="comma-separated window strides (a share of the window) to add")
    p.add_argument("--name", default="", help="the result file's name (default late_chunking[_SPLIT])")
    args = p.parse_args(argv)
    filler = tuple(int(x) for x in args.filler.split(","))
    assert len(filler) == 3, "--filler BEFORE,AFTER_MIN,AFTER_MAX"
    strides = tuple(float(x) for x in args.strides.split(",") if x.strip())
    command = " ".join(argv if argv is not None else sys.argv[1:])
    out = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": cpu_model(),
           "command": f"python -m benchmarks.quality.late_chunking {command}",
           **run(args.split, filler, strides)}  # type: ignore[arg-type]
    print(json.dumps(out, indent=2))  # noqa: T201 (a benchmark's console output)
    name = args.name or ("late_chunking" if args.split == "dev" else f"late_chunking_{args.split}")
    (repo_root() / "benchmarks" / "results" / "quality" / f"{name}.json").write_text(
        json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
