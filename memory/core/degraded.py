"""Guards fail open, loudly: which optional parts of this process are degraded, and what stands in for them.

A rate limiter, the progress events and the extraction queue are guards and conveniences, not dependencies
(issue #34, "Degrade, don't fall over"): when the shared cache (``OAM_REDIS_URL``), the channel layer or the
broker is unreachable, the request goes on. This module is the one place that knows it:

* ``attempt(part, call, fallback)``: run ``call``; when it raises, or when ``part`` failed less than
  ``RETRY_SECONDS`` ago (no request waits on a part known to be down), answer ``fallback()`` instead;
* ``attempt_async``: the same for a coroutine; ``reported(part, call)``: ``call()`` with its outcome
  reported, its failure raised again; ``bounded``: a channel-layer call within ``CALL_SECONDS``;
* ``report_failure(part, exc)`` / ``report_ok(part)``: what a guard saw; the first failure of a part and then
  at most one every ``WARN_SECONDS`` is logged as a warning (never one per request), the recovery once;
* ``states()``: the registry ``/readyz`` (``oam_site.health``) reads: per part, ``up`` or ``degraded`` with
  a fixed reason word (``reason_of``: ``unreachable``, ``timeout``, ``error``), never an exception's text;
* ``FallbackCounter``: fixed-window counters in this process's memory, bounded to ``max_keys`` keys, for the
  rate limits while the cache is down (``threads.throttling``): each process then counts for itself, as
  without ``OAM_REDIS_URL``.

Parts are short names: ``cache``, ``channels``, ``broker``. State is per process and lost on restart.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")


#: After a failure a part is not tried again for this long (seconds): calls answer the fallback at once. Longer
#: than the slowest failure a hung Redis costs a call (``CALL_SECONDS``, the broker's 2 s read timeout), so a
#: hung part costs one request in 30 s, not every request (an outside attack measured 36 s per write with 5 s);
#: ``/readyz`` asks the cache and the channel layer on every probe, so their recovery is seen at once.
RETRY_SECONDS = 30.0
#: Longest one channel-layer call (``group_send``, ``group_add``, ``group_discard``) may take (seconds). Its
#: Redis connections keep a 30 s read timeout for the blocking receive (django/channels_redis#422), so the
#: other calls are bounded here: past it they count as a failure ("timeout").
CALL_SECONDS = 2.0
#: At most one warning per part per this interval (seconds), however many calls fail.
WARN_SECONDS = 60.0
#: What each part degrades to, for the log and ``/readyz``.
FALLBACKS = {
    "cache": "per-process rate counters",
    "channels": "progress events dropped",
    "broker": "jobs stay queued; the sweep re-sends them",
}


@dataclass(frozen=True)
class PartState:
    """One part as the guards last saw it: ``state`` ``up`` or ``degraded``; ``reason`` a fixed word
    (``reason_of``) or None; ``since`` (epoch seconds) when it became degraded; ``failures`` since then."""

    state: str
    reason: str | None = None
    since: float | None = None
    failures: int = 0


@dataclass
class _Entry:
    reason: str
    since: float
    failures: int = 0
    retry_at: float = 0.0
    warned_at: float = 0.0


_lock = threading.Lock()
_degraded: dict[str, _Entry] = {}


def reason_of(exc: BaseException) -> str:
    """A fixed word for a failure, safe to show: ``timeout``, ``unreachable`` (refused, reset, DNS: any
    ``OSError`` or a client library's ``ConnectionError``), else ``error``."""
    name = type(exc).__name__
    if isinstance(exc, TimeoutError) or "Timeout" in name:
        return "timeout"
    if isinstance(exc, OSError) or "Connection" in name:
        return "unreachable"
    return "error"


def report_failure(part: str, exc: BaseException, *, now: float | None = None) -> None:
    """Mark ``part`` degraded after ``exc``; log a warning the first time and at most every ``WARN_SECONDS``."""
    now = time.monotonic() if now is None else now
    reason = reason_of(exc)
    with _lock:
        entry = _degraded.get(part)
        if entry is None:
            entry = _degraded[part] = _Entry(reason=reason, since=time.time())
        entry.reason, entry.failures, entry.retry_at = reason, entry.failures + 1, now + RETRY_SECONDS
        warn = entry.warned_at == 0.0 or now - entry.warned_at >= WARN_SECONDS
        if warn:
            entry.warned_at = now
        failures = entry.failures
    if warn:
        logger.warning("%s is %s (%s: %s); degraded to %s (%d failures so far; next warning in %.0f s at most)",
                       part, reason, type(exc).__name__, exc, FALLBACKS.get(part, "skipping it"), failures,
                       WARN_SECONDS)


def report_ok(part: str) -> None:
    """Mark ``part`` up again (a call succeeded); log the recovery once. Cheap when it was up."""
    if part not in _degraded:
        return
    with _lock:
        entry = _degraded.pop(part, None)
    if entry is not None:
        logger.warning("%s is back after %.0f s and %d failures", part, time.time() - entry.since, entry.failures)


def should_try(part: str, *, now: float | None = None) -> bool:
    """Whether a call to ``part`` should be made: it is up, or its ``RETRY_SECONDS`` pause is over."""
    entry = _degraded.get(part)
    return entry is None or (time.monotonic() if now is None else now) >= entry.retry_at


def reported(part: str, call: Callable[[], T]) -> T:
    """``call()``, its outcome reported for ``part``: a success ``report_ok``, an ``Exception``
    ``report_failure`` and raised again (for a caller that needs the failure itself: ``/readyz``, the broker's
    status)."""
    try:
        value = call()
    except Exception as exc:
        report_failure(part, exc)
        raise
    report_ok(part)
    return value


def attempt(part: str, call: Callable[[], T], fallback: Callable[[], T]) -> T:
    """``call()``, or ``fallback()`` when it raises any ``Exception`` (reported: ``reported``) or when
    ``part`` is pausing after a failure (``should_try``). A success reports ``part`` up."""
    if should_try(part):
        try:
            return reported(part, call)
        except Exception:  # noqa: BLE001, S110 - a guard fails open: any failure of the part is the fallback
            pass
    return fallback()


async def attempt_async(part: str, call: Callable[[], Awaitable[T]], fallback: Callable[[], T]) -> T:
    """``attempt`` for a coroutine: ``await call()``, or ``fallback()`` when it raises or ``part`` is pausing."""
    if should_try(part):
        try:
            value = await call()
        except Exception as exc:  # noqa: BLE001 - a guard fails open: any failure of the part is the fallback
            report_failure(part, exc)
        else:
            report_ok(part)
            return value
    return fallback()


async def bounded(awaitable: Awaitable[T], seconds: float | None = None) -> T:
    """``await awaitable`` within ``seconds`` (``CALL_SECONDS``); ``TimeoutError`` past it (a guard's failure,
    reported by the caller like any other)."""
    return await asyncio.wait_for(awaitable, CALL_SECONDS if seconds is None else seconds)


def states() -> dict[str, PartState]:
    """The degraded parts of this process, by name (a part not listed is up as far as the guards know)."""
    with _lock:
        return {part: PartState("degraded", e.reason, e.since, e.failures) for part, e in _degraded.items()}


def reset() -> None:
    """Forget every degraded part (tests)."""
    with _lock:
        _degraded.clear()


class FallbackCounter:
    """Fixed-window counters in this process, at most ``max_keys`` of them (memory stays bounded).

    ``count(key, window)`` adds one and returns the new count; ``peek`` reads it. Keys of windows before
    the previous one are dropped as new keys arrive; past ``max_keys`` the oldest key is dropped, so a
    flood of distinct addresses can make this process forget a count (it then counts from zero: the limit
    fails open rather than growing without bound). Thread-safe.
    """

    def __init__(self, max_keys: int = 10_000):
        self.max_keys = max_keys
        self._counts: OrderedDict[tuple[str, int], int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, key: str, window: int) -> int:
        """Add one to ``key`` in ``window`` (an integer, e.g. the minute number); return the new count."""
        with self._lock:
            slot = (key, window)
            if slot not in self._counts:
                self._drop_old(window)
            value = self._counts.get(slot, 0) + 1
            self._counts[slot] = value
            return value

    def peek(self, key: str, window: int) -> int:
        """The count of ``key`` in ``window`` (0 when unknown)."""
        with self._lock:
            return self._counts.get((key, window), 0)

    def __len__(self) -> int:
        return len(self._counts)

    def _drop_old(self, window: int) -> None:
        while self._counts:
            (_, oldest), _ = next(iter(self._counts.items()))
            if oldest >= window - 1 and len(self._counts) < self.max_keys:
                return
            self._counts.popitem(last=False)
