"""The speaker a question is about. A conversation written turn by turn as ``"<speaker>: <text>"`` memories holds both
speakers' turns, and a question that names one of them ("What did Caroline research?") asks what that speaker said or
did. The other speaker's reply shares the question's words and often outranks the answer ("Melanie: Thanks for the tip,
Caroline. Doing research and readying myself emotionally makes sense." above "Caroline: Researching adoption agencies
…").

After the rerank and the second hop, :func:`speaker_relevance` multiplies by ``SPEAKER_FACTOR`` the relevance of each
EPISODIC candidate whose speaker (``updates.split_speaker``: a leading ``"Name:"``) is the one speaker among the
candidates' speakers that the question names as a word; a question that names none of them, or two ("What do Jon and
Gina both have in common?"), is left alone. The factor is a prior on the calibrated probability that the turn answers
(capped below 1), so the block's floors read it as any relevance. Memories without a speaker (facts, documents,
SciFact's abstracts, the written sets' statements) are never touched. Chosen on the LoCoMo dev conversations
(docs/benchmarks/quality.md, the speaker rule's variants; docs/concepts/ranking.md).

A chat between a user and an assistant is written the same way with roles for names (``"user: …"``,
``"assistant: …"``, as ``write_conversation`` writes ``("user", text)`` turns), and there the user asks in the first
person: "What did I say about Rome?" names the user without a name. A question that names no speaker by name, speaks
in the first person ("I", "my", "me", "我") and not in the second ("you", "你"), names the user role
(``USER_ROLES``) when the candidates hold exactly one such speaker and at least one other (``FIRST_PERSON``). A
question in the second person ("what did you suggest for my trip?") may ask about the assistant's words and is left
alone; a "you" that only asks the assistant to act or recall ("Can you suggest a hotel for my trip?", "Do you
remember what I told you …", ``REQUESTS``) is not the second person.

A turn of a conversation between people that ends by asking the other something ("Caroline: That's awesome! What
made you pick pottery?") is rarely where the answer lies: the reply holds it. Among the top 10 of the LoCoMo dev
questions, 2 % of such turns are evidence against 12 % of the other turns, at the same mean relevance (0.132 and
0.131), so the calibration does not see it. :func:`question_relevance` multiplies by ``QUESTION_FACTOR`` the
relevance of every EPISODIC candidate whose speaker is a name (not a chat role) and whose text, at most
``updates.MAX_WORDS`` words (a CJK character counts as one), ends with a question mark. A user's turn to an
assistant is left alone: there a question is a request, and it often carries the user's own facts ("I adopted a
puppy last week, what should she eat?"). Chosen on the LoCoMo dev conversations (docs/benchmarks/quality.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

from server.domain import Memory, MemoryType
from server.engine.siblings import statement_words
from server.engine.updates import MAX_WORDS, ROLES, split_speaker
from server.text import has_cjk

SPEAKER_FACTOR = 1.5     # × on the relevance of the named speaker's turns (1: off)
# A question that names one speaker ("What activities does Melanie partake in?") also fuses a third list: the dense
# hits of that speaker's own turns, searched with the name taken out ("What activities does they partake in?": in the
# embedding the name pulls the turns that address the speaker, "Thanks, Melanie!"). Multi-hop evidence lies in the
# speaker's turns of other sessions. Through the server, LoCoMo dev R@10 0.810 -> 0.816, block 0.741 -> 0.752; held out
# 0.769 -> 0.777, 0.708 -> 0.710; it costs the long-turn suite, whose evidence is an assistant's turn quoting the
# speaker, R@10 0.754 -> 0.727 (docs/benchmarks/quality.md "The named speaker's own dense list").
SPEAKER_LIST = True
SPEAKER_LIST_DEPTH = 400   # the tenant's dense hits read to find the speaker's (kept as deep as the dense list)
# The list's dense search reads the question's text without the name (:func:`unnamed`), a second forward pass once the
# candidates name the speaker. The speakers a tenant's questions named lately are kept (the last NAMES_KEPT): a question
# naming one again has its unnamed text embedded in its own forward pass (:func:`names_in`), two texts in one pass
# costing less than two passes (bfloat16 on one Zen 4 core: 15 ms against 2 x 11-12 ms).
NAMES_KEPT = 32
NAMES_PREFETCHED = 2   # at most this many of them a question
MAX_RELEVANCE = 0.999    # a relevance is a probability: the factor never lifts one to 1
FIRST_PERSON = True      # a first-person question names the user role (False: names only)
USER_ROLES = frozenset({"user", "human", "用户"})   # speakers that stand for the user (compared in lower case)
# × on the relevance of a named speaker's turn that ends by asking (1: off): on the LoCoMo dev conversations the
# best of 0.3 / 0.5 / 1 through the server (the ratio of the two evidence rates among the top 10 is 0.19).
QUESTION_FACTOR = 0.3
_ENDS = "?？.!。！"   # what a turn's last sentence ends with; emoji, quotes, brackets after it are not read
_FIRST_EN = re.compile(r"(?<![\w'’])(?:i|me|my|mine|myself)(?![\w'’])|(?<![\w'’])i['’](?:m|ve|d|ll)(?!\w)",
                       re.IGNORECASE)
_SECOND_EN = re.compile(r"(?<![\w'’])(?:you|your|yours|yourself)(?!\w)", re.IGNORECASE)
# Where "you" is only the one asked to act or to recall ("Can you suggest a hotel for my trip?", "Do you remember what
# I told you about my diet?"), the question is still about the user; a "you" left after these ("Can you remind me
# what you recommended?") asks about the assistant's words.
REQUESTS = True
_REQUEST_EN = re.compile(
    r"(?<![\w'’])(?:(?:can|could|would|will)\s+you(?:\s+please)?(?:\s+not)?"
    r"|(?:do|did)\s+you\s+(?:still\s+)?(?:remember|recall|know)|would\s+you\s+mind|are\s+you\s+able\s+to"
    r"|(?:i|i've|i'd)\s+(?:have\s+|had\s+)?(?:tell|told|ask|asked|show|showed|shown|send|sent|give|gave|given|"
    r"mentioned\s+to|said\s+to|wrote\s+to|written\s+to)\s+you|thank\s+you|thanks)(?![\w'’])", re.IGNORECASE)
# A first-person request to act ("Can you suggest what I should cook for my friends?", "Plan a holiday for me",
# "你能帮我想想周末做什么菜吗？"), not to recall: what the agent needs is the user's own statements (likes, limits,
# plans); the assistant's old advice on the topic shares the request's words and outranks them. The user's turns
# then take this factor instead of SPEAKER_FACTOR. Measured at 2, 3 and 5 on the written requests set
# (benchmarks/quality/requests.py): one dev request gained at most, so it stays the named speaker's 1.5.
REQUEST_FACTOR = 1.5
_ACT_EN = re.compile(
    r"^(?:please\s+)?(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
    r"(?:suggest|recommend|plan|pick|choose|find|help|make|put\s+together|give\s+me|propose|come\s+up\s+with|"
    r"organi[sz]e|design|draft|write|create|book|schedule|work\s+out|figure\s+out|advise|think\s+of|arrange|prepare|"
    r"tell\s+me\s+(?:what|where|how|which)\s+to)(?![\w'’])"
    r"|(?<![\w'’])(?:any|some)\s+(?:ideas?|tips|suggestions?|recommendations?|advice)(?![\w'’])"
    r"|(?<![\w'’])should\s+i(?![\w'’])", re.IGNORECASE)
_RECALL_EN = re.compile(r"(?<![\w'’])(?:remind|remember|recall|repeat)(?![\w'’])", re.IGNORECASE)
_ACT_ZH = re.compile(r"推荐|建议|帮我|给我(?:想|挑|选|安排|制定|规划)|安排|制定|规划|该(?:怎么|买|吃|去|选|穿|做)")
_REQUEST_ZH = re.compile(r"你(?:能不能|能否|能|可以|可不可以|还记得|记得|知道)|(?:请|麻烦|谢谢)你|我(?:跟|和|对|给|告诉)你")


def _named_in(name: str, query: str) -> bool:
    """``name`` occurs in ``query`` as a word (a CJK name: as a substring, CJK text has no word boundaries)."""
    if has_cjk(name):
        return name in query
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query) is not None


def speakers_of(memories: Sequence[Memory | None]) -> list[str]:
    """The speaker of each memory: its leading ``"Name:"`` for an EPISODIC memory, else ""."""
    return [split_speaker(m.content)[0] if m is not None and m.type == MemoryType.EPISODIC else "" for m in memories]


def first_person(query: str) -> bool:
    """``query`` speaks in the first person singular and not in the second (English words; Chinese 我 outside 我们,
    and no 你 or 您), the second person of a request to act or recall not counted (``REQUESTS``: "Can you …",
    "Do you remember …", "… I told you …", "你能…", "你还记得…")."""
    if REQUESTS:
        query = _REQUEST_ZH.sub(lambda m: m.group(0).replace("你", "").replace("我", "我 "), query)
        query = _REQUEST_EN.sub(lambda m: " I " if m.group(0).lower().startswith("i") else " ", query)
    if has_cjk(query):
        if "你" in query or "您" in query:
            return False
        if "我" in query.replace("我们", ""):
            return True
    return _FIRST_EN.search(query) is not None and _SECOND_EN.search(query) is None


def asks_to_act(query: str) -> bool:
    """``query`` asks the assistant to do something now (suggest, recommend, plan, pick, help; "any tips", "should
    I"; 推荐, 建议, 帮我, 安排 …), not to remind it of something ("remind", "remember", "recall"; 记得)."""
    text = query.strip()
    if _RECALL_EN.search(text) or "记得" in text or "提醒" in text:
        return False
    return _ACT_EN.search(text) is not None or _ACT_ZH.search(text) is not None


def named_speaker(query: str, speakers: Sequence[str], *, roles: bool | None = None) -> str:
    """The one speaker of ``speakers`` that ``query`` names, else "" (none, or more than one). With ``roles``
    (default ``FIRST_PERSON``), a first-person question that names no speaker names the one user role among them,
    when another speaker is among them too."""
    named = {s for s in speakers if s and _named_in(s, query)}
    if len(named) == 1:
        return named.pop()
    if named or not (FIRST_PERSON if roles is None else roles):
        return ""
    present = {s for s in speakers if s}
    users = {s for s in present if s.lower() in USER_ROLES}
    if len(users) == 1 and len(present) > 1 and first_person(query):
        return users.pop()
    return ""


def unnamed(question: str, name: str) -> str:
    """``question`` with the speaker ``name`` taken out: "What did Caroline research?" → "What did they research?",
    "Caroline's" → "their"."""
    text = re.sub(rf"(?<!\w){re.escape(name)}['’]s(?!\w)", "their", question)
    text = re.sub(rf"(?<!\w){re.escape(name)}(?!\w)", "they", text)
    return " ".join(text.split())


def names_in(query: str, known: Iterable[str], *, limit: int = NAMES_PREFETCHED) -> list[str]:
    """The names of ``known`` (speakers a tenant's questions named before) that ``query`` names, at most ``limit``,
    in ``known``'s order; none for a CJK query (:func:`listed_speaker` lists no speaker of one)."""
    if has_cjk(query):
        return []
    return [name for name in known if _named_in(name, query)][:limit]


def listed_speaker(query: str, memories: Sequence[Memory | None]) -> str:
    """The speaker whose own turns get a dense list of their own for ``query`` (``SPEAKER_LIST``): the one speaker
    among ``memories`` (a query's first candidates) that the query names by name (not a chat role named by the first
    person), not CJK (:func:`unnamed` rewrites English); else ""."""
    if not SPEAKER_LIST:
        return ""
    name = named_speaker(query, speakers_of(memories), roles=False)
    return name if name and not has_cjk(name) and name.lower() not in ROLES else ""


def speaker_relevance(query: str, memories: Sequence[Memory | None], relevance: np.ndarray, *,
                      factor: float = SPEAKER_FACTOR) -> np.ndarray:
    """``relevance`` with the named speaker's turns × ``factor`` (at most ``MAX_RELEVANCE``); the same array when the
    question names no single speaker of ``memories`` or ``factor`` is 1."""
    if factor == 1.0 or len(relevance) == 0:
        return relevance
    speakers = speakers_of(memories)
    name = named_speaker(query, speakers)
    if not name:
        return relevance
    if (REQUEST_FACTOR != factor and name.lower() in USER_ROLES and not _named_in(name, query)
            and asks_to_act(query)):
        factor = REQUEST_FACTOR   # the user's statements for a request to act (the first person named them)
    own = np.asarray([s == name for s in speakers], dtype=np.bool_)
    out = np.asarray(relevance, dtype=np.float64).copy()
    out[own] = np.maximum(out[own], np.minimum(out[own] * factor, MAX_RELEVANCE))
    return out


def asks(text: str) -> bool:
    """Whether a turn's text (after its speaker) ends with a question mark, symbols after it aside, in at most
    ``updates.MAX_WORDS`` words (``siblings.statement_words``: a CJK character counts as one)."""
    body = _without_trailing(text.rstrip())
    # statement_words counts at least the space-separated words: a long turn is out before its CJK runs are read
    return body.endswith(("?", "？")) and len(body.split()) <= MAX_WORDS and statement_words(body) <= MAX_WORDS


def _without_trailing(text: str) -> str:
    """``text`` without the symbols after its last sentence: what follows its last word character (``\\w``:
    alphanumeric or "_") or sentence end (:data:`_ENDS`). From the end: a regex anchored at ``$`` tries every
    position of a long turn."""
    end = len(text)
    while end and not ((c := text[end - 1]).isalnum() or c == "_" or c in _ENDS):
        end -= 1
    return text[:end]


def question_relevance(memories: Sequence[Memory | None], relevance: np.ndarray, *,
                       factor: float = QUESTION_FACTOR) -> np.ndarray:
    """``relevance`` with each named speaker's turn that ends by asking (:func:`asks`) × ``factor``; the same array
    when none does or ``factor`` is 1. Chat roles and memories without a speaker are never touched."""
    if factor == 1.0 or len(relevance) == 0:
        return relevance
    hit = np.zeros(len(relevance), dtype=np.bool_)
    for i, m in enumerate(memories):
        if m is None or m.type != MemoryType.EPISODIC:
            continue
        speaker, body = split_speaker(m.content)
        hit[i] = bool(speaker) and speaker.lower() not in ROLES and asks(body)
    if not hit.any():
        return relevance
    out = np.asarray(relevance, dtype=np.float64).copy()
    out[hit] *= factor
    return out
