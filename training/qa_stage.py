"""The recipe's second stage: the cross-encoder trained further on questions asked of LoCoMo's dev conversations.

    python -m training.qa_stage [--init models/weights/engram-reranker-v1] [--out <same>]   # after python -m training

Stage one (``python -m training``) learns relevance from SciFact and from bags of a turn's words; nothing in it asks
a question of a conversation the way an agent does ("What activities does Melanie partake in?", where the turn says
"I just signed up for a pottery class"). Here each question of the dev conversations (``block.LOCOMO_DEV``, categories
1-4) is a query, each of its evidence turns a positive, as the server's cross-encoder reads a turn (its date, the
content, the previous turn of its session as context: ``training.conversation.turn_text`` "served"); the hard
negatives are drawn from the same conversation's turns that BM25 and the server's embedder rank highest for the
question (30 of each, interleaved; the evidence left out). Those groups twice; with ``ROLES`` (the default) the same
conversations also written as a user and an assistant, their questions that name one speaker asked by that speaker in
the first person (:func:`role_groups`), once; with 1,000 groups of stage one's own data replayed (its pool, mined as
stage one mines it); one epoch from the stage-one weights and their head at a low learning rate (``CONFIG``). The
held-out conversations' questions, answers and evidence are never read; nor are the SciFact test claims.

Chosen on dev: with this stage trained on two dev conversations' questions (conv-26, conv-30), the third (conv-41),
never trained on, read R@10 / R@5 / block 0.803 / 0.728 / 0.736 → 0.806 / 0.745 / 0.755 through the block suite,
every category at or above (docs/benchmarks/reranker.md).

Writes the weights over ``--out`` (default: the stage-one folder it starts from), the provenance of both stages, and
``training_log_qa_stage.json``. A folder whose provenance already names this stage is refused (``--force``: train it
again on top).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo, load_locomo_turns, load_scifact
from training.bm25 import BM25
from training.conversation import doc_id, turn_docs
from training.data import Group, MinedQuery, build_groups
from training import recipe
from training.recipe import DEFAULT_CACHE, DEFAULT_OUT
from training.train import PROVENANCE_FILE, TrainConfig, config_dict, save, train

log = logging.getLogger(__name__)

FORM = "served"          # the turn as the server's cross-encoder reads it
DEPTH = 30               # hard negatives drawn from each retriever's top DEPTH (the evidence left out)
NEGATIVES = 7
REPEATS = 2              # the question groups, twice
REPLAY = 1000            # stage one's groups replayed beside them
# The project's own sets (benchmarks/quality/data) whose dev half's English questions train too: each question's
# relevant memory the positive, hard negatives from the same user's other memories by the embedder (the older or
# newer value of the same attribute among them). Chinese questions are left out (the server does not rerank them:
# search.rerank_cjk); the held-out half's users are never read. Measured with "updates", not adopted: two held-out
# knowledge-update questions gained and the held-out LoCoMo context block fell 0.012 (docs/benchmarks/reranker.md,
# "The knowledge-update set's dev questions in the stage").
OWN_SETS: tuple[str, ...] = ()
OWN_REPEATS = 4          # each with its own draw of negatives
OWN_DEPTH = 10           # from the user's memories the embedder ranks nearest the question (the positive left out)
OWN_NOW_MS = 1_780_000_000_000   # the "now" the sets' ages count back from, for an episodic memory's date header
# The same dev conversations written as a user and an assistant (each speaker the user in turn, the other the
# assistant, as benchmarks/quality/roles.py writes them) and their questions that name the user alone asked in the
# first person ("What did I research?"): an agent's memory is mostly such a chat, and stage one never saw "I" stand
# for the "user:" speaker. Each (question, evidence turn) a group, negatives from BM25 and the embedder over the
# same role-written conversation (the other speaker's "assistant:" turns with the question's words among them).
# Chosen with conv-41 left out (its roles suite R@10 0.790 -> 0.802, its block suite's block 0.755 -> 0.758); held out,
# reported once: the roles suite's block 0.737 -> 0.752, the block suite's R@10 0.774 -> 0.782 and block 0.729 -> 0.724
# (docs/benchmarks/reranker.md, "The dev conversations as a user and an assistant").
ROLES = True
ROLE_REPEATS = 1
SEED = 13
CONFIG = TrainConfig(epochs=1, lr=3e-5, head_lr=3e-5, uniform_last_attention=False)
STAGE = "LoCoMo dev questions"
PROVENANCE = ("; then trained further (training/qa_stage.py) on the questions of LoCoMo's dev conversations "
              "({}): each evidence turn the positive as the server reads it, hard negatives from BM25 and the "
              "embedder over the same conversation, with stage one's data replayed; the held-out conversations' "
              "questions, answers and evidence never read")


def hard_negatives(embedder: Any, bm25: BM25, ids: list[str], vectors: np.ndarray, question: str,
                   evidence: set[str]) -> list[str]:
    """The candidate negatives of ``question`` among one conversation's turns ``ids`` (their ``vectors`` and ``bm25``
    index): BM25's and the embedder's top ``DEPTH`` each, the ``evidence`` left out, interleaved, each once."""
    lexical = [t for t in bm25.search(question, DEPTH + 10) if t not in evidence][:DEPTH]
    query = embedder.embed([embedder.query_prefix + question])[0]
    dense = [ids[i] for i in np.argsort(-(vectors @ query), kind="stable") if ids[i] not in evidence][:DEPTH]
    return list(dict.fromkeys(x for pair in zip(lexical, dense, strict=False) for x in pair))


def question_groups(embedder: Any, conversations: tuple[str, ...] = LOCOMO_DEV,
                    root: Path | None = None) -> tuple[list[Group], int]:
    """One group per (question, evidence turn) of ``conversations`` (:func:`build_groups`), and the questions; the
    other conversations' questions are never used (``root``: the data folder, default ``../shared/data``)."""
    turns = load_locomo_turns(root)
    docs = turn_docs(turns)
    mined: list[MinedQuery] = []
    for conv in load_locomo(root):
        if conv.id not in conversations:
            continue
        ids = [t.id for t in turns[conv.id]]
        texts = [docs[doc_id(conv.id, t, FORM)] for t in ids]
        bm25 = BM25(dict(zip(ids, texts, strict=True)))
        vectors = embedder.embed([embedder.passage_prefix + x for x in texts])
        for q in conv.questions:
            pool = hard_negatives(embedder, bm25, ids, vectors, q.text, set(q.evidence))
            mined.append(MinedQuery(id=f"qa/{conv.id}/{q.id}", text=q.text,
                                    positives=tuple(doc_id(conv.id, e, FORM) for e in q.evidence),
                                    candidates=tuple(doc_id(conv.id, t, FORM) for t in pool)))
    return build_groups(mined, docs, negatives=NEGATIVES, seed=SEED), len(mined)


