"""Offline, dev sets only: does the cross-encoder's reading of two statements tell a changed attribute from two
statements that are both true?

    .venv/bin/python -m benchmarks.quality.link_probe [--sets recency,recency_dev2,recency_dev3]

The write-time update links (server/engine/updates.py) are word and subject rules; on the dev sets they link most of
the labelled changes and on a held-out set written after them under half (docs/concepts/updates.md). A model's
evidence would have to separate the two kinds of pair a write sees among a new statement's nearest older ones: a
changed value ("My alarm is set for 6:30" → "I set my alarm to 7:15 since the new shift") and two statements that
are both true ("Played Catan with the neighbours" → "Played Ticket to Ride with the neighbours").

One in-process server at its defaults writes each dev recency set; for every memory, its ``--neighbours`` nearest
older memories by the embedder's cosine make the pairs, labelled a change where a query of the set names the older
one stale and the newer one current. Features: the cosine, the bundled cross-encoder's logit with the older text as
the query and with the newer as the query, and its last layer's first-token state both ways (2 × 384). An L2
logistic probe (torch LBFGS, features standardised on the training folds) is trained on all sets but one and
scores the one left out; per feature set: the ROC AUC of the pooled out-of-fold scores and of each fold, and the
share of the labelled changes caught at a precision of at least 0.8. The held-out recency sets are never read.
Writes ``benchmarks/results/quality/link_probe.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.ingest.run import cpu_model
from benchmarks.quality import suites
from benchmarks.quality.datasets import load_recency, repo_root
from benchmarks.quality.harness import EvalServer
from benchmarks.quality.report import write_json

RERANKER = "models/weights/engram-reranker-v1"
CHANGE_KINDS = ("newer", "past", "first")


def pairs_of(sets: list[str], neighbours: int) -> list[dict]:
    """Every (older, newer) pair of nearest neighbours of the sets, with its cosine, label and whether the rules
    linked it."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="engram-link-probe-") as tmp, EvalServer(Path(tmp) / "data") as server:
        for name in sets:
            rs = load_recency(name=name)
            tenant = server.ingest(name, suites.recency_inputs(rs))
            shard = server._app.engine.registry.shard(tenant.tenant)   # type: ignore[union-attr]
            by_id = {eid: shard.store.get(mid) for mid, eids in tenant.docs_of.items() for eid in eids}
            ids = sorted(by_id)
            memories = [by_id[i] for i in ids]
            vectors = shard.dense.reconstruct_batch(np.asarray([m.doc_id for m in memories], dtype=np.int64))
            cosine = vectors @ vectors.T
            changes = {pair for q in rs.queries if rs.kind[q.id] in CHANGE_KINDS   # "past" asks for the older
                       for a in rs.stale[q.id] for b in rs.qrels[q.id] for pair in ((a, b), (b, a))}
            for j, newer in enumerate(memories):
                older = [i for i in np.argsort(-cosine[j]).tolist()
                         if i != j and memories[i].created_at_ms < newer.created_at_ms][:neighbours]
                for i in older:
                    rows.append({"set": name, "older": memories[i].content, "newer": newer.content,
                                 "cosine": float(cosine[i, j]), "change": (ids[i], ids[j]) in changes,
                                 "linked": memories[i].memory_id in (newer.updates or ())})
    return rows


