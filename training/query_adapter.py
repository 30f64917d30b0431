"""Fits the query adapter (server/engine/query_adapter.py): a linear map of the embedder's query vectors.

    python -m training.query_adapter [--out models/weights/engram-query-adapter]

Dev data only, embedded by the server's own embedder (``models.embedder``'s default) as the server embeds it:

* the questions of LoCoMo's dev conversations (``block.LOCOMO_DEV``, categories 1-4), each against every turn of
  its conversation, its evidence turns the positives; a turn embedded as the server writes it (its date, the
  content, the previous turn of its session as context: ``training.conversation.turn_text`` "served");
* the SciFact *train* claims, each against every abstract of the corpus (main vectors: title and abstract, the
  first ``models.embed_max_length`` tokens), its cited abstracts the positives; a fifth of the claims (by a hash of
  the id) is kept out of the fit and read as a check (``scifact_check_ndcg@10`` in the provenance).

The map is ``q -> normalise(q + q W)``, W zero at the start; the loss is each data set's mean over its queries of
``-log sum_pos softmax(cos / TAU)`` over every candidate of the query (all turns of the conversation, all
abstracts), the data sets weighted alike, plus ``PENALTY * ||W||^2``; full-batch AdamW, ``EPOCHS`` steps, fixed
seed. The held-out LoCoMo conversations' questions and evidence and the SciFact test claims are never read.

Chosen on dev (docs/concepts/retrieval.md "The query adapter"): with each dev conversation left out of a fit and
scored, the dense list's evidence recall@10 read 0.651 without the map and 0.681 with it (0.692 fitted on LoCoMo
alone, which cost the SciFact check 0.578 -> 0.570 nDCG@10 where the mixed fit read 0.615).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo, load_scifact, ndcg_at_k, recall_at_k
from server.config import BUNDLED_QUERY_ADAPTER
from server.engine.query_adapter import MATRIX, PROVENANCE

log = logging.getLogger(__name__)

TAU = 0.02          # the softmax temperature over cosines
PENALTY = 1.0       # times the squared Frobenius norm of W
EPOCHS = 100        # full-batch steps
LR = 1e-3
SEED = 0
CHECK_SHARE = 5     # one SciFact train claim in CHECK_SHARE (crc32 of its id) is kept out of the fit


Group = tuple[np.ndarray, np.ndarray, list[list[int]]]   # (candidates, queries, each query's positive rows)


def is_check_claim(claim_id: str) -> bool:
    return zlib.crc32(claim_id.encode()) % CHECK_SHARE == 0


def locomo_groups(embed: Any, query_prefix: str, passage_prefix: str) -> dict[str, Group]:
    """One group a dev conversation: its turns as the server embeds them, its questions."""
    from training.conversation import turn_text

    out: dict[str, Group] = {}
    for conv in load_locomo():
        if conv.id not in LOCOMO_DEV:
            continue
        turns = conv.turns
        texts = [turn_text(t, "served", turns[i - 1] if i and turns[i - 1].session == t.session else None)
                 for i, t in enumerate(turns)]
        row = {t.id: i for i, t in enumerate(turns)}
        questions = embed([query_prefix + q.text for q in conv.questions])
        out[conv.id] = (embed([passage_prefix + x for x in texts]), questions,
                        [[row[e] for e in q.evidence] for q in conv.questions])
        log.info("LoCoMo %s: %d turns, %d questions", conv.id, len(turns), len(conv.questions))
    return out


def scifact_groups(embed: Any, query_prefix: str, passage_prefix: str) -> tuple[Group, Group]:
    """The SciFact train claims over the corpus: (the fit's claims, the check's claims). The abstracts are
    embedded shortest first, 64 at a time."""
    train = load_scifact(split="train")
    order = sorted(range(len(train.docs)), key=lambda i: len(train.docs[i].text))
    docs = np.zeros((len(train.docs), 0), dtype=np.float32)
    for s in range(0, len(order), 64):
        idx = order[s:s + 64]
        vecs = embed([passage_prefix + train.docs[i].text for i in idx])
        if docs.shape[1] == 0:
            docs = np.zeros((len(train.docs), vecs.shape[1]), dtype=np.float32)
        docs[idx] = vecs
    row = {d.id: i for i, d in enumerate(train.docs)}
    claims = embed([query_prefix + q.text for q in train.queries])

    def group(keep: bool) -> Group:
        rows = [i for i, q in enumerate(train.queries) if is_check_claim(q.id) != keep]
        positives = [[row[d] for d, g in train.qrels[train.queries[i].id].items() if g > 0 and d in row]
                     for i in rows]
        return docs, claims[rows], positives

    return group(True), group(False)


def fit(groups: Sequence[Group], *, tau: float = TAU, penalty: float = PENALTY, epochs: int = EPOCHS,
        lr: float = LR, seed: int = SEED) -> np.ndarray:
    """W (dim, dim) float32 fitted on ``groups``."""
    import torch

    torch.manual_seed(seed)
    data = [(torch.from_numpy(np.ascontiguousarray(c)), torch.from_numpy(np.ascontiguousarray(q)), p)
            for c, q, p in groups]
    dim = data[0][1].shape[1]
    w = torch.nn.Parameter(torch.zeros(dim, dim))
    opt = torch.optim.AdamW([w], lr=lr, weight_decay=0.0)
    for _ in range(epochs):
        loss = torch.zeros(())
        for cands, queries, positives in data:
            mapped = torch.nn.functional.normalize(queries + queries @ w, dim=-1)
            logp = (mapped @ cands.T / tau).log_softmax(dim=1)
            per_query = [logp[i, p].logsumexp(0) for i, p in enumerate(positives) if p]
            loss = loss - torch.stack(per_query).mean() / len(data)
        opt.zero_grad()
        (loss + penalty * (w ** 2).sum()).backward()
        opt.step()
    return w.detach().numpy().astype(np.float32)


def mapped(queries: np.ndarray, w: np.ndarray | None) -> np.ndarray:
    if w is None:
        return queries
    out = queries + queries @ w
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _ranked(group: Group, w: np.ndarray | None, k: int) -> list[tuple[list[str], dict[str, int]]]:
    """Each query's top ``k`` candidate rows and its positives, as the quality metrics read them."""
    cands, queries, positives = group
    top = np.argsort(-(mapped(queries, w) @ cands.T), axis=1, kind="stable")[:, :k]
    return [([str(d) for d in t.tolist()], {str(d): 1 for d in p}) for p, t in zip(positives, top, strict=True) if p]


