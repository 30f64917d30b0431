"""The recipe's third stage: the cross-encoder trained further on long chat turns, read as the server reads them.

    python -m training.long_stage [--init models/weights/engram-reranker-v1] [--out <same>]   # after training.qa_stage

A long chat turn (an EPISODIC memory past ``passages.PASSAGE_CHARS``) is read by the cross-encoder as three of its
sentence units (``server/engine/passages.py`` ``rerank_texts``): the line that answers a question with other talk
around it, cut at 200 characters. Stages one and two only ever saw a turn whole and short, and score a line far lower
with talk around it (offline, the dev ~1 KB turns: the evidence line alone a mean logit of -3.4, with 60 characters
each side -5.7). Here each (question, evidence turn) of the dev conversations (``block.LOCOMO_DEV``, categories 1-4)
is a group whose positive is a unit the server reads of that turn written long: the turn's own words inside other
turns of the same conversation that are no dev question's evidence (``FILLER_BEFORE`` characters before it,
``FILLER_AFTER`` after, under the turn's own speaker), the unit chosen among those that hold the line as
``rerank_texts`` orders them; the negatives are units of the same long turn that hold none of the line
(``OWN_NEGATIVES``) and the first unit the server reads of the long form of the turns BM25 and the embedder rank
highest for the question (``training.qa_stage.hard_negatives``, the evidence left out). Beside them the short
question groups of stage two once (each turn as it is read short) and ``REPLAY`` groups of stage one's data; one
epoch at stage two's learning rate from the weights it is given.

The filler is the conversations' own talk, not the generic sentences of ``benchmarks/quality/long_turns.py`` that
the long-turn suite wraps its evidence in; the held-out conversations' questions, answers and evidence are never
read; nor are the SciFact test claims. Writes the weights over ``--out`` (default: the folder it starts from), the
provenance of every stage, and ``training_log_long_stage.json``. A folder whose provenance already names this stage
is refused (``--force``: train it again on top).
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from pathlib import Path
from typing import Any

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo, load_locomo_turns
from benchmarks.quality.long_turns import filler
from training import qa_stage
from training.bm25 import BM25
from training.conversation import doc_id, turn_docs
from training.data import Group
from training.train import config_dict, train

log = logging.getLogger(__name__)

FILLER_BEFORE = (450, 800)   # characters of other talk before the turn's own words (a ~1 KB turn with the after)
FILLER_AFTER = (300, 600)
OWN_NEGATIVES = 2            # units of the same long turn that hold none of its line
MINED_NEGATIVES = qa_stage.NEGATIVES - OWN_NEGATIVES
HOLDS = 0.6                  # a unit holds the line when it covers this share of the line (or the line the unit)
REPEATS = 1
SHORT_REPEATS = 1            # stage two's short question groups, beside the long ones
REPLAY = 1000
SEED = 17
CONFIG = qa_stage.CONFIG      # one epoch at the question stage's learning rate
STAGE = "long chat turns"
PROVENANCE = ("; then trained further (training/long_stage.py) on the same dev conversations' questions with each "
              "evidence turn written long (its words inside other talk of the conversation) and read as the server "
              "reads a long turn, its sentence units")


def long_form(speaker: str, text: str, pool: list[str], rng: random.Random) -> tuple[str, tuple[int, int]]:
    """``"<speaker>: <talk> <text> <talk>"``, longer than ``passages.PASSAGE_CHARS`` (a long turn), and where
    ``text`` lies in it."""
    from server.engine.passages import PASSAGE_CHARS

    head = f"{speaker}: {filler(rng.randint(*FILLER_BEFORE), rng, pool)} "
    after = rng.randint(*FILLER_AFTER)
    after = max(after, PASSAGE_CHARS + 1 - len(head) - len(text))
    content = f"{head}{text} {filler(after, rng, pool)}"
    return content, (len(head), len(head) + len(text))


def _memory(content: str, created_at_ms: int) -> Any:
    from server.domain import Memory, MemoryStatus, MemoryType

    return Memory(memory_id="m", doc_id=0, content=content, type=MemoryType.EPISODIC, importance=0.5,
                  created_at_ms=created_at_ms, last_access_at_ms=created_at_ms, access_count=0, entities=(),
                  source_ref="", scope="", confidence=1.0, key="", status=MemoryStatus.ACTIVE, supersedes=(),
                  superseded_by="", pinned=False, expires_at_ms=0, metadata={}, source_refs=(),
                  updated_at_ms=created_at_ms)


def _unit_reads(query: str, content: str, created_at_ms: int) -> list[tuple[str, tuple[int, int]]]:
    """Every sentence unit of ``content`` as the cross-encoder reads it for ``query`` (in ``rerank_texts``' order,
    all of them, not its first three) and each unit's span in ``content``."""
    from server.engine import passages

    saved = passages.TURN_SENTENCES
    passages.TURN_SENTENCES = -1
    try:
        reads = passages.rerank_texts(query, _memory(content, created_at_ms))
    finally:
        passages.TURN_SENTENCES = saved
    units = passages.sentence_units(content, limit=passages.MAX_UNITS)
    spans = dict(zip(units, passages.window_spans(content, units), strict=True))
    order = passages.ranked_windows(query, units)
    return [(text, spans[units[i]]) for text, i in zip(reads, order, strict=True)]


