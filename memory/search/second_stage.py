"""The second stage of HYBRID search: rescore a deep candidate pool with signals, not ranks only.

The first stage (``memory.search.ranking.candidate_pool``) takes up to ``POOL_DEPTH`` records from each arm
(vector, BM25 on the record's text, BM25 on its context) with their raw scores, and reads the candidates' own
rows once. This module is pure (no queries): ``rank`` scores every candidate as a weighted sum of

* ``rrf``: the arms' weighted reciprocal rank fusion (``ranking.fuse``), divided by the query's best;
* ``vector``: cosine similarity, min-max normalised over the query's vector candidates;
* ``text``: BM25 of the record's own words, divided by the query's best;
* ``neighbour``: the best ``text`` of the turns within ``NEIGHBOUR_TURNS`` of a message in its thread, the
  neighbours' words credited with a discount (its weight is below ``text``'s, checked by ``Weights``);
* ``neighbour_vector``: the same for ``vector``, below ``vector``'s weight;
* ``terms``: share of the query's content words (``keyword_terms``, stemmed, less the pool's speakers,
  months and weekdays) among the record's own words (exact term overlap: BM25 weighs rare words and long texts, this only counts);
* ``speaker``: the query names the message's speaker (its role) as a word (generic roles never match);
* ``entity``: share of the query's proper nouns (capitalised words past its first, not months, not speakers)
  found among the record's own words;
* ``date``: the query names a date, month, year or relative time ("last week") and the record's date, or a
  date its text implies ("yesterday" in a message of 8 May: 7 May), falls in it;
* ``when``: the query asks when ("When did ...?", "what date", "how long ago") and the record's own words
  say when (a relative time, a date, a month, a weekday, a year);
* ``novel``: a message's own words beyond the query's (stems, less stopwords and speakers), up to
  ``NOVEL_WORDS``: a turn that only repeats the question ("What pet do you have?") holds no answer; other
  records get 1 (a memory is never such a turn; a short exact memory must not sink below chatty turns);
* ``answer``: the turn just before a message, by another speaker, asks a question ("?") that shares the
  query's words (its ``text``): the reply is where the answer is. Not for a query that asks when (the turn
  that states the time is the evidence, not a reply). The question's ``vector`` is not used: min-max
  normalised over a small pool, a weak likeness looked strong and lifted an unrelated reply above the
  message that matched (tests/staff). Its weight is below ``rrf + text + vector`` (the question's words are
  not the reply's own).
* ``session``: how strongly the rest of the message's session matches: the mean ``rrf`` of the best
  ``SESSION_TOP`` other messages of its session (its thread, and the same day when both have a date) in the
  pool: a conversation about the query is where its evidence is, also in a turn that names it only as
  "it" or "they". Other records get 1, as for ``novel``: the signal orders messages among themselves and
  never sinks a memory below them. (Searching LoCoMo with its observations as fact memories, every record
  type, ``bench/locomo_import.py --observations --mixed``, tuning half: 0 scored (recall@10 + hit@1) / 2
  0.6875, the memory's own thread and day 0.6850, 1 0.6805; but 0 sank an exact, seeded memory out of the
  staff search page's top 10 under chatty turns of a matching session (tests/browser), the fault ``novel``
  gives memories 1 for; so 1.) Its weight is below ``rrf``'s (the session's words are not the message's
  own).

and multiplies the sum by ``Weights.invalid`` for a record whose status is invalid (superseded, refined,
duplicated, invalidated), so a valid record that scores as well comes first; ``ranking.after_replacements``
then puts every replaced memory after its replacement whatever the scores say.

Every constant names the split of LoCoMo it was chosen on (``bench/locomo_tune.py`` chose them on the TUNING
half, the first five conversations, and prints the REPORT half beside it).

Shapes: ``Candidate`` per record; ``rank(candidates, query, now, weights)`` -> [((kind, record_id), score)],
best first, scores decreasing.
"""

from __future__ import annotations

import calendar
import datetime as dt
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from memory.search.request import STOPWORDS, keyword_terms

