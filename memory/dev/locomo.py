"""Read the LoCoMo benchmark file (``locomo10.json``) into plain values.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0) is test and benchmark input
only: it is read from the shared data folder and never copied into the repo
(github.com/snap-research/locomo describes the layout). This module only
parses; ``manage.py import_locomo`` writes through ``memory.client``.

File shape (a list of samples)::

    [{"sample_id": "conv-26",
      "conversation": {"speaker_a": "Caroline", "speaker_b": "Melanie",
                       "session_1_date_time": "1:56 pm on 8 May, 2023",
                       "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "...",
                                     "blip_caption"?: "...", "img_url"?: [...], "query"?: "..."},
                                    ...],
                       ...},
      "qa": [{"question": "...", "answer" | "adversarial_answer": ..., "evidence": ["D1:3", ...],
              "category": 1..5}, ...],
      ...}]

Parsed shape: ``Sample(sample_id, speakers, sessions=(Session(number, date_time,
timestamp, turns=(Turn(dia_id, speaker, text), ...)), ...), questions=(Question(...), ...))``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Agent id every imported thread carries.
AGENT_ID = "locomo"

#: Question categories as the benchmark's authors use them (5 has no answer).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

_MONTHS = {
    name: i
    for i, name in enumerate(
        ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
         "november", "december"),
        1,
    )
}
_DATE_RE = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>am|pm)\s+on\s+(?P<day>\d{1,2})\s+"
    r"(?P<month>[a-z]+),?\s+(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)
_SESSION_RE = re.compile(r"^session_(\d+)$")
_EVIDENCE_RE = re.compile(r"^D:?(\d+):(\d+)$")


def default_data_path() -> Path:
    """Return where the shared LoCoMo file is: ``$OAM_LOCOMO_PATH`` or
    ``<repo>/../shared/data/locomo/locomo10.json``."""
    override = os.environ.get("OAM_LOCOMO_PATH")
    if override:
        return Path(override)
    repo = Path(__file__).resolve().parents[2]
    return repo.parent / "shared" / "data" / "locomo" / "locomo10.json"


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: ``dia_id`` ("D<session>:<k>"), speaker name, text with any photo caption, and its own
    ISO-8601 timestamp when the corpus dates each turn (REALTALK, ``memory.dev.realtalk``); None when only the
    session is dated (LoCoMo)."""

    dia_id: str
    speaker: str
    text: str
    timestamp: str | None = None


@dataclass(frozen=True)
class Session:
    """One session: its number N, the raw date string, the ISO-8601 timestamp and its turns in order."""

    number: int
    date_time: str | None
    timestamp: str | None
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class Question:
    """One QA item. ``evidence`` holds normalised dia ids; ``answer`` is None for category 5."""

    question: str
    answer: str | None
    category: int
    evidence: tuple[str, ...]

    def resolves(self, dia_ids: Iterable[str] | set[str]) -> bool:
        """True when the question has evidence and every evidence id is a turn of the conversation."""
        known = dia_ids if isinstance(dia_ids, (set, frozenset)) else set(dia_ids)
        return bool(self.evidence) and all(e in known for e in self.evidence)

    def known_evidence(self, dia_ids: Iterable[str] | set[str]) -> tuple[str, ...]:
        """The evidence ids that are turns of the conversation (what retrieval can find), in order.

        Three category 1-4 questions of the file cite one id that is not a turn;
        scoring them on the rest gives 1,536 questions (``bench/locomo_import.py``).
        """
        known = dia_ids if isinstance(dia_ids, (set, frozenset)) else set(dia_ids)
        return tuple(e for e in self.evidence if e in known)


@dataclass(frozen=True)
class Sample:
    """One conversation between two speakers, with its sessions and questions."""

    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    @property
    def dia_ids(self) -> frozenset[str]:
        return frozenset(t.dia_id for s in self.sessions for t in s.turns)