def cross_encoder_features(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(logits, first-token states): each pair read with the older text as the query, then the newer."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(RERANKER)
    model = AutoModelForSequenceClassification.from_pretrained(RERANKER, dtype=torch.float32).eval()
    logits, states = [], []
    for first, second in (("older", "newer"), ("newer", "older")):
        out_l, out_s = [], []
        for k in range(0, len(rows), 64):
            chunk = rows[k:k + 64]
            enc = tokenizer([r[first] for r in chunk], [r[second] for r in chunk], padding=True, truncation=True,
                            max_length=128, return_tensors="pt")
            with torch.no_grad():
                out = model(**enc, output_hidden_states=True)
            out_l.append(out.logits[:, 0].numpy())
            out_s.append(out.hidden_states[-1][:, 0].numpy())
        logits.append(np.concatenate(out_l))
        states.append(np.concatenate(out_s))
    return np.stack(logits, axis=1), np.concatenate(states, axis=1)


def probe(x: np.ndarray, y: np.ndarray, l2: float) -> tuple[np.ndarray, float]:
    """An L2 logistic regression with balanced class weights: (weights, bias)."""
    xt, yt = torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)
    weight = torch.where(yt > 0, 0.5 / max(yt.mean().item(), 1e-9), 0.5 / max(1 - yt.mean().item(), 1e-9))
    w = torch.zeros(x.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=500, line_search_fn="strong_wolfe")

    def loss() -> torch.Tensor:
        opt.zero_grad()
        value = (weight * torch.nn.functional.binary_cross_entropy_with_logits(xt @ w + b, yt, reduction="none")).mean()
        value = value + l2 * (w ** 2).sum() / len(yt)
        value.backward()
        return value

    opt.step(loss)
    return w.detach().numpy(), float(b.item())


def auc(score: np.ndarray, label: np.ndarray) -> float:
    pos, neg = score[label], score[~label]
    if not len(pos) or not len(neg):
        return float("nan")
    return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())


def recall_at_precision(score: np.ndarray, label: np.ndarray, precision: float = 0.8) -> float:
    order = np.argsort(-score, kind="stable")
    hits = np.cumsum(label[order])
    ok = np.flatnonzero(hits / np.arange(1, len(order) + 1) >= precision)
    return float(hits[ok[-1]] / max(label.sum(), 1)) if len(ok) else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="recency,recency_dev2,recency_dev3")
    parser.add_argument("--neighbours", type=int, default=5)
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality"
                        / "link_probe.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    if any("held" in s for s in sets):
        parser.error("the held-out recency sets are not read here")
    torch.manual_seed(0)
    rows = pairs_of(sets, args.neighbours)
    logits, states = cross_encoder_features(rows)
    cosine = np.asarray([[r["cosine"]] for r in rows])
    label = np.asarray([r["change"] for r in rows])
    linked = np.asarray([r["linked"] for r in rows])
    fold = np.asarray([r["set"] for r in rows])
    features = {"cosine": cosine, "logits both ways": logits, "cosine + logits": np.hstack([cosine, logits]),
                "first-token states both ways": states,
                "states + cosine + logits": np.hstack([states, cosine, logits])}
    results = {}
    for name, x in features.items():
        for l2 in (1.0, 10.0, 100.0):
            score = np.zeros(len(label))
            for held in sets:
                train, test = fold != held, fold == held
                mu, sd = x[train].mean(0), x[train].std(0) + 1e-6
                w, b = probe((x[train] - mu) / sd, label[train].astype(float), l2)
                score[test] = ((x[test] - mu) / sd) @ w + b
            key = f"{name}, l2 {l2:g}"
            results[key] = {"auc": round(auc(score, label), 3),
                            "auc_by_set": {s: round(auc(score[fold == s], label[fold == s]), 3) for s in sets},
                            "recall_at_precision_0.8": round(recall_at_precision(score, label), 3)}
            print(f"{key:40s} AUC {results[key]['auc']:.3f}  by set {results[key]['auc_by_set']}  "
                  f"recall at precision 0.8 {results[key]['recall_at_precision_0.8']:.3f}", flush=True)
    rules = {"labelled changes among the pairs": int(label.sum()), "pairs": len(label),
             "linked by the rules": int((label & linked).sum()), "links that are no labelled change":
             int((~label & linked).sum())}
    print(rules)
    write_result(args.out, f"python -m benchmarks.quality.link_probe --sets {','.join(sets)} --neighbours "
                 f"{args.neighbours}", {"sets": sets, "rules": rules, "probes": results})
    return 0


def write_result(path: Path, command: str, result: dict) -> None:
    """``result`` as JSON at ``path``, after the date, the machine and the command that made it."""
    write_json({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": cpu_model(), "command": command,
                **result}, path)


if __name__ == "__main__":
    raise SystemExit(main())
