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
  months and weekdays) among the record's own words (exact term overlap: BM25 weighs rare words and long
  texts, this only counts);
* ``speaker``: the query names the message's speaker (its role) as a word (generic roles never match);
* ``entity``: share of the query's proper nouns (capitalised words past its first, not months, not speakers)
  found among the record's own words;
* ``date``: the query names a date, month, year or relative time ("last week") and the record's date, or a
  date its text implies ("yesterday" in a message of 8 May: 7 May), falls in it (``memory.search.dates``);
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

import datetime as dt
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields

from memory.search.dates import MONTHS, WEEKDAYS, asks_when, date_match, query_spans, says_when
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


def query_entities(query: str, speakers: Iterable[str] = ()) -> set[str]:
    """Stems of the query's proper nouns: capitalised words after its first word, less stopwords, month and
    weekday names, and the ``speakers`` (roles; the speaker signal counts those). ``"Did Caroline go to the
    LGBTQ parade in June?"`` with speaker Caroline -> ``{"lgbtq"}``."""
    skip = {stem(s) for s in speakers}
    out = set()
    for i, match in enumerate(_WORD.finditer(query)):
        word = match.group()
        low = word.lower()
        if i == 0 or not word[0].isupper() or low in STOPWORDS or low in MONTHS or low in WEEKDAYS:
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


# --- names a speaker goes by -----------------------------------------------------------------------------

#: Words before a name that make it a form of address ("Hey Kate!", "Thank you Kate", "What about you Kate?").
_ADDRESS_BEFORE = (r"(?:hey|hi|hii+|hello|hiya|yo|dear|thanks|thank\s+you|thx|bye|goodbye|night|morning|"
                   r"congrats|congratulations|wow|omg|aw+|yay|haha+|lol|oh|yes|yeah|no|sure|ok|okay|true|right|"
                   r"you|sorry|miss\s+you|love\s+you|see\s+you)")
#: How a speaker names themselves ("I'm Kate", "my name is Vanessa", "call me Vee").
_SELF_NAMING = r"(?:i'?m|i\s+am|my\s+name\s+is|my\s+name'?s|call\s+me|name'?s)"

#: Times another speaker must address someone by a name (or they name themselves) before the name is read as
#: theirs, and the share of those votes the person must hold. Not tuned: the smallest count that is more than
#: a one-off, and a clear majority.
ALIAS_MIN_VOTES = 2
ALIAS_MIN_SHARE = 0.75


@functools.lru_cache(maxsize=256)
def _alias_patterns(name: str) -> tuple[re.Pattern, re.Pattern]:
    """(addressed by ``name``, naming oneself ``name``) patterns, any case; the last 256 names' are kept."""
    n = re.escape(name)
    addressed = re.compile(
        rf"(?:^|[.!?]\s+){n}\s*[,!]|\b{_ADDRESS_BEFORE}[,!.]*\s+{n}\b(?!\s*\w)|,\s*{n}\s*[!?.]*\s*$"
        rf"|\b{_ADDRESS_BEFORE}[,!.]*\s+{n}\s*[!?.,]",
        re.IGNORECASE)
    return addressed, re.compile(rf"\b{_SELF_NAMING}\s+{n}\b", re.IGNORECASE)


def query_names(query: str, roles: Iterable[str]) -> list[str]:
    """The words of ``query`` that may name a person: capitalised, not a stopword, month or weekday, not a
    speaker's role (case-insensitive) and not "I". ``"What are Kate's hobbies?"`` -> ``["Kate"]``."""
    known = {r.lower() for r in roles if r}
    out: list[str] = []
    for match in _PLAIN_WORD.finditer(query):
        word = match.group()
        low = word.lower()
        if (not word[0].isupper() or low in STOPWORDS or low in MONTHS or low in WEEKDAYS or low in known
                or low == "i" or len(word) < 2 or word in out):
            continue
        out.append(word)
    return out


def speaker_aliases(query: str, candidates: Iterable[Candidate]) -> dict[str, str]:
    """Names the query uses for a speaker whose role is another word: ``{name: role}``.

    Real chats label a person one way and call them another: REALTALK's speaker "Emi" introduces herself as
    Kate and is addressed as Kate throughout, and its questions ask about "Kate" (arXiv 2502.13270; 35 of
    chat 1's 70 questions). A query name (``query_names``) belongs to a role when, among the messages of the
    pool, the other speaker of a two-person thread addresses someone by it ("Hey Kate!", "Thank you Kate",
    "..., Kate!"; a vote for the role they talk to) or the role names itself by it ("I'm Kate"): at least
    ``ALIAS_MIN_VOTES`` votes, ``ALIAS_MIN_SHARE`` of them for that role, and the role is a name, not a
    generic one (a user thanking "Claude" leaves "Claude" in the query: "assistant" names no one).
    Case-insensitive. A name that is only mentioned ("I went to Miami!") gets no vote. On LoCoMo it finds
    the short names the speakers use for each other: "Mel" (Melanie), "Deb" (Deborah), "Jo" (Joanna).
    Pure: reads only the candidates' roles, threads and texts (the keyword arm brings the messages that hold
    the name into the pool).
    """
    candidates = [c for c in candidates if c.key[0] == "message" and c.role]
    names = query_names(query, {c.role for c in candidates})
    if not names:
        return {}
    roles_of: dict[str, set[str]] = {}
    for c in candidates:
        if c.thread_id:
            roles_of.setdefault(c.thread_id, set()).add(c.role)
    out: dict[str, str] = {}
    for name in names:
        addressed, self_named = _alias_patterns(name)
        votes: dict[str, int] = {}
        for c in candidates:
            if name.lower() not in c.content.lower():
                continue
            if self_named.search(c.content):
                votes[c.role] = votes.get(c.role, 0) + 1
            elif addressed.search(c.content) and len(others := roles_of.get(c.thread_id, set()) - {c.role}) == 1:
                (other,) = others
                votes[other] = votes.get(other, 0) + 1
        if votes:
            role, count = max(votes.items(), key=lambda item: item[1])
            if (count >= ALIAS_MIN_VOTES and count >= ALIAS_MIN_SHARE * sum(votes.values())
                    and role.lower() not in GENERIC_ROLES):
                out[name] = role
    return out


def with_aliases(query: str, aliases: dict[str, str]) -> str:
    """``query`` with each alias replaced by its role (whole words, any case): ``"What are Kate's hobbies?"``
    with ``{"Kate": "Emi"}`` -> ``"What are Emi's hobbies?"``."""
    for name, role in aliases.items():
        query = re.sub(rf"\b{re.escape(name)}\b", lambda _m, r=role: r, query, flags=re.IGNORECASE)
    return query


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
             if len(t) > 1 and t not in MONTHS and t not in WEEKDAYS} - {stem(r) for r in roles}
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