def parse_session_datetime(value: str) -> str:
    """Turn a LoCoMo session date into ISO-8601 UTC without a zone.

    ``"1:56 pm on 8 May, 2023"`` -> ``"2023-05-08T13:56:00"``; ``"12:09 am on
    13 September, 2023"`` -> ``"2023-09-13T00:09:00"``. Parsed by hand rather
    than ``strptime`` so the result does not depend on the process locale.
    Raises ValueError for anything else.
    """
    match = _DATE_RE.match(value or "")
    month = _MONTHS.get(match.group("month").lower()) if match else None
    if not match or month is None:
        raise ValueError(f"not a LoCoMo session date: {value!r}")
    hour, minute = int(match.group("hour")), int(match.group("minute"))
    if not (1 <= hour <= 12 and minute <= 59):
        raise ValueError(f"not a LoCoMo session date: {value!r}")
    hour = hour % 12 + (12 if match.group("ampm").lower() == "pm" else 0)
    stamp = dt.datetime(int(match.group("year")), month, int(match.group("day")), hour, minute)
    return stamp.isoformat(timespec="seconds")


def normalize_evidence(raw: Iterable[str]) -> list[str]:
    """Normalise a question's evidence list to well-formed, unique dia ids, in order.

    Entries may hold several ids separated by ``;`` or spaces (``"D8:6; D9:17"``
    -> ``["D8:6", "D9:17"]``); ``"D:11:26"`` -> ``"D11:26"``; leading zeros go
    (``"D30:05"`` -> ``"D30:5"``). A token that is still not ``D<n>:<k>`` is
    kept as written, so that the question fails ``Question.resolves``.
    """
    out: list[str] = []
    for entry in raw:
        for token in re.split(r"[;,\s]+", str(entry)):
            if not token:
                continue
            m = _EVIDENCE_RE.match(token)
            norm = f"D{int(m.group(1))}:{int(m.group(2))}" if m else token
            if norm not in out:
                out.append(norm)
    return out


def turn_text(turn: dict[str, Any], key: str = "text") -> str:
    """Return a turn's text (its ``key`` field: "text" in LoCoMo, "clean_text" in REALTALK), with a shared
    photo's caption kept as text.

    ``{"text": "Look!", "blip_caption": "a photo of a dog"}`` ->
    ``"Look! [shares a photo: a photo of a dog]"``. The photo itself is not
    in the data, so its caption is all there is to remember of it.
    """
    text = str(turn.get(key) or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [shares a photo: {caption}]" if text else f"[shares a photo: {caption}]"
    return text


def parse_sample(raw: dict[str, Any]) -> Sample:
    """Parse one raw sample dict (see the module docstring) into a ``Sample``.

    Sessions come in numeric order; ``session_N_date_time`` keys with no
    ``session_N`` are skipped; a session without a date gets timestamp None.
    """
    conv = raw["conversation"]
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION_RE.match(key)))
    sessions = []
    for n in numbers:
        date_time = conv.get(f"session_{n}_date_time")
        turns = tuple(
            Turn(dia_id=str(t["dia_id"]), speaker=str(t["speaker"]), text=turn_text(t)) for t in conv[f"session_{n}"]
        )
        sessions.append(
            Session(number=n, date_time=date_time,
                    timestamp=parse_session_datetime(date_time) if date_time else None, turns=turns)
        )
    questions = tuple(
        Question(
            question=str(q["question"]),
            answer=None if q.get("answer") is None else str(q["answer"]),
            category=int(q["category"]),
            evidence=tuple(normalize_evidence(q.get("evidence") or [])),
        )
        for q in raw.get("qa") or []
    )
    return Sample(
        sample_id=str(raw["sample_id"]),
        speakers=(str(conv["speaker_a"]), str(conv["speaker_b"])),
        sessions=tuple(sessions),
        questions=questions,
    )


def iter_samples(path: str | os.PathLike | None = None, sample_ids: Sequence[str] | None = None) -> Iterator[Sample]:
    """Yield parsed samples from ``path`` (default: ``default_data_path()``), in file order.

    ``sample_ids`` keeps only those samples. Raises FileNotFoundError when the
    file is missing and ValueError when it is not a LoCoMo list of samples.
    """
    path = Path(path) if path is not None else default_data_path()
    with path.open(encoding="utf-8") as fh:
        data = json.load(fh)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of samples")
    wanted = set(sample_ids) if sample_ids else None
    for raw in data:
        if wanted is None or raw.get("sample_id") in wanted:
            yield parse_sample(raw)


# --- what the importer stores ----------------------------------------------------------


def thread_id(sample_id: str, session: int) -> str:
    """Thread id of a session: ``"conv-26-s1"``."""
    return f"{sample_id}-s{session}"