#: Records each arm contributes to the pool. Split: TUNING half. bench/locomo_tune.py's coordinate ascent
#: preferred 200 by 0.0005 of its objective ((recall@10 + hit@1) / 2: 0.6308 vs 0.6303 at 100), within noise,
#: and 200 cost HYBRID search on bench/search_scale.py's 100k chunks 1.39x numpy against 1.26x before this
#: stage (100 reads half the keyword rows and rows of candidates): 100 is kept for latency. The pool holds
#: 95.7 % of LoCoMo's evidence turns at 100 (98.2 % at 200, 92.7 % at 50).
POOL_DEPTH = 100

#: Turns on each side of a message whose own BM25 counts as neighbour credit (the keyword context's window,
#: ``memory.index.writer.CONTEXT_TURNS``).
NEIGHBOUR_TURNS = 2

#: Roles that name a position in a chat, not a person: a query saying "the user" names no speaker.
GENERIC_ROLES = frozenset({"user", "assistant", "system", "tool", "developer", "function"})


@dataclass(frozen=True)
class Weights:
    """The second stage's weights (see the module docstring); ``invalid`` multiplies an invalid record's score.

    Raises ValueError when ``neighbour`` is positive and not below ``text`` (a neighbour's words never count
    as much as the record's own), likewise ``neighbour_vector`` and ``vector``, ``session`` and ``rrf``, and
    ``answer`` and ``rrf + text + vector``, or when ``invalid`` is outside [0, 1].
    """

    rrf: float = 1.0
    vector: float = 0.0
    text: float = 0.0
    neighbour: float = 0.0
    neighbour_vector: float = 0.0
    terms: float = 0.0
    speaker: float = 0.5
    entity: float = 0.0
    date: float = 0.0
    when: float = 0.0
    novel: float = 0.0
    answer: float = 0.0
    session: float = 0.0
    invalid: float = 1.0

    def __post_init__(self):
        if self.neighbour > 0 and self.neighbour >= self.text:
            raise ValueError("neighbour must be below text: a neighbour's words are not the record's own")
        if self.neighbour_vector > 0 and self.neighbour_vector >= self.vector:
            raise ValueError("neighbour_vector must be below vector: a neighbour's meaning is not the record's own")
        if self.answer > 0 and self.answer >= self.rrf + self.text + self.vector:
            raise ValueError("answer must be below rrf + text + vector: the question's words are not the reply's own")
        if self.session > 0 and self.session >= self.rrf:
            raise ValueError("session must be below rrf: the rest of a session's words are not the message's own")
        if not 0.0 <= self.invalid <= 1.0:
            raise ValueError("invalid must be within [0, 1]")


#: The signals, one per field of ``Weights`` but ``invalid`` (a multiplier, not a signal), in the fields' order:
#: the order ``score`` adds them in, so it is part of every score's last bits.
SIGNALS = tuple(f.name for f in fields(Weights) if f.name != "invalid")


