"""Does this message need memory? The recall gate: a search with ``gate`` set answers at once with no hits
when its text is clearly small talk — every word a greeting, thanks, acknowledgement or filler word, no
number, no name, no back-reference — and always searches otherwise. It errs towards recalling: a word it
does not know is reason enough to search (measured on LoCoMo: README "Memory hygiene").

Back-references ("last time", "that project", "remember", "上次", "之前") and names the tenant has seen
(its memories' entities and capitalised names, even when the message writes them in lower case or they
are also ordinary words) always recall.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor

from server.domain import Memory, QueryResult, SearchQuery, Timings
from server.tenants.shard import TenantShard
from server.text import has_cjk

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_NAME = re.compile(r"\b[A-Z][a-z]{2,}\b")
# Words that carry no request for memory on their own: greetings, thanks, acknowledgements, fillers.
SMALL_TALK = frozenset("""
hi hello hey heya hiya yo howdy greetings morning afternoon evening night good gd thanks thank thx ty tysm cheers
appreciate appreciated ok okay k kk yes yeah yep yup ya yea no nope nah sure cool great awesome nice wow woah lol
lmao haha hahaha hehe omg bye goodbye cya later see soon welcome congrats congratulations glad happy hear that that's
thats this it it's its so much very really too me you your you're we us i i'm am is are was be been doing going how
what's whats up sup fine alright well oh ah ahh hmm um uh and a an the of to for just all right true exactly indeed
totally agree absolutely definitely amazing wonderful fantastic lovely sweet perfect np problem worries same here
there take care have day weekend talk chat catch again anyway sounds sound fun cute love lovely haha wish luck best
bless xoxo hugs please pls let's lets get got it noted understood gotcha makes sense
""".split())
_SMALL_TALK_ZH = ("你好", "您好", "谢谢", "多谢", "好的", "好吧", "嗯嗯", "嗯", "哈哈", "呵呵", "再见", "拜拜", "没问题",
                  "早上好", "晚上好", "下午好", "晚安", "收到", "明白", "知道了", "是的", "对的", "对", "不客气", "辛苦了",
                  "太好了", "好", "哦", "啊", "呀", "吧", "呢", "了", "的", "哇", "嘿", "喂", "在吗", "你", "您", "很", "也",
                  "啦", "么", "吗", "非常", "真", "棒")
_BACK_REFERENCE = re.compile(
    r"\b(last\s+(time|week|month|year|night)|that\s+(project|place|thing|one|book|movie|trip|idea|plan)|"
    r"remember|remind|recall|mentioned|you\s+said|i\s+said|told\s+(you|me)|we\s+(talked|discussed|spoke)|"
    r"earlier|before|previous|previously|again|still|yesterday|ago|back\s+then|as\s+usual|my|our)\b|"
    r"上次|之前|以前|上回|那个|那次|记得|说过|提过|提到|聊过|上周|上个月|去年|昨天|还是|我的|我们的",
    re.I)
_PUNCT = re.compile(r"[\s\W_]+", re.UNICODE)


def needs_memory(text: str, *, known_names: frozenset[str] = frozenset()) -> tuple[bool, str]:
    """``(True, why)`` when the message may need memory, ``(False, "small talk")`` when it clearly does not."""
    if _BACK_REFERENCE.search(text):
        return True, "refers back"
    if any(ch.isdigit() for ch in text):
        return True, "has a number"
    words = [w.lower() for w in _WORD.findall(text)]
    if known_names and any(w in known_names for w in words):
        return True, "names a known entity"
    if has_cjk(text):
        rest = text
        for phrase in _SMALL_TALK_ZH:
            rest = rest.replace(phrase, "")
        rest = _PUNCT.sub("", "".join(ch for ch in rest if not ch.isascii() or ch.isalpha()))
        rest = "".join(w for w in _WORD.findall(rest) if w.lower() not in SMALL_TALK)
        return (True, "has content words") if rest else (False, "small talk")
    if any(w not in SMALL_TALK for w in words):
        return True, "has content words"
    return False, "small talk"


def names_of(memories: Iterable[Memory]) -> frozenset[str]:
    """Lower-cased names a tenant has seen: its memories' entities and words capitalised inside a sentence
    after a word ("the Cheers bar"; not "Hi! Thanks" or "Thanks, See you", where a capital starts a clause)."""
    out: set[str] = set()
    for m in memories:
        out.update(e.lower() for e in m.entities)
        text = m.content
        for match in _NAME.finditer(text):
            before = text[:match.start()].rstrip()
            if before and before[-1].isalnum():
                out.add(match.group().lower())
    return frozenset(out)


class NameBook:
    """Per shard, the names :func:`names_of` finds, recomputed when the shard's size changed and the copy is
    older than ``max_age_s``. Keyed weakly: an evicted shard takes its names with it."""

    def __init__(self, *, max_age_s: float = 30.0) -> None:
        self.max_age_s = max_age_s
        self._names: weakref.WeakKeyDictionary[object, tuple[int, float, frozenset[str]]] = weakref.WeakKeyDictionary()

    def stale(self, shard: object, size: int) -> bool:
        got = self._names.get(shard)
        return got is None or (got[0] != size and time.monotonic() - got[1] > self.max_age_s)

    def get(self, shard: object) -> frozenset[str]:
        got = self._names.get(shard)
        return got[2] if got is not None else frozenset()

    def refresh(self, shard: object, memories: list[Memory]) -> frozenset[str]:
        names = names_of(memories)
        self._names[shard] = (len(memories), time.monotonic(), names)
        return names


class RecallGate:
    """What the engine asks before a search: which of these gated queries need no memory. The tenant's names
    are read off the event loop (``pool``) when stale; the check itself is a few regular expressions."""

    def __init__(self, *, pool: Executor) -> None:
        self.pool = pool
        self.names = NameBook()

    async def skips(self, shard: TenantShard, queries: Sequence[SearchQuery]) -> dict[int, QueryResult]:
        if not any(q.gate for q in queries):
            return {}
        started = time.monotonic_ns()
        if self.names.stale(shard, len(shard.store)):
            await asyncio.get_running_loop().run_in_executor(
                self.pool, lambda: self.names.refresh(shard, shard.store.all()))
        names = self.names.get(shard)
        out: dict[int, QueryResult] = {}
        for i, q in enumerate(queries):
            if q.gate:
                need, why = needs_memory(q.text, known_names=names)
                if not need:
                    out[i] = QueryResult(hits=(), timings=Timings(total_ns=time.monotonic_ns() - started), skipped=why)
        return out
