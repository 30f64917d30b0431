"""Chinese time expressions → spans (server/temporal.py documents the conventions). Pure.

Rules as in server/temporal_en.py: a pattern and a builder `(match, now) → Span | None`; the longest match
wins, a tie goes to the earlier rule. Numbers are Arabic or Chinese (一 … 十二, 两, 几 ≈ 2–4).
"""

from __future__ import annotations

import re
from datetime import datetime

from server.temporal_calendar import (
    CN_NUM, DAY, RECENT_DAYS, RECENT_FEW_DAYS, Rule, Span, add_months, ago, calendar_unit, cn_int, count, day_of,
    days, latest_date, latest_month, month, recent, registry, season, up_to_today, weekday_before, year,
)

RULES: list[Rule] = []
_rule = registry(RULES, chinese=True)
TRIGGER = re.compile("[天日周期拜月年晚早夜近时钟阵]")  # every rule's match contains one of these

_YEAR_WORDS = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1}
_YEAR = r"(?:(?P<yw>大前年|前年|去年|今年|明年)的?|(?P<y>\d{4})\s*年\s*的?)"
_WEEK = r"(?:周|星期|礼拜)"
_STEP = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1}
_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week", "月": "month", "年": "year",
          "小时": "hour", "分钟": "minute"}
_UNIT = "|".join(_UNITS)


def _year_of(m: re.Match[str], now: datetime) -> int | None:
    if m["yw"]:
        return now.year + _YEAR_WORDS[m["yw"]]
    return int(m["y"]) if m["y"] else None


_DAY_WORDS = {"大前天": -3, "前天": -2, "昨": -1, "今": 0, "明": 1, "后天": 2, "大后天": 3}


@_rule(r"大前天|前天|昨天|昨日|昨晚|昨夜|今天|今日|今晚|今早|明天|明日|明晚|大后天|后天")
def _day_word(m: re.Match[str], now: datetime) -> Span | None:
    offset = _DAY_WORDS.get(m[0], _DAY_WORDS.get(m[0][0], 0))
    return *days(day_of(now) + offset * DAY), "day", False


@_rule(r"前(?P<n>几|两)天")
def _days_ago(m: re.Match[str], now: datetime) -> Span | None:
    """前几天 (2–4 days ago), 前两天 (2 days ago)."""
    n = count(m["n"])
    return ago(now, n, "day") if n else None


@_rule(rf"(?P<s>上上|上|这|本|下)个?{_WEEK}(?![年围边期到全岁])")  # not 周年, 周围, 周边, 周期, 周到 …
def _week(m: re.Match[str], now: datetime) -> Span | None:
    return calendar_unit(now, "week", _STEP[m["s"]])


@_rule(r"(?:(?P<s>上上|上|这|本|下)个?)?周末")
def _weekend(m: re.Match[str], now: datetime) -> Span | None:
    """上周末 is last week's weekend; 周末 alone the current one on a weekend, else the last."""
    return calendar_unit(now, "weekend", _STEP[m["s"]] if m["s"] else (0 if now.weekday() >= 5 else -1))


@_rule(rf"(?<!每)(?:(?P<s>上|这|本|下)个?)?{_WEEK}(?P<d>[一二三四五六日天])")
def _weekday(m: re.Match[str], now: datetime) -> Span | None:
    """周五 is the latest Friday before today; 上周五 last week's Friday, 这周五 this week's, 下周五 next week's."""
    if m["d"] in "一二三四五六" and m.string[m.end():m.end() + 1] in ("次", "天", "回", "趟"):  # 一周三次, 一周五天
        return None
    wd = "一二三四五六".find(m["d"]) if m["d"] not in "日天" else 6
    if not m["s"]:
        return *days(weekday_before(now, wd)), "day", False
    monday = day_of(now) - now.weekday() * DAY + 7 * _STEP[m["s"]] * DAY
    return *days(monday + wd * DAY), "day", False


