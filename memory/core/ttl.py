"""Timestamps and time-to-live rules shared by messages and memories.

Spec rules (add_messages, add_memory, update_message, update_memory):

* ``ttl_days`` omitted: the schema default (``MemoryRetentionConfig.default_ttl_days``);
  with none set, ``max_ttl_days`` when that is set (SDK 26.8.0), else no expiry.
* ``ttl_days=0``: expires at once (the record is stored, and is not live).
* ``ttl_days=None``: ``max_ttl_days`` when the retention configuration sets
  one, else no expiry.
* ``ttl_days`` above ``max_ttl_days`` is clamped to it with a ``UserWarning``.
* ``TimeToLiveAnchor.CREATED_AT`` counts from the creation time;
  ``TIMESTAMP`` from the record's event timestamp, which must then be ISO-8601.
* ISO-8601 timestamps without a zone are UTC.
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Any

from django.utils.dateparse import parse_datetime

from memory.core.errors import InvalidArgument, InvalidType
from memory.core.types import NOTSET, MemoryRetentionConfig, TimeToLiveAnchor


def parse_timestamp(value: str | None) -> dt.datetime | None:
    """Parse an ISO-8601 string to an aware UTC datetime; None when absent, not ISO-8601, or outside the
    years 1-9999 once in UTC (``0001-01-01T00:00:00+14:00``: Python's datetime cannot hold it)."""
    if value is None:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is None:
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    try:
        return parsed.astimezone(dt.timezone.utc)
    except OverflowError:
        return None


def check_timestamp(value: Any, field: str = "timestamp") -> str | None:
    """Validate a caller's timestamp argument: a string or None (TypeError otherwise)."""
    if value is None or isinstance(value, str):
        return value
    raise InvalidType(field, f"must be a string or None, not {type(value).__name__}")


def check_anchor(value: Any, field: str = "ttl_anchor") -> TimeToLiveAnchor:
    """Coerce a ``TimeToLiveAnchor`` or its value string; ValueError otherwise."""
    try:
        return TimeToLiveAnchor(value)
    except ValueError:
        allowed = ", ".join(a.value for a in TimeToLiveAnchor)
        raise InvalidArgument(field, f"must be one of: {allowed}") from None


def resolve_ttl_days(ttl_days: Any, retention: MemoryRetentionConfig, field: str = "ttl_days") -> int | None:
    """Apply the retention rules to a ``ttl_days`` argument (NOTSET, None or int).

    Returns the effective number of days, or None for "never expires".
    Raises TypeError for a non-int and ValueError for a negative value. The
    same results as the SDK's retention helpers on every case of
    tests/memory/test_sdk_parity.py (the SDK coerces a bool, float or numeric
    string; those are a TypeError here).
    """
    if ttl_days is NOTSET:
        days = retention.default_ttl_days if retention.default_ttl_days is not None else retention.max_ttl_days
    elif ttl_days is None:
        return retention.max_ttl_days
    else:
        if not isinstance(ttl_days, int) or isinstance(ttl_days, bool):
            raise InvalidType(field, f"must be an int or None, not {type(ttl_days).__name__}")
        if ttl_days < 0:
            raise InvalidArgument(field, "must be 0 or more days (0: expires at once)")
        days = ttl_days
    if days is not None and retention.max_ttl_days is not None and days > retention.max_ttl_days:
        warnings.warn(
            f"{field}={days} exceeds MemoryRetentionConfig.max_ttl_days={retention.max_ttl_days}; clamped",
            UserWarning,
            stacklevel=4,
        )
        days = retention.max_ttl_days
    return days


def expires_at(
    days: int | None,
    anchor: TimeToLiveAnchor,
    *,
    created_at: dt.datetime,
    timestamp: str | None,
    field: str = "ttl_anchor",
    days_field: str = "ttl_days",
) -> dt.datetime | None:
    """Return the expiry instant for ``days`` counted from ``anchor``.

    A TIMESTAMP anchor needs ``timestamp`` to be ISO-8601 (ValueError naming
    ``field`` otherwise), even when ``days`` is None, so a bad call fails the
    same way whatever the retention settings are. An expiry after year 9999
    (``datetime.max``) is a ValueError naming ``days_field``.
    """
    if anchor is TimeToLiveAnchor.TIMESTAMP:
        base = parse_timestamp(timestamp)
        if base is None:
            raise InvalidArgument(field, "TIMESTAMP anchoring needs a concrete ISO-8601 timestamp")
    else:
        base = created_at
    if days is None:
        return None
    try:
        return base + dt.timedelta(days=days)
    except OverflowError:  # past datetime.max (year 9999), the latest instant SQLite and Oracle columns hold
        raise InvalidArgument(days_field, f"{days} days from {base.date().isoformat()} is after year 9999") from None
