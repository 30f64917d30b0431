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
from server.text import indexed_text, without_context
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
    asks: str = ""  # a question's own words (its speaker and content words), what mining reads; "": the text


def doc_id(conversation: str, turn_id: str, form: str) -> str:
    return f"locomo/{conversation}/{turn_id}/{form}"


# The forms of a question's positive and negatives: "speaker", a turn as an agent writes it ("Caroline: text");
# "served", what the server's cross-encoder reads of such a memory written in a conversation (its date, the
# content, the previous turn of its session as its context: server/text.py indexed_text, server/engine/conversation.py).
QUESTION_TEXT_FORMS = ("served", "speaker")


def turn_text(turn: Turn, form: str, previous: Turn | None = None) -> str:
    """The memory text the quality harness writes for ``turn`` in ``form`` (``previous``: the turn before it in
    its session, the "served" form's context)."""
    if form == "contextualised":
        return contextualise(turn)
    if form == "speaker":
        return f"{turn.speaker}: {turn.text}"
    if form == "served":
        context = f"{previous.speaker}: {previous.text}" if previous is not None else ""
        return indexed_text(f"{turn.speaker}: {turn.text}", dated=True, created_at_ms=turn.created_at * 1000,
                            context=context)
    return turn.text


def turn_docs(conversations: Mapping[str, Sequence[Turn]]) -> dict[str, str]:
    """Every turn in every form (:data:`FORMS` and :data:`QUESTION_TEXT_FORMS`), by :func:`doc_id`."""
    out: dict[str, str] = {}
    for c, turns in conversations.items():
        for i, t in enumerate(turns):
            previous = turns[i - 1] if i and turns[i - 1].session == t.session else None
            for form in (*FORMS, *QUESTION_TEXT_FORMS):
                out[doc_id(c, t.id, form)] = turn_text(t, form, previous)
    return out


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
    out: list[TurnQuery] = []
    for conversation, turn in _shuffled(conversations, rng):
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
    picked = _pick(words, rng.randint(min_query, min(max_query - named, len(words))), rng)
    return " ".join([speaker, *picked] if named else picked)


def _shuffled(conversations: Mapping[str, Sequence[Turn]], rng: random.Random) -> list[tuple[str, Turn]]:
    pool = [(c, t) for c in sorted(conversations) for t in conversations[c]]
    rng.shuffle(pool)
    return pool


def _pick(words: Sequence[str], size: int, rng: random.Random) -> list[str]:
    """``size`` of ``words``: a span (a phrase with its stopwords dropped) or a subset, in the turn's order."""
    if rng.random() < 0.5:
        start = rng.randrange(len(words) - size + 1)
        return list(words[start:start + size])
    return [words[i] for i in sorted(rng.sample(range(len(words)), size))]


# Questions as a user or an agent asks its memory about what someone said: ``{s}`` the turn's speaker, ``{p}`` a
# few of the turn's content words in order. Written for this recipe from how people ask about a conversation,
# not taken from any evaluation set; a question names the speaker, so the turns that only mention or answer that
# speaker ("Thanks, Caroline!") are the hard negatives it learns to put below the speaker's own.
QUESTION_FORMS = (
    "What did {s} say about {p}?", "When did {s} talk about {p}?", "What does {s} think about {p}?",
    "Why did {s} mention {p}?", "How does {s} feel about {p}?", "Did {s} say anything about {p}?",
    "What did {s} tell me about {p}?", "What has {s} been doing with {p}?", "Has {s} ever mentioned {p}?",
    "What do I know about {s} and {p}?", "What did {s} share about {p}?", "Where did {s} mention {p}?",
    "What is {s}'s {p}?", "Tell me what {s} said about {p}.", "Which {p} did {s} mention?",
)


def turn_questions(conversations: Mapping[str, Sequence[Turn]], *, count: int, seed: int, min_words: int = 6,
                   min_query: int = 2, max_query: int = 5) -> list[TurnQuery]:
    """``count`` questions from distinct turns chosen by ``seed`` (another stream than :func:`turn_queries`'):
    a form of :data:`QUESTION_FORMS` around 2 to 5 of the turn's content words (a span or a subset, in order),
    always naming the turn's speaker. Forms alternate served, speaker, served, … (:data:`QUESTION_TEXT_FORMS`)."""
    rng = random.Random(f"questions-{seed}")
    out: list[TurnQuery] = []
    for conversation, turn in _shuffled(conversations, rng):
        if len(out) >= count:
            break
        words = [w for w in content_words(turn.text) if w.lower() != turn.speaker.lower()]
        if len(turn.text.split()) < min_words or len(words) < min_query:
            continue
        picked = _pick(words, rng.randint(min_query, min(max_query, len(words))), rng)
        text = rng.choice(QUESTION_FORMS).format(s=turn.speaker, p=" ".join(picked))
        out.append(TurnQuery(conversation=conversation, turn=turn, text=text,
                             form=QUESTION_TEXT_FORMS[len(out) % len(QUESTION_TEXT_FORMS)],
                             asks=" ".join([turn.speaker, *picked])))
    return out


def mine_turn_queries(conversations: Mapping[str, Sequence[Turn]], *, count: int, seed: int, depth: int = 100,
                      near_duplicate: float = 0.4, questions: bool = False) -> list[MinedQuery]:
    """:func:`turn_queries` (``questions``: :func:`turn_questions`) with their candidates: up to ``depth`` other
    turns of the same conversation in the positive's form, in BM25 order, skipping turns whose words overlap the
    positive's by a Jaccard share of ``near_duplicate`` or more and turns that hold every query word."""
    by_id = {c: {t.id: t for t in turns} for c, turns in conversations.items()}
    docs = turn_docs(conversations)
    indexes: dict[tuple[str, str], BM25] = {}
    out: list[MinedQuery] = []
    make = turn_questions if questions else turn_queries
    for q in make(conversations, count=count, seed=seed):
        key = (q.conversation, q.form)
        if key not in indexes:
            indexes[key] = BM25({t.id: docs[doc_id(q.conversation, t.id, q.form)]
                                 for t in conversations[q.conversation]})
        bm25, turn_of = indexes[key], by_id[q.conversation]
        asks = q.asks or q.text
        positive, asked = set(tokens(q.turn.text)), set(tokens(asks))
        kept: list[str] = []
        for turn_id in bm25.search(asks, len(bm25.ids), exclude=(q.turn.id,)):
            words = set(tokens(turn_of[turn_id].text))
            if len(words & positive) >= near_duplicate * max(len(words | positive), 1):
                continue
            # a turn that says every asked word itself answers as well as the positive (its context does not)
            if asked <= set(tokens(without_context(docs[doc_id(q.conversation, turn_id, q.form)]))):
                continue
            kept.append(doc_id(q.conversation, turn_id, q.form))
            if len(kept) == depth:
                break
        out.append(MinedQuery(id=f"locomo{'-q' if questions else ''}-{q.conversation}-{q.turn.id}", text=q.text,
                              positives=(doc_id(q.conversation, q.turn.id, q.form),), candidates=tuple(kept)))
    return out