def role_groups(embedder: Any, conversations: tuple[str, ...] = LOCOMO_DEV,
                root: Path | None = None) -> tuple[list[Group], int]:
    """One group per (first-person question, evidence turn) of ``conversations`` written with roles (:data:`ROLES`),
    each turn as the server's cross-encoder reads a threaded chat turn (its date, ``"user: …"`` or
    ``"assistant: …"``, the previous turn of its session as context); and the questions."""
    from benchmarks.quality.roles import first_person_question, named
    from server.text import indexed_text

    turns = load_locomo_turns(root)
    docs: dict[str, str] = {}
    mined: list[MinedQuery] = []
    for conv in load_locomo(root):
        if conv.id not in conversations:
            continue
        said = turns[conv.id]
        speakers = sorted({t.speaker for t in said})
        for user in speakers:
            def role(t: Any, user: str = user) -> str:
                return f"{'user' if t.speaker == user else 'assistant'}: {t.text}"

            ids = []
            for i, t in enumerate(said):
                previous = said[i - 1] if i and said[i - 1].session == t.session else None
                ids.append(f"roles/{conv.id}/{user}/{t.id}")
                docs[ids[-1]] = indexed_text(role(t), dated=True, created_at_ms=t.created_at * 1000,
                                             context=role(previous) if previous is not None else "")
            texts = [docs[d] for d in ids]
            bm25 = BM25(dict(zip(ids, texts, strict=True)))
            vectors = embedder.embed([embedder.passage_prefix + x for x in texts])
            others = [s for s in speakers if s != user]
            for q in conv.questions:
                if not named(user, q.text) or any(named(o, q.text) for o in others):
                    continue
                text = first_person_question(q.text, user)
                evidence = {f"roles/{conv.id}/{user}/{e}" for e in q.evidence}
                pool = hard_negatives(embedder, bm25, ids, vectors, text, evidence)
                mined.append(MinedQuery(id=f"roles/{conv.id}/{user}/{q.id}", text=text,
                                        positives=tuple(sorted(evidence & set(ids))), candidates=tuple(pool)))
    return build_groups(mined, docs, negatives=NEGATIVES, seed=SEED + 100), len(mined)


