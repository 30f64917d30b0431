"""English time expressions → spans (server/temporal.py documents the conventions). Pure.

Each rule is a pattern and a builder `(match, now) → Span | None`; the parser keeps the longest match, and on a
tie the earlier rule. Dates ("8 May 2023", "May 8, 2023", "2023-05-08", "May 2023", a day word, a bare month or
year) are parsed by one table, shared by the simple rules and the anchored ones ("the week before 9 June 2023").
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timedelta

from server.temporal_calendar import (
    DAY, NUM, NUM_PLURAL, RECENT_DAYS, RECENT_FEW_DAYS, UNITS, Rule, Span, add_months, ago, around, calendar_unit,
    count, day_of, days, latest_date, latest_month, month, recent, registry, season, shift, up_to_today,
    weekday_before, year,
)

RULES: list[Rule] = []
_rule = registry(RULES, chinese=False)
# every rule's match contains one of these (a unit, a day, month or season name, a digit): a query without one
# skips the rules, which are most of a parse's cost
TRIGGER = re.compile(r"\d|day|week|month|year|ago|recent|late|night|morning|afternoon|evening|tomorrow|hour|minute"
                     r"|fortnight|spring|summer|autumn|fall|winter|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec",
                     re.IGNORECASE | re.ASCII)

_MONTH_NAMES = "january february march april may june july august september october november december".split()
_MONTHS = {n: i + 1 for i, n in enumerate(_MONTH_NAMES)} | {n[:3]: i + 1 for i, n in enumerate(_MONTH_NAMES)}
_MONTHS["sept"] = 9
_MONF = "(?:" + "|".join(_MONTH_NAMES) + ")"  # full names only where a month stands alone
_MON = "(?:" + "|".join(_MONTH_NAMES) + r"|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?)"
_YEAR = r"(?:1[89]\d\d|2[01]\d\d)(?!\d)"
_DOM = r"(?:3[01]|[12]\d|0?[1-9])(?!\d)(?:st|nd|rd|th)?"
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_WEEKDAY = "|".join(_WEEKDAYS)
_NOT_MODAL = r"(?!\s+(?:i|we|you|he|she|they|it|be|have|not)(?![A-Za-z]))"  # "May I ask", "in may be"
_UNIT = "minute|hour|day|week|month|year|fortnight"


def _month_of(name: str) -> int:
    return _MONTHS[name.lower().rstrip(".")]


def _dom(text: str) -> int:
    return int(text.rstrip("stndrhSTNDRH"))


def _day_span(d: datetime | None) -> Span | None:
    return None if d is None else (*days(d), "day", True)


def _dated(y: str | None, m: str, d: str, ref: datetime) -> Span | None:
    """A day of month `m`: in year `y`, else the latest one not after `ref`."""
    mon = _month_of(m)
    return _day_span(datetime(int(y), mon, _dom(d)) if y else latest_date(mon, _dom(d), ref))


_DateForm = Callable[[tuple[str, ...], datetime, datetime], "Span | None"]
_DAY_WORDS = {"today": 0, "yesterday": -1, "tomorrow": 1}
_DATE_FORMS: list[tuple[str, _DateForm]] = [
    (r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})", lambda g, now, ref: _day_span(datetime(*map(int, g)))),
    (rf"(?:the\s+)?({_DOM})\s+(?:of\s+)?({_MON})(?:,?\s*({_YEAR}))?",
     lambda g, now, ref: _dated(g[2], g[1], g[0], ref)),
    (rf"({_MON})\s+(?:the\s+)?({_DOM})(?:,?\s*({_YEAR}))?", lambda g, now, ref: _dated(g[2], g[0], g[1], ref)),
    (rf"({_MON}),?\s+(?:of\s+)?({_YEAR})", lambda g, now, ref: (*month(int(g[1]), _month_of(g[0])), "month", True)),
    (r"(\d{4})-(\d{2})", lambda g, now, ref: (*month(int(g[0]), int(g[1])), "month", True)),
    (r"(today|yesterday|tomorrow)",
     lambda g, now, ref: (*days(day_of(now) + _DAY_WORDS[g[0].lower()] * DAY), "day", False)),
    (rf"({_MONF}){_NOT_MODAL}", lambda g, now, ref: (*latest_month(_month_of(g[0]), ref), "month", True)),
    (rf"({_YEAR})", lambda g, now, ref: (*year(int(g[0])), "year", True)),
]
_DATE = "|".join(p for p, _ in _DATE_FORMS[:5])  # a calendar day or month
_ANCHOR = "|".join(p for p, _ in _DATE_FORMS)  # … or a day word, a bare month, a year
_DATE_TABLE = [(re.compile(p, re.IGNORECASE | re.ASCII), f) for p, f in _DATE_FORMS]


def date_span(text: str, now: datetime, ref: datetime | None = None) -> Span | None:
    """The span of one date form; a missing year is the latest such day or month not after `ref` (now)."""
    for pattern, build in _DATE_TABLE:
        if m := pattern.fullmatch(text):
            return build(m.groups(), now, ref or now)
    return None


@_rule(rf"(?:(?:the|last|that)\s+)?(?:(?P<n>{NUM})\s+)?(?P<u>{_UNIT}|weekend|{_WEEKDAY})s?"
       rf"\s+(?P<dir>before|after|prior\s+to)\s+(?:the\s+)?(?P<a>{_ANCHOR})")
def _relative_to_date(m: re.Match[str], now: datetime) -> Span | None:
    """"the week before 9 June 2023", "two weeks after 11 August", "the Sunday before 25 October"."""
    anchor = date_span(m["a"], now)
    if anchor is None:
        return None
    a0, a1, akind, absolute = anchor
    after, unit = m["dir"].lower() == "after", m["u"].lower()
    if m["n"]:
        n = count(m["n"]) if unit in UNITS else None
        if n is None:
            return None
        sign = 1 if after else -1
        if unit == akind:  # whole calendar units: "3 days before 8 May", "two months after May 2023"
            ends = [shift(a, sign * k, unit) for a in (a0, a1) for k in n]
            return min(ends), max(ends), unit, absolute
        return (*around(a1 if after and akind != "day" else a0, *n, unit, sign), "relative", absolute)
    if unit in UNITS:
        span = (a1, shift(a1, 1, unit)) if after else (shift(a0, -1, unit), a0)
        return *span, unit if unit in ("day", "week", "month", "year") else "relative", absolute
    if unit == "weekend":
        saturday = a1 + ((5 - a1.weekday()) % 7) * DAY if after else a0 - (a0.weekday() + 2) * DAY
        return *days(saturday, 2), "weekend", absolute
    wd = _WEEKDAYS.index(unit)
    return *days(a1 + ((wd - a1.weekday()) % 7) * DAY if after else weekday_before(a0, wd)), "day", absolute


@_rule(rf"(?:the\s+)?week\s+of\s+(?P<a>{_DATE})")
def _week_of(m: re.Match[str], now: datetime) -> Span | None:
    anchor = date_span(m["a"], now)
    if anchor is None or anchor[2] != "day":
        return None
    return *days(anchor[0] - anchor[0].weekday() * DAY, 7), "week", True


@_rule(rf"(?:between|from)\s+(?P<a>{_ANCHOR})\s*(?:\s(?:and|to|until|till|through)\s|-|–)\s*(?P<b>{_ANCHOR})")
def _between(m: re.Match[str], now: datetime) -> Span | None:
    b = date_span(m["b"], now)
    a = date_span(m["a"], now, b[1] - timedelta(milliseconds=1)) if b else None  # "between August 11 and 15 2023"
    return (a[0], b[1], "range", a[3] or b[3]) if a and b else None


@_rule(rf"since\s+(?P<a>{_ANCHOR})")
def _since(m: re.Match[str], now: datetime) -> Span | None:
    a = date_span(m["a"], now)
    return (a[0], day_of(now) + DAY, "range", a[3]) if a else None


_PART = (r"early|mid|late|the\s+(?:beginning|start|middle|end)\s+of|(?:the\s+)?(?:first|second)\s+half\s+of"
         r"|the\s+(?:first|second|third|fourth|last)\s+week\s+of")
_PART_DAYS = {"early": (0, 10), "beginning": (0, 10), "start": (0, 10), "mid": (10, 20), "middle": (10, 20),
              "late": (20, 99), "end": (20, 99), "first half": (0, 15), "second half": (15, 99),
              "first week": (0, 7), "second week": (7, 14), "third week": (14, 21), "fourth week": (21, 28),
              "last week": (-7, 99)}
_PART_MONTHS = {0: 0, 10: 4, 15: 6, 20: 8, 99: 12}  # the same words of a year: thirds and halves by months


@_rule(rf"(?:(?:in|during|at|by)\s+)?(?P<p>{_PART})[\s-]*(?P<t>{_MON}(?:,?\s+(?:of\s+)?{_YEAR})?|{_YEAR}"
       r"|(?:this|last|next)\s+(?:month|year))")
def _part(m: re.Match[str], now: datetime) -> Span | None:
    """"early May", "mid-2023", "the end of last month", "the second week of November"."""
    target = " ".join(m["t"].lower().split())
    word = re.sub(r"^the\s|\sof$", "", " ".join(m["p"].lower().split()))
    if rel := re.fullmatch(r"(this|last|next) (month|year)", target):
        start, end, _, absolute = calendar_unit(now, rel[2], {"this": 0, "last": -1, "next": 1}[rel[1]])
    elif span := date_span(target, now):
        start, end, _, absolute = span
    else:
        return None
    lo, hi = _PART_DAYS[word]
    if end - start > 31 * DAY and "week" not in word:
        return add_months(start, _PART_MONTHS[lo]), add_months(start, _PART_MONTHS[hi]), "part", absolute
    return end + lo * DAY if lo < 0 else start + lo * DAY, min(end, start + hi * DAY), "part", absolute


_SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}


@_rule(rf"(?:(?P<mod>this\s+past|last|this|next|past|the|in|during)\s+(?:the\s+)?)?"
       rf"(?P<s>spring|summer|autumn|fall|winter)(?:\s+(?:of\s+)?(?P<y>{_YEAR}))?")
def _season(m: re.Match[str], now: datetime) -> Span | None:
    """"last summer", "in the fall", "summer 2021"; a season word alone ("summer camp", "fall asleep") is not one."""
    mod, name = " ".join((m["mod"] or "").lower().split()), m["s"].lower()
    if not m["y"] and (not mod or (name in ("fall", "spring") and mod == "the")):  # "the fall of Rome"
        return None
    return season(now, _SEASONS[name], mod, int(m["y"]) if m["y"] else None)


@_rule(rf"(?P<mod>last|this|next|past)\s+(?P<m>{_MONF})|(?:(?:in|during)\s+)?(?P<m2>{_MONF})\s+(?:of\s+)?"
       r"(?P<mod2>last|this|next)\s+year")
def _month_relative(m: re.Match[str], now: datetime) -> Span | None:
    """"last May" (the latest before this month), "this May", "next May", "May last year"."""
    if m["m2"]:
        y = now.year + {"last": -1, "this": 0, "next": 1}[m["mod2"].lower()]
        return *month(y, _month_of(m["m2"])), "month", True
    mon, mod = _month_of(m["m"]), m["mod"].lower()
    if mod == "this":
        return *month(now.year, mon), "month", True
    if mod == "next":
        return *month(now.year + (mon <= now.month), mon), "month", True
    return *latest_month(mon, now, strict=True), "month", True


@_rule(rf"(?:in|during|throughout|around|the\s+month\s+of)\s+(?P<m>{_MONF}){_NOT_MODAL}")
def _bare_month(m: re.Match[str], now: datetime) -> Span | None:
    return *latest_month(_month_of(m["m"]), now), "month", True


@_rule(rf"(?:(?:on|in|during|of)\s+)?(?P<a>{_DATE})")
def _date(m: re.Match[str], now: datetime) -> Span | None:
    return date_span(m["a"], now)


@_rule(rf"(?:in|during|throughout|around|of|for|the\s+year|year)\s+(?P<y>{_YEAR})")
def _year(m: re.Match[str], now: datetime) -> Span | None:
    return *year(int(m["y"])), "year", True


@_rule(r"today|tonight|this\s+(?:morning|afternoon|evening)|yesterday|last\s+night|tomorrow")
def _day_word(m: re.Match[str], now: datetime) -> Span | None:
    word = m[0].lower()
    offset = -1 if word.startswith(("yesterday", "last")) else 1 if word == "tomorrow" else 0
    return *days(day_of(now) + offset * DAY), "day", False


@_rule(r"(?P<mod>this|last|next|previous)\s+(?P<u>week|month|year)|(?:the\s+)?(?P<u2>week|month|year)\s+before\s+last")
def _calendar(m: re.Match[str], now: datetime) -> Span | None:
    if m["u2"]:
        return calendar_unit(now, m["u2"].lower(), -2)
    return calendar_unit(now, m["u"].lower(), {"this": 0, "next": 1}.get(m["mod"].lower(), -1))


@_rule(r"(?P<mod>this\s+past|this|last|next|previous|past|(?:on|over|at|during)\s+the)\s+weekend")
def _weekend(m: re.Match[str], now: datetime) -> Span | None:
    """"last weekend" is the previous week's; "on the weekend" the current one on a weekend, else the last."""
    mod = " ".join(m["mod"].lower().split())
    step = {"this": 0, "next": 1}.get(mod, 0 if mod.endswith(" the") and now.weekday() >= 5 else -1)
    return calendar_unit(now, "weekend", step)