def recall_at(group: Group, w: np.ndarray | None, k: int = 10) -> list[float]:
    return [recall_at_k(ranked, qrels, k) for ranked, qrels in _ranked(group, w, k)]


def ndcg_at(group: Group, w: np.ndarray | None, k: int = 10) -> float:
    return float(np.mean([ndcg_at_k(ranked, qrels, k) for ranked, qrels in _ranked(group, w, k)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=BUNDLED_QUERY_ADAPTER)
    parser.add_argument("--no-loco", action="store_true", help="skip the leave-one-conversation-out check")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from server.app import load_embedder
    from server.config import load_config

    started = time.time()
    embedder = load_embedder(load_config(env={}), "cpu")
    qp, pp = getattr(embedder, "query_prefix", ""), getattr(embedder, "passage_prefix", "")
    locomo = locomo_groups(embedder.embed, qp, pp)
    sci_fit, sci_check = scifact_groups(embedder.embed, qp, pp)
    log.info("embedded in %.0f s", time.time() - started)
    report: dict[str, Any] = {}
    if not args.no_loco:
        base, loco = [], []
        for left in locomo:
            w = fit([g for c, g in locomo.items() if c != left] + [sci_fit])
            base += recall_at(locomo[left], None)
            loco += recall_at(locomo[left], w)
        report["locomo_dev_left_out_recall@10"] = {"without": round(float(np.mean(base)), 4),
                                                   "with": round(float(np.mean(loco)), 4)}
        log.info("LoCoMo dev, each conversation left out of its fit: %s", report["locomo_dev_left_out_recall@10"])
    w = fit([*locomo.values(), sci_fit])
    report["scifact_check_ndcg@10"] = {"without": round(ndcg_at(sci_check, None), 4),
                                       "with": round(ndcg_at(sci_check, w), 4)}
    log.info("SciFact check claims (not fitted): %s", report["scifact_check_ndcg@10"])

    args.out.mkdir(parents=True, exist_ok=True)
    np.save(args.out / MATRIX, w)
    raw = (args.out / MATRIX).read_bytes()
    provenance = {
        "name": "engram-query-adapter", "embedder": embedder.name, "dim": int(w.shape[0]),
        "map": "q -> normalise(q + q W)", "sha256": hashlib.sha256(raw).hexdigest(),
        "data": {"locomo_dev": list(LOCOMO_DEV), "scifact": "train claims (check share kept out)",
                 "fit_queries": int(sum(len(g[1]) for g in locomo.values()) + len(sci_fit[1])),
                 "check_share": f"crc32(id) % {CHECK_SHARE} == 0"},
        "settings": {"tau": TAU, "penalty": PENALTY, "epochs": EPOCHS, "lr": LR, "seed": SEED,
                     "optimizer": "AdamW, full batch"},
        "report": report, "frobenius_norm": round(float(np.linalg.norm(w)), 4),
        "seconds": round(time.time() - started, 1),
        "built_by": "python -m training.query_adapter",
    }
    (args.out / PROVENANCE).write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    log.info("wrote %s (sha256 %s)", args.out / MATRIX, provenance["sha256"][:12])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
