"""Trains the query tower (server/engine/query_tower.py): a copy of the embedder's top layers, trained further for the
query side alone.

    python -m training.query_tower --out <folder> [--loco] [--held-out]

The data and the loss are the query adapter's (training/query_adapter.py): the questions of LoCoMo's dev conversations
against every turn of their conversation, and the SciFact *train* claims (a fifth kept out as a check) against the
corpus, the candidates embedded once by the frozen embedder as the server embeds them; each data set's mean over its
queries of ``-log sum_pos softmax(cos / TAU)`` over all its candidates, the data sets weighted alike. What is trained is
not a map of the finished vector but the embedder's layers from ``START`` on, copied: a query's token states after the
lower layers are computed once (frozen), and each step reads a sample of ``BATCH`` queries of every data set through
the copy (AdamW, ``LR``, ``STEPS`` steps, fixed seed). The weights are written as float16 with the embedder's name and
``START`` in ``engram_provenance.json``.

``--loco`` reports the dense list's evidence recall@10 with each dev conversation left out of a training and scored,
beside the embedder alone; the SciFact check claims' nDCG@10 is always reported. ``--held-out`` reads, once, the
held-out conversations and the SciFact test claims (the dense list alone), beside the embedder alone and the bundled
query adapter. The held-out conversations and the SciFact test claims are never trained on.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV, LOCOMO_HELD_OUT
from benchmarks.quality.datasets import load_locomo, load_scifact, ndcg_at_k, recall_at_k
from server.engine.query_tower import bert_layer
from training.query_adapter import TAU, is_check_claim

log = logging.getLogger(__name__)

START = 8        # the first trained layer (of e5's 12): chosen on dev with 10 (two layers)
LR = 5e-5        # chosen on dev among 1e-5, 2e-5, 5e-5 and 1e-4
STEPS = 60
BATCH = 64       # queries of each data set a step
SEED = 0
CHUNK = 48       # queries a forward when the lower states are computed or a data set is scored

Group = tuple[np.ndarray, list[str], list[list[int]]]   # (candidate vectors, query texts, each query's positives)


def locomo_group(embed: Any, conv: Any, query_prefix: str, passage_prefix: str) -> Group:
    from training.conversation import turn_text

    turns = conv.turns
    texts = [turn_text(t, "served", turns[i - 1] if i and turns[i - 1].session == t.session else None)
             for i, t in enumerate(turns)]
    row = {t.id: i for i, t in enumerate(turns)}
    return (embed([passage_prefix + x for x in texts]), [query_prefix + q.text for q in conv.questions],
            [[row[e] for e in q.evidence] for q in conv.questions])


def scifact_groups(embed: Any, query_prefix: str, passage_prefix: str) -> dict[str, Group]:
    """``fit`` and ``check`` (the train claims, split by :func:`is_check_claim`) and ``test`` over the corpus."""
    train, test = load_scifact(split="train"), load_scifact(split="test")
    order = sorted(range(len(train.docs)), key=lambda i: len(train.docs[i].text))
    docs: np.ndarray | None = None
    for s in range(0, len(order), 64):
        idx = order[s:s + 64]
        vecs = embed([passage_prefix + train.docs[i].text for i in idx])
        docs = np.zeros((len(train.docs), vecs.shape[1]), dtype=np.float32) if docs is None else docs
        docs[idx] = vecs
    assert docs is not None
    row = {d.id: i for i, d in enumerate(train.docs)}
    out: dict[str, Group] = {}
    for name, data, keep in (("fit", train, False), ("check", train, True), ("test", test, None)):
        queries = [q for q in data.queries if keep is None or is_check_claim(q.id) == keep]
        positives = [[row[d] for d, g in data.qrels.get(q.id, {}).items() if g > 0 and d in row] for q in queries]
        out[name] = (docs, [query_prefix + q.text for q in queries], positives)
    return out


class Trainer:
    """The embedder's network read as a BERT encoder, split at ``start``: lower states cached, top layers trained."""

    def __init__(self, embedder: Any, start: int) -> None:
        import torch

        self.torch = torch
        self.embedder = embedder
        self.model = copy.deepcopy(embedder._model).float().eval()
        self.start = start
        config = self.model.config
        self.heads = int(config.num_attention_heads)
        self.gelu_tanh = config.hidden_act in ("gelu_new", "gelu_pytorch_tanh")

    def _layer(self, layer: Any, x: Any, mask: Any) -> Any:
        return bert_layer(layer, x, mask, heads=self.heads, gelu_tanh=self.gelu_tanh)

    def lower_states(self, texts: list[str]) -> list[Any]:
        """Each text's token states after the frozen layers, ``(tokens, hidden)``."""
        torch = self.torch
        out: list[Any] = [None] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.no_grad():
            for s in range(0, len(order), CHUNK):
                rows = order[s:s + CHUNK]
                tokens = self.embedder.tokenize([texts[i] for i in rows])
                x, mask = self.pad_ids([np.asarray(r) for r in tokens.input_ids])
                x = self.model.embeddings(input_ids=x, token_type_ids=torch.zeros_like(x))
                for layer in self.model.encoder.layer[:self.start]:
                    x = self._layer(layer, x, mask)
                for j, i in enumerate(rows):
                    out[i] = x[j, :int(mask[j].sum())].clone()
        return out

    def pad_ids(self, rows: list[np.ndarray]) -> tuple[Any, Any]:
        torch = self.torch
        ids = torch.zeros(len(rows), max(len(r) for r in rows), dtype=torch.long)
        mask = torch.zeros(ids.shape, dtype=torch.bool)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.from_numpy(r.astype(np.int64))
            mask[i, :len(r)] = True
        return ids, mask

    def upper(self, layers: Any, states: list[Any]) -> Any:
        torch = self.torch
        x = torch.zeros(len(states), max(len(t) for t in states), states[0].shape[1])
        mask = torch.zeros(x.shape[:2], dtype=torch.bool)
        for i, t in enumerate(states):
            x[i, :len(t)] = t
            mask[i, :len(t)] = True
        for layer in layers:
            x = self._layer(layer, x, mask)
        weights = mask[..., None].float()
        return torch.nn.functional.normalize((x * weights).sum(1) / weights.sum(1), dim=-1)

    def vectors(self, layers: Any, states: list[Any]) -> np.ndarray:
        with self.torch.no_grad():
            return np.concatenate([self.upper(layers, states[s:s + CHUNK]).numpy()
                                   for s in range(0, len(states), CHUNK)])

    def train(self, groups: list[tuple[np.ndarray, list[Any], list[list[int]]]], *, steps: int = STEPS,
              lr: float = LR, batch: int = BATCH, seed: int = SEED) -> Any:
        torch = self.torch
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        layers = copy.deepcopy(self.model.encoder.layer[self.start:])
        opt = torch.optim.AdamW(layers.parameters(), lr=lr, weight_decay=0.0)
        data = [(torch.from_numpy(c), s, p, [i for i, x in enumerate(p) if x]) for c, s, p in groups]
        for _ in range(steps):
            opt.zero_grad()
            for cands, states, positives, have in data:
                rows = rng.choice(have, size=min(batch, len(have)), replace=False).tolist()
                logp = (self.upper(layers, [states[i] for i in rows]) @ cands.T / TAU).log_softmax(dim=1)
                loss = -torch.stack([logp[j, positives[i]].logsumexp(0) for j, i in enumerate(rows)]).mean()
                (loss / len(data)).backward()
            opt.step()
        return layers.eval()


