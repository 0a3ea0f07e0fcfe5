"""Read REALTALK chats (``Chat_<n>_<A>_<B>.json``) into the plain values ``memory.dev.locomo`` defines.

REALTALK (Lee et al., "REALTALK: A 21-Day Real-World Dataset for Long-Term Conversation", arXiv 2502.13270)
holds real messaging-app chats between pairs of people, with memory-probing questions and evidence turns.
Unlike LoCoMo (written by an LLM) its turns are human: short messages, typos, a thought split over several
turns, inconsistent name casing ("Emi", "elise"), people addressed by a name that is not their speaker label.
Test and benchmark input only: read from the shared data folder (``../shared/data/realtalk/``, whose
SOURCE.md gives the origin), never copied into the repo. This module only parses; ``manage.py
import_realtalk`` writes through ``memory.client`` exactly as ``import_locomo`` does.

File shape (one chat per file)::

    {"name": {"speaker_1": "Emi", "speaker_2": "elise"},
     "session_1_date_time": "29.12.2023, 22:42:04",
     "session_1": [{"clean_text": "...", "speaker": "Emi", "date_time": "29.12.2023, 22:42:04",
                    "dia_id": "D1:1", "img_url": [...], "blip_caption"?: "..."}, ...],
     "events_session_1": {...},
     "qa": [{"question": "...", "answer": "...", "evidence": ["D1:6", ...], "category": 1..3}, ...]}

Parsed shape: ``memory.dev.locomo.Sample`` per chat, ``sample_id`` ``"realtalk-<n>"`` (the chat's number), each
``Turn`` with its own timestamp (REALTALK dates every message; a session spans hours, sometimes midnight).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from memory.dev.locomo import (
    Question,
    Sample,
    Session,
    Turn,
    message_id,
    normalize_evidence,
    session_messages,
    thread_id,
    turn_text,
)

__all__ = ["AGENT_ID", "CATEGORIES", "default_data_path", "iter_samples", "message_id", "parse_chat",
           "parse_datetime", "session_messages", "thread_id"]

#: Agent id every imported thread carries.
AGENT_ID = "realtalk"

#: Question categories as the corpus's SOURCE.md describes them.
CATEGORIES = {1: "multi-session", 2: "temporal", 3: "inference"}

_FILE_RE = re.compile(r"^Chat_(\d+)_[^/]*\.json$")
_SESSION_RE = re.compile(r"^session_(\d+)$")
_DATE_RE = re.compile(r"^\s*(\d{1,2})\.(\d{1,2})\.(\d{4}),\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")


def default_data_path() -> Path:
    """Return the folder of the REALTALK chats: ``$OAM_REALTALK_PATH`` or ``<repo>/../shared/data/realtalk``."""
    override = os.environ.get("OAM_REALTALK_PATH")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "realtalk"


def parse_datetime(value: str) -> str:
    """A REALTALK date (day.month.year, 24 h) as ISO-8601 without a zone: ``"29.12.2023, 22:42:04"`` ->
    ``"2023-12-29T22:42:04"``. Raises ValueError for anything else (an impossible date included)."""
    match = _DATE_RE.match(value or "")
    if not match:
        raise ValueError(f"not a REALTALK date: {value!r}")
    day, month, year, hour, minute, second = (int(g or 0) for g in match.groups())
    return dt.datetime(year, month, day, hour, minute, second).isoformat(timespec="seconds")


def parse_chat(raw: dict[str, Any], number: int) -> Sample:
    """Parse one chat (see the module docstring) into a ``Sample`` named ``"realtalk-<number>"``.

    Sessions come in numeric order; the speakers are ``name.speaker_1`` and ``name.speaker_2`` as written.
    Evidence goes through ``locomo.normalize_evidence`` after a full stop between ids is read as a separator
    (``"D13:4. D14:4"``). Raises KeyError, TypeError or ValueError on a file of another shape.
    """
    if not isinstance(raw, dict):
        raise TypeError("a REALTALK chat is a JSON object")
    names = raw["name"]
    numbers = sorted(int(m.group(1)) for key in raw if (m := _SESSION_RE.match(key)))
    sessions = []
    for n in numbers:
        date_time = raw.get(f"session_{n}_date_time")
        turns = tuple(
            Turn(dia_id=str(t["dia_id"]), speaker=str(t["speaker"]), text=turn_text(t, key="clean_text"),
                 timestamp=parse_datetime(t["date_time"]) if t.get("date_time") else None)
            for t in raw[f"session_{n}"]
        )
        sessions.append(Session(number=n, date_time=date_time,
                                timestamp=parse_datetime(date_time) if date_time else None, turns=turns))
    questions = tuple(
        Question(question=str(q["question"]), answer=None if q.get("answer") is None else str(q["answer"]),
                 category=int(q["category"]),
                 evidence=tuple(normalize_evidence(str(e).replace(". ", " ").rstrip(".")
                                                   for e in q.get("evidence") or [])))
        for q in raw.get("qa") or []
    )
    return Sample(sample_id=f"realtalk-{number}", speakers=(str(names["speaker_1"]), str(names["speaker_2"])),
                  sessions=tuple(sessions), questions=questions)


def iter_samples(path: str | os.PathLike | None = None, sample_ids: Sequence[str] | None = None) -> Iterator[Sample]:
    """Yield the chats of a REALTALK folder (default ``default_data_path()``), by chat number.

    ``path`` may also be one chat file. ``sample_ids`` keeps only those (``"realtalk-1"``). Raises
    FileNotFoundError when nothing is there and ValueError when a file is not a REALTALK chat.
    """
    path = Path(path) if path is not None else default_data_path()
    files = [path] if path.is_file() else sorted(
        (p for p in path.glob("Chat_*.json") if _FILE_RE.match(p.name)),
        key=lambda p: int(_FILE_RE.match(p.name).group(1)))
    if not files:
        raise FileNotFoundError(f"no REALTALK chats (Chat_<n>_*.json) in {path}")
    wanted = set(sample_ids) if sample_ids else None
    for file in files:
        match = _FILE_RE.match(file.name)
        if not match:
            raise ValueError(f"{file}: not named Chat_<n>_<A>_<B>.json")
        number = int(match.group(1))
        if wanted is not None and f"realtalk-{number}" not in wanted:
            continue
        with file.open(encoding="utf-8") as fh:
            data = json.load(fh)
        try:
            yield parse_chat(data, number)
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{file}: not a REALTALK chat ({exc!r})") from exc
