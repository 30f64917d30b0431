"""Candidate lists for training and evaluation, mined with BM25 over the SciFact corpus.

The SciFact train claims and the self-supervised sentence queries get their hard negatives here; the
SciFact test claims get candidate lists written to a separate file that only the evaluation reads
(training never opens it). The conversational queries (:mod:`.conversation`) are mined per LoCoMo
conversation from its turns alone, into their own file with the turn texts they name. BM25 rather
than the server's hybrid search because embedding the 5k-doc corpus through the server takes most of
an hour on the shared 2-core box; the reranker sees the same kind of lexically close candidates
either way. Deterministic (ties broken by doc id).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import asdict
from pathlib import Path

from benchmarks.quality.block import LOCOMO_DEV
from benchmarks.quality.datasets import load_locomo_turns, load_scifact
from training.bm25 import BM25
from training.conversation import mine_turn_queries, turn_docs
from training.data import MinedQuery, sentence_queries

log = logging.getLogger(__name__)

TRAIN_FILE = "scifact_train.json"
SELFSUP_FILE = "scifact_selfsup.json"
TEST_FILE = "scifact_test_eval_only.json"
LOCOMO_FILE = "locomo_selfsup.json"
LOCOMO_TURNS_FILE = "locomo_turns.json"  # doc id → memory text of every turn in every form
LOCOMO_QUESTIONS_FILE = "locomo_questions.json"


def save(path: Path, mined: Sequence[MinedQuery]) -> None:
    path.write_text(json.dumps([asdict(m) for m in mined], ensure_ascii=False), encoding="utf-8")


def load(path: Path) -> list[MinedQuery]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [MinedQuery(id=m["id"], text=m["text"], positives=tuple(m["positives"]),
                       candidates=tuple(m["candidates"]), positive_text=m.get("positive_text")) for m in raw]


def mine(out_dir: Path, *, selfsup: int, seed: int, depth: int = 100) -> None:
    """Writes the three candidate files under ``out_dir`` (skipped when all exist)."""
    paths = [out_dir / f for f in (TRAIN_FILE, SELFSUP_FILE, TEST_FILE)]
    if all(p.is_file() for p in paths) and len(load(paths[1])) >= selfsup:
        log.info("candidates cached in %s", out_dir)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    train = load_scifact(split="train")
    docs = {d.id: d.text for d in train.docs}
    bm25 = BM25(docs)
    save(paths[0], [MinedQuery(id=q.id, text=q.text, positives=tuple(d for d, g in train.qrels[q.id].items() if g > 0),
                               candidates=tuple(bm25.search(q.text, depth))) for q in train.queries])
    sentences = sentence_queries(docs, count=selfsup, seed=seed)
    save(paths[1], [MinedQuery(id=f"ss-{doc_id}", text=s, positives=(doc_id,), positive_text=rest,
                               candidates=tuple(bm25.search(s, depth, exclude=(doc_id,))))
                    for doc_id, s, rest in sentences])
    test = load_scifact(split="test")  # evaluation only: its own file, never read by training
    save(paths[2], [MinedQuery(id=q.id, text=q.text, positives=tuple(d for d, g in test.qrels[q.id].items() if g > 0),
                               candidates=tuple(bm25.search(q.text, depth))) for q in test.queries])
    log.info("mined %d train, %d self-supervised, %d test queries into %s",
             len(train.queries), len(sentences), len(test.queries), out_dir)


def mine_locomo(out_dir: Path, *, count: int, seed: int, depth: int = 100, root: Path | None = None) -> None:
    """Writes ``count`` conversational queries and the turn texts under ``out_dir`` (nothing when
    ``count`` is 0; skipped when cached). Reads only the LoCoMo conversation text."""
    _mine_turns(out_dir / LOCOMO_FILE, count=count, seed=seed, depth=depth, root=root, only=None, questions=False)


def mine_locomo_questions(out_dir: Path, *, count: int, seed: int, depth: int = 100, root: Path | None = None,
                          only: Collection[str] | None = LOCOMO_DEV) -> None:
    """Writes ``count`` conversational questions (:func:`training.conversation.turn_questions`) and the turn
    texts under ``out_dir`` (nothing at 0; skipped when cached). Reads only the LoCoMo conversation text; the
    questions come from the conversations in ``only`` (default: the dev ones, so the held-out conversations
    measure what they teach; None: every one)."""
    _mine_turns(out_dir / LOCOMO_QUESTIONS_FILE, count=count, seed=seed, depth=depth, root=root, only=only,
                questions=True)


def _mine_turns(path: Path, *, count: int, seed: int, depth: int, root: Path | None, only: Collection[str] | None,
                questions: bool) -> None:
    """``path``: the mined queries; beside it the texts of every turn of every conversation (both files' docs)."""
    texts = path.parent / LOCOMO_TURNS_FILE
    if count <= 0:
        return
    if path.is_file() and texts.is_file() and len(load(path)) >= count:
        log.info("conversational %s cached in %s", "questions" if questions else "queries", path.parent)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    conversations = load_locomo_turns(root)
    asked = {c: turns for c, turns in conversations.items() if only is None or c in only}
    mined = mine_turn_queries(asked, count=count, seed=seed, depth=depth, questions=questions)
    save(path, mined)
    texts.write_text(json.dumps(turn_docs(conversations), ensure_ascii=False), encoding="utf-8")
    log.info("mined %d conversational %s from %d LoCoMo conversations into %s", len(mined),
             "questions" if questions else "queries", len(asked), path.parent)


def load_locomo_queries(out_dir: Path, *, count: int, questions: bool = False,
                        ) -> tuple[list[MinedQuery], dict[str, str]]:
    """The first ``count`` cached conversational queries (``questions``: the questions) and the turn texts by doc
    id (empty at 0)."""
    if count <= 0:
        return [], {}
    turns = json.loads((out_dir / LOCOMO_TURNS_FILE).read_text(encoding="utf-8"))
    return load(out_dir / (LOCOMO_QUESTIONS_FILE if questions else LOCOMO_FILE))[:count], turns