def _holds(span: tuple[int, int], line: tuple[int, int]) -> float:
    overlap = max(0, min(span[1], line[1]) - max(span[0], line[0]))
    return overlap / max(1, min(span[1] - span[0], line[1] - line[0]))


def long_groups(embedder: Any, conversations: tuple[str, ...] = LOCOMO_DEV,
                root: Path | None = None) -> tuple[list[Group], int]:
    """One group per (question, evidence turn) of ``conversations`` whose long form has a unit that holds the line
    (module docstring), and the number of (question, evidence turn) pairs read."""
    turns = load_locomo_turns(root)
    docs = turn_docs(turns)
    rng = random.Random(SEED)
    groups: list[Group] = []
    pairs = 0
    for conv in load_locomo(root):
        if conv.id not in conversations:
            continue
        said = {t.id: t for t in turns[conv.id]}
        evidence_of_any = {e for q in conv.questions for e in q.evidence}
        pool = [t.text for t in turns[conv.id] if t.id not in evidence_of_any]
        ids = [t.id for t in turns[conv.id]]
        texts = [docs[doc_id(conv.id, t, qa_stage.FORM)] for t in ids]
        bm25 = BM25(dict(zip(ids, texts, strict=True)))
        vectors = embedder.embed([embedder.passage_prefix + x for x in texts])
        long = {t: long_form(said[t].speaker, said[t].text, pool, rng) for t in ids}
        for q in conv.questions:
            mined = qa_stage.hard_negatives(embedder, bm25, ids, vectors, q.text, set(q.evidence))
            negatives = [_unit_reads(q.text, long[t][0], said[t].created_at * 1000)[0][0] for t in mined[:20]]
            for e in q.evidence:
                if e not in said:
                    continue
                pairs += 1
                content, line = long[e]
                reads = _unit_reads(q.text, content, said[e].created_at * 1000)
                holding = [text for text, span in reads if _holds(span, line) >= HOLDS]
                apart = [text for text, span in reads if _holds(span, line) == 0]
                if not holding or len(apart) < OWN_NEGATIVES or len(negatives) < MINED_NEGATIVES:
                    continue
                chosen = rng.sample(negatives, MINED_NEGATIVES) + rng.sample(apart[:6], OWN_NEGATIVES)
                groups.append(Group(query=q.text, passages=(holding[0], *chosen)))
    rng.shuffle(groups)
    return groups, pairs


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    return qa_stage.stage_parser("python -m training.long_stage", __doc__,
                                 init="the question stage's weights").parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    from server.app import load_embedder
    from server.config import load_config

    out, before, conversations = qa_stage.stage_inputs(args, STAGE)
    started = time.perf_counter()
    embedder = load_embedder(load_config(env={}), "cpu")
    long, pairs = long_groups(embedder, conversations)
    short, asked = qa_stage.question_groups(embedder, conversations)
    replay = qa_stage.replay_groups(args.cache)[:REPLAY]
    groups = long * REPEATS + short * SHORT_REPEATS + replay
    random.Random(SEED).shuffle(groups)
    log.info("%d (question, evidence) pairs -> %d long groups (x%d), %d short groups (x%d), %d replayed: %d groups",
             pairs, len(long), REPEATS, len(short), SHORT_REPEATS, len(replay), len(groups))
    t0 = time.perf_counter()
    tokenizer, model, history = train(groups, init_path=args.init, cfg=CONFIG)
    train_s = time.perf_counter() - t0
    data = dict(before.get("data", {}))
    data["long_stage"] = {"pairs": pairs, "long_groups": len(long), "repeats": REPEATS, "short_groups": len(short),
                          "short_repeats": SHORT_REPEATS, "questions": asked, "replayed_groups": len(replay),
                          "filler_before": list(FILLER_BEFORE), "filler_after": list(FILLER_AFTER),
                          "own_negatives": OWN_NEGATIVES, "mined_negatives": MINED_NEGATIVES, "holds": HOLDS,
                          "conversations": list(conversations), "embedder": embedder.name}
    provenance = {**before, "provenance": before["provenance"] + PROVENANCE, "data": data,
                  "stages": [*before.get("stages", []), STAGE], "long_stage_training": config_dict(CONFIG)}
    report = {"stage": STAGE, "init": str(args.init), "training": config_dict(CONFIG), "data": data["long_stage"],
              "history": history, "seconds": {"train": round(train_s, 1),
                                              "total": round(time.perf_counter() - started, 1)}}
    return qa_stage.write_stage(tokenizer, model, out, provenance=provenance, report=report,
                                log_name="training_log_long_stage.json", cfg=CONFIG)


def main(argv: list[str] | None = None) -> None:
    qa_stage.stage_main(run, parse, argv)


if __name__ == "__main__":
    main()
