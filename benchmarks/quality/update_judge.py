"""Offline: a cross-encoder trained to judge whether a newer statement gives a new value of an older one's attribute,
its links added through the server on top of the rules', recency recall@1 beside the rules alone.

    .venv/bin/python -m benchmarks.quality.update_judge              # dev sets: choose the threshold
    .venv/bin/python -m benchmarks.quality.update_judge --held-out 1  # then the held-out sets, at that one threshold

The bundled cross-encoder does not separate a changed attribute from two statements that are both true
(``benchmarks.quality.link_probe``). This trains one for the question: the bundled weights, fine-tuned (embeddings
frozen; one epoch, 6,400 pairs, batch 32, lr 5e-5, seed 0) on pairs generated from
``data/update_judge_templates.json`` — 35 attributes with state and change wordings, written for this check with
values and wordings apart from the recency sets' — labelled a change (a change wording or a plain new value of the
attribute) or not (the same value restated, repeated events, another person's attribute, another attribute of the
same topic, a change of another attribute). Then, for every dev recency set, one tenant per threshold: the set is
written at the defaults (the rules link what they link), and for each memory, oldest first, of its 5 nearest older
memories by cosine those that are English statements of the same subject and not yet updated are read by the judge
(older first); the best at or above the threshold is linked with ``LinkUpdate``, as a write-time rule would; the set
is then searched at the defaults. The held-out recency sets are read only with ``--held-out T`` (one threshold,
chosen on dev). Writes ``benchmarks/results/quality/update_judge.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from benchmarks.quality import suites
from benchmarks.quality.datasets import RECENCY_SETS, load_recency, repo_root
from benchmarks.quality.harness import DEFAULTS, EvalServer
from benchmarks.quality.link_probe import RERANKER, auc, pairs_of, recall_at_precision, write_result
from server.text import has_cjk

TEMPLATES = Path(__file__).resolve().parent / "data" / "update_judge_templates.json"
PAIRS, SEED, BATCH, LR, MAX_TOKENS = 6400, 0, 32, 5e-5, 64
NEIGHBOURS = 5
THRESHOLDS = (0.0, 1.0, 1.5, 2.0)


def generate(n: int, seed: int = 1) -> list[tuple[str, str, int]]:
    """``n`` (older, newer, changed) pairs from the templates (about 45 % changes)."""
    t = json.loads(TEMPLATES.read_text(encoding="utf-8"))
    attrs, events = t["attributes"], t["events"]
    rng = random.Random(seed)
    out: set[tuple[str, str, int]] = set()
    names = sorted(attrs)
    while len(out) < n:
        r, a = rng.random(), rng.choice(names)
        spec = attrs[a]
        v1, v2 = rng.sample(spec["values"], 2)
        old = rng.choice(spec["states"]).format(v=v1, o=v1)
        if r < 0.30:      # a change, worded as one
            out.add((old, rng.choice(spec["changes"]).format(v=v2, o=v1), 1))
        elif r < 0.40:    # a plain new value of the attribute
            out.add((old, rng.choice(spec["states"]).format(v=v2, o=v1) + rng.choice([" now", " these days", ""]), 1))
        elif r < 0.50:    # the same value restated
            out.add((old, rng.choice(spec["states"]).format(v=v1, o=v1), 0))
        elif r < 0.65:    # repeated events: both true
            e = rng.choice(events)
            e1, e2 = rng.sample(e["values"], 2)
            out.add((e["template"].format(v=e1), e["template"].format(v=e2), 0))
        elif r < 0.75:    # another person's attribute
            if a in t["third_person"]:
                third = t["third_person"][a].format(s=rng.choice(t["relations"]), v=v2)
                out.add((old, third, 0) if rng.random() < 0.5 else (third, old, 0))
        elif r < 0.80:    # another attribute of the same topic
            if a in t["same_topic"]:
                side = rng.choice(t["same_topic"][a])
                out.add((old, side, 0) if rng.random() < 0.6 else (side, old, 0))
        else:             # another attribute, the newer often a change of it
            b = attrs[rng.choice([x for x in names if x != a])]
            w1, w2 = rng.sample(b["values"], 2)
            if rng.random() < 0.7:
                older = old if rng.random() < 0.6 else rng.choice(spec["changes"]).format(v=v2, o=v1)
                out.add((older, rng.choice(b["changes"]).format(v=w2, o=w1), 0))
            else:
                out.add((old, rng.choice(b["states"]).format(v=w1, o=""), 0))
    pairs = sorted(out)
    rng.shuffle(pairs)
    return pairs


class Judge:
    def __init__(self, model: torch.nn.Module, tokenizer) -> None:  # type: ignore[no-untyped-def]
        self.model, self.tokenizer = model.eval(), tokenizer

    def score(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        out = []
        for k in range(0, len(pairs), 64):
            chunk = pairs[k:k + 64]
            enc = self.tokenizer([a for a, _ in chunk], [b for _, b in chunk], padding=True, truncation=True,
                                 max_length=MAX_TOKENS, return_tensors="pt")
            with torch.no_grad():
                out.append(self.model(**enc).logits[:, 0].float().numpy())
        return np.concatenate(out) if out else np.zeros(0)


def train() -> tuple[Judge, dict]:
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(SEED)
    tokenizer = AutoTokenizer.from_pretrained(RERANKER)
    model = AutoModelForSequenceClassification.from_pretrained(RERANKER, dtype=torch.float32,
                                                               attn_implementation="eager")
    for p in model.bert.embeddings.parameters():
        p.requires_grad_(False)
    data = generate(PAIRS)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, weight_decay=0.01)
    steps = len(data) // BATCH
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, s / 50) * max(0.0, 1 - s / steps))
    model.train()
    t0, losses = time.perf_counter(), []
    for k in range(0, steps * BATCH, BATCH):
        batch = data[k:k + BATCH]
        enc = tokenizer([a for a, _, _ in batch], [b for _, b, _ in batch], padding=True, truncation=True,
                        max_length=MAX_TOKENS, return_tensors="pt")
        label = torch.tensor([c for _, _, c in batch], dtype=torch.float32)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(**enc).logits[:, 0], label)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(float(loss.item()))
    log = {"pairs": len(data), "changes": sum(c for _, _, c in data), "steps": steps,
           "seconds": round(time.perf_counter() - t0, 1), "loss_last_20": round(float(np.mean(losses[-20:])), 3)}
    return Judge(model, tokenizer), log


def with_links(server: EvalServer, name: str, judge: Judge, threshold: float | None) -> dict:
    """One tenant of the set: the rules' links, the judge's added at ``threshold`` (None: none), recall@1."""
    from engram_proto.v1 import service_pb2 as spb
    from server.engine import siblings

    rs = load_recency(name=name)
    tenant = server.ingest(f"{name}-{threshold}", suites.recency_inputs(rs))
    shard = server._app.engine.registry.shard(tenant.tenant)   # type: ignore[union-attr]
    ids = sorted({mid for mid in tenant.docs_of})
    vectors = shard.dense.reconstruct_batch(np.asarray([shard.store.get(m).doc_id for m in ids], dtype=np.int64))
    cosine = vectors @ vectors.T
    added = 0
    if threshold is not None:
        for j in sorted(range(len(ids)), key=lambda j: shard.store.get(ids[j]).created_at_ms):
            newer = shard.store.get(ids[j])
            if newer.updates or has_cjk(newer.content) or not siblings.joinable(newer):
                continue
            near = [shard.store.get(ids[i]) for i in np.argsort(-cosine[j]).tolist() if i != j]
            near = [m for m in near if m.created_at_ms < newer.created_at_ms][:NEIGHBOURS]
            near = [m for m in near if not has_cjk(m.content) and siblings.joinable(m) and not m.updated_by
                    and siblings._subject(m) == siblings._subject(newer)]
            scores = judge.score([(m.content, newer.content) for m in near])
            if len(scores) and scores.max() >= threshold:
                older = near[int(scores.argmax())]
                server._memory.LinkUpdate(spb.LinkUpdateRequest(tenant_id=tenant.tenant, memory_id=newer.memory_id,
                                                                updates_id=older.memory_id), metadata=server._metadata)
                added += 1
    run = server.search(tenant, rs.queries, DEFAULTS, now_ms=suites.RECENCY_NOW_MS, top_k=10)
    hit = {q.id: bool(run[q.id]) and run[q.id][0] in rs.qrels[q.id] for q in rs.queries}
    kinds = sorted(set(rs.kind.values()))
    return {"recall@1": round(float(np.mean(list(hit.values()))), 3), "links_added": added,
            **{k: round(float(np.mean([hit[q] for q in hit if rs.kind[q] == k])), 3) for k in kinds}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--held-out", type=float, default=None, help="read the held-out sets at this threshold")
    parser.add_argument("--out", type=Path, default=repo_root() / "benchmarks" / "results" / "quality"
                        / "update_judge.json")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    dev = [s for s in RECENCY_SETS if "held" not in s]
    judge, training = train()
    print("trained:", training, flush=True)
    rows = pairs_of(dev, NEIGHBOURS)
    english = np.asarray([not has_cjk(r["older"] + r["newer"]) for r in rows])
    label = np.asarray([r["change"] for r in rows])
    linked = np.asarray([r["linked"] for r in rows])
    score = judge.score([(r["older"], r["newer"]) for r in rows])

    def beyond(flag: np.ndarray) -> list[int]:
        extra = english & flag & ~linked
        return [int((extra & label).sum()), int((extra & ~label).sum())]

    pairs = {"english_pairs": int(english.sum()), "english_changes": int(label[english].sum()),
             "english_changes_the_rules_miss": int((label & ~linked & english).sum()),
             "auc_english": round(auc(score[english], label[english]), 3),
             "recall_at_precision_0.8_english": round(recall_at_precision(score[english], label[english]), 3),
             **{f"at {t:g}: beyond the rules, changes / other pairs": beyond(score >= t) for t in THRESHOLDS}}
    print("dev pairs:", pairs, flush=True)
    sets = [s for s in RECENCY_SETS if "held" in s] if args.held_out is not None else dev
    thresholds = [None, args.held_out] if args.held_out is not None else [None, *THRESHOLDS]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="engram-update-judge-") as tmp, EvalServer(Path(tmp) / "data") as server:
        for name in sets:
            results[name] = {("rules" if t is None else f"rules + judge >= {t:g}"): with_links(server, name, judge, t)
                             for t in thresholds}
            for key, value in results[name].items():
                print(f"{name:16s} {key:22s} {value}", flush=True)
    write_result(args.out, "python -m benchmarks.quality.update_judge" + (
        f" --held-out {args.held_out:g} --out {args.out.name}" if args.held_out is not None else ""),
        {"training": training, "dev_pairs": pairs, "recency": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