#: The weights search uses. Split: TUNING half of LoCoMo only (the first five conversations), by coordinate
#: ascent in bench/locomo_tune.py over the grid 0-3 of each weight, maximising (recall@10 + hit@1) / 2 of the
#: tuning half (760 questions). History:
#: 1. From the speaker stage (rrf 1, speaker 0.5) it chose rrf 1, terms 0.75, speaker 0.75, date 0.75, when
#:    0.2 (text and its neighbour credit helped tuning by 0.002 and cost the report half 0.010 recall@10, so
#:    0; a question-turn signal got weight 0).
#: 2. (2026-12-02) With ``novel`` and ``answer`` added, two rounds from 1.'s point moved to vector 0.1,
#:    neighbour_vector 0.05, speaker 1.0, date 1.5, when 0.3, novel 0.5, answer 0.75, entity 0.05, pool 200.
#:    Entity added nothing to the tuning half at pool 100 (0.7996 / 0.5447 either way), so it stays 0; the
#:    pool stays 100 for latency (200 added 0.003 / 0.005 on tuning). Offline at pool 100, 1. -> 2.: tuning
#:    recall@10 0.774 -> 0.800, hit@1 0.487 -> 0.545; report (never tuned on) 0.762 -> 0.781, 0.476 -> 0.490.
#:    Left out one at a time, on the report half every kept signal helps; ``answer`` most (without it the
#:    report half is 0.769 / 0.486 at pool 200).
#: 3. By category on the tuning half, ``answer`` cost "when" questions hit@1 (temporal 0.744 -> 0.686: their
#:    evidence states the time, it does not reply to a question), so it is 0 for a query that asks when;
#:    tuning (recall@10 + hit@1) / 2 0.6722 -> 0.6767. Two more rounds then chose when 0.5 at pool 100
#:    (0.6781; at pool 200 they added text 0.05, which pool 100 does not keep). Offline at pool 100, 1. -> 3.:
#:    tuning 0.774 / 0.487 -> 0.798 / 0.558; report (never tuned on) 0.762 / 0.476 -> 0.784 / 0.504.
#: 4. ``answer`` then lost the question's vector (a defect in small pools, see the module docstring), weights
#:    kept: tuning objective 0.6781 -> 0.6731; bench/locomo_import.py --reuse --modes HYBRID: tuning 0.794 /
#:    0.553, report 0.783 / 0.509, all ten 0.788 / 0.531.
#: 5. (2026-12-02, next day) ``session`` added, every other weight kept (a full re-run of the ascent with it
#:    chose rrf 0.75, terms 0.5, session 0.5 and raised tuning hit@1 0.546 -> 0.562 while the report half's
#:    fell 0.514 -> 0.501: weights fitted to the tuning half, not kept). Its weight alone, on the tuning
#:    half: 0.3 -> 0.6767, 0.5 -> 0.6777, 0.75 -> 0.6780, 0.9 -> 0.6762 (below rrf's 1 by ``Weights``' rule).
#:    Offline at pool 100, 4. -> 5.: tuning 0.794 / 0.553 -> 0.810 / 0.546; report (never tuned on) 0.783 /
#:    0.509 -> 0.806 / 0.514. Signals tried beside it and not kept (no gain on the tuning half, or a loss on
#:    the report half): adjacent query word pairs in the record, an answer type ("how many" -> a number,
#:    "who"/"where" -> a name, "why" -> "because"), the vector arm z-scored instead of min-max, the previous
#:    turn's match (same speaker, or either), the context arm's own score, a question-and-reply vector key
#:    per reply, fewer results per session (for all questions, or questions asking for several things), and
#:    the weights re-chosen from rrf 0 (score fusion: tuning 0.814 / 0.559, report 0.785 / 0.492).
#: ``invalid`` is not from LoCoMo (it has no invalid records): half the score, so a valid record that scores
#: as well comes first (tests/memory/test_second_stage.py).
WEIGHTS = Weights(rrf=1.0, vector=0.1, neighbour_vector=0.05, terms=0.75, speaker=1.0, date=1.5, when=0.5,
                  novel=0.5, answer=0.75, session=0.75, invalid=0.5)


@dataclass
class Candidate:
    """One record of the pool with what the arms said of it and what its row holds.

    ``ranks``: its rank (from 1) in each arm that found it, by arm name;
    ``similarity``: 1 - cosine distance of its best chunk, None when the vector arm did not reach it;
    ``text_bm25`` / ``context_bm25``: keyword strength (higher is better, >= 0; 0 when that arm did not
    match it); ``rrf``: its fused score; ``role``/``thread_id``/``seq``: a message's; ``content``: its own
    text (a message's without the role); ``when``: its event time (aware datetime) or None; ``status``.
    """

    key: tuple[str, str]
    ranks: dict[str, int] = field(default_factory=dict)
    similarity: float | None = None
    text_bm25: float = 0.0
    context_bm25: float = 0.0
    rrf: float = 0.0
    role: str | None = None
    content: str = ""
    when: dt.datetime | None = None
    thread_id: str | None = None
    seq: int | None = None
    status: str = "valid"
    signals: dict[str, float] = field(default_factory=dict)


# --- words --------------------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Za-z0-9\u00C0-\uFFFF][\w'\u2019]*", re.UNICODE)
_PLAIN_WORD = re.compile(r"\w+")


#: Words up to this many characters have their stems remembered (``stem``), at most ``STEM_CACHE`` of them:
#: the second stage stems every word of ~200 candidates per query, 75 % of its time before the cache
#: (16 ms a query on LoCoMo's pools); a longer word is stemmed each time, so the cache stays small.
STEM_CACHE = 65536
_CACHED_WORD_LENGTH = 40


