"""Calendar arithmetic and counting words shared by the temporal rules (server/temporal.py). Pure.

Naive datetimes, all UTC. Months and years move by calendar arithmetic (31 March − 1 month = 28/29 February);
weeks start on Monday.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import datetime, timedelta

RECENT_DAYS = 30  # "recently", 最近: an assistant's "recently" is a matter of weeks
RECENT_FEW_DAYS = 7  # "the other day", 这几天

DAY = timedelta(days=1)

# start, end (exclusive), kind, whether it names a calendar date (a month, a year) rather than a time from now
Span = tuple[datetime, datetime, str, bool]
Build = Callable[[re.Match[str], datetime], "Span | None"]
Rule = tuple[re.Pattern[str], Build]


def registry(rules: list[Rule], *, chinese: bool) -> Callable[[str], Callable[[Build], Build]]:
    """A decorator that appends (pattern, builder) to `rules`; English patterns are case-insensitive and
    bounded by non-alphanumerics, Chinese ones only kept from starting inside a number."""

    def rule(pattern: str) -> Callable[[Build], Build]:
        if chinese:
            compiled = re.compile(rf"(?<!\d)(?:{pattern})", re.ASCII)
        else:
            compiled = re.compile(rf"(?<![A-Za-z0-9])(?:{pattern})(?![A-Za-z0-9])", re.IGNORECASE | re.ASCII)

        def register(build: Build) -> Build:
            rules.append((compiled, build))
            return build

        return register

    return rule


def day_of(dt: datetime) -> datetime:
    return datetime(dt.year, dt.month, dt.day)


def add_months(dt: datetime, n: int) -> datetime:
    y, m = divmod(dt.year * 12 + dt.month - 1 + n, 12)
    return dt.replace(year=y, month=m + 1, day=min(dt.day, calendar.monthrange(y, m + 1)[1]))


UNITS = {"minute": (False, 1 / 1440), "hour": (False, 1 / 24), "halfhour": (False, 1 / 48), "day": (False, 1),
         "week": (False, 7), "fortnight": (False, 14), "halfmonth": (False, 15), "month": (True, 1),
         "halfyear": (True, 6), "year": (True, 12)}  # unit → (in calendar months?, size in months or days)


def shift(dt: datetime, n: int, unit: str) -> datetime:
    months, size = UNITS[unit]
    return add_months(dt, int(n * size)) if months else dt + n * size * DAY


def days(start: datetime, n: int = 1) -> tuple[datetime, datetime]:
    return start, start + n * DAY


def month(y: int, m: int) -> tuple[datetime, datetime]:
    return datetime(y, m, 1), add_months(datetime(y, m, 1), 1)


def year(y: int) -> tuple[datetime, datetime]:
    return datetime(y, 1, 1), datetime(y + 1, 1, 1)


def latest_month(m: int, ref: datetime, *, strict: bool = False) -> tuple[datetime, datetime]:
    """The latest month `m` not after `ref`'s month (before it if strict)."""
    return month(ref.year if m < ref.month or (m == ref.month and not strict) else ref.year - 1, m)


def latest_date(m: int, d: int, ref: datetime) -> datetime | None:
    """The latest `m`-`d` not after `ref`'s day (29 February looks back up to eight years)."""
    for y in range(ref.year, ref.year - 9, -1):
        if d <= calendar.monthrange(y, m)[1] and datetime(y, m, d) <= day_of(ref):
            return datetime(y, m, d)
    return None


def weekday_before(ref: datetime, wd: int) -> datetime:
    """The latest weekday `wd` (Monday 0) strictly before `ref`'s day."""
    return day_of(ref) - ((ref.weekday() - wd - 1) % 7 + 1) * DAY


def calendar_unit(now: datetime, unit: str, step: int) -> Span:
    """This (step 0), last (−1) or next (+1) calendar week, weekend (Saturday and Sunday), month or year."""
    if unit in ("week", "weekend"):
        monday = day_of(now) - now.weekday() * DAY + 7 * step * DAY
        return (*days(monday, 7), "week", False) if unit == "week" else (*days(monday + 5 * DAY, 2), "weekend", False)
    months = 1 if unit == "month" else 12
    start = add_months(datetime(now.year, now.month if months == 1 else 1, 1), step * months)
    return start, add_months(start, months), unit, False