@_rule(r"(?P<s>上上|上|这|本|下)个?月(?![亮光饼球份])")
def _month_word(m: re.Match[str], now: datetime) -> Span | None:
    return calendar_unit(now, "month", _STEP[m["s"]])


@_rule(r"(?:大前年|前年|去年|今年|明年)(?![纪龄])")
def _year_word(m: re.Match[str], now: datetime) -> Span | None:
    return *year(now.year + _YEAR_WORDS[m[0]]), "year", False


@_rule(rf"(?<!每年)(?<!每)(?<!每个){_YEAR}?(?P<m>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])\s*月份?(?:(?P<d>3[01]|[12]\d|0?[1-9]"
       r"|[二三]?十[一二三四五六七八九]?|[一二三四五六七八九])\s*[日号]|(?P<p>初|上旬|中旬|下旬|底|末))?")
def _date(m: re.Match[str], now: datetime) -> Span | None:
    """三月, 去年三月, 2023年5月, 2023年5月8日, 5月8号 (the latest not after today), 5月底; not 每年五月."""
    mon, y = cn_int(m["m"]), _year_of(m, now)
    if m["d"]:
        d = datetime(y, mon, cn_int(m["d"])) if y is not None else latest_date(mon, cn_int(m["d"]), now)
        return None if d is None else (*days(d), "day", True)
    start, end = month(y, mon) if y is not None else latest_month(mon, now)
    if m["p"]:
        lo, hi = {"初": (0, 10), "上": (0, 10), "中": (10, 20)}.get(m["p"][0], (20, 99))
        return start + lo * DAY, min(end, start + hi * DAY), "part", True
    return start, end, "month", True


@_rule(r"(?P<y>\d{4})\s*年(?![代龄纪级])")  # not 1990年代
def _year_number(m: re.Match[str], now: datetime) -> Span | None:
    return *year(int(m["y"])), "year", True


@_rule(rf"{_YEAR}?(?P<h>上|下)半年")
def _half_year(m: re.Match[str], now: datetime) -> Span | None:
    y = _year_of(m, now)
    start = datetime(now.year if y is None else y, 1 if m["h"] == "上" else 7, 1)
    return start, add_months(start, 6), "part", m["y"] is not None


@_rule(rf"{_YEAR}(?P<s>[春夏秋冬])[天季]")
def _season(m: re.Match[str], now: datetime) -> Span | None:
    y = _year_of(m, now)
    return None if y is None else season(now, {"春": 3, "夏": 6, "秋": 9, "冬": 12}[m["s"]], "", y)


@_rule(rf"(?P<n>{CN_NUM}|好几|几|半)(?P<ge>个)?(?P<u>{_UNIT})(?:前|之前|以前)")
def _ago(m: re.Match[str], now: datetime) -> Span | None:
    """三天前, 两周前, 三个月前, 几年前, 半年前, 两个小时前."""
    unit = _UNITS[m["u"]]
    if unit == "month" and not m["ge"] and m["n"] != "半":  # 3月前 is "before March"
        return None
    if m["n"] == "半":
        return ago(now, (1, 1), "half" + unit) if unit in ("month", "year", "hour") else None
    n = count(m["n"])
    return ago(now, n, unit) if n else None


@_rule(r"最近几天|这几天|这些天|近几天|最近这段时间|最近一段时间|这段时间|这阵子|最近|近来|近期|近日")
def _recent(m: re.Match[str], now: datetime) -> Span | None:
    return recent(now, RECENT_FEW_DAYS if m[0].endswith("天") else RECENT_DAYS)


@_rule(rf"(?:过去|最近|近|这)的?(?P<n>{CN_NUM}|好几|几)个?(?P<u>{_UNIT})(?:来|里|内|以来|之内|当中)?")
def _last_n(m: re.Match[str], now: datetime) -> Span | None:
    """最近三天, 过去两周, 近一年, 过去几个月, 过去24小时."""
    n = count(m["n"])
    return up_to_today(now, n[1], _UNITS[m["u"]]) if n else None
