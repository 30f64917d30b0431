"""Training data for the reranker: pure functions over the SciFact corpus and train split.

Allowed sources only: the SciFact *train* claims with their judgments, and self-supervised queries
made from the corpus itself (one sentence of a document is the query; the document without that
sentence is the positive). The SciFact test claims and judgments are never read here. The
conversational queries come from :mod:`training.conversation` (LoCoMo conversation text only;
the LoCoMo questions, answers and evidence labels are never read anywhere in the recipe).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(])")


@dataclass(frozen=True)
class MinedQuery:
    """A query with its positive documents and its mined candidates (BM25 order)."""

    id: str
    text: str
    positives: tuple[str, ...]
    candidates: tuple[str, ...]  # doc ids in candidate order (positives included where found)
    positive_text: str | None = None  # self-supervised: the document with the query sentence removed


@dataclass(frozen=True)
class Group:
    """One listwise example: the positive first, then the hard negatives."""

    query: str
    passages: tuple[str, ...]


def is_dev(query_id: str, *, dev_share: float) -> bool:
    """A stable split of the train claims into train and dev by a hash of the id (no RNG state)."""
    digest = hashlib.sha256(query_id.encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < dev_share


def sentence_queries(docs: Mapping[str, str], *, count: int, seed: int,
                     min_words: int = 8, max_words: int = 40) -> list[tuple[str, str, str]]:
    """``(doc id, sentence, doc without the sentence)`` for ``count`` documents chosen by ``seed``.

    The sentence is never the first one of the document (the title runs into it), so the rest of the
    document still has to be understood to match it.
    """
    rng = random.Random(seed)
    ids = sorted(docs)
    rng.shuffle(ids)
    out: list[tuple[str, str, str]] = []
    for doc_id in ids:
        sentences = _SENTENCE_END.split(docs[doc_id])
        choices = [i for i, s in enumerate(sentences) if i > 0 and min_words <= len(s.split()) <= max_words]
        if len(sentences) < 4 or not choices:
            continue
        pick = rng.choice(choices)
        rest = " ".join(s for i, s in enumerate(sentences) if i != pick)
        out.append((doc_id, sentences[pick], rest))
        if len(out) == count:
            break
    return out


def build_groups(mined: Sequence[MinedQuery], docs: Mapping[str, str], *, negatives: int, seed: int,
                 skip_top: int = 0) -> list[Group]:
    """One group per (query, positive): the positive and ``negatives`` hard negatives sampled from the
    candidates that are not positives (after skipping the ``skip_top`` highest, which are the
    likeliest unjudged relevant documents). Deterministic in ``seed``; the order is shuffled."""
    rng = random.Random(seed)
    groups: list[Group] = []
    for q in mined:
        pool = [d for d in q.candidates if d not in q.positives][skip_top:]
        if len(pool) < negatives:
            continue
        for pos in q.positives:
            text = q.positive_text if q.positive_text is not None else docs[pos]
            negs = rng.sample(pool, negatives)
            groups.append(Group(query=q.text, passages=(text, *(docs[d] for d in negs))))
    rng.shuffle(groups)
    return groups
