"""Time expressions in a search query → windows of Unix ms (UTC), for a soft boost of memories in them.

Pure: regular expressions and calendar arithmetic, no I/O. English rules live in server/temporal_en.py, Chinese
ones in server/temporal_zh.py, the arithmetic they share in server/temporal_calendar.py. Everything is computed in UTC
relative to the search's ``now``; weeks start on Monday; months and years move by calendar arithmetic (8 May −
1 month = 8 April, 31 March − 1 month = 28/29 February). Overlapping matches keep the longest ("last week",
not "week"; "去年三月", not "去年" + "三月"). Conventions, where English or Chinese leave a choice:

* "N days ago" is that calendar day; "N hours/weeks/months/years ago" the point N units before now ± half a unit
  (the midpoints to N±1 units, so consecutive N tile the past without overlap); "a few", "several", "几" are
  2–4 units. "in the last/past N units" runs from midnight N units ago (for hours, the very time) to the end of today.
* "recently", "lately", "these days", "nowadays", 最近, 近来, 近期 cover the last 30 days (an assistant's
  "recently" is a matter of weeks; the weight's margin softens the edge); "the other day", 这几天, 最近几天
  the last 7 days.
* A bare month ("in May", 三月) is the latest such month not after now; a day without a year ("8th of May",
  5月8日) the latest such day not after today; "last May" the latest May before the current month. A bare
  weekday ("on Friday", "last Friday", 周五) is the latest such day before today; 上周五 is the Friday of last
  week and 这周五 of this week, as the words say.
* Seasons are meteorological, northern hemisphere: spring March–May, summer June–August, autumn
  September–November, winter December–February (winter 2023 starts in December 2023).
* "early/mid/late May" are days 1–10, 11–20, 21–end; of a year, January–April, May–August, September–December.
* A query that names a calendar date, month or year is anchored to it: a relative phrase beside it ("last week,
  as mentioned on 6 November 2023", "recently, in May 2022") is relative to that date, not to now, so only
  the named ones are kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from server import temporal_en, temporal_zh
from server.temporal_calendar import Span

__all__ = ["TimeWindow", "parse_time_windows", "refers_back", "window_weight"]

MAX_QUERY_CHARS = 2000  # a query is a sentence or two; longer text is cut, so parsing stays bounded

_EPOCH = datetime(1970, 1, 1)
_MS = timedelta(milliseconds=1)
_RULE_SETS = ((temporal_en.TRIGGER, temporal_en.RULES), (temporal_zh.TRIGGER, temporal_zh.RULES))
_FULLWIDTH = str.maketrans("０１２３４５６７８９", "0123456789")  # one character for one: offsets stay


@dataclass(frozen=True)
class TimeWindow:
    start_ms: int  # inclusive, Unix ms UTC
    end_ms: int  # exclusive
    text: str  # the matched expression, as written
    kind: str  # day, week, weekend, month, year, season, part, recent, range, relative


def _ms(dt: datetime) -> int:
    return (dt - _EPOCH) // _MS


def parse_time_windows(query: str, *, now_ms: int) -> tuple[TimeWindow, ...]:
    """The time windows `query` names, relative to `now_ms`, in the order they appear; never raises."""
    if not isinstance(query, str) or not query:
        return ()
    try:
        now = _EPOCH + int(now_ms) * _MS
    except (OverflowError, ValueError, TypeError):
        return ()
    text = query[:MAX_QUERY_CHARS].translate(_FULLWIDTH)
    rules = [rule for trigger, rule_set in _RULE_SETS if trigger.search(text) for rule in rule_set]
    found: list[tuple[int, int, int, Span]] = []
    for order, (pattern, build) in enumerate(rules):
        for m in pattern.finditer(text):
            try:
                span = build(m, now)
            except (ValueError, OverflowError, KeyError):  # impossible dates, years out of range
                span = None
            if span is not None and span[0] < span[1]:
                found.append((m.start(), m.end(), order, span))
    found.sort(key=lambda c: (c[0] - c[1], c[2], c[0]))  # longest first, then rule order, then leftmost
    taken: list[tuple[int, int, int, Span]] = []
    for c in found:
        if all(c[1] <= t[0] or c[0] >= t[1] for t in taken):
            taken.append(c)
    if any(t[3][3] for t in taken):  # a named date anchors the query: drop phrases relative to now
        taken = [t for t in taken if t[3][3]]
    return tuple(TimeWindow(_ms(s), _ms(e), query[a:b], kind) for a, b, _, (s, e, kind, _) in sorted(taken))


_BACK = re.compile(
    r"(?<![A-Za-z])(?:(?:last|previous|other)\s+time|previously|earlier(?!\s+than)|before(?=\s*(?:[?.!,;:)]|$))"
    r"|as\s+(?:i|we|you)\s+(?:said|mentioned|discussed|told)|(?:you|we)\s+(?:told|mentioned|discussed|talked|said)"
    r"|(?:do\s+you\s+)?remember\s+(?:when|what|that|how))(?![A-Za-z])"
    r"|上次|上回|上一次|(?<![天日周月年期拜])(?:之前|以前)|先前|此前|刚才|早些时候|提到过|说过|聊过|讲过",
    re.IGNORECASE | re.ASCII,
)


def refers_back(query: str) -> bool:
    """Whether `query` points back at an earlier exchange: "last time", "as I said before", 上次, 之前."""
    return isinstance(query, str) and _BACK.search(query[:MAX_QUERY_CHARS]) is not None


def window_weight(times_ms: np.ndarray, windows: Sequence[TimeWindow], *, margin_fraction: float = 0.5,
                  after_fraction: float | None = None) -> np.ndarray:
    """Membership of each time in the windows, in [0, 1]: 1 inside one, a raised-cosine fall-off over a margin
    of `margin_fraction` × the window's length outside it, 0 beyond; the best window counts. The default half
    length covers a UTC day read in the user's time zone (±12 h) and keeps month and year edges soft.
    `after_fraction` (default: the same) sets the margin after a window's end on its own: memories are written at
    or after the events they tell of ("last Sunday we …" said on Tuesday), so a longer one there may suit."""
    t = np.asarray(times_ms, dtype=np.float64)
    if not windows:
        return np.zeros(t.shape)
    start = np.array([w.start_ms for w in windows], dtype=np.float64)
    end = np.array([w.end_ms for w in windows], dtype=np.float64)
    length = np.maximum(end - start, 0.0)
    before = length * max(float(margin_fraction), 0.0)
    after = length * max(float(margin_fraction if after_fraction is None else after_fraction), 0.0)
    tt = t[..., None]
    early = tt < start
    distance = np.where(early, start - tt, tt - end)  # > 0 outside, ≤ 0 inside
    margin = np.where(early, before, after)
    with np.errstate(invalid="ignore"):  # NaN times weigh 0
        cosine = 0.5 * (1.0 + np.cos(np.pi * distance / np.where(margin > 0, margin, 1.0)))
        weight = np.where((tt >= start) & (tt < end), 1.0, np.where(distance < margin, cosine, 0.0))
    return np.nan_to_num(weight.max(axis=-1), nan=0.0)