@_rule(rf"(?<!every\s)(?<!each\s)(?<!black\s)(?<!good\s)(?:(?P<mod>this\s+past|last|this|next|past|previous|on)\s+)?(?P<d>{_WEEKDAY})")
def _weekday(m: re.Match[str], now: datetime) -> Span | None:
    """"(on|last) Friday": the latest Friday before today; "this Friday" this week's; "next Friday" the coming one
    (not "every Friday", "Black Friday", "Good Friday")."""
    wd, mod = _WEEKDAYS.index(m["d"].lower()), (m["mod"] or "").lower()
    if mod == "this":
        return *days(day_of(now) + (wd - now.weekday()) * DAY), "day", False
    if mod == "next":
        return *days(day_of(now) + ((wd - now.weekday() - 1) % 7 + 1) * DAY), "day", False
    return *days(weekday_before(now, wd)), "day", False


@_rule(rf"(?:(?:in|over|during|for|within|throughout)\s+)?(?:the\s+|these\s+)?(?:last|past|previous)\s+"
       rf"(?P<n>{NUM_PLURAL})\s+(?P<u>{_UNIT})s?"
       rf"|(?:(?:in|over|during|for|within|throughout)\s+)?(?:the\s+(?:last|past)|past)\s+(?P<u1>{_UNIT})")
