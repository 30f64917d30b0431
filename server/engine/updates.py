"""Updates without keys: at write time, a new memory that restates an attribute of the same subject as an
older one with a different value links to it — ``updates`` on the new memory, ``updated_by`` on the old one
("I switched to a Framework laptop" after "my laptop is a ThinkPad"; "预算改成八万了" after "预算三万").
Nothing is deleted or superseded: the old memory stays ACTIVE, searchable and in History; the ranking puts
it below the newer one unless the query asks about the past (server/engine/time_intent.py, ranking.py).

LLM-free. A link needs all of (:func:`judge`):

* the same scope and the same type family (episodic and semantic memories are one family, procedural the
  other), the older memory live and not already updated (a chain links to its newest member);
* embedding evidence: cosine ≥ the embedder's link threshold (:data:`LINK_COSINE`);
* lexical evidence: a shared attribute word (English words without stop words, Chinese character bigrams);
* a different value: the newer text says something the older one does not (not a restatement);
* the same subject: the same speaker (``"Name: …"`` turns) and the same people named by relation ("my
  sister", "我妈妈"), and no explicit entities on one that the other lacks;
* a change cue in the newer text — "switched to", "now", "moved to", "no longer", "instead", "new", "改成",
  "换成", "现在", "搬到" — or, without one, the same "my X is …" frame on both ("my manager is Priya" /
  "my manager is Tom");
* the same attribute: both name one of the everyday attribute classes (``_ATTRIBUTES``) outside their change
  cues, or, for an attribute no class names, the frame rule (:func:`_by_frame`): two short statements sharing a
  frame word, the newer naming the change itself ("renamed", "换成"; "now" or "new" alone is not enough);
  or, for a change that names no attribute ("Ported my number to Giffgaff" after "My mobile plan is with EE"),
  the nearest-statement rule (:func:`_by_nearest`): the newer text's nearest older statement of the same
  subject names one, and both are short.

A wrong link demotes a true memory, so every rule errs towards no link. ``LinkUpdate`` (the RPC) undoes a
link or makes one by hand; both are audited (AUDIT_OP_UNLINK / AUDIT_OP_UPDATE_LINK).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.domain import LIVE_STATUSES, Memory, MemoryType
from server.text import CJK_CHARS, has_cjk

if TYPE_CHECKING:
    from server.engine.write import Staging

# The cosine at or above which a pair may link when the embedder names none (Embedder.update_link_cosine: e5 0.86,
# its cosines crowd high; MiniLM 0.55; memory.update_link_cosine overrides both).
LINK_COSINE_DEFAULT = 0.82
# Chinese text: e5's cosines between unrelated Chinese sentences sit ~0.09 above English ones (0.886–0.896 against
# ~0.80 on the pairs measured for docs/concepts/updates.md), so a pair in a CJK script needs this much more.
LINK_COSINE_CJK_SHIFT = 0.05

MAX_WORDS = 30   # a text longer than this (in space-separated words) is a narrative, never linked

_SPEAKER = re.compile(r"^\s*([A-Z][\w.'-]{0,30}(?: [A-Z][\w.'-]{0,30})?)\s*:\s+")
# A chat's roles in any case ("user: …", "assistant: …", as agents log them), and in Chinese with either colon.
_EN_ROLES, _ZH_ROLES = ("user", "assistant", "human", "ai", "system"), ("用户", "助手")
ROLES = frozenset(_EN_ROLES + _ZH_ROLES)   # chat roles: split_speaker returns them as the speaker, in lower case
_ROLE = re.compile(rf"^\s*({'|'.join(_EN_ROLES)})\s*:\s+|^\s*({'|'.join(_ZH_ROLES)})\s*[:：]\s*", re.IGNORECASE)
_WORD = re.compile(r"\d+(?:[.,:]\d+)*|[a-z][a-z0-9'-]*")
_CJK_RUN = re.compile(f"[{CJK_CHARS}]+")

_EN_CUES = re.compile(
    r"\b(?:switched|switching|switch(?:ed)? (?:to|over)|changed (?:\w+ ){0,4}to|changed (?:jobs|careers|schools|dentists|doctors|gyms|teams|"
    r"banks|cities|phones|laptops|cars|diets|companies)|change to|moved|now|"
    r"no longer|"
    r"not any ?more|any ?more|instead|(?:my|our) new|started (?:a |an |my )?new|new \w+ (?:\w+ ){0,2}(?:is|are)|"
    r"got a new|replaced|upgraded|became|"
    r"these days|nowadays|currently|from now on|gave up|ditched|sold|renamed|traded|"
    # Verbs that say a state ended or began, the value changing with it: "took a position at Stripe", "Dropped
    # Spanish", "Swapped Monday spin for yoga", "Netflix put the price up to 11 pounds", "Got a raise to 48k".
    r"took (?:a |an |the |up )?(?:new )?(?:job|position|role|post)|started (?:at|with|using|going|learning|"
    r"teaching|working|seeing|dating|taking|playing|doing)|left (?:\w+ ){1,3}and joined|"
    r"dropped(?! (?:it|them|him|her|me|us|my|off|by|in|out|the kids?)\b)|"
    r"swapped|ported|transferred|cancell?ed|registered with|signed up (?:for|with)|broke up|divorced|retired|"
    r"got a raise|pay rise|raised|increased|reduced|went (?:up|down) to|(?:up|down) to \d|put (?:\w+ ){0,2}up|"
    # Not "quit" ("I won't quit", "don't quit": chat's encouragement), "stopped" ("stopped by"), "no more".
    r"shifted|moved up|promoted|(?:'ve|have) been (?:\w+ ){1,2}since)\b", re.IGNORECASE)
_ZH_CUES = re.compile(r"改成|换成|换了|改为|改到|改了|改名|更名|现在|如今|目前|搬到|搬去|搬家|跳槽|不再|不用了|已经不|"
                      r"变成|转到|升级|升到|升入|调整|换到|[的了个台辆份家部只]新|新的|辞职|离开了|加入了|"
                      # A state ended or began: "房贷降到三千二", "羽毛球不打了", "法语放弃了，开始学韩语", "戒糖了".
                      r"降到|涨到|减到|增加到|提高到|放弃|开始[学用做在]|入手|戒[了掉糖烟酒]|不[打玩喝吃去做学看抽]了|"
                      r"分手|退休|辞去|辞掉|转行|取消了|注销|卖了|毕业|调到|改[去骑坐用喝吃看学]|上了?[小中大]学|上[初高]中")
# Cues that say the state now holds or that a thing is new, not that a value changed ("now", "these days", "my new",
# "现在", "的新" — also inside "今天的新闻", the news; "any more suggestions"): chat says them all the time. The frame
# rule (:func:`_by_frame`), which needs no attribute class, asks for a cue that names the change itself ("switched",
# "renamed", "no longer", "换成").
_PRESENT_ONLY = re.compile(r"now|these days|nowadays|currently|any more|现在|如今|目前|.*\bnew\b.*|.*新.*", re.IGNORECASE)
FRAME_MAX_WORDS = 15   # the frame rule reads short statements only (a CJK character counts as half a word)
# The "my X is …" frame: a restated attribute even without a change cue.
_EN_FRAME = re.compile(r"\b(?:my|our)\s+((?:[a-z]+\s+){0,2}?[a-z]+?)(?:'s)?\s+(?:is|are|was)\b", re.IGNORECASE)
_ZH_FRAME = re.compile(f"我的([{CJK_CHARS}]{{1,4}}?)(?:是|叫)")

_EN_STOP = frozenset("""
a an the i me my mine we us our ours you your he him his she her it its they them their this that these those
is are was were be been being am do does did have has had having will would can could should shall may might must
and or but so if then than as at by for from in into of on onto to with without about over under after before
again also just very really too not no yes oh ok okay well now new old one some any all more most much many
there here what which who whom whose when where why how up down out off still back got get gets getting go going
went gone make made really actually lot lots thing things stuff like love yeah hey hi thanks thank yes sure
switched switch switching changed change moved move moving instead started start stopped stop quit replaced
upgraded became become currently nowadays days longer anymore joined left sold renamed traded gave ditched
since last week month year ago today yesterday use used using i'm i've i'd it's that's we're we've don't
""".split())
_CJK_STOP = frozenset("我的 我在 我们 你的 他的 她的 现在 目前 已经 一个 一台 一家 没有 还是 就是 不是 这个 那个 什么 "
                      "了一 换了 改成 换成 改到 改为 搬到 如今 的是 是我 我是 了新 的新 新的 也是 我用 我有 我换 我现 在是 是一 "
                      "成了 了工 在的 现在 在用 用的".split())

_CJK_STOP_CHARS = frozenset("我你他她它们的了在是有和也都就还要会去来不没这那个一上下中大小好吗呢吧啊把被给让"
                            "很太最更又再已经现如今目前新换改成为到搬跳槽变转用")
_RELATIONS_EN = frozenset("""
sister brother mother mom mum father dad parents wife husband partner girlfriend boyfriend friend son daughter
kids kid children child boss manager colleague coworker roommate neighbor neighbour grandma grandpa grandmother
grandfather aunt uncle cousin fiance fiancee
""".split())
_RELATIONS_ZH = ("姐姐", "妹妹", "哥哥", "弟弟", "妈妈", "母亲", "爸爸", "父亲", "老婆", "妻子", "老公", "丈夫",
                 "女朋友", "男朋友", "朋友", "儿子", "女儿", "孩子", "同事", "室友", "邻居", "奶奶", "爷爷", "外婆", "外公")


# Attribute classes: the everyday attributes a person restates, each with the words that name it (English stems and
# Chinese words). Two texts that both name attributes must share one ("laptop" and "phone" never link, "live" and
# "moved" do); a text naming none falls back to its shared words. Only attributes that hold one value at a time (a
# bank, a landlord, a child's school; not a sport or a hobby, of which a person has several) have a class.
_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "computer": ("laptop", "computer", "notebook", "macbook", "thinkpad", "电脑", "笔记本"),
    "phone": ("phone", "smartphone", "mobile", "iphone", "handset", "sim", "carrier", "手机"),
    "home": ("live", "lived", "move", "moved", "relocate", "relocated", "city", "town", "address",
             "apartment", "flat", "住", "搬", "城市", "地址", "家在"),
    "job": ("job", "work", "works", "working", "career", "employer", "company", "position", "role", "工作", "上班",
            "公司", "跳槽", "职位", "岗位"),
    "money": ("budget", "salary", "earn", "earning", "raise", "rent", "price", "cost", "mortgage", "wage", "income",
              "预算", "工资", "房租", "价格", "薪水", "房贷", "月供", "收入"),
    "diet": ("diet", "vegetarian", "vegan", "keto", "pescatarian", "eat", "饮食", "吃素", "素食"),
    "partner": ("partner", "girlfriend", "boyfriend", "wife", "husband", "fiance", "fiancee", "男朋友", "女朋友",
                "老公", "老婆", "对象", "伴侣"),
    "team": ("team", "club", "allegiance", "球队", "主队"),
    "car": ("car", "drive", "vehicle", "motorbike", "scooter", "车"),
    "gym": ("gym", "train", "fitness", "健身房", "健身"),
    "school": ("school", "university", "college", "course", "study", "primary", "secondary", "nursery", "kindergarten",
               "preschool", "学校", "大学", "专业", "小学", "中学", "初中", "高中", "幼儿园"),
    "contact": ("email", "邮箱", "号码", "电话"),   # not "number": a desk number is no phone number
    "account": ("password", "login", "passcode", "密码", "账号"),
    "doctor": ("doctor", "gp", "dr", "physician", "dentist", "therapist", "医生", "牙医"),
    "manager": ("manager", "boss", "supervisor", "领导", "老板", "经理", "主管", "上司"),
    "learning": ("learning", "reading", "学", "在读"),
    "schedule": ("standup", "meeting", "schedule", "alarm", "周会", "例会", "会议", "闹钟"),
    "internet": ("internet", "broadband", "wifi", "isp", "宽带"),
    "childcare": ("babysitter", "babysit", "nanny", "childminder", "保姆"),
    "parking": ("park", "parking", "停车", "车位"),
    "desk": ("desk", "cubicle", "工位"),
    "bank": ("bank", "banking", "银行"),
    "energy": ("energy", "electricity", "tariff", "电费", "燃气"),
    "insurance": ("insurance", "insurer", "保险"),
    "landlord": ("landlord", "landlady", "房东"),
    "weight": ("weight", "weigh", "kg", "kilo", "体重", "公斤"),
    "hair": ("hairdresser", "barber", "salon", "理发", "理发师"),
    "vet": ("vet", "veterinarian", "兽医"),
}
_ATTR_WORDS = {w: a for a, ws in _ATTRIBUTES.items() for w in ws if w.isascii()}
_ATTR_ZH = [(w, a) for a, ws in _ATTRIBUTES.items() for w in ws if not w.isascii()]


def attributes(text: str) -> frozenset[str]:
    """The attribute classes a text names (``_ATTRIBUTES``)."""
    words = _WORD.findall(text.lower())
    found = {_ATTR_WORDS[w] for w in (_stem(x) for x in words) if w in _ATTR_WORDS}
    found.update(_ATTR_WORDS[w] for w in words if w in _ATTR_WORDS)
    if not text.isascii():   # the Chinese words: none in an ASCII text
        found.update(a for w, a in _ATTR_ZH if w in text)
    return frozenset(found)


def named_attributes(text: str) -> frozenset[str]:
    """The attribute classes a text names outside its change cues: "moved" in "I moved my logins to Bitwarden" is
    the change, not a home ("I moved over to Zed as my editor" is not the same attribute)."""
    return attributes(_ZH_CUES.sub(" ", _EN_CUES.sub(" ", text)))


@dataclass(frozen=True, slots=True)
class Evidence:
    """Why a pair links: the cosine, the shared attribute words, and the cue (or frame) in the newer text."""

    cosine: float
    shared: tuple[str, ...]
    cue: str

    def note(self) -> str:
        return f"cosine {self.cosine:.3f}; shared {', '.join(self.shared)}; cue {self.cue!r}"


def family(t: MemoryType) -> int:
    """Episodic and semantic memories restate each other's facts; procedural ones are rules apart."""
    return 1 if t == MemoryType.PROCEDURAL else 0


