"""Health probes for systemd, load balancers and orchestrators: ``/healthz`` (alive) and ``/readyz`` (ready).

Both are outside ``/api/``: no key, no cache, no session, nothing a tenant owns. Issue #34 ("Degrade, don't
fall over") states what they answer:

* ``GET /healthz``: 200 ``{"status": "ok"}`` while the process serves requests; it asks no dependency.
* ``GET /readyz``: each part's ``state``, ``latency_ms`` and ``reason``, checked at once, each within
  ``CHECK_SECONDS``::

      {"status": "ok" | "degraded" | "down",
       "parts": {"database": {"state": "up", "latency_ms": 0.4, "reason": null}, "cache": {...},
                 "broker": {...}, "channels": {...}, "embedder": {...}, "llm": {...}}}

  ``state`` is ``up``, ``degraded`` (the part failed or is not ready; the service goes on without it:
  ``memory.core.degraded``), ``down`` (only the database: nothing works without it) or ``off`` (not
  configured: no LLM, the process's own cache). ``reason`` is a fixed word (``unreachable``, ``timeout``,
  ``error``, ``not_loaded``, ``unchecked``) or null, never a DSN, a host name, a key or an exception's text.
  ``latency_ms`` is the check's round trip in milliseconds (null when nothing was asked).
  The answer is 503 when the database is down, else 200 (with ``"status": "degraded"`` when a part is).

The checks run in a small pool of threads of their own (``MAX_CHECK_THREADS``), so a hung dependency costs
``/readyz`` at most ``CHECK_SECONDS`` and never holds the event loop or another request's thread. Hung checks
hold their threads until they end: a check that waits behind them for a free thread times out too (memory
and threads stay bounded).
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from memory.core import degraded
from memory.embedders import embedder_loaded
from memory.extraction.queue import broker_status

#: Longest one readiness check may take (seconds); a probe's own timeout should be at least 3 s.
CHECK_SECONDS = 1.5
#: Threads that run the checks (a hung check holds one until it ends).
MAX_CHECK_THREADS = 6
#: The cache key the cache check reads (a round trip; nothing is written).
PROBE_KEY = "oam:health:probe"

_pool = ThreadPoolExecutor(max_workers=MAX_CHECK_THREADS, thread_name_prefix="oam-readyz")


class Unready(Exception):
    """A check's verdict without an exception of the dependency's own: ``state`` and ``reason`` words."""

    def __init__(self, state: str, reason: str):
        super().__init__(reason)
        self.state, self.reason = state, reason


def _database() -> None:
    connection = connections["default"]
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT 1{connection.features.bare_select_suffix}")
            cursor.fetchone()
    finally:
        connection.close()  # this pool thread keeps no connection between probes


def _cache() -> None:
    if settings.CACHES["default"]["BACKEND"].endswith((".LocMemCache", ".DummyCache")):
        raise Unready("off", "local")  # the process's own memory: nothing to reach
    try:
        cache.get(PROBE_KEY)
    except Exception as exc:
        degraded.report_failure("cache", exc)
        raise
    degraded.report_ok("cache")


def _broker() -> None:
    status = broker_status()
    if status["ok"] is None:
        raise Unready("up" if "broker" not in degraded.states() else "degraded", "unchecked")
    if not status["ok"]:
        raise Unready("degraded", "unreachable")


def _channels() -> None:
    seen = degraded.states().get("channels")
    if seen is not None:
        raise Unready("degraded", seen.reason or "error")


def _embedder() -> None:
    if not embedder_loaded():
        raise Unready("degraded", "not_loaded")


def _llm() -> None:
    url = urlsplit(settings.OAM_LLM_BASE_URL)
    if not url.hostname:
        raise Unready("off", "not_configured")
    port = url.port or (443 if url.scheme == "https" else 80)
    socket.create_connection((url.hostname, port), timeout=CHECK_SECONDS).close()


#: Each part's check, and the state it is in when the check raises: only the database is a dependency.
CHECKS: dict[str, tuple[Callable[[], None], str]] = {
    "database": (_database, "down"),
    "cache": (_cache, "degraded"),
    "broker": (_broker, "degraded"),
    "channels": (_channels, "degraded"),
    "embedder": (_embedder, "degraded"),
    "llm": (_llm, "degraded"),
}


def _timed(check: Callable[[], None], failed: str) -> dict[str, object]:
    started = time.perf_counter()
    try:
        check()
        state, reason = "up", None
    except Unready as verdict:
        state, reason = verdict.state, verdict.reason
    except Exception as exc:  # noqa: BLE001 - any failure of the dependency is its state; its text is not shown
        state, reason = failed, degraded.reason_of(exc)
    return {"state": state, "latency_ms": round((time.perf_counter() - started) * 1000, 1), "reason": reason}


async def readiness() -> dict[str, object]:
    """Run every check of ``CHECKS`` at once, each within ``CHECK_SECONDS``; return the ``/readyz`` body."""
    loop = asyncio.get_running_loop()
    futures = {name: loop.run_in_executor(_pool, _timed, check, failed) for name, (check, failed) in CHECKS.items()}
    await asyncio.wait(futures.values(), timeout=CHECK_SECONDS)
    parts = {}
    for name, future in futures.items():
        if future.done():
            parts[name] = future.result()
        else:
            future.cancel()  # a queued check never starts; a running one ends in its thread, unread
            parts[name] = {"state": CHECKS[name][1], "latency_ms": None, "reason": "timeout"}
    states = {part["state"] for part in parts.values()}
    status = "down" if "down" in states else "degraded" if "degraded" in states else "ok"
    return {"status": status, "parts": parts}


def _no_store(response: JsonResponse) -> JsonResponse:
    response["Cache-Control"] = "no-store"
    return response


@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """``GET /healthz``: 200 ``{"status": "ok"}``; the process is alive (no dependency is asked)."""
    return _no_store(JsonResponse({"status": "ok"}))


@require_safe
async def readyz(request: HttpRequest) -> JsonResponse:
    """``GET /readyz``: the parts' states (``readiness``); 503 when the database is down, else 200."""
    body = await readiness()
    return _no_store(JsonResponse(body, status=503 if body["status"] == "down" else 200))
