"""Salience on write: how likely a memory is to be worth recalling, from cheap signals of its text.

Greetings, thanks, acknowledgements and other low-information turns score low; preferences, decisions,
facts with entities or numbers and open tasks score high. The score is a logistic function of a few
features (:func:`features`) with weights fitted on the LoCoMo dev conversations, where a turn that some
question's evidence names is a positive (``benchmarks/hygiene/fit_salience.py`` writes
``salience.json``; README "Memory hygiene" has the fit and what it costs). No model, no network.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

BUNDLED_WEIGHTS = Path(__file__).with_name("salience.json")
# A write without an importance starts at DEFAULT_IMPORTANCE, moved by up to ±SALIENCE_IMPORTANCE_SPAN / 2 with
# its salience (importance_from_salience). The span was chosen on LoCoMo dev (benchmarks/hygiene/run.py, recall@10
# by span, re-scored from a span-0 run: 0.0 → 0.749, 0.1 → 0.751, 0.2 → 0.752, 0.4 → 0.752, 0.6 → 0.750,
# 0.8 → 0.750; README "Memory hygiene").
DEFAULT_IMPORTANCE = 0.5
SALIENCE_IMPORTANCE_SPAN = 0.4

_WORD = re.compile(r"[A-Za-z][A-Za-z'’]*|\d+(?:[.,:/-]\d+)*|[\u4e00-\u9fff]")
_NAME = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+")
_NUMBER = re.compile(r"\d")
_SMALL_TALK = frozenset("""hi hello hey hiya yo thanks thank thx ty cheers ok okay k yes yeah yep yup no nope sure cool
great awesome nice wow lol haha hahaha hehe omg bye goodbye see ya later good morning night evening afternoon welcome
congrats congratulations glad happy hear that's thats so much you too me it sounds sound totally agree absolutely
definitely right true exactly indeed amazing wonderful fantastic lovely sweet perfect fine alright np problem same
appreciate care take soon talk chat catch up how are doing going what's up""".split())
_SMALL_TALK_ZH = ("你好", "谢谢", "好的", "嗯", "哈哈", "再见", "拜拜", "没问题", "早上好", "晚安", "收到", "好吧", "对", "是的")
_PREFERENCE = re.compile(r"\b(love|loves|like|likes|prefer|prefers|favou?rite|hate|hates|enjoy|enjoys|allergic|"
                         r"can't stand|into|passionate|dream)\b|喜欢|讨厌|偏好|最爱|过敏", re.I)
_DECISION = re.compile(r"\b(decided|decide|chose|choose|going to|gonna|will|plan|plans|planning|signed up|started|"
                       r"start|joined|bought|moved|adopted|got|made|finished|won|lost|married|visited|went)\b|"
                       r"决定|打算|计划|开始|搬|买了", re.I)
_TASK = re.compile(r"\b(need to|have to|must|todo|to-do|remind|deadline|due|tomorrow|next week|appointment|"
                   r"meeting|schedule)\b|需要|提醒|截止|明天|下周", re.I)
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|my|me|we|our)\b|我", re.I)
_TIME = re.compile(r"\b(yesterday|today|last|ago|since|year|years|month|months|week|weeks|weekend|"
                   r"january|february|march|april|may|june|july|august|september|october|november|december|"
                   r"monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|上周|去年|昨天", re.I)

FEATURES = ("bias", "log_words", "small_talk_share", "names", "numbers", "preference", "decision", "task",
            "first_person", "time", "question")
_RUN = re.compile(r"\w+")


class _Cue:
    """``pattern.search(text)`` as a bool, exactly, and for an ASCII text ~5x faster: a case-insensitive
    ``\\b(a|b|...)\\b`` alternation (optionally ``|`` non-ASCII literals after it) matches an ASCII text iff one of
    its one-word alternatives is a whole word of the lowercased text (``\\bX\\b`` for an X of word characters spans
    exactly one maximal run of them, and ASCII letters fold only to ASCII ones), or one of its others (with an
    apostrophe, a space or a hyphen) matches; those few are searched for only when their lowercased text occurs.
    The alternatives are read from the pattern itself (``u?`` expanded), so the two can never disagree. A write
    scores every input (~100 us a short turn through the regexes alone, 13 ms of a Write of 128)."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        body = pattern.pattern[len(r"\b("):pattern.pattern.index(r")\b")]
        alternatives = [variant.lower() for alt in body.split("|") for variant in _variants(alt)]
        self.words = frozenset(a for a in alternatives if _RUN.fullmatch(a))
        self.others = tuple(a for a in alternatives if not _RUN.fullmatch(a))
        self.others_pattern = re.compile(r"\b(" + "|".join(re.escape(a) for a in self.others) + r")\b", re.I)

    def found(self, text: str, low: str, runs: frozenset[str]) -> bool:
        """``low``/``runs``: the text lowercased and its maximal runs of word characters (ASCII texts only)."""
        if not text.isascii():
            return bool(self.pattern.search(text))
        if not self.words.isdisjoint(runs):
            return True
        return any(o in low for o in self.others) and bool(self.others_pattern.search(text))


def _variants(alternative: str) -> list[str]:
    """``favou?rite`` -> favourite, favorite; a plain alternative as it is."""
    if "?" not in alternative:
        return [alternative]
    at = alternative.index("?")
    head, tail = alternative[:at], alternative[at + 1:]
    return [v for rest in _variants(tail) for v in (head + rest, head[:-1] + rest)]


_CUES = tuple(_Cue(p) for p in (_PREFERENCE, _DECISION, _TASK, _FIRST_PERSON, _TIME))


def _speech(text: str) -> str:
    """The said part of a ``"<speaker>: <text>"`` turn (the speaker's name is not information)."""
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) <= 40 and "\n" not in head else text


def features(text: str) -> list[float]:
    said = _speech(text)
    words = _WORD.findall(said)
    n = len(words)
    ascii_only = said.isascii()
    small = sum(w.lower() in _SMALL_TALK for w in words) + (0 if ascii_only else
                                                              sum(said.count(p) for p in _SMALL_TALK_ZH))
    low = said.lower() if ascii_only else ""
    runs = frozenset(_RUN.findall(low))
    preference, decision, task, first_person, time = (float(c.found(said, low, runs)) for c in _CUES)
    return [1.0, math.log1p(n), small / max(1, n), min(3.0, float(len(_NAME.findall(said)))),
            min(3.0, float(len(_NUMBER.findall(said)) > 0) + float(len(re.findall(r"\d+", said)) > 1)),
            preference, decision, task, first_person, time, float("?" in said or "？" in said)]


@dataclass(frozen=True)
class SalienceModel:
    weights: tuple[float, ...]
    source: str = ""

    def score(self, text: str) -> float:
        z = sum(w * x for w, x in zip(self.weights, features(text), strict=True))
        return round(1.0 / (1.0 + math.exp(-z)), 4)


def load_salience(path: Path | None = None) -> SalienceModel:
    data = json.loads((path or BUNDLED_WEIGHTS).read_text())
    if tuple(data["features"]) != FEATURES:
        raise ValueError(f"salience weights in {path or BUNDLED_WEIGHTS} are for other features")
    return SalienceModel(weights=tuple(float(w) for w in data["weights"]), source=str(data.get("source", "")))


def importance_from_salience(salience: float, *, default: float, span: float) -> float:
    """The default importance a write without one gets: ``default`` moved by up to ±span/2 with salience."""
    return min(1.0, max(0.0, default + span * (salience - 0.5)))