def split_speaker(text: str) -> tuple[str, str]:
    """``("Caroline", "I moved …")`` for a ``"Caroline: I moved …"`` turn, ``("user", "I moved …")`` for a chat role
    (``"user: …"``, ``"Assistant: …"``, ``"用户：…"``; a role comes back in lower case), else ``("", text)``."""
    m = _ROLE.match(text)
    if m:
        return ((m.group(1) or m.group(2)).lower(), text[m.end():])
    m = _SPEAKER.match(text)
    return (m.group(1), text[m.end():]) if m else ("", text)


def _stem(word: str) -> str:
    for suffix in ("'s", "ies", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def content_words(text: str) -> frozenset[str]:
    """Attribute words: English words (lower case, plural folded) without stop or cue words, and Chinese
    character bigrams and characters without the common function pairs and characters."""
    words = {_stem(w) for w in _WORD.findall(text.lower()) if w not in _EN_STOP and (len(w) > 1 or w.isdigit())}
    for run in () if text.isascii() else _CJK_RUN.findall(text):
        words.update(b for b in (run[i:i + 2] for i in range(len(run) - 1)) if b not in _CJK_STOP)
        words.update(ch for ch in run if ch not in _CJK_STOP_CHARS)
    return frozenset(words)


_TOKEN = re.compile(rf"[{CJK_CHARS}]+|\d+(?:[.,:]\d+)*|[A-Za-z][A-Za-z0-9'-]*")


def first_content_word(text: str) -> tuple[str, bool]:
    """The first of :func:`content_words` in the text's order, and whether it is written with a capital — where a
    statement names its subject ("Alice moved to Lisbon": ("alice", True); "My alarm is set for 6:30": ("alarm",
    False)); a Chinese run gives its first bigram. ("", False) for none."""
    for token in _TOKEN.findall(text):
        if has_cjk(token):
            bigram = next((b for b in (token[i:i + 2] for i in range(len(token) - 1)) if b not in _CJK_STOP), "")
            if bigram:
                return bigram, False
            continue
        word = token.lower()
        if word not in _EN_STOP and (len(word) > 1 or word.isdigit()):
            return _stem(word), token[0].isupper()
    return "", False


def relations(text: str) -> frozenset[str]:
    """The people a text names by their relation to the speaker ("my sister", "我妈妈")."""
    found = {_stem(w) for w in _WORD.findall(text.lower()) if _stem(w) in _RELATIONS_EN or w in _RELATIONS_EN}
    if not text.isascii():
        found.update(r for r in _RELATIONS_ZH if r in text)
    return frozenset(found)


def change_cue(text: str) -> str:
    """The first change cue in ``text`` ("" when it has none)."""
    m = _EN_CUES.search(text) or _ZH_CUES.search(text)
    return m.group(0) if m else ""


def change_cues(text: str) -> tuple[str, ...]:
    """Every change cue in ``text``, in order."""
    en = tuple(m.group(0) for m in _EN_CUES.finditer(text))
    return en if text.isascii() else en + tuple(m.group(0) for m in _ZH_CUES.finditer(text))


def frame_words(words: frozenset[str], relation_words: frozenset[str]) -> frozenset[str]:
    """The words that can name an attribute's frame: English words of three letters or more that are not numbers,
    and Chinese character bigrams; never a person named by relation (that is the subject)."""
    return frozenset(w for w in words if w not in relation_words and not w[0].isdigit()
                     and (len(w) == 2 and has_cjk(w) or len(w) >= 3 and not has_cjk(w)))


def _short(text: str) -> bool:
    cjk = sum(len(run) for run in _CJK_RUN.findall(text))
    return len(_CJK_RUN.sub(" ", text).split()) + cjk / 2 <= FRAME_MAX_WORDS


def _frames(text: str) -> frozenset[str]:
    out = {_stem(m.group(1).lower().split()[-1]) for m in _EN_FRAME.finditer(text)}
    if not text.isascii():
        out.update(m.group(1) for m in _ZH_FRAME.finditer(text))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class _Text:
    """What :func:`judge` reads of one text, worked out once per text (:func:`_analysed`)."""

    cjk: bool
    speaker: str
    statement: bool              # not a question, at most MAX_WORDS words: a text that can link at all
    relations: frozenset[str]
    words: frozenset[str]
    attributes: frozenset[str]
    cue: str
    frames: frozenset[str]
    named: frozenset[str]        # attribute classes named outside the change cues
    heads: frozenset[str]        # frame words (:func:`frame_words`)
    change: str                  # the first cue that names a change (not "now" alone), for the frame rule
    short: bool                  # at most FRAME_MAX_WORDS: the frame rule may read it


# A Write's new memories are each judged against up to a dozen neighbours, and the same stored neighbours come
# back Write after Write: each text is analysed once, not once a pair (the linker was ~40 ms of a Write of 128
# short turns when every pair re-ran the regular expressions of both texts).
_ANALYSED_TEXTS = 8192


@functools.lru_cache(maxsize=_ANALYSED_TEXTS)
def _analysed(text: str) -> _Text:
    speaker, body = split_speaker(text)
    rel, words = relations(body), content_words(body)
    relation_words = rel | {w for r in rel for w in content_words(r)}
    attrs, cues = attributes(body), change_cues(body)   # change_cue(body) is cues[0]
    return _Text(cjk=has_cjk(text), speaker=speaker,
                 statement=_statement(body),
                 relations=rel, words=words, attributes=attrs, cue=cues[0] if cues else "", frames=_frames(body),
                 # the cues are cut out by spaces, so what is named outside them is a subset of attrs (all of
                 # them where there is no cue to cut)
                 named=(named_attributes(body) if cues else attrs) if attrs else frozenset(),
                 heads=frame_words(words, relation_words),
                 change=next((c for c in cues if not _PRESENT_ONLY.fullmatch(c)), ""),
                 short=_short(body))


def _statement(body: str) -> bool:
    """Not a question, at most MAX_WORDS words: a text that can link at all."""
    return not ("?" in body or "？" in body or len(body.split()) > MAX_WORDS)


@functools.lru_cache(maxsize=_ANALYSED_TEXTS)
def _said(text: str) -> tuple[str, bool]:
    """A text's speaker and whether it is a statement (what :func:`_analysed` holds of them, for a fraction of it)."""
    speaker, body = split_speaker(text)
    return speaker, _statement(body)


@functools.lru_cache(maxsize=_ANALYSED_TEXTS)
def may_update(text: str) -> bool:
    """Whether a new memory's text can link as an update at all: a statement that names an everyday attribute, or a
    short one with a change cue or a "my X is" frame (what :func:`find_updated` asks of :func:`_analysed` before it
    reads a neighbour). The same answer for a fraction of the analysis' cost: a Write's texts are mostly questions,
    long turns or small talk, and each new text is analysed once."""
    body = split_speaker(text)[1]
    if not _statement(body):
        return False
    if attributes(body):
        return True
    return _short(body) and bool(any(not _PRESENT_ONLY.fullmatch(c) for c in change_cues(body)) or _frames(body))


def names_change(text: str) -> bool:
    """Whether a text (a speaker's turn or a plain statement) holds a cue that names a change ("switched",
    "Ported", "换成"; "now" alone names none)."""
    return bool(_analysed(text).change)


def forget_texts() -> None:
    """Empties the cache: a purged memory's text must not stay in the process until it is evicted. The cache is
    shared by every tenant and keyed by text alone, so it is emptied whole (re-reading a text costs ~50 us)."""
    _analysed.cache_clear()
    may_update.cache_clear()
    _said.cache_clear()


def judge(newer: Memory, older: Memory, cosine: float, *, min_cosine: float) -> Evidence | None:
    """The evidence that ``newer`` updates ``older`` (same subject, same attribute, a different value), or None."""
    texts = _same_subject(newer, older, cosine, min_cosine=min_cosine)
    return None if texts is None else _by_attribute(*texts, cosine)


def _by_attribute(new: _Text, old: _Text, cosine: float) -> Evidence | None:
    """:func:`judge` past the subject: the same attribute class, else the frame rule."""
    # The same attribute class, named outside the change cues by at least one of them ("moved" alone is the change).
    shared = tuple(sorted(new.attributes & old.attributes & (new.named | old.named)))
    if not shared:
        return _by_frame(new, old, cosine)
    cue = new.cue
    if not cue:
        frame = new.frames & old.frames
        if not frame:
            return None
        cue = f"my {sorted(frame)[0]} is"
    return Evidence(cosine=cosine, shared=shared, cue=cue)


def _same_subject(newer: Memory, older: Memory, cosine: float, *, min_cosine: float) -> tuple[_Text, _Text] | None:
    """Both texts' analyses when the pair may link at all — the same scope, type family, speaker and people named by
    relation, no conflicting entities, two statements, a cosine at the threshold, something new in the newer text —
    else None."""
    if newer.scope != older.scope or family(newer.type) != family(older.type):
        return None
    new = _analysed(newer.content)
    if new.cjk or has_cjk(older.content):
        min_cosine += LINK_COSINE_CJK_SHIFT
    if cosine < min_cosine:
        return None
    # The older text's speaker and whether it is a statement before its whole analysis: most neighbours fail here.
    if not (new.statement and _said(older.content) == (new.speaker, True)):
        return None   # a question restates nothing; a long narrative turn is not an attribute's statement
    old = _analysed(older.content)
    if new.relations != old.relations:
        return None
    if newer.entities and older.entities and set(newer.entities) != set(older.entities):
        return None
    if not (new.words - old.words):
        return None   # nothing new: a restatement, not an update
    return new, old


def _by_frame(new: _Text, old: _Text, cosine: float) -> Evidence | None:
    """The frame rule, for attributes no class names ("The project codename is Falcon" → "The project was renamed
    to Osprey"; "我用的输入法是搜狗" → "输入法换成了微信输入法"): two short statements that share a frame word (an
    English word of three letters or more, a Chinese bigram: what stays when the differing values are masked), the
    newer one with a cue that names a change ("renamed", "switched", "换成"; "now" alone is no change), or the same
    "my X is" frame on both with X shared. Two statements that name different attribute classes never link."""
    if not (new.short and old.short) or (new.named and old.named and not new.named & old.named):
        return None
    shared = new.heads & old.heads
    if not shared:
        return None
    cue = new.change
    if not cue:
        frame = new.frames & old.frames & shared
        if not frame:
            return None
        cue = f"my {sorted(frame)[0]} is"
    return Evidence(cosine=cosine, shared=tuple(sorted(shared)), cue=cue)


def _by_nearest(new: _Text, old: _Text, cosine: float) -> Evidence | None:
    """The nearest-statement rule, for a change that does not name its attribute ("Ported my number to Giffgaff"
    after "My mobile plan is with EE"; "入手了一台小米14" after "我用的是华为手机"): two short statements, the newer
    with a cue that names a change and no attribute class outside it, the older naming one. :func:`find_updated`
    asks it of the newer text's nearest older statement of the same subject only: what the change refers back to
    is the statement most like it, not any statement further down that happens to name an attribute."""
    if not (new.short and old.short and new.change and old.named) or new.named:
        return None
    return Evidence(cosine=cosine, shared=tuple(sorted(old.named)), cue=new.change)


def find_updated(new: Memory, neighbours: Sequence[tuple[float, Memory]], *,
                 min_cosine: float) -> tuple[Memory, Evidence] | None:
    """The older memory ``new`` updates among its nearest neighbours (highest cosine first), or None. Only live
    memories that nothing updates yet, created before ``new``; a memory with a key is left to the key slots. The
    first neighbour with evidence of the same attribute (:func:`judge`) wins; failing that, the nearest older
    statement of the same subject may be the one by :func:`_by_nearest` (not when something updates it already)."""
    if new.key or new.status not in LIVE_STATUSES or not may_update(new.content):
        return None
    text = _analysed(new.content)
    if not (text.statement and (text.attributes or (text.short and (text.change or text.frames)))):
        return None   # judge refuses every pair: no attribute nor a short changed frame (most turns), not a statement
    nearest: tuple[Memory, _Text, float] | None = None
    for cosine, old in neighbours:
        if cosine < min_cosine:
            break
        if (old.memory_id == new.memory_id or old.key or old.status not in LIVE_STATUSES
                or old.created_at_ms >= new.created_at_ms or old.memory_id in new.updates):
            continue
        if old.updated_by and nearest is not None:
            continue   # neither linkable nor the nearest: not analysed
        texts = _same_subject(new, old, cosine, min_cosine=min_cosine)
        if texts is None:
            continue
        if nearest is None:
            nearest = (old, texts[1], cosine)
        if old.updated_by:
            continue
        evidence = _by_attribute(*texts, cosine)
        if evidence is not None:
            return old, evidence
    if nearest is None or nearest[0].updated_by:
        return None
    evidence = _by_nearest(text, nearest[1], nearest[2])
    return None if evidence is None else (nearest[0], evidence)


def reviewable_text(text: str) -> bool:
    """Whether a text is a statement a model may review as an update (:func:`reviewable`)."""
    return _said(text)[1]


def reviewable(memory: Memory) -> bool:
    """Whether a new memory's update link may be reviewed by a model (server/hygiene/link_review.py): live, no key
    and no explicit supersede (the key slots and the writer say what it replaces), a statement (not a question, at
    most :data:`MAX_WORDS` words)."""
    return (memory.status in LIVE_STATUSES and not memory.key and not memory.supersedes
            and _said(memory.content)[1])


def review_candidates(new: Memory, neighbours: Sequence[tuple[float, Memory]], *, min_cosine: float,
                      limit: int) -> list[tuple[float, Memory]]:
    """The older memories a model may be asked whether ``new`` updates, from its nearest neighbours (highest cosine
    first): every rule of :func:`judge` but the attribute's evidence — the same scope, type family, speaker and
    people named by relation, no conflicting entities, two statements, something new in the newer one, the cosine
    at ``min_cosine`` (+ the CJK shift) — and, as :func:`find_updated` asks, live, no key, created before ``new``
    and updated by nothing else (a memory ``new`` already updates is offered again: the model confirms it). At most
    ``limit``, nearest first."""
    out: list[tuple[float, Memory]] = []
    for cosine, old in neighbours:
        if len(out) >= limit:
            break
        if (old.memory_id == new.memory_id or old.key or old.status not in LIVE_STATUSES
                or old.created_at_ms >= new.created_at_ms or old.updated_by not in ("", new.memory_id)):
            continue
        if _same_subject(new, old, cosine, min_cosine=min_cosine) is not None:
            out.append((cosine, old))
    return out


def link(staging: Staging, new_id: str, old_id: str, *, now_ms: int) -> None:
    """Stages the link: ``old_id`` in the new memory's ``updates``, ``new_id`` as the old memory's ``updated_by``."""
    new, old = staging.current(new_id), staging.current(old_id)
    assert new is not None and old is not None
    staging.change(dataclasses.replace(old, updated_by=new_id, updated_at_ms=now_ms))
    new = staging.current(new_id) or new
    if old_id not in new.updates:
        staging.change(dataclasses.replace(new, updates=new.updates + (old_id,), updated_at_ms=now_ms))


def unlink(staging: Staging, new_id: str, old_id: str, *, now_ms: int) -> None:
    """Stages the removal of the link (both sides)."""
    new, old = staging.current(new_id), staging.current(old_id)
    assert new is not None and old is not None
    staging.change(dataclasses.replace(old, updated_by="", updated_at_ms=now_ms))
    new = staging.current(new_id) or new
    staging.change(dataclasses.replace(new, updates=tuple(i for i in new.updates if i != old_id), updated_at_ms=now_ms))


def chain_target(tip: Memory, *, want: str, get: Callable[[str], Memory | None]) -> Memory:
    """The member of ``tip``'s chain a query asks for: ``"current"`` the tip itself, ``"previous"`` the newest memory
    it updates, ``"first"`` the oldest state (follow ``updates`` down, oldest branch first)."""
    if want == "current":
        return tip
    cur, seen = tip, {tip.memory_id}
    while cur.updates:
        older = [m for m in (get(i) for i in cur.updates) if m is not None and m.memory_id not in seen]
        if not older:
            break
        cur = max(older, key=lambda m: m.created_at_ms) if want == "previous" else min(older, key=lambda m: m.created_at_ms)
        seen.add(cur.memory_id)
        if want == "previous":
            break
    return cur


def chains_of(docs: Sequence[int], *, by_doc: Callable[[int], Memory | None],
              get: Callable[[str], Memory | None]) -> dict[str, list[int]]:
    """Groups candidate positions by their chain: the id of the chain's newest member (its tip) → positions."""
    chains: dict[str, list[int]] = {}
    for i, doc in enumerate(docs):
        m = by_doc(doc)
        if m is None:
            continue
        seen = {m.memory_id}
        while m.updated_by and m.updated_by not in seen:
            nxt = get(m.updated_by)
            if nxt is None:
                break
            m = nxt
            seen.add(m.memory_id)
        chains.setdefault(m.memory_id, []).append(i)
    return chains
