"""Valid time (issue #32): when a memory's fact holds in the world.

A memory may carry a validity window ``[valid_from, valid_to)``: half-open, so a fact valid to 1 July holds on
30 June at 23:59 and not on 1 July at 00:00, and a window closed at another's start never overlaps it. Either
bound may be None (open on that side); a memory with neither holds at every instant, as every memory did before
issue #32. The window is distinct from when the memory was recorded (``created_at``, the history's times) and from
its TTL expiry (``expires_at``): an expired memory is gone, a memory outside its window is kept and listed, and
only a ``valid_at`` read leaves it out.

Instants are given as a ``datetime``, a ``date`` (its midnight) or an ISO-8601 string (``"2026-07-01"``,
``"2026-07-01T09:30:00+02:00"``); one without a zone is UTC, as timestamps are (``memory.core.ttl``). They are
kept as aware UTC datetimes and shown as ISO-8601 strings, like ``created_at``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from memory.core.errors import InvalidArgument, InvalidType
from memory.core.ttl import parse_timestamp

#: The names of the window's bounds, in order.
WINDOW_FIELDS = ("valid_from", "valid_to")


def as_instant(value: Any) -> dt.datetime | None:
    """``value`` as an aware UTC datetime, or None when it is None or cannot be read (no error: extraction drops
    what an LLM wrote badly). A naive datetime or zone-less string is UTC; a ``date`` is its midnight."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
        try:
            return moment.astimezone(dt.timezone.utc)
        except OverflowError:
            return None
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if isinstance(value, str):
        return parse_timestamp(value.strip())
    return None


def check_instant(value: Any, field: str) -> dt.datetime | None:
    """A caller's instant (``valid_from``, ``valid_to``, ``valid_at``): None, or a datetime, date or ISO-8601
    string, returned as an aware UTC datetime (issue #32).

    Raises ``InvalidType`` (TypeError) naming ``field`` for another type, ``InvalidArgument`` (ValueError) for a
    string that is not ISO-8601 or an instant outside the years 1-9999 in UTC.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, dt.date)):
        raise InvalidType(field, f"must be a datetime, a date or an ISO-8601 string, not {type(value).__name__}")
    moment = as_instant(value)
    if moment is None:
        raise InvalidArgument(field, f"must be an ISO-8601 date or date-time (such as 2026-07-01 or "
                                     f"2026-07-01T09:30:00Z), not {str(value)[:40]!r}")
    return moment


def check_window(valid_from: dt.datetime | None, valid_to: dt.datetime | None) -> None:
    """The window's rule: ``valid_to`` is not before ``valid_from`` (``InvalidArgument`` naming ``valid_to``).
    Equal bounds are allowed: an empty window, which no ``valid_at`` falls in."""
    if valid_from is not None and valid_to is not None and valid_to < valid_from:
        raise InvalidArgument("valid_to", f"must not be before valid_from ({valid_from.isoformat()}), "
                                          f"got {valid_to.isoformat()}")


def holds_at(valid_from: dt.datetime | None, valid_to: dt.datetime | None, at: dt.datetime) -> bool:
    """Whether the window ``[valid_from, valid_to)`` contains ``at`` (None bounds are open): the Python form of
    ``memory.records.selectors.valid_at_q``."""
    return (valid_from is None or valid_from <= at) and (valid_to is None or at < valid_to)


def iso(value: dt.datetime | None) -> str | None:
    """A bound as shown on records and in history snapshots: ISO-8601, None for an open side."""
    return value.isoformat() if value is not None else None