def _last_n(m: re.Match[str], now: datetime) -> Span | None:
    """"in the last 3 days", "over the past few weeks", "the past month", "in the last 24 hours"."""
    if m["u1"]:
        return None if m["u1"].lower() == "day" else up_to_today(now, 1, m["u1"].lower())  # "the last day of"
    n = count(m["n"])
    return up_to_today(now, n[1], m["u"].lower()) if n else None


@_rule(rf"(?:(?P<n>{NUM})\s+(?P<u>{_UNIT})s?(?P<half>\s+and\s+a\s+half)?|half\s+an?\s+(?P<hu>year|month|hour))"
       r"\s+(?P<dir>ago|back|from\s+now)")
def _ago(m: re.Match[str], now: datetime) -> Span | None:
    """"two weeks ago", "a few months ago", "half a year ago", "a year and a half ago", "3 days from now"."""
    sign = 1 if m["dir"].lower().startswith("from") else -1
    if m["hu"]:
        return ago(now, (1, 1), "half" + m["hu"].lower(), sign)
    n, unit = count(m["n"]), m["u"].lower()
    if n and m["half"]:
        return ago(now, (2 * n[0] + 1, 2 * n[1] + 1), "half" + unit, sign) if "half" + unit in UNITS else None
    return ago(now, n, unit, sign) if n else None


@_rule(r"recently|lately|these\s+days|nowadays|of\s+late|recent|the\s+other\s+day")
def _recent(m: re.Match[str], now: datetime) -> Span | None:
    return recent(now, RECENT_FEW_DAYS if m[0].lower().endswith(" day") else RECENT_DAYS)