def _bounded_cache(function, maxsize: int, longest: int):
    """``function`` of one string, remembered for at most ``maxsize`` strings of at most ``longest``
    characters (a longer one is computed each time), so the cache's memory stays bounded."""
    cached = functools.lru_cache(maxsize=maxsize)(function)

    def call(text: str):
        return cached(text) if len(text) <= longest else function(text)

    return call


def stem(word: str) -> str:
    """A light English stem for matching a query's word to a record's: lower-cased; a possessive, a plural
    ``s`` (``ies`` -> ``y``), then an ``ing`` or ``ed`` ending (and the doubled consonant before it) and a
    final ``e`` dropped: ``"Paintings"``, ``"painted"`` -> ``"paint"``; ``"making"``, ``"make"`` -> ``"mak"``;
    ``"hobbies"`` -> ``"hobby"``. Not a linguist's stemmer; both sides go through it, which is what matters."""
    return _cached_stem(word)


def _stem(word: str) -> str:
    w = word.lower().replace("\u2019", "'")
    if w.endswith("'s"):
        w = w[:-2]
    w = w.rstrip("'")
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return w


_cached_stem = _bounded_cache(_stem, STEM_CACHE, _CACHED_WORD_LENGTH)


#: Texts up to this many characters have their stems remembered (``word_stems``), at most ``TEXT_CACHE`` of
#: them: the second stage reads the stems of ~200 candidates a query and the same user's records come back
#: query after query (on LoCoMo, 40 % of the stage's time was spent re-reading them: 4.7 -> 3.5 ms a query
#: with the cache). Bounded: at most TEXT_CACHE texts of at most _CACHED_TEXT_LENGTH characters.
TEXT_CACHE = 2048
_CACHED_TEXT_LENGTH = 600


def word_stems(text: str) -> frozenset[str]:
    """The stems of ``text``'s words."""
    return _cached_word_stems(text)


def _word_stems(text: str) -> frozenset[str]:
    return frozenset(stem(w) for w in set(_WORD.findall(text)))


_cached_word_stems = _bounded_cache(_word_stems, TEXT_CACHE, _CACHED_TEXT_LENGTH)


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower() for name in calendar.day_name} | {name.lower() for name in calendar.day_abbr}


def query_entities(query: str, speakers: Iterable[str] = ()) -> set[str]:
    """Stems of the query's proper nouns: capitalised words after its first word, less stopwords, month and
    weekday names, and the ``speakers`` (roles; the speaker signal counts those). ``"Did Caroline go to the
    LGBTQ parade in June?"`` with speaker Caroline -> ``{"lgbtq"}``."""
    skip = {stem(s) for s in speakers}
    out = set()
    for i, match in enumerate(_WORD.finditer(query)):
        word = match.group()
        low = word.lower()
        if i == 0 or not word[0].isupper() or low in STOPWORDS or low in _MONTHS or low in _WEEKDAYS:
            continue
        if stem(word) in skip or low == "i":
            continue
        out.add(stem(word))
    return out


def speaker_named(query_words: set[str], role: str | None) -> bool:
    """The query (its lower-cased words) names ``role`` as one word; generic and multi-word roles never do."""
    if not role:
        return False
    role = role.lower()
    return role in query_words and role not in GENERIC_ROLES


# --- dates --------------------------------------------------------------------------------------------

#: A span of days, both ends included; ``month``: any year's month ``month`` (``"in June"``) when set.
@dataclass(frozen=True)
class Span:
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


_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH_RE})\.?,?\s+(?:of\s+)?(\d{{4}})\b", re.I)
# A month alone must be capitalised: "may" is also a verb.
_MONTH_ALONE = re.compile(r"\b(" + "|".join(sorted((m.capitalize() for m in _MONTHS), key=len, reverse=True))
                          + r")\b")
_YEAR = re.compile(r"\b(19\d\d|20\d\d)\b")


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
    r"(\d+|a|an|one|two|three|four|five|six|a few|few|a couple of|couple of|several)\s+(day|week|month|year)s?\s+ago)\b",
    re.I)


