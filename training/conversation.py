"""Self-supervised conversational training queries, mined from LoCoMo conversation turns.

Only the conversation text is read (:func:`benchmarks.quality.datasets.load_locomo_turns`: turns,
speakers, session dates); the LoCoMo questions, answers, evidence labels and every other annotation
are never touched. A chosen turn (at least ``min_words`` words) gives a short query as an agent asks
its memory: 3 to 8 of the turn's content words (a span of them or a subset, in order), now and then led
by the speaker's name. The positive is that turn as the server indexes it, its raw text or its
contextualised text (``[8 May 2023] Caroline: …``), alternating query by query. The hard negatives
are other turns of the same conversation in the same form, by BM25 over that conversation's turns,
without the positive's near-duplicates and without turns that hold every query word (they would
answer the query as well as the positive does). Deterministic in the seed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchmarks.quality.datasets import Turn, contextualise
from training.bm25 import BM25, tokens
from training.data import MinedQuery

FORMS = ("raw", "contextualised")  # the two ways the quality harness writes a turn as a memory

_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")
# English function words and conversational fillers: never a query word
_STOPWORDS = """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing don't down during each few for from further had has have
having he her here hers herself him himself his how i i'm i've i'll i'd if in into is it it's its itself
just let's me more most my myself no nor not now of off on once only or other our ours ourselves out over
own same she should so some such than that that's the their theirs them themselves then there these they
this those through to too under until up very was we we're were what when where which while who whom why
will with would you you're you've your yours yourself yourselves
aren't can't couldn't didn't doesn't hadn't hasn't haven't he's isn't she's shouldn't there's they'd
they'll they're they've wasn't we'd we'll we've weren't what's where's who's won't wouldn't you'd you'll
hey hi hello wow oh ooh yeah yes yep ok okay sure thanks thank lol haha really totally definitely
great cool awesome amazing nice glad good thing things stuff lot lots much many pretty kind sounds
get got getting go going gonna like think know want even still well way right
"""
_STOP = frozenset(_STOPWORDS.split())


@dataclass(frozen=True)
class TurnQuery:
    conversation: str
    turn: Turn
    text: str
    form: str  # one of FORMS: how the positive (and its negatives) are written


def doc_id(conversation: str, turn_id: str, form: str) -> str:
    return f"locomo/{conversation}/{turn_id}/{form}"


def turn_text(turn: Turn, form: str) -> str:
    """The memory text the quality harness writes for ``turn`` in ``form``."""
    return contextualise(turn) if form == "contextualised" else turn.text


def turn_docs(conversations: Mapping[str, Sequence[Turn]]) -> dict[str, str]:
    """Every turn in every form, by :func:`doc_id`."""
    return {doc_id(c, t.id, form): turn_text(t, form) for c, turns in conversations.items() for t in turns
            for form in FORMS}


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not stopwords, each once (the first spelling), in order."""
    seen: set[str] = set()
    out: list[str] = []
    for word in _WORD.findall(text):
        key = word.lower().replace("’", "'")
        if len(key) > 1 and key not in _STOP and key not in seen:
            seen.add(key)
            out.append(word)
    return out


def turn_queries(conversations: Mapping[str, Sequence[Turn]], *, count: int, seed: int, min_words: int = 6,
                 min_query: int = 3, max_query: int = 8, name_share: float = 0.25) -> list[TurnQuery]:
    """``count`` queries from distinct turns chosen by ``seed``; the first ``n`` are the same for any
    ``count`` >= ``n``. Forms alternate raw, contextualised, raw, …"""
    rng = random.Random(seed)
    pool = [(c, t) for c in sorted(conversations) for t in conversations[c]]
    rng.shuffle(pool)
    out: list[TurnQuery] = []
    for conversation, turn in pool:
        if len(out) >= count:
            break
        words = content_words(turn.text)
        if len(turn.text.split()) < min_words or len(words) < min_query:
            continue
        text = _query(words, turn.speaker, rng, min_query=min_query, max_query=max_query, name_share=name_share)
        out.append(TurnQuery(conversation=conversation, turn=turn, text=text, form=FORMS[len(out) % len(FORMS)]))
    return out


def _query(words: Sequence[str], speaker: str, rng: random.Random, *, min_query: int, max_query: int,
           name_share: float) -> str:
    named = rng.random() < name_share and speaker.lower() not in {w.lower() for w in words}
    size = rng.randint(min_query, min(max_query - named, len(words)))
    if rng.random() < 0.5:  # a span of the content words (a phrase with its stopwords dropped)
        start = rng.randrange(len(words) - size + 1)
        picked = list(words[start:start + size])
    else:  # a subset, in the turn's order
        picked = [words[i] for i in sorted(rng.sample(range(len(words)), size))]
    return " ".join([speaker, *picked] if named else picked)


def mine_turn_queries(conversations: Mapping[str, Sequence[Turn]], *, count: int, seed: int, depth: int = 100,
                      near_duplicate: float = 0.4) -> list[MinedQuery]:
    """:func:`turn_queries` with their candidates: up to ``depth`` other turns of the same conversation
    in the positive's form, in BM25 order, skipping turns whose words overlap the positive's by a
    Jaccard share of ``near_duplicate`` or more and turns that hold every query word."""
    by_id = {c: {t.id: t for t in turns} for c, turns in conversations.items()}
    indexes: dict[tuple[str, str], BM25] = {}
    out: list[MinedQuery] = []
    for q in turn_queries(conversations, count=count, seed=seed):
        key = (q.conversation, q.form)
        if key not in indexes:
            indexes[key] = BM25({t.id: turn_text(t, q.form) for t in conversations[q.conversation]})
        bm25, turn_of = indexes[key], by_id[q.conversation]
        positive, asked = set(tokens(q.turn.text)), set(tokens(q.text))
        kept: list[str] = []
        for turn_id in bm25.search(q.text, len(bm25.ids), exclude=(q.turn.id,)):
            words = set(tokens(turn_of[turn_id].text))
            if len(words & positive) >= near_duplicate * max(len(words | positive), 1):
                continue
            if asked <= set(tokens(turn_text(turn_of[turn_id], q.form))):
                continue
            kept.append(doc_id(q.conversation, turn_id, q.form))
            if len(kept) == depth:
                break
        out.append(MinedQuery(id=f"locomo-{q.conversation}-{q.turn.id}", text=q.text,
                              positives=(doc_id(q.conversation, q.turn.id, q.form),), candidates=tuple(kept)))
    return out
