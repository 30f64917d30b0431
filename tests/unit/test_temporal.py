"""server/temporal.py: time expressions in queries → windows; back-references; window membership weights.

Expected windows are written out by hand from the calendar (now = Tuesday 15 August 2023, 10:00 UTC unless a
case says otherwise), not computed with the module's helpers.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server import temporal
from server.temporal import TimeWindow, parse_time_windows, refers_back, window_weight


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).replace(tzinfo=timezone.utc).timestamp() * 1000)


NOW = ms("2023-08-15T10:00")  # a Tuesday

# (query, text, start, end, kind): the query names exactly one window
ONE_WINDOW = [
    ("what did I eat yesterday?", "yesterday", "2023-08-14", "2023-08-15", "day"),
    ("Today", "Today", "2023-08-15", "2023-08-16", "day"),
    ("the day before yesterday", "the day before yesterday", "2023-08-13", "2023-08-14", "day"),
    ("plans for tonight", "tonight", "2023-08-15", "2023-08-16", "day"),
    ("what did I say this morning", "this morning", "2023-08-15", "2023-08-16", "day"),
    ("this evening", "this evening", "2023-08-15", "2023-08-16", "day"),
    ("the film last night", "last night", "2023-08-14", "2023-08-15", "day"),
    ("meeting tomorrow", "tomorrow", "2023-08-16", "2023-08-17", "day"),
    ("the day after tomorrow", "the day after tomorrow", "2023-08-17", "2023-08-18", "day"),
    ("this week", "this week", "2023-08-14", "2023-08-21", "week"),
    ("What did we decide last week?", "last week", "2023-08-07", "2023-08-14", "week"),
    ("next week", "next week", "2023-08-21", "2023-08-28", "week"),
    ("the week before last", "the week before last", "2023-07-31", "2023-08-07", "week"),
    ("this month", "this month", "2023-08-01", "2023-09-01", "month"),
    ("LAST MONTH", "LAST MONTH", "2023-07-01", "2023-08-01", "month"),
    ("next month", "next month", "2023-09-01", "2023-10-01", "month"),
    ("this year", "this year", "2023-01-01", "2024-01-01", "year"),
    ("trips last year", "last year", "2022-01-01", "2023-01-01", "year"),
    ("next year", "next year", "2024-01-01", "2025-01-01", "year"),
    ("last weekend", "last weekend", "2023-08-12", "2023-08-14", "weekend"),
    ("this weekend", "this weekend", "2023-08-19", "2023-08-21", "weekend"),
    ("what I did over the weekend", "over the weekend", "2023-08-12", "2023-08-14", "weekend"),
    ("last Friday", "last Friday", "2023-08-11", "2023-08-12", "day"),
    ("what happened on Monday", "on Monday", "2023-08-14", "2023-08-15", "day"),
    ("on Tuesday", "on Tuesday", "2023-08-08", "2023-08-09", "day"),  # today is Tuesday: the one before
    ("this Friday", "this Friday", "2023-08-18", "2023-08-19", "day"),
    ("next Monday", "next Monday", "2023-08-21", "2023-08-22", "day"),
    ("3 days ago", "3 days ago", "2023-08-12", "2023-08-13", "day"),
    ("a day ago", "a day ago", "2023-08-14", "2023-08-15", "day"),
    ("two weeks ago", "two weeks ago", "2023-07-28T22:00", "2023-08-04T22:00", "relative"),
    ("a week ago", "a week ago", "2023-08-04T22:00", "2023-08-11T22:00", "relative"),
    ("two months ago", "two months ago", "2023-05-30T22:00", "2023-06-30T10:00", "relative"),
    ("a year ago", "a year ago", "2022-02-13T22:00", "2023-02-13T22:00", "relative"),
    ("a few days ago", "a few days ago", "2023-08-11", "2023-08-14", "relative"),
    ("a couple of weeks ago", "a couple of weeks ago", "2023-07-28T22:00", "2023-08-04T22:00", "relative"),
    ("several months ago", "several months ago", "2023-03-30T22:00", "2023-06-30T10:00", "relative"),
    ("half a year ago", "half a year ago", "2022-11-15T10:00", "2023-05-16T22:00", "relative"),
    ("a year and a half ago", "a year and a half ago", "2021-11-15T10:00", "2022-05-16T22:00", "relative"),
    ("an hour ago", "an hour ago", "2023-08-15T08:30", "2023-08-15T09:30", "relative"),
    ("3 days from now", "3 days from now", "2023-08-18", "2023-08-19", "day"),
    ("in the last 3 days", "in the last 3 days", "2023-08-12", "2023-08-16", "range"),
    ("over the past two weeks", "over the past two weeks", "2023-08-01", "2023-08-16", "range"),
    ("the past month", "the past month", "2023-07-15", "2023-08-16", "range"),
    ("in the last few months", "in the last few months", "2023-04-15", "2023-08-16", "range"),
    ("in the last 24 hours", "in the last 24 hours", "2023-08-14T10:00", "2023-08-16", "range"),
    ("what have I been reading recently?", "recently", "2023-07-16", "2023-08-16", "recent"),
    ("lately", "lately", "2023-07-16", "2023-08-16", "recent"),
    ("these days", "these days", "2023-07-16", "2023-08-16", "recent"),
    ("nowadays", "nowadays", "2023-07-16", "2023-08-16", "recent"),
    ("the other day", "the other day", "2023-08-08", "2023-08-16", "recent"),
    ("in May", "in May", "2023-05-01", "2023-06-01", "month"),
    ("in August", "in August", "2023-08-01", "2023-09-01", "month"),  # the current month is not after now
    ("in September", "in September", "2022-09-01", "2022-10-01", "month"),  # the latest not after now
    ("May 2023", "May 2023", "2023-05-01", "2023-06-01", "month"),
    ("MAY 2023", "MAY 2023", "2023-05-01", "2023-06-01", "month"),
    ("in May of 2023", "in May of 2023", "2023-05-01", "2023-06-01", "month"),
    ("on 8 May 2023", "on 8 May 2023", "2023-05-08", "2023-05-09", "day"),
    ("May 8, 2023", "May 8, 2023", "2023-05-08", "2023-05-09", "day"),
    ("8th of May", "8th of May", "2023-05-08", "2023-05-09", "day"),
    ("on 1 February, 2023", "on 1 February, 2023", "2023-02-01", "2023-02-02", "day"),
    ("shared on December 1,2023", "on December 1,2023", "2023-12-01", "2023-12-02", "day"),
    ("when they met on Aug 15th", "on Aug 15th", "2023-08-15", "2023-08-16", "day"),
    ("in 2022", "in 2022", "2022-01-01", "2023-01-01", "year"),
    ("2023-05-08", "2023-05-08", "2023-05-08", "2023-05-09", "day"),
    ("early May", "early May", "2023-05-01", "2023-05-11", "part"),
    ("mid-May 2022", "mid-May 2022", "2022-05-11", "2022-05-21", "part"),
    ("late May", "late May", "2023-05-21", "2023-06-01", "part"),
    ("late 2022", "late 2022", "2022-09-01", "2023-01-01", "part"),
    ("the end of last month", "the end of last month", "2023-07-21", "2023-08-01", "part"),
    ("in the beginning of November 2022", "in the beginning of November 2022", "2022-11-01", "2022-11-11", "part"),
    ("in the second week of November", "in the second week of November", "2022-11-08", "2022-11-15", "part"),
    ("the first half of September 2022", "the first half of September 2022", "2022-09-01", "2022-09-16", "part"),
    ("last summer", "last summer", "2022-06-01", "2022-09-01", "season"),  # now is in summer 2023
    ("this summer", "this summer", "2023-06-01", "2023-09-01", "season"),
    ("in the fall", "in the fall", "2022-09-01", "2022-12-01", "season"),
    ("last winter", "last winter", "2022-12-01", "2023-03-01", "season"),
    ("in summer 2021", "in summer 2021", "2021-06-01", "2021-09-01", "season"),
    ("in the spring of 2020", "in the spring of 2020", "2020-03-01", "2020-06-01", "season"),
    ("last May", "last May", "2023-05-01", "2023-06-01", "month"),
    ("last September", "last September", "2022-09-01", "2022-10-01", "month"),
    ("in May last year", "in May last year", "2022-05-01", "2022-06-01", "month"),
    ("next March", "next March", "2024-03-01", "2024-04-01", "month"),
    ("the week before 9 June 2023", "the week before 9 June 2023", "2023-06-02", "2023-06-09", "week"),
    ("the day after 8 May 2023", "the day after 8 May 2023", "2023-05-09", "2023-05-10", "day"),
    ("the month before May 2023", "the month before May 2023", "2023-04-01", "2023-05-01", "month"),
    ("last weekend before April 10, 2023", "last weekend before April 10, 2023", "2023-04-08", "2023-04-10",
     "weekend"),
    ("the Sunday before October 25, 2022", "the Sunday before October 25, 2022", "2022-10-23", "2022-10-24", "day"),
    ("two weeks before August 11, 2023", "two weeks before August 11, 2023", "2023-07-24T12:00",
     "2023-07-31T12:00", "relative"),
    ("3 days before 8 May 2023", "3 days before 8 May 2023", "2023-05-05", "2023-05-06", "day"),
    ("two months after May 2023", "two months after May 2023", "2023-07-01", "2023-08-01", "month"),
    ("the week of 8 May 2023", "the week of 8 May 2023", "2023-05-08", "2023-05-15", "week"),
    ("between August 11 and August 15 2023", "between August 11 and August 15 2023", "2023-08-11", "2023-08-16",
     "range"),
    ("from May to July", "from May to July", "2023-05-01", "2023-08-01", "range"),
    ("since March", "since March", "2023-03-01", "2023-08-16", "range"),
    ("since 2022", "since 2022", "2022-01-01", "2023-08-16", "range"),
    # Chinese
    ("今天吃了什么", "今天", "2023-08-15", "2023-08-16", "day"),
    ("昨天", "昨天", "2023-08-14", "2023-08-15", "day"),
    ("前天", "前天", "2023-08-13", "2023-08-14", "day"),
    ("大前天", "大前天", "2023-08-12", "2023-08-13", "day"),
    ("明天", "明天", "2023-08-16", "2023-08-17", "day"),
    ("后天", "后天", "2023-08-17", "2023-08-18", "day"),
    ("前几天说的餐厅", "前几天", "2023-08-11", "2023-08-14", "relative"),
    ("两三天前", "两三天前", "2023-08-12", "2023-08-14", "relative"),
    ("今晚", "今晚", "2023-08-15", "2023-08-16", "day"),
    ("昨晚看的电影", "昨晚", "2023-08-14", "2023-08-15", "day"),
    ("本周", "本周", "2023-08-14", "2023-08-21", "week"),
    ("这周", "这周", "2023-08-14", "2023-08-21", "week"),
    ("这个星期", "这个星期", "2023-08-14", "2023-08-21", "week"),
    ("这礼拜", "这礼拜", "2023-08-14", "2023-08-21", "week"),
    ("上周开会说了什么", "上周", "2023-08-07", "2023-08-14", "week"),
    ("上个星期", "上个星期", "2023-08-07", "2023-08-14", "week"),
    ("上礼拜", "上礼拜", "2023-08-07", "2023-08-14", "week"),
    ("上星期", "上星期", "2023-08-07", "2023-08-14", "week"),
    ("下周", "下周", "2023-08-21", "2023-08-28", "week"),
    ("上上周", "上上周", "2023-07-31", "2023-08-07", "week"),
    ("本月", "本月", "2023-08-01", "2023-09-01", "month"),
    ("这个月", "这个月", "2023-08-01", "2023-09-01", "month"),
    ("上个月", "上个月", "2023-07-01", "2023-08-01", "month"),
    ("上月", "上月", "2023-07-01", "2023-08-01", "month"),
    ("下个月", "下个月", "2023-09-01", "2023-10-01", "month"),
    ("今年", "今年", "2023-01-01", "2024-01-01", "year"),
    ("去年", "去年", "2022-01-01", "2023-01-01", "year"),
    ("前年", "前年", "2021-01-01", "2022-01-01", "year"),
    ("明年", "明年", "2024-01-01", "2025-01-01", "year"),
    ("最近在读什么书", "最近", "2023-07-16", "2023-08-16", "recent"),
    ("近来", "近来", "2023-07-16", "2023-08-16", "recent"),
    ("近期", "近期", "2023-07-16", "2023-08-16", "recent"),
    ("这几天", "这几天", "2023-08-08", "2023-08-16", "recent"),
    ("最近几天", "最近几天", "2023-08-08", "2023-08-16", "recent"),
    ("3天前", "3天前", "2023-08-12", "2023-08-13", "day"),
    ("三天前", "三天前", "2023-08-12", "2023-08-13", "day"),
    ("十天前", "十天前", "2023-08-05", "2023-08-06", "day"),
    ("两周前", "两周前", "2023-07-28T22:00", "2023-08-04T22:00", "relative"),
    ("三个月前", "三个月前", "2023-04-30T10:00", "2023-05-30T22:00", "relative"),
    ("两年前", "两年前", "2021-02-13T22:00", "2022-02-13T22:00", "relative"),
    ("几天前", "几天前", "2023-08-11", "2023-08-14", "relative"),
    ("半年前", "半年前", "2022-11-15T10:00", "2023-05-16T22:00", "relative"),
    ("三月", "三月", "2023-03-01", "2023-04-01", "month"),
    ("3月", "3月", "2023-03-01", "2023-04-01", "month"),
    ("十二月", "十二月", "2022-12-01", "2023-01-01", "month"),
    ("去年三月", "去年三月", "2022-03-01", "2022-04-01", "month"),
    ("今年3月份", "今年3月份", "2023-03-01", "2023-04-01", "month"),
    ("2023年5月", "2023年5月", "2023-05-01", "2023-06-01", "month"),
    ("2023年5月8日", "2023年5月8日", "2023-05-08", "2023-05-09", "day"),
    ("5月8号", "5月8号", "2023-05-08", "2023-05-09", "day"),
    ("9月1日", "9月1日", "2022-09-01", "2022-09-02", "day"),  # the latest not after today
    ("5月底", "5月底", "2023-05-21", "2023-06-01", "part"),
    ("２０２３年５月", "２０２３年５月", "2023-05-01", "2023-06-01", "month"),  # full-width digits
    ("上周五", "上周五", "2023-08-11", "2023-08-12", "day"),
    ("周五", "周五", "2023-08-11", "2023-08-12", "day"),
    ("星期五", "星期五", "2023-08-11", "2023-08-12", "day"),
    ("礼拜五", "礼拜五", "2023-08-11", "2023-08-12", "day"),
    ("周二", "周二", "2023-08-08", "2023-08-09", "day"),  # today is Tuesday: the one before
    ("这周五", "这周五", "2023-08-18", "2023-08-19", "day"),
    ("下周一", "下周一", "2023-08-21", "2023-08-22", "day"),
    ("上周日", "上周日", "2023-08-13", "2023-08-14", "day"),
    ("上周末", "上周末", "2023-08-12", "2023-08-14", "weekend"),
    ("周末去哪了", "周末", "2023-08-12", "2023-08-14", "weekend"),
    ("上半年", "上半年", "2023-01-01", "2023-07-01", "part"),
    ("去年下半年", "去年下半年", "2022-07-01", "2023-01-01", "part"),
    ("去年夏天", "去年夏天", "2022-06-01", "2022-09-01", "season"),
    ("过去三天", "过去三天", "2023-08-12", "2023-08-16", "range"),
    ("最近两周", "最近两周", "2023-08-01", "2023-08-16", "range"),
    ("近一年", "近一年", "2022-08-15", "2023-08-16", "range"),
    ("2024年", "2024年", "2024-01-01", "2025-01-01", "year"),
]


@pytest.mark.parametrize(("query", "text", "start", "end", "kind"), ONE_WINDOW, ids=[c[0] for c in ONE_WINDOW])
def test_one_window(query: str, text: str, start: str, end: str, kind: str) -> None:
    assert parse_time_windows(query, now_ms=NOW) == (TimeWindow(ms(start), ms(end), text, kind),)


# (now, query, start, end): month and year boundaries, month ends, leap years
BOUNDARIES = [
    ("2024-01-10T12:00", "last month", "2023-12-01", "2024-01-01"),
    ("2024-01-10T12:00", "上个月", "2023-12-01", "2024-01-01"),
    ("2024-01-10T12:00", "去年三月", "2023-03-01", "2023-04-01"),
    ("2024-01-10T12:00", "in March", "2023-03-01", "2023-04-01"),
    ("2024-01-10T12:00", "12月", "2023-12-01", "2024-01-01"),
    ("2024-01-10T12:00", "last December", "2023-12-01", "2024-01-01"),
    ("2024-01-10T12:00", "last week", "2024-01-01", "2024-01-08"),
    ("2024-01-10T12:00", "last year", "2023-01-01", "2024-01-01"),
    ("2024-01-10T12:00", "next month", "2024-02-01", "2024-03-01"),
    ("2024-01-10T12:00", "this winter", "2023-12-01", "2024-03-01"),
    ("2024-01-10T12:00", "last winter", "2022-12-01", "2023-03-01"),  # we are in winter 2023/24
    ("2024-01-10T12:00", "two months ago", "2023-10-26T00:00", "2023-11-25T12:00"),
    ("2024-01-10T12:00", "in the past 2 weeks", "2023-12-27", "2024-01-11"),
    ("2024-01-01T00:00", "yesterday", "2023-12-31", "2024-01-01"),
    ("2023-03-31T12:00", "a month ago", "2023-02-14T12:00", "2023-03-16T00:00"),  # 31 March − 1 month = 28 Feb
    ("2023-03-31T12:00", "in the past month", "2023-02-28", "2023-04-01"),
    ("2024-03-01T09:00", "yesterday", "2024-02-29", "2024-03-01"),
    ("2024-03-01T09:00", "last month", "2024-02-01", "2024-03-01"),
    ("2024-03-01T09:00", "29 February", "2024-02-29", "2024-03-01"),
    ("2023-08-15T10:00", "29 February", "2020-02-29", "2020-03-01"),  # the latest one not after today
    ("2023-08-15T10:00", "2月29日", "2020-02-29", "2020-03-01"),
    ("2024-02-29T12:00", "a year ago", "2022-08-30T00:00", "2023-08-30T12:00"),
    ("2023-08-19T10:00", "last weekend", "2023-08-12", "2023-08-14"),  # on a Saturday: the week before's
    ("2023-08-19T10:00", "on the weekend", "2023-08-19", "2023-08-21"),
    ("2023-08-19T10:00", "上周五", "2023-08-11", "2023-08-12"),  # last week's Friday, not yesterday
    ("2023-08-19T10:00", "last Friday", "2023-08-18", "2023-08-19"),  # the latest Friday before today
    ("2023-10-10T10:00", "last summer", "2023-06-01", "2023-09-01"),  # ended: the latest one
]


@pytest.mark.parametrize(("now", "query", "start", "end"), BOUNDARIES, ids=[f"{c[0]} {c[1]}" for c in BOUNDARIES])
def test_calendar_boundaries(now: str, query: str, start: str, end: str) -> None:
    (window,) = parse_time_windows(query, now_ms=ms(now))
    assert (window.start_ms, window.end_ms) == (ms(start), ms(end))


NO_WINDOW = [
    "May I ask you something?", "you may want to check the logs", "we will march on", "wait a second",
    "Will said hi", "the last time we talked", "I fall asleep early", "summer camp was fun", "one week of rest",
    "the fall of Rome", "every Monday we meet", "I have 3 kids and 2000 emails", "the last day of the trip",
    "what did I buy on Black Friday", "每周一次", "一周三次", "每年五月", "这周围的餐厅", "1990年代的音乐", "三个月的课程", "", "   ",
]


@pytest.mark.parametrize("query", NO_WINDOW)
def test_no_false_positives(query: str) -> None:
    assert parse_time_windows(query, now_ms=NOW) == ()


def test_several_windows_come_in_the_order_they_appear() -> None:
    got = parse_time_windows("yesterday or last week, and 上个月", now_ms=NOW)
    assert [w.text for w in got] == ["yesterday", "last week", "上个月"]
    assert [w.kind for w in got] == ["day", "week", "month"]


def test_the_longest_match_wins_over_its_parts() -> None:
    assert [w.text for w in parse_time_windows("去年三月去了哪里", now_ms=NOW)] == ["去年三月"]
    assert [w.text for w in parse_time_windows("the week before 9 June 2023", now_ms=NOW)] == [
        "the week before 9 June 2023"]


def test_a_named_date_anchors_the_relative_phrases_beside_it() -> None:
    got = parse_time_windows("What was Tim's issue last week, as mentioned on November 6, 2022?", now_ms=NOW)
    assert got == (TimeWindow(ms("2022-11-06"), ms("2022-11-07"), "on November 6, 2022", "day"),)
    assert [w.text for w in parse_time_windows("the cake she made recently in May 2022", now_ms=NOW)] == [
        "in May 2022"]


def test_bad_inputs_give_no_windows() -> None:
    assert parse_time_windows("yesterday", now_ms=10**20) == ()
    assert parse_time_windows(None, now_ms=NOW) == ()  # type: ignore[arg-type]
    assert parse_time_windows("on 31 February 2023 and 2023-13-40", now_ms=NOW) == ()
    assert parse_time_windows("yesterday", now_ms=-62135596800000) == ()  # 1 January of year 1: no year 0
    assert parse_time_windows("next year", now_ms=253402300799999) == ()  # 31 December 9999: no year 10000


_TOKENS = ["last", "next", "this", "the", "week", "month", "year", "weekend", "ago", "before", "after", "of", "in",
           "between", "and", "since", "early", "late", "summer", "fall", "Friday", "a few", "days", "two", "May",
           "march", "8", "31", "29 February", "2023", "1800", "-", ",", "上", "周", "月", "年", "前", "去年", "三",
           "十", "几", "个", "天", "号", "半", "最近", "这", "１２"]


@settings(max_examples=400, deadline=None)
@given(query=st.text(max_size=80), now_ms=st.integers(min_value=0, max_value=ms("2100-01-01")))
def test_fuzz_random_text_never_raises(query: str, now_ms: int) -> None:
    windows = parse_time_windows(query, now_ms=now_ms)
    assert isinstance(windows, tuple)
    assert all(w.start_ms < w.end_ms and w.text in query for w in windows)
    assert isinstance(refers_back(query), bool)


@settings(max_examples=600, deadline=None)
@given(tokens=st.lists(st.sampled_from(_TOKENS), max_size=8), sep=st.sampled_from([" ", ""]),
       now_ms=st.integers(min_value=0, max_value=ms("2100-01-01")))
def test_fuzz_time_words_never_raise_and_the_triggers_skip_nothing(tokens: list[str], sep: str, now_ms: int) -> None:
    query = sep.join(tokens)
    windows = parse_time_windows(query, now_ms=now_ms)
    assert all(w.start_ms < w.end_ms and w.text in query for w in windows)
    saved = temporal._RULE_SETS
    temporal._RULE_SETS = tuple((re.compile(""), rules) for _, rules in saved)  # every rule runs
    try:
        assert parse_time_windows(query, now_ms=now_ms) == windows
    finally:
        temporal._RULE_SETS = saved


@pytest.mark.parametrize("query", [
    "what did we talk about last time?", "as I said before", "you mentioned earlier that", "previously you told me",
    "remember when we went to Lisbon", "the restaurant from before?", "上次说的那家店", "之前提到的书", "我以前说过",
    "上回那个", "刚才你说",
])
def test_refers_back(query: str) -> None:
    assert refers_back(query)


@pytest.mark.parametrize("query", [
    "What is the capital of France?", "Which city was John in before traveling to Chicago?",
    "anything earlier than 2020", "三天以前", "yesterday", "", "last week",
])
def test_does_not_refer_back(query: str) -> None:
    assert not refers_back(query)


def _window(start: int, end: int) -> TimeWindow:
    return TimeWindow(start, end, "x", "range")


def test_window_weight_is_one_inside_and_falls_off_smoothly_outside() -> None:
    w = _window(1000, 2000)  # length 1000, margin 500 at the default fraction 0.5
    t = np.array([1000, 1500, 1999, 2000, 2250, 2500, 3000, 750, 500, 0])
    got = window_weight(t, [w])
    assert got[:4].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert got[4] == pytest.approx(0.5) and got[7] == pytest.approx(0.5)  # half the margin out: cosine midpoint
    assert got[5] == 0.0 and got[6] == 0.0 and got[8] == 0.0 and got[9] == 0.0
    near = window_weight(np.arange(2000, 2501, 50), [w])
    assert np.all(np.diff(near) <= 0) and np.all((near >= 0) & (near <= 1))


def test_window_weight_takes_the_best_window_and_keeps_the_shape() -> None:
    windows = [_window(0, 100), _window(1000, 1100)]
    got = window_weight(np.array([[50, 1050], [525, 1125]]), windows, margin_fraction=0.5)
    assert got.shape == (2, 2)
    assert got[0].tolist() == [1.0, 1.0] and got[1, 0] == 0.0 and got[1, 1] == pytest.approx(0.5)


def test_window_weight_edge_cases() -> None:
    assert window_weight(np.array([1, 2]), []).tolist() == [0.0, 0.0]
    assert window_weight(np.array([1500, 2100]), [_window(1000, 2000)], margin_fraction=0.0).tolist() == [1.0, 0.0]
    assert window_weight(np.array([np.nan, 1500.0]), [_window(1000, 2000)]).tolist() == [0.0, 1.0]
    assert window_weight(np.array([], dtype=np.int64), [_window(0, 1)]).shape == (0,)


def test_window_weight_after_fraction_sets_the_margin_after_the_end_alone() -> None:
    w = _window(1000, 2000)
    got = window_weight(np.array([750, 2250, 2750, 3100]), [w], margin_fraction=0.5, after_fraction=2.0)
    assert got[0] == pytest.approx(0.5)  # before the start: half of the 500 margin
    assert got[1] == pytest.approx(0.5 * (1 + np.cos(np.pi * 250 / 2000)))  # after the end: a 2000 margin
    assert got[2] == pytest.approx(0.5 * (1 + np.cos(np.pi * 750 / 2000))) and 0 < got[3] < got[2]
    assert window_weight(np.array([2100]), [w], after_fraction=0.0).tolist() == [0.0]


def test_window_weight_of_a_parsed_day() -> None:
    (yesterday,) = parse_time_windows("yesterday", now_ms=NOW)
    times = np.array([ms("2023-08-14T12:00"), ms("2023-08-15T06:00"), ms("2023-08-15T12:00"), ms("2023-08-10")])
    got = window_weight(times, [yesterday])
    assert got[0] == 1.0 and got[1] == pytest.approx(0.5) and got[2] == 0.0 and got[3] == 0.0