OWN_KNOWN = ("updates",)


def check_own_sets(sets: tuple[str, ...]) -> None:
    unknown = set(sets) - set(OWN_KNOWN)
    if unknown:
        raise SystemExit(f"no own set {sorted(unknown)} (known: {', '.join(OWN_KNOWN)})")


def own_groups(embedder: Any, sets: tuple[str, ...]) -> tuple[list[Group], int]:
    """One group per (dev-half English question, relevant memory) of the project's own ``sets`` (only "updates" so
    far), the memory as the server's cross-encoder reads it (:func:`server.text.indexed_text`), the negatives the
    same user's other memories the embedder ranks highest; and the questions."""
    from benchmarks.quality.datasets import load_updates
    from server.config import DAY_S
    from server.text import indexed_text

    check_own_sets(sets)
    mined: list[MinedQuery] = []
    docs: dict[str, str] = {}
    for name in sets:
        data = load_updates()
        for m in data.memories:
            docs[f"{name}/{m.id}"] = indexed_text(m.content, dated=m.type == "episodic",
                                                  created_at_ms=int(OWN_NOW_MS - m.age_days * DAY_S * 1000))
        for user, queries in sorted(data.queries.items()):
            asked = [q for q in queries if data.half[q.id] == "dev" and data.lang[q.id] == "en"]
            if not asked:
                continue
            mine = [f"{name}/{m.id}" for m in data.memories if m.user == user]
            vectors = embedder.embed([embedder.passage_prefix + docs[d] for d in mine])
            for q in asked:
                positives = tuple(f"{name}/{r}" for r in data.qrels[q.id])
                query = embedder.embed([embedder.query_prefix + q.text])[0]
                ranked = [mine[i] for i in np.argsort(-(vectors @ query), kind="stable") if mine[i] not in positives]
                mined.append(MinedQuery(id=f"own/{name}/{q.id}", text=q.text, positives=positives,
                                        candidates=tuple(ranked[:OWN_DEPTH])))
    # Each repeat samples its negatives afresh from the question's OWN_DEPTH nearest.
    return [g for r in range(OWN_REPEATS) for g in build_groups(mined, docs, negatives=NEGATIVES, seed=SEED + r)], \
        len(mined)


def replay_groups(cache: Path) -> list[Group]:
    """``REPLAY`` groups of stage one's pool (SciFact train claims, self-supervised sentences, LoCoMo keyword
    queries), built by stage one's own :func:`training.recipe.training_groups` at its defaults, mined into
    ``cache``."""
    stage_one = recipe.parse(["--cache", str(cache)])
    docs = {d.id: d.text for d in load_scifact(split="train").docs}
    return recipe.training_groups(stage_one, docs, seed=SEED)[0][:REPLAY]