def message_id(sample_id: str, dia_id: str) -> str:
    """Deterministic message id of a turn: ``"conv-26:D1:3"`` (re-imports find it taken)."""
    return f"{sample_id}:{dia_id}"


def session_messages(sample_id: str, session: Session) -> list[dict[str, Any]]:
    """Return a session's turns as ``Thread.add_messages`` input, in order.

    Each item: ``{"id": "conv-26:D1:3", "role": <speaker>, "content": <turn text>,
    "timestamp": <the turn's ISO date, else the session's>, "metadata": {"dia_id", "sample_id", "session"}}``.
    """
    return [
        {
            "id": message_id(sample_id, turn.dia_id),
            "role": turn.speaker,
            "content": turn.text,
            "timestamp": turn.timestamp or session.timestamp,
            "metadata": {"dia_id": turn.dia_id, "sample_id": sample_id, "session": session.number},
        }
        for turn in session.turns
    ]


# --- scoring ------------------------------------------------------------------------------


def record_turns(record: Any) -> list[str]:
    """The turns (dia ids) a search result's record is, or was extracted from, in order.

    A message: its own ``metadata["dia_id"]`` (``[None]`` when it has none). A memory (a record with
    ``source_message_ids``, as ``memory.core.types.MemoryRecord``): the dia ids of its source messages, read from
    their ids (``message_id``: ``"conv-26:D1:3"`` -> ``"D1:3"``; other ids are left out). An agent that
    searches every record type gets a memory in place of its turns: ``bench/locomo_import.py --mixed``.
    """
    sources = getattr(record, "source_message_ids", None)
    if sources is not None:
        return [mid.split(":", 1)[1] for mid in sources if ":" in mid]
    return [(getattr(record, "metadata", None) or {}).get("dia_id")]


def evidence_recall(ranked_dia_ids: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Fraction of the (unique) evidence ids found among the first ``k`` ranked ids.

    The measure behind ``bench/locomo_import.py``'s baselines; 0.0 for empty evidence.
    """
    wanted = set(evidence)
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked_dia_ids[:k])) / len(wanted)


def session_of(dia_id: str | None) -> str | None:
    """The session a dia id belongs to: ``"D3:5"`` -> ``"D3"``; None for None or an id with no ``:``."""
    if not dia_id or ":" not in dia_id:
        return None
    return dia_id.split(":", 1)[0]


def ranked_sessions(ranked_dia_ids: Sequence[str | None]) -> list[str]:
    """The distinct sessions of ranked turns, each at its best (first) turn's place.

    A session ranks by its best turn (max-similarity pooling, the "late interaction" of arXiv 2606.04194
    and Nano-Memory's turn isolation): ``["D2:4", "D1:1", "D2:9", "D5:2"]`` -> ``["D2", "D1", "D5"]``.
    """
    out: list[str] = []
    for dia_id in ranked_dia_ids:
        session = session_of(dia_id)
        if session is not None and session not in out:
            out.append(session)
    return out


def session_hit(first_turns: Iterable[str | None], evidence: Iterable[str]) -> bool:
    """Whether the first result's turns (``record_turns`` of the top result: one turn for a message, its
    source turns for a memory) lie in a session that holds some of the evidence: hit@1 with the session as
    the unit (arXiv 2606.04194: the top session intersects the gold sessions). False for no turns, as the
    turn-unit hit@1 of ``bench/locomo_import.py`` counts a result without turns as a miss."""
    wanted = set(map(session_of, evidence)) - {None}
    return bool(wanted.intersection(map(session_of, first_turns)))


def session_recall(ranked_dia_ids: Sequence[str | None], evidence: Iterable[str], k: int) -> float:
    """Fraction of the sessions holding a question's evidence found among the first ``k`` sessions of
    ``ranked_sessions(ranked_dia_ids)``; 0.0 for empty evidence.

    The session is the retrieval unit of arXiv 2606.04194 (its LoCoMo Hit@1 0.752 is ``session_hit``),
    coarser than ``evidence_recall``'s turns: a conversation has 19-32 sessions against 369-689 turns.
    Ranked from the top 20 turns only, a session figure at k >= 5 is a lower bound of what ranking every
    session would give.
    """
    wanted = set(map(session_of, evidence)) - {None}
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked_sessions(ranked_dia_ids)[:k])) / len(wanted)
