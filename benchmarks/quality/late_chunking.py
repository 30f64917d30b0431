"""Passage vectors of long chat turns by independent windows (the server's rule: 48-token model inputs, up to 16 a
turn) against the same windows pooled from token states ("late chunking": no extra forward pass for the spans inside
the main pass), on the dense side alone (each memory scored at its best vector; recall@10 of the evidence turns), on
the long-turn set of benchmarks/quality/long_turns.py. Measured to decide whether late chunking could replace the
windows' extra forward passes (they halve the ingest rate of ~1 KB turns: docs/benchmarks/ingest.md), and whether the
windows could replace the main pass of a long turn instead (``windows_mean_main``: the window at the body's start
added, the main vector the mean of all windows; ``long_texts_nearest_main_cosine`` compares what the near-duplicate
rule would read, each long text's highest cosine to another text's main vector).

    .venv/bin/python -m benchmarks.quality.late_chunking [--split dev|held_out] [--filler 500,100,400] [--strides 1.0]

Variants: ``main`` (the main vector alone), ``windows`` (the server's), ``late_main`` (the spans pooled from the main
pass over the first ``embed_max_length`` tokens; spans past it as independent windows), ``late_full`` (the spans
pooled from one pass over the whole turn, up to 512 tokens), ``windows_mean_main`` (above; ``--no-late`` skips the
late-chunking variants), ``sentences`` and ``sentences_mean_main`` (windows of at most 48 tokens that follow
sentence ends, no overlap; with the main pass, or the mean of those windows as the main vector); ``--real-texts N``
adds :func:`real_near_duplicates`; ``--strides`` adds the independent windows at other
strides (``windows_stride_X``, a share of the window; the server's is 0.5). Writes
benchmarks/results/quality/late_chunking*.json (``--name``: another name).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
import sys
from typing import Any

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo, repo_root
from benchmarks.quality.long_turns import FILLER_CHARS, inputs

WIDTH, LIMIT = 48, 16   # advanced.turn_passage_tokens, advanced.turn_passage_vectors
VARIANTS = ("main", "windows", "late_main", "late_full", "windows_mean_main", "sentences", "sentences_mean_main")
LATE = ("late_main", "late_full")


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


def conversation_vectors(emb: Any, texts: list[str], cost: dict[str, int], strides: tuple[float, ...] = (),
                         late: bool = True) -> dict[str, list[list[np.ndarray]]]:
    """Each variant's vectors of each text (the main vector first). ``late`` False: the late-chunking variants keep
    the main vector alone (their token states are not computed)."""
    from models.base import TokenBatch

    tok = emb.tokenize(texts)
    main = emb.forward(tok)
    cost["main"] += int(tok.lengths.sum())
    vecs: dict[str, list[list[np.ndarray]]] = {k: [[main[i]] for i in range(len(texts))]
                                                for k in (*VARIANTS, *(f"windows_stride_{x}" for x in strides))}
    long = [i for i, n in enumerate(tok.lengths) if n > emb.windows_from(WIDTH)]
    cost["main_long"] = cost.get("main_long", 0) + int(sum(tok.lengths[i] for i in long))
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
    cost["windows_mean_main"] += sum(len(w) for w in flat)
    heads = [ws[0] for ws in emb.passage_windows([texts[i] for i in long], limit=LIMIT, width=WIDTH, first=True)]
    head_vectors = emb.forward(TokenBatch(input_ids=tuple(heads), token_type_ids=tuple(np.zeros_like(h) for h in heads)))
    cost["windows_mean_main"] += sum(len(h) for h in heads)
    sents = sentence_windows(emb, [texts[i] for i in long])
    flat_s = [w for ws in sents for w in ws]
    sentence_vectors = iter(emb.forward(TokenBatch(input_ids=tuple(flat_s),
                                                   token_type_ids=tuple(np.zeros_like(w) for w in flat_s))))
    cost["sentences"] += sum(len(w) for w in flat_s)
    cost["sentences_mean_main"] += sum(len(w) for w in flat_s)
    for i, ws in zip(long, sents, strict=True):
        own = [next(sentence_vectors) for _ in ws]
        vecs["sentences"][i].extend(own)
        vecs["sentences_mean_main"][i] = [unit(np.mean(own, axis=0)), *own]
    if not late:
        for i, ws, head in zip(long, wins, head_vectors, strict=True):
            own = [head, *(next(window_vectors) for _ in ws)]
            vecs["windows"][i].extend(own[1:])
            vecs["windows_mean_main"][i] = [unit(np.mean(own, axis=0)), *own]
        return vecs
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
            vecs["windows_mean_main"][i].append(independent)
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
        vecs["windows_mean_main"][i][1:1] = [head_vectors[k]]
        vecs["windows_mean_main"][i][0] = unit(np.mean(vecs["windows_mean_main"][i][1:], axis=0))
    return vecs


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")


def sentence_windows(emb: Any, texts: list[str]) -> list[list[np.ndarray]]:
    """Windows of ``WIDTH`` tokens at most that follow sentences: each text's body (after the passage prefix) split
    after ``.!?`` and at line breaks, consecutive sentences packed while they fit, a longer sentence cut into
    ``WIDTH``-token pieces; no token is embedded twice (no overlap)."""
    prefix = emb.passage_prefix.strip()
    head = emb._encode_full([prefix])[0][1:-1] if prefix else []
    cls, sep = emb._encode_full(["x"])[0][0], emb._encode_full(["x"])[0][-1]
    room = WIDTH - 2 - len(head)
    out = []
    for text in texts:
        body = text[len(emb.passage_prefix):] if text.startswith(emb.passage_prefix) else text
        sentences = [x for x in _SENTENCE_END.split(body) if x.strip()]
        pieces: list[list[int]] = []
        for ids in (row[1:-1] for row in emb._encode_full(sentences)):
            pieces += [ids[k:k + room] for k in range(0, len(ids), room)]
        windows, current = [], []
        for ids in pieces:
            if current and len(current) + len(ids) > room:
                windows.append(current)
                current = []
            current = current + ids
        if current:
            windows.append(current)
        out.append([np.asarray([cls, *head, *w, sep], dtype=np.int64) for w in windows])
    return out


def near_pairs(mains: list[np.ndarray], long: set[int]) -> list[float]:
    """Each long text's highest cosine to any other text's main vector (what the near-duplicate rule reads)."""
    m = np.stack(mains)
    sims = m @ m.T
    np.fill_diagonal(sims, -1.0)
    return [float(sims[i].max()) for i in sorted(long)]


def real_near_duplicates(emb: Any, n: int, *, threshold: float = 0.985) -> dict[str, Any]:
    """What the near-duplicate rule (cosine >= ``threshold`` between main vectors) would read on ``n`` real ~1 KB chat
    texts (runs of consecutive LoCoMo turns, benchmarks.ingest.texts.long_turns, no filler): for the model's main
    pass and for the mean of the windows, the pairs at or above it and how many of them share under half / under 30 %
    of their words (distinct texts the rule would merge)."""
    from benchmarks.ingest.texts import long_turns
    from models.base import TokenBatch

    texts = long_turns(n, seed=5)
    prefixed = [emb.passage_prefix + t for t in texts]
    wins = emb.passage_windows(prefixed, limit=LIMIT, width=WIDTH, first=True)
    flat = [w for ws in wins for w in ws]
    window_vectors = iter(emb.forward(TokenBatch(input_ids=tuple(flat),
                                                 token_type_ids=tuple(np.zeros_like(w) for w in flat))))
    mains = {"main_pass": emb.forward(emb.tokenize(prefixed)),
             "windows_mean": np.stack([unit(np.mean([next(window_vectors) for _ in ws], axis=0)) for ws in wins])}
    words = [set(re.findall(r"\w+", t.casefold())) for t in texts]
    out: dict[str, Any] = {"texts": n, "threshold": threshold}
    for name, m in mains.items():
        sims = m @ m.T
        a, b = np.nonzero(np.triu(sims >= threshold, k=1))
        jaccard = np.array([len(words[i] & words[j]) / len(words[i] | words[j]) for i, j in zip(a, b, strict=True)])
        out[name] = {"pairs": len(a), "word_jaccard_below_0.5": int((jaccard < 0.5).sum()),
                     "word_jaccard_below_0.3": int((jaccard < 0.3).sum())}
    return out


def run(split: str, filler: tuple[int, int, int], strides: tuple[float, ...] = (), late: bool = True) -> dict[str, Any]:
    from server.app import load_embedder
    from server.config import load_config

    emb = load_embedder(load_config(env={}), "cpu")
    rng = random.Random(20260101)   # long_turns.py's seed: the same set
    names = (*(v for v in VARIANTS if late or v not in LATE), *(f"windows_stride_{x}" for x in strides))
    recalls: dict[str, list[float]] = {k: [] for k in names}
    cost = dict.fromkeys(names, 0)
    nearest: dict[str, list[float]] = {"windows": [], "windows_mean_main": [], "sentences_mean_main": []}
    for conv in [c for c in load_locomo() if (c.id in LOCOMO_DEV) == (split == "dev")]:
        items = inputs(conv, rng, {d for q in conv.questions for d in q.evidence}, filler)
        ids = [i for i, _ in items]
        vecs = conversation_vectors(emb, [emb.passage_prefix + m.content for _, m in items], cost, strides, late)
        long = {i for i, v in enumerate(vecs["windows"]) if len(v) > 1}
        for name in nearest:
            nearest[name] += near_pairs([v[0] for v in vecs[name]], long)
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
            "tokens_embedded_beyond_the_main_pass": {k: v for k, v in cost.items() if k != "main" and k in names},
            "tokens_of_the_main_pass": cost["main"],
            "tokens_of_the_main_pass_long_texts": cost.get("main_long", 0),
            "long_texts_nearest_main_cosine": {
                k: {"texts": len(v), "p50": round(float(np.median(v)), 4), "p99": round(float(np.quantile(v, 0.99)), 4),
                    "max": round(max(v), 4), "at_least_0.985": sum(x >= 0.985 for x in v),
                    "at_least_0.95": sum(x >= 0.95 for x in v)} for k, v in nearest.items() if v}}


def main(argv: list[str] | None = None) -> int:
    from benchmarks.ingest.run import cpu_model

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--split", choices=("dev", "held_out"), default="dev")
    p.add_argument("--filler", default=",".join(map(str, FILLER_CHARS)))
    p.add_argument("--strides", default="", help="comma-separated window strides (a share of the window) to add")
    p.add_argument("--real-texts", type=int, default=0, help="also the near-duplicate check on N real ~1 KB texts")
    p.add_argument("--no-late", action="store_true", help="skip the late-chunking variants' token states")
    p.add_argument("--name", default="", help="the result file's name (default late_chunking[_SPLIT])")
    args = p.parse_args(argv)
    filler = tuple(int(x) for x in args.filler.split(","))
    assert len(filler) == 3, "--filler BEFORE,AFTER_MIN,AFTER_MAX"
    strides = tuple(float(x) for x in args.strides.split(",") if x.strip())
    command = " ".join(argv if argv is not None else sys.argv[1:])
    out = {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), "machine": cpu_model(),
           "command": f"python -m benchmarks.quality.late_chunking {command}",
           **run(args.split, filler, strides, not args.no_late)}
    if args.real_texts:
        from server.app import load_embedder
        from server.config import load_config

        out["real_texts_near_duplicates"] = real_near_duplicates(load_embedder(load_config(env={}), "cpu"),
                                                                 args.real_texts)  # type: ignore[arg-type]
    print(json.dumps(out, indent=2))  # noqa: T201 (a benchmark's console output)
    name = args.name or ("late_chunking" if args.split == "dev" else f"late_chunking_{args.split}")
    (repo_root() / "benchmarks" / "results" / "quality" / f"{name}.json").write_text(
        json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
