"""What a search query and a record say about time: the ``date`` and ``when`` signals of the second stage.

Pure (no queries), English only. ``query_spans`` reads the days a query names (a date, a month of a year, a
month alone, a year, a relative time such as "last week" seen from the query's own date or from now);
``record_days`` the days a record is about (its own date, and the days relative times in its words name from
it: "yesterday" in a message of 8 May is 7 May); ``date_match`` says whether they meet. ``asks_when`` tells a
question about time ("When did ...?"), ``says_when`` a text that states one. ``memory.search.second_stage``
turns them into signals; the month and weekday names are also what its other signals leave to these.

Shapes: ``Span`` (days, both ends included, or a month of any year); spans of a record are
``(first day, last day)`` pairs of ``datetime.date``.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass

#: Month names and abbreviations, lower-cased (``"june"``, ``"jun"``, ``"sept"``) -> the month's number.
MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
MONTHS["sept"] = 9
#: Weekday names and abbreviations, lower-cased.
WEEKDAYS = {name.lower() for name in calendar.day_name} | {name.lower() for name in calendar.day_abbr}


@dataclass(frozen=True)
class Span:
    """A span of days, both ends included; ``month``: any year's month ``month`` (``"in June"``) when set."""

    start: dt.date | None = None
    end: dt.date | None = None
    month: int | None = None

    def meets(self, start: dt.date, end: dt.date) -> bool:
        """Whether the days ``start``..``end`` (inclusive) overlap this span."""
        if self.month is not None:
            day, seen = start, 0
            while day <= end and seen < 400:  # bounded: a day at a time, at most a year's worth
                if day.month == self.month:
                    return True
                day += dt.timedelta(days=1)
                seen += 1
            return False
        return self.start <= end and start <= self.end


_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I)
# A month alone must be capitalised: "may" is also a verb.
_MONTH_ALONE = re.compile(r"\b(" + "|".join(sorted((m.capitalize() for m in MONTHS), key=len, reverse=True))
                          + r")\b")
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")
# Dates in digits, read from runs of digits joined by separators ("2024-01-23", "23.01.2024", "1/2/2024-3/4/2024").
# Year first (ISO 8601 "2024-01-23", "2024/01/23"): year, month, day. Year last: dots are day-first
# ("23.01.2024", the European form REALTALK's questions use); slashes and hyphens are written either way
# ("01/23/2024" in the US, "23/01/2024" elsewhere), so one whose numbers both fit a month names both days.
_NUMERIC_RUN = re.compile(r"(?<![\w.])[0-9]{1,4}(?:(?:--|[./\-\u2013])[0-9]{1,4})*(?=$|\W|T[0-9])")
_RUN_PART = re.compile(r"--|[./\-\u2013]|[0-9]+")
_RANGE_SEPARATORS = ("-", "--", "/", "\u2013")


#: Most dates, months and years ``query_spans`` reads from a query (a slashed date may make two spans;
#: relative times add at most 8 more): a question names a few; a 32,768-character query of years made 6,500
#: spans, 2.2 s to read, and each was compared with every candidate's days.
MAX_SPANS = 16


def _digit_days(numbers: list[str], separators: list[str]) -> list[dt.date]:
    """The days three numbers and their two separators can be (``numeric_dates``), in order of preference."""
    if separators[0] != separators[1]:
        return []
    a, b, c = (int(n) for n in numbers)
    if len(numbers[0]) == 4 and len(numbers[1]) <= 2 and len(numbers[2]) <= 2:
        orders = [(a, b, c)]
    elif len(numbers[2]) == 4 and len(numbers[0]) <= 2 and len(numbers[1]) <= 2:
        orders = [(c, b, a)] if separators[0] == "." else [(c, a, b), (c, b, a)]
    else:
        return []
    days: list[dt.date] = []
    for year, month, day_of_month in orders:
        day = _date(year, month, day_of_month) if 1900 <= year <= 2099 else None
        if day is not None and day not in days:
            days.append(day)
    return days