def around(at: datetime, lo: int, hi: int, unit: str, sign: int) -> tuple[datetime, datetime]:
    """`lo`..`hi` units from `at` (sign −1 before, +1 after): whole calendar days, or else each point ± half a
    unit (the midpoints to the neighbouring counts, so consecutive counts tile time without overlap)."""
    if unit == "day":
        a, b = day_of(at + sign * lo * DAY), day_of(at + sign * hi * DAY)
        return min(a, b), max(a, b) + DAY

    def mid(j: int) -> datetime:  # halfway between the points j and j + 1 units away
        p, q = shift(at, sign * j, unit), shift(at, sign * (j + 1), unit)
        return p + (q - p) / 2

    a, b = mid(lo - 1), mid(hi)
    return min(a, b), max(a, b)


def ago(now: datetime, count: tuple[int, int], unit: str, sign: int = -1) -> Span:
    kind = "day" if unit == "day" and count[0] == count[1] else "relative"
    return *around(now, *count, unit, sign), kind, False


def up_to_today(now: datetime, hi: int, unit: str) -> Span:
    """"in the last `hi` units": from midnight `hi` units ago (the very time, for hours) to the end of today."""
    start = shift(now, -hi, unit)
    return start if unit in ("minute", "hour") else day_of(start), day_of(now) + DAY, "range", False


def recent(now: datetime, n_days: int) -> Span:
    return day_of(now) - n_days * DAY, day_of(now) + DAY, "recent", False


def season(now: datetime, first: int, mod: str, y: int | None) -> Span:
    """The meteorological (northern) season starting in month `first`: of year `y` (winter `y` starts in its
    December), else the latest that has begun; "last" one that has ended, "next" the coming one."""
    if y is None:
        y = now.year if now.month >= first else now.year - 1
        if mod == "next":
            y += 1
        elif mod == "this":
            y = now.year - (first == 12 and now.month <= 2)
        elif mod == "last" and now < add_months(datetime(y, first, 1), 3):  # still in it: the one before
            y -= 1
    start = datetime(y, first, 1)
    return start, add_months(start, 3), "season", mod not in ("this", "last", "next", "past", "this past")


# ---- counting words ----
_WORDS = "one two three four five six seven eight nine ten eleven twelve".split()
NUMBERS = {w: i + 1 for i, w in enumerate(_WORDS)} | {"a": 1, "an": 1, "fifteen": 15, "twenty": 20, "thirty": 30,
                                                       "a dozen": 12, "a couple of": 2, "a couple": 2, "couple of": 2}
FUZZY = frozenset({"a few", "few", "several", "几", "好几"})  # 2..4 units
_ENGLISH_FUZZY = FUZZY - {"几", "好几"}


def _alternatives(words: set[str]) -> str:
    longest_first = sorted(words, key=lambda w: (-len(w), w))
    return "|".join([r"\d{1,4}", *(re.escape(w).replace(r"\ ", r"\s+") for w in longest_first)])


NUM = _alternatives(NUMBERS.keys() | _ENGLISH_FUZZY)
NUM_PLURAL = _alternatives(NUMBERS.keys() - {"a", "an"} | _ENGLISH_FUZZY)  # "the last few days", not "the last a"
_CN_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
CN_NUM = r"\d{1,4}|[一二两三四五六七八九十]{1,3}"


def cn_int(s: str) -> int:
    """一 → 1, 十二 → 12, 二十三 → 23, 两 → 2, "15" → 15."""
    if s.isascii() and s.isdigit():
        return int(s)
    tens, ten, ones = s.partition("十")
    if not ten:
        if s not in _CN_DIGITS:
            raise ValueError(s)
        return _CN_DIGITS[s]
    if len(tens) > 1 or len(ones) > 1 or any(c not in _CN_DIGITS for c in tens + ones):
        raise ValueError(s)
    return (_CN_DIGITS[tens] if tens else 1) * 10 + (_CN_DIGITS[ones] if ones else 0)


def count(text: str) -> tuple[int, int] | None:
    """(lo, hi) units: an exact count, 2..4 for "a few", "several", 几, 3..4 for 三四; None past 5000."""
    t = " ".join(text.lower().split())
    if t in FUZZY:
        return 2, 4
    if len(t) == 2 and t[0] in _CN_DIGITS and t[1] in _CN_DIGITS and _CN_DIGITS[t[1]] == _CN_DIGITS[t[0]] + 1:
        return _CN_DIGITS[t[0]], _CN_DIGITS[t[1]]  # 两三 (2–3), 三四 (3–4)
    n = NUMBERS[t] if t in NUMBERS else cn_int(t)
    return (n, n) if 0 < n <= 5000 else None