def scores(cands: np.ndarray, queries: np.ndarray, positives: list[list[int]], k: int = 10) -> tuple[list, list]:
    """Each query's (recall@k, nDCG@k) over ``cands``."""
    top = np.argsort(-(queries @ cands.T), axis=1, kind="stable")[:, :k]
    recall, ndcg = [], []
    for p, t in zip(positives, top, strict=True):
        if p:
            ranked, qrels = [str(d) for d in t.tolist()], {str(d): 1 for d in p}
            recall.append(recall_at_k(ranked, qrels, k))
            ndcg.append(ndcg_at_k(ranked, qrels, k))
    return recall, ndcg


def _mean(values: list[float]) -> float:
    return round(float(np.mean(values)), 4)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--start", type=int, default=START)
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--loco", action="store_true", help="each dev conversation left out of a training, scored")
    parser.add_argument("--held-out", action="store_true", help="read the held-out conversations and SciFact test")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from server.app import load_embedder
    from server.config import BUNDLED_QUERY_ADAPTER, load_config
    from server.engine.query_adapter import load_query_adapter

    started = time.time()
    embedder = load_embedder(load_config(env={}), "cpu")
    qp, pp = getattr(embedder, "query_prefix", ""), getattr(embedder, "passage_prefix", "")
    conversations = {c.id: c for c in load_locomo()}
    groups = {c: locomo_group(embedder.embed, conversations[c], qp, pp)
              for c in LOCOMO_DEV + (LOCOMO_HELD_OUT if args.held_out else ())}
    groups.update({f"scifact_{k}": g for k, g in scifact_groups(embedder.embed, qp, pp).items()})
    log.info("candidates embedded in %.0f s", time.time() - started)
    trainer = Trainer(embedder, args.start)
    states = {name: trainer.lower_states(g[1]) for name, g in groups.items()}
    base = {name: trainer.vectors(trainer.model.encoder.layer[args.start:], s) for name, s in states.items()}

    def fit(names: list[str]) -> Any:
        return trainer.train([(groups[n][0], states[n], groups[n][2]) for n in names], steps=args.steps, lr=args.lr)

    def score(name: str, vectors: np.ndarray) -> tuple[list, list]:
        return scores(groups[name][0], vectors, groups[name][2])

    report: dict[str, Any] = {}
    if args.loco:
        without, with_ = [], []
        for left in LOCOMO_DEV:
            layers = fit([c for c in LOCOMO_DEV if c != left] + ["scifact_fit"])
            without += score(left, base[left])[0]
            with_ += score(left, trainer.vectors(layers, states[left]))[0]
        report["locomo_dev_left_out_recall@10"] = {"without": _mean(without), "with": _mean(with_)}
        log.info("LoCoMo dev, each conversation left out: %s", report["locomo_dev_left_out_recall@10"])
    layers = fit([*LOCOMO_DEV, "scifact_fit"])
    tuned = trainer.vectors(layers, states["scifact_check"])
    report["scifact_check_ndcg@10"] = {"without": _mean(score("scifact_check", base["scifact_check"])[1]),
                                       "with": _mean(score("scifact_check", tuned)[1])}
    log.info("SciFact check claims (not trained on): %s", report["scifact_check_ndcg@10"])
    if args.held_out:
        adapter = load_query_adapter(BUNDLED_QUERY_ADAPTER, embedder=embedder.name, dim=embedder.dim)
        held: dict[str, Any] = {}
        for label, names, metric in (("locomo_held_out_recall@10", list(LOCOMO_HELD_OUT), 0),
                                     ("scifact_test_ndcg@10", ["scifact_test"], 1)):
            row = {}
            for kind in ("embedder alone", "query adapter", "query tower"):
                values: list[float] = []
                for n in names:
                    vectors = (base[n] if kind == "embedder alone" else trainer.vectors(layers, states[n])
                               if kind == "query tower" else np.stack([adapter.apply(v) for v in base[n]])
                               if adapter is not None else base[n])
                    values += score(n, vectors)[metric]
                row[kind] = _mean(values)
            held[label] = row
        report["held_out"] = held
        log.info("held out, read once: %s", held)

    from safetensors.torch import save_file

    args.out.mkdir(parents=True, exist_ok=True)
    weights = args.out / "tower.safetensors"
    save_file({k: v.detach().half().contiguous() for k, v in layers.state_dict().items()}, str(weights))
    provenance = {
        "name": "engram-query-tower", "embedder": embedder.name, "start": args.start,
        "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
        "data": {"locomo_dev": list(LOCOMO_DEV), "scifact": "train claims (check share kept out)"},
        "settings": {"tau": TAU, "lr": args.lr, "steps": args.steps, "batch": BATCH, "seed": SEED,
                     "optimizer": "AdamW"},
        "report": report, "seconds": round(time.time() - started, 1),
        "built_by": "python -m training.query_tower",
    }
    (args.out / "engram_provenance.json").write_text(json.dumps(provenance, indent=1) + "\n", encoding="utf-8")
    log.info("wrote %s (sha256 %s)", weights, provenance["sha256"][:12])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