def numeric_dates(text: str, limit: int | None = None) -> list[tuple[tuple[int, int], list[tuple[dt.date, dt.date]]]]:
    """The dates ``text`` writes in digits, each as (its character span, the spans of days it can be, as
    (first day, last day)): ``"2024-01-23"`` and ``"23.01.2024"`` that day, ``"03/04/2024"`` two (3 April or
    4 March: a slash does not tell the order), ``"01/23/2024"`` one (no 23rd month); a range
    (``"2024-01-01/2024-01-31"``, ``"1.1.2024-5.1.2024"``) the days from one to the other. A run of three or
    more numbers that no calendar day fits (``"31.02.2024"``, ``"192.168.1.2024"``, ``"10.1.2024.5"``) is
    returned with no days, so that its year is not read alone either; two numbers (``"2023-2024"``, ``"12.30"``)
    are not a date. Numbers of more than four digits are no part of a date. With ``limit``: at most that many."""
    out: list[tuple[tuple[int, int], list[tuple[dt.date, dt.date]]]] = []
    for m in _NUMERIC_RUN.finditer(text):
        if limit is not None and len(out) >= limit:
            break
        parts = _RUN_PART.findall(m.group(0))
        numbers, separators = parts[0::2], parts[1::2]
        if len(numbers) < 3:
            continue
        spans: list[tuple[dt.date, dt.date]] = []
        if len(numbers) == 3:
            spans = [(day, day) for day in _digit_days(numbers, separators)]
        elif len(numbers) == 6 and separators[2] in _RANGE_SEPARATORS:
            first, last = _digit_days(numbers[:3], separators[:2]), _digit_days(numbers[3:], separators[3:])
            spans = [(a, b) for a in first for b in last if a <= b][:1]
        out.append((m.span(), spans))
    return out


def _month_span(year: int, month: int) -> Span:
    return Span(dt.date(year, month, 1), dt.date(year, month, calendar.monthrange(year, month)[1]))


def _date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _shift_months(day: dt.date, months: int) -> tuple[dt.date, dt.date]:
    """The calendar month ``months`` before ``day``'s: (first day, last day)."""
    index = day.year * 12 + day.month - 1 - months
    year, month = divmod(index, 12)
    return dt.date(year, month + 1, 1), dt.date(year, month + 1, calendar.monthrange(year, month + 1)[1])


_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "couple of": 2,
            "few": 3, "a few": 3, "several": 4}
_RELATIVE = re.compile(
    r"\b(yesterday|last night|today|tonight|this morning|this week|this weekend|last week|last weekend|"
    r"last month|last year|this month|this year|"
    r"(\d{1,4}|a|an|one|two|three|four|five|six|a few|few|a couple of|couple of|several)"
    r"\s+(day|week|month|year)s?\s+ago)\b",
    re.I)