def stage_parser(prog: str, description: str | None, *, init: str) -> argparse.ArgumentParser:
    """A further stage's options: the weights it starts from (``init``: what they are), where it writes, stage
    one's mined cache, ``--force`` and the dev conversations it trains on."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--init", type=Path, default=DEFAULT_OUT, help=init)
    p.add_argument("--out", type=Path, default=None, help="where to write (default: --init, replaced)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--force", action="store_true", help="train on top of weights that already had this stage")
    p.add_argument("--conversations", default=",".join(LOCOMO_DEV),
                   help="the dev conversations whose questions train (a subset: leave one out to measure the stage)")
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = stage_parser("python -m training.qa_stage", __doc__, init="stage one's weights")
    p.add_argument("--own-sets", default=",".join(OWN_SETS),
                   help="the project's own sets whose dev half's English questions train too (\"updates\"; \"\": none)")
    p.add_argument("--roles", action=argparse.BooleanOptionalAction, default=ROLES,
                   help="the dev conversations written as a user and an assistant, asked in the first person, too")
    return p.parse_args(argv)


def stage_inputs(args: argparse.Namespace, stage: str) -> tuple[Path, dict[str, Any], tuple[str, ...]]:
    """A further stage's output folder, the provenance of the weights it starts from (refused when they already had
    ``stage``, unless ``--force``) and the dev conversations it trains on (refused when any is not a dev one)."""
    before = json.loads((args.init / PROVENANCE_FILE).read_text(encoding="utf-8"))
    if stage in before.get("stages", []) and not args.force:
        raise SystemExit(f"{args.init} already had the {stage} stage (--force trains it again on top)")
    conversations = tuple(c for c in args.conversations.split(",") if c)
    if not conversations or not set(conversations) <= set(LOCOMO_DEV):
        raise SystemExit(f"--conversations must name dev conversations ({', '.join(LOCOMO_DEV)})")
    return args.out or args.init, before, conversations


def run(args: argparse.Namespace) -> dict[str, Any]:
    from server.app import load_embedder
    from server.config import load_config

    out, stage_one, conversations = stage_inputs(args, STAGE)
    own_sets = tuple(x for x in args.own_sets.split(",") if x)
    check_own_sets(own_sets)   # both before the embedder loads
    started = time.perf_counter()
    embedder = load_embedder(load_config(env={}), "cpu")
    questions, asked = question_groups(embedder, conversations)
    own, own_asked = own_groups(embedder, own_sets) if own_sets else ([], 0)
    roles, roles_asked = role_groups(embedder, conversations) if args.roles else ([], 0)
    extra = own + roles * ROLE_REPEATS
    groups = questions * REPEATS + extra + replay_groups(args.cache)
    random.Random(SEED).shuffle(groups)
    replayed = len(groups) - len(questions) * REPEATS - len(extra)
    log.info("%d questions → %d groups (x%d), %d own questions → %d groups, %d first-person questions → %d "
             "groups, %d replayed: %d groups", asked, len(questions), REPEATS, own_asked, len(own), roles_asked,
             len(roles) * ROLE_REPEATS, replayed, len(groups))
    t0 = time.perf_counter()
    tokenizer, model, history = train(groups, init_path=args.init, cfg=CONFIG)
    train_s = time.perf_counter() - t0
    data = dict(stage_one.get("data", {}))
    data["never_used"] = ("SciFact test claims/judgments; the questions, answers and evidence of LoCoMo's held-out "
                          "conversations" + "".join(f"; the held-out half of engram's own {s} set" for s in own_sets))
    data["qa_stage"] = {"questions": asked, "question_groups": len(questions), "repeats": REPEATS,
                        "own_sets": list(own_sets), "own_questions": own_asked, "own_groups": len(own),
                        "own_repeats": OWN_REPEATS, "own_depth": OWN_DEPTH, "role_questions": roles_asked,
                        "role_groups": len(roles) * ROLE_REPEATS, "replayed_groups": replayed,
                        "negatives": NEGATIVES,
                        "depth": DEPTH, "conversations": list(conversations), "embedder": embedder.name}
    provenance = {**{k: v for k, v in stage_one.items() if k not in ("random_weights",)},
                  "provenance": stage_one["provenance"] + PROVENANCE.format(", ".join(conversations)) + "".join(
                      f"; with the English questions of the dev half of engram's own {s} set (benchmarks/quality/data)"
                      for s in own_sets) + ("; with the same conversations written as a user and an assistant, "
                                            "their questions asked in the first person" if args.roles else ""),
                  "data": data,
                  "stages": [*stage_one.get("stages", ["stage one (make reranker)"]), STAGE],
                  "qa_stage_training": config_dict(CONFIG)}
    report = {"stage": STAGE, "init": str(args.init), "training": config_dict(CONFIG), "data": data["qa_stage"],
              "history": history, "seconds": {"train": round(train_s, 1),
                                              "total": round(time.perf_counter() - started, 1)}}
    return write_stage(tokenizer, model, out, provenance=provenance, report=report,
                       log_name="training_log_qa_stage.json")


def write_stage(tokenizer: Any, model: Any, out: Path, *, provenance: dict[str, Any], report: dict[str, Any],
                log_name: str, cfg: TrainConfig = CONFIG) -> dict[str, Any]:
    """A further stage's weights and provenance saved over ``out``, its ``report`` (with the weights' sha256) beside
    them as ``log_name``; the report."""
    save(tokenizer, model, out, max_length=cfg.max_length, provenance=provenance)
    report = {**report, "weights_sha256": hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()}
    (out / log_name).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def stage_main(run: Any, parse: Any, argv: list[str] | None) -> None:
    """A further stage's command line: ``run(parse(argv))``, its summary printed."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    report = run(parse(argv))
    print(json.dumps({k: report[k] for k in ("stage", "data", "seconds", "weights_sha256")}, indent=2))


def main(argv: list[str] | None = None) -> None:
    stage_main(run, parse, argv)


if __name__ == "__main__":
    main()