def relative_spans(text: str, anchor: dt.date) -> list[tuple[dt.date, dt.date]]:
    """Days that relative times in ``text`` name, seen from ``anchor`` (the day it was said).

    ``"yesterday"`` -> the day before; ``"last week"`` -> the 7 to 13 days before... widened to the 2 to 13
    days before (a week's edges are fuzzy in speech); ``"last weekend"`` -> 1 to 8 days before; ``"last
    month"`` / ``"last year"`` -> the previous calendar month / year; ``"N days|weeks|months|years ago"``
    -> that many units before, give or take a quarter of a unit (at least a day); ``today``/``this week``
    etc. -> the anchor's own day/week/month/year. At most 8 spans."""
    spans: list[tuple[dt.date, dt.date]] = []
    day = dt.timedelta(days=1)
    for match in _RELATIVE.finditer(text):
        phrase = match.group(1).lower()
        if phrase == "yesterday":
            spans.append((anchor - day, anchor - day))
        elif phrase == "last night":
            spans.append((anchor - day, anchor))
        elif phrase in ("today", "tonight", "this morning"):
            spans.append((anchor, anchor))
        elif phrase in ("this week", "this weekend"):
            spans.append((anchor - 6 * day, anchor + 6 * day))
        elif phrase == "last week":
            spans.append((anchor - 13 * day, anchor - 2 * day))
        elif phrase == "last weekend":
            spans.append((anchor - 8 * day, anchor - day))
        elif phrase == "last month":
            spans.append(_shift_months(anchor, 1))
        elif phrase == "this month":
            spans.append(_shift_months(anchor, 0))
        elif phrase == "last year":
            spans.append((dt.date(anchor.year - 1, 1, 1), dt.date(anchor.year - 1, 12, 31)))
        elif phrase == "this year":
            spans.append((dt.date(anchor.year, 1, 1), dt.date(anchor.year, 12, 31)))
        else:
            count_word, unit = match.group(2).lower(), match.group(3).lower()
            count = int(count_word) if count_word.isdigit() else _NUMBERS.get(count_word, 1)
            days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * min(count, 100)
            slack = max(1, days // 4)
            spans.append((anchor - dt.timedelta(days=days + slack), anchor - dt.timedelta(days=max(0, days - slack))))
        if len(spans) == 8:
            break
    return spans


def query_spans(query: str, now: dt.datetime) -> list[Span]:
    """What the query says about when: explicit dates (``"13 October, 2023"``, ``"October 13, 2023"``: that
    day), months of a year (``"June 2023"``), a month alone (``"in June"``: June of any year), years
    (``"in 2022"``), and relative times (``"last week"``) seen from the query's own date if it names a day
    (``"last weekend before April 10, 2023"``), else from ``now``. Empty when it says nothing of time."""
    spans: list[Span] = []
    taken: list[tuple[int, int]] = []
    days: list[dt.date] = []

    def free(m) -> bool:
        return all(m.end() <= a or m.start() >= b for a, b in taken)

    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for m in pattern.finditer(query):
            if not free(m):
                continue
            parts = dict(zip(order, m.groups()))
            day = _date(int(parts["y"]), _MONTHS[parts["m"].lower().rstrip(".")], int(parts["d"]))
            if day is not None:
                spans.append(Span(day, day))
                days.append(day)
                taken.append(m.span())
    for m in _MONTH_YEAR.finditer(query):
        if free(m):
            spans.append(_month_span(int(m.group(2)), _MONTHS[m.group(1).lower()]))
            taken.append(m.span())
    for m in _MONTH_ALONE.finditer(query):
        if free(m):
            spans.append(Span(month=_MONTHS[m.group(1).lower()]))
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


#: Words of a record beyond the query's (stems, less stopwords and speakers) that make ``novel`` 1: a turn
#: that only repeats the question's words ("What pet do you have?") holds no answer. Split: TUNING half.
NOVEL_WORDS = 10
_STOP_STEMS = frozenset(stem(w) for w in STOPWORDS)

#: Other messages of a session whose ``rrf`` the ``session`` signal averages. Split: TUNING half (with the
#: other weights fixed, 1, 2, 3 and 5 gave tuning (recall@10 + hit@1) / 2 of 0.6768, 0.6772, 0.6780, 0.6782;
#: 3 and 5 are within 0.001 and 3 has the higher tuning recall@10, 0.810 against 0.809).
SESSION_TOP = 3


def session_key(candidate: Candidate) -> tuple | None:
    """The session a message belongs to: its thread and, when it has one, its event day (a long thread of
    dated messages holds many sessions; LoCoMo imports one thread per session, so there both agree). None
    for a record that is not a message in a thread."""
    if candidate.key[0] != "message" or not candidate.thread_id:
        return None
    return candidate.thread_id, candidate.when.date() if candidate.when is not None else None


def _session_signal(candidates: list[Candidate]) -> None:
    """Set each candidate's ``session`` signal (see the module docstring) from the ``rrf`` signals already set."""
    keys = [session_key(c) for c in candidates]
    sessions: dict[tuple, list[float]] = {}
    for c, key in zip(candidates, keys):
        if key is not None:
            sessions.setdefault(key, []).append(c.signals["rrf"])
    best = {key: sorted(values, reverse=True)[: SESSION_TOP + 1] for key, values in sessions.items()}
    for c, key in zip(candidates, keys):
        if key is None:
            c.signals["session"] = 1.0
            continue
        others = list(best[key])
        if c.signals["rrf"] in others:  # itself (or an equal value: either leaves the same others)
            others.remove(c.signals["rrf"])
        c.signals["session"] = sum(others[:SESSION_TOP]) / SESSION_TOP


# --- scoring ------------------------------------------------------------------------------------------


def signals(candidates: list[Candidate], query: str, now: dt.datetime) -> None:
    """Fill each candidate's ``signals`` (each within [0, 1]), one per name in ``SIGNALS``: rrf, vector, text,
    neighbour, neighbour_vector, terms, speaker, entity, date, when, novel, answer, session (see the module
    docstring). Normalised per query, over this pool."""
    if not candidates:
        return
    query_words = {w.lower() for w in _PLAIN_WORD.findall(query)}  # "Melanie's" names Melanie
    roles = {c.role for c in candidates if c.role}
    entities = query_entities(query, roles)
    # Speakers' names are the speaker signal's, months and weekdays the date signal's; one-letter pieces ("s"
    # of "Caroline's") say nothing.
    terms = {stem(t) for t in keyword_terms(query)
             if len(t) > 1 and t not in _MONTHS and t not in _WEEKDAYS} - {stem(r) for r in roles}
    spans = query_spans(query, now)
    when = asks_when(query)
    sims = [c.similarity for c in candidates if c.similarity is not None]
    lo, hi = (min(sims), max(sims)) if sims else (0.0, 0.0)
    best_text = max((c.text_bm25 for c in candidates), default=0.0)
    best_rrf = max((c.rrf for c in candidates), default=0.0)
    text = {c.key: (c.text_bm25 / best_text if best_text > 0 else 0.0) for c in candidates}
    vector = {c.key: ((c.similarity - lo) / (hi - lo) if c.similarity is not None and hi > lo else 0.0)
              for c in candidates}
    by_position = {(c.thread_id, c.seq): c for c in candidates if c.seq is not None and c.thread_id}
    query_stems = {stem(w) for w in query_words} | {stem(r) for r in roles}
    for c in candidates:
        s = c.signals
        s["rrf"] = c.rrf / best_rrf if best_rrf > 0 else 0.0
        s["vector"] = vector[c.key]
        s["text"] = text[c.key]
        neighbour = neighbour_vector = 0.0
        if c.seq is not None and c.thread_id:
            for offset in range(1, NEIGHBOUR_TURNS + 1):
                for seq in (c.seq - offset, c.seq + offset):
                    if (other := by_position.get((c.thread_id, seq))) is not None:
                        neighbour = max(neighbour, text[other.key])
                        neighbour_vector = max(neighbour_vector, vector[other.key])
        s["neighbour"] = neighbour
        s["neighbour_vector"] = neighbour_vector
        s["speaker"] = 1.0 if c.key[0] == "message" and speaker_named(query_words, c.role) else 0.0
        own = word_stems(c.content) if entities or terms or c.key[0] == "message" else set()
        # A memory or an image description is never a chat turn that repeats the question: full credit, so
        # the signal only orders messages among themselves and never sinks a short, exact memory below them.
        s["novel"] = (min(1.0, len(own - query_stems - _STOP_STEMS) / NOVEL_WORDS) if c.key[0] == "message"
                      else 1.0)
        previous = by_position.get((c.thread_id, c.seq - 1)) if c.seq is not None else None
        s["answer"] = (text[previous.key]
                       if not when and previous is not None and previous.role != c.role and "?" in previous.content
                       else 0.0)
        s["terms"] = len(terms & own) / len(terms) if terms else 0.0
        s["entity"] = len(entities & own) / len(entities) if entities else 0.0
        s["date"] = 1.0 if spans and date_match(spans, c.when, c.content) else 0.0
        s["when"] = 1.0 if when and says_when(c.content) else 0.0
    _session_signal(candidates)


def score(candidate: Candidate, weights: Weights | None = None) -> float:
    """The weighted sum of a candidate's ``signals`` (filled by ``signals``), times ``weights.invalid`` when
    its status is invalid. ``weights``: default ``WEIGHTS`` (read at call time)."""
    weights = weights or WEIGHTS
    return _weighted_sum(candidate, _counted(weights), weights.invalid)


def _counted(weights: Weights) -> list[tuple[str, float]]:
    """The signals a score counts, with their weights (zero weights left out)."""
    return [(name, value) for name in SIGNALS if (value := getattr(weights, name))]


def _weighted_sum(candidate: Candidate, counted: list[tuple[str, float]], invalid: float) -> float:
    s = candidate.signals
    total = sum(value * s.get(name, 0.0) for name, value in counted)
    return total * invalid if candidate.status == "invalid" else total


def rank(candidates: list[Candidate], query: str, now: dt.datetime,
         weights: Weights | None = None) -> list[tuple[tuple[str, str], float]]:
    """Score every candidate (``signals``, ``score``): [((kind, record_id), score)], best first; ties keep the
    order of the candidates (the fused order when the caller passes them so). ``weights``: default ``WEIGHTS``."""
    weights = weights or WEIGHTS
    signals(candidates, query, now)
    counted = _counted(weights)  # once per query, not per record
    scored = [(c.key, _weighted_sum(c, counted, weights.invalid)) for c in candidates]
    scored.sort(key=lambda item: -item[1])
    return scored


#: Weight of a cross-encoder's scores (``memory.rerankers``, off unless ``OAM_RERANK_DEPTH`` > 0), min-max
#: normalised over the records it read. Split: TUNING half, at depth 10, the committed weights beneath
#: (``bench/locomo_tune.py --rounds 0 --rerank-depth 10``, ms-marco-MiniLM-L-12-v2): tuning hit@1 at weight
#: 0 / 0.5 / 1 / 1.5 / 2 / 3 -> 0.546 / 0.543 / 0.563 / 0.565 / 0.574 / 0.570; the report half at 2: 0.514 ->
#: 0.554 (recall@10 cannot move at depth 10). The model's order alone over the same ten: tuning 0.543,
#: report 0.546 (below the sum on the tuning half: the model is one more signal, not the ranking).
CROSS_ENCODER_WEIGHT = 2.0


def with_cross_encoder(ranked: list[tuple[tuple[str, str], float]], scores: list[float | None],
                       weight: float = CROSS_ENCODER_WEIGHT) -> list[tuple[tuple[str, str], float]]:
    """``ranked`` (best first, as ``rank`` returns it) with a cross-encoder's ``scores`` of its first
    ``len(scores)`` records added: ``weight`` x the score min-max normalised over them (0 to ``weight``),
    then those records re-sorted by the sum. A record the model could not read (score None: an image, whose
    text the pool does not hold; or a score that is not finite) gets the median of the others' normalised
    scores, neither lifted nor sunk. The records below keep their order and scores; the ones above only
    gain, so they stay above. Pure; ties keep the earlier order."""
    n = len(scores)
    scores = [s if s is not None and math.isfinite(s) else None for s in scores]
    known = [s for s in scores if s is not None]
    if not n or not known:
        return ranked
    low, span = min(known), max(known) - min(known)
    normalised = [(s - low) / span if span > 0 else 0.0 for s in known]
    middle = sorted(normalised)[len(normalised) // 2]
    it = iter(normalised)
    top = [(key, score + weight * (next(it) if s is not None else middle))
           for (key, score), s in zip(ranked[:n], scores)]
    top.sort(key=lambda item: -item[1])
    return top + ranked[n:]