def _relative_span(match: re.Match, anchor: dt.date) -> tuple[dt.date, dt.date]:
    """The days one ``_RELATIVE`` match names, seen from ``anchor`` (``relative_spans``); OverflowError or
    ValueError when they would fall before year 1."""
    day = dt.timedelta(days=1)
    phrase = match.group(1).lower()
    if phrase == "yesterday":
        return anchor - day, anchor - day
    if phrase == "last night":
        return anchor - day, anchor
    if phrase in ("today", "tonight", "this morning"):
        return anchor, anchor
    if phrase in ("this week", "this weekend"):
        return anchor - 6 * day, anchor + 6 * day
    if phrase == "last week":
        return anchor - 13 * day, anchor - 2 * day
    if phrase == "last weekend":
        return anchor - 8 * day, anchor - day
    if phrase == "last month":
        return _shift_months(anchor, 1)
    if phrase == "this month":
        return _shift_months(anchor, 0)
    if phrase == "last year":
        return dt.date(anchor.year - 1, 1, 1), dt.date(anchor.year - 1, 12, 31)
    if phrase == "this year":
        return dt.date(anchor.year, 1, 1), dt.date(anchor.year, 12, 31)
    count_word, unit = match.group(2).lower(), match.group(3).lower()
    count = int(count_word) if count_word.isdigit() else _NUMBERS.get(count_word, 1)
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * min(count, 100)
    slack = max(1, days // 4)
    return anchor - dt.timedelta(days=days + slack), anchor - dt.timedelta(days=max(0, days - slack))


def relative_spans(text: str, anchor: dt.date) -> list[tuple[dt.date, dt.date]]:
    """Days that relative times in ``text`` name, seen from ``anchor`` (the day it was said).

    ``"yesterday"`` -> the day before; ``"last week"`` -> the 7 to 13 days before... widened to the 2 to 13
    days before (a week's edges are fuzzy in speech); ``"last weekend"`` -> 1 to 8 days before; ``"last
    month"`` / ``"last year"`` -> the previous calendar month / year; ``"N days|weeks|months|years ago"``
    -> that many units before, give or take a quarter of a unit (at least a day); ``today``/``this week``
    etc. -> the anchor's own day/week/month/year. At most 8 spans."""
    spans: list[tuple[dt.date, dt.date]] = []
    for match in _RELATIVE.finditer(text):
        try:
            spans.append(_relative_span(match, anchor))
        except (OverflowError, ValueError):  # a day before 1 January of year 1: no such span
            continue
        if len(spans) == 8:
            break
    return spans


def query_spans(query: str, now: dt.datetime) -> list[Span]:
    """What the query says about when: explicit dates (``"13 October, 2023"``, ``"October 13, 2023"``, and in
    digits, ``numeric_dates``: ``"2023-10-13"``, ``"13.10.2023"``: that day), months of a year (``"June 2023"``),
    a month alone (``"in June"``: June of any year), years (``"in 2022"``), and relative times (``"last week"``)
    seen from the query's own date if it names a day (``"last weekend before April 10, 2023"``), else from
    ``now``. Empty when it says nothing of time."""
    spans: list[Span] = []
    taken: list[tuple[int, int]] = []
    days: list[dt.date] = []

    def free(m) -> bool:
        return len(spans) < MAX_SPANS and all(m.end() <= a or m.start() >= b for a, b in taken)

    for where, named in numeric_dates(query, limit=MAX_SPANS):
        spans.extend(Span(start, end) for start, end in named)
        days.extend(start for start, _ in named)
        taken.append(where)
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for m in pattern.finditer(query):
            if not free(m):
                continue
            parts = dict(zip(order, m.groups()))
            day = _date(int(parts["y"]), MONTHS[parts["m"].lower().rstrip(".")], int(parts["d"]))
            if day is not None:
                spans.append(Span(day, day))
                days.append(day)
                taken.append(m.span())
    for m in _MONTH_YEAR.finditer(query):
        if free(m):
            spans.append(_month_span(int(m.group(2)), MONTHS[m.group(1).lower()]))
            taken.append(m.span())
    for m in _MONTH_ALONE.finditer(query):
        if free(m):
            spans.append(Span(month=MONTHS[m.group(1).lower()]))
            taken.append(m.span())
    for m in _YEAR.finditer(query):
        if free(m):
            year = int(m.group(1))
            spans.append(Span(dt.date(year, 1, 1), dt.date(year, 12, 31)))
            taken.append(m.span())
    anchor = days[0] if days else now.date()
    for start, end in relative_spans(query, anchor):
        spans.append(Span(start, end))
    return spans


_ASKS_WHEN = re.compile(r"^\W*(when\b|what (time|date|day|month|year)\b|which (day|month|year)\b|how long ago\b)",
                        re.I)
_FULL_NAMES = sorted({n.lower() for n in (*calendar.day_name, *calendar.month_name) if n} - {"may"}, key=len,
                     reverse=True)
_SAYS_WHEN = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|recently|weekend|week|month|year|morning|evening|"
    + "|".join(_FULL_NAMES) + r"|19\d\d|20\d\d)\b|\bMay\b", re.I)


def asks_when(query: str) -> bool:
    """Whether the query asks for a time: ``"When did ..."``, ``"What date ..."``, ``"How long ago ..."``."""
    return bool(_ASKS_WHEN.match(query))


def says_when(text: str) -> bool:
    """Whether ``text`` says when: a relative time word, a weekday, a month's full name or a year ("May" only
    capitalised: "may" is a verb)."""
    for match in _SAYS_WHEN.finditer(text):
        if match.group(0).lower() != "may" or match.group(0) == "May":
            return True
    return False


def record_days(when: dt.datetime | None, content: str) -> list[tuple[dt.date, dt.date]]:
    """The days a record is about: its own date, and the days relative times in its text name from it."""
    if when is None:
        return []
    day = when.date()
    return [(day, day), *relative_spans(content, day)]


def date_match(spans: list[Span], when: dt.datetime | None, content: str) -> bool:
    """Whether one of the record's days (``record_days``) falls in one of the query's ``spans``."""
    if not spans:
        return False
    return any(span.meets(start, end) for start, end in record_days(when, content) for span in spans)
