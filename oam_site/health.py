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

Each part's check runs on a thread of its own (one per part), so a hung dependency costs ``/readyz`` at most
``CHECK_SECONDS`` and never holds the event loop, another request's thread or another part's check; a probe
that finds its part's check still running waits on that check instead of starting another, so concurrent
probes share the checks (threads and load on the dependencies stay bounded whatever the probe rate).
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import urlsplit

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from memory.core import degraded
from memory.embedders import embedder_loaded
from memory.extraction.queue import broker_status

#: Longest one readiness check may take (seconds), but the database's; a probe's own timeout should be at
#: least ``DATABASE_CHECK_SECONDS`` + 1 s.
CHECK_SECONDS = 1.5
#: Longest the database check may take before the database counts as down (seconds): longer than the others,
#: since "down" answers 503 and takes the process out of a load balancer; it opens a connection of its own each
#: time (on SQLite: loading sqlite-vec too), which took over 1.5 s on 2 busy cores in the test suite.
DATABASE_CHECK_SECONDS = 3.0
#: The cache key the cache check reads (a round trip; nothing is written).
PROBE_KEY = "oam:health:probe"
#: The channel-layer group the channels check sends to (nobody is in it).
PROBE_GROUP = "oam-readyz-probe"

#: One thread per part: a hung check holds only its own part's thread, and a probe that finds its part's
#: check still running waits on that same check rather than queueing another (an outside attack made 8 to 20
#: concurrent probes answer 503 "database down" during a Redis hang: the database check had queued behind
#: the hung cache and broker checks in a shared pool).
_executors: dict[str, ThreadPoolExecutor] = {}
_running: dict[str, Future] = {}
_running_lock = threading.Lock()


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
    degraded.reported("cache", lambda: cache.get(PROBE_KEY))


def _broker() -> None:
    status = broker_status()
    if status["ok"] is None:
        raise Unready("up" if "broker" not in degraded.states() else "degraded", "unchecked")
    if not status["ok"]:
        raise Unready("degraded", "unreachable")


def _channels() -> None:
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        raise Unready("off", "local")  # the process's own memory: nothing to reach
    # a message to a group nobody is in: one round trip to the layer's Redis
    degraded.reported("channels", lambda: async_to_sync(degraded.bounded)(
        layer.group_send(PROBE_GROUP, {"type": "probe"}), CHECK_SECONDS))


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


def _check(name: str) -> Future:
    """The running check of part ``name``, or a new one on its own thread when none is running."""
    with _running_lock:
        future = _running.get(name)
        if future is None or future.done():
            executor = _executors.get(name)
            if executor is None:
                executor = _executors[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"oam-readyz-{name}")
            future = _running[name] = executor.submit(_timed, *CHECKS[name])
        return future


async def readiness() -> dict[str, object]:
    """Run every check of ``CHECKS`` at once, each within ``CHECK_SECONDS`` (the database within
    ``DATABASE_CHECK_SECONDS``); return the ``/readyz`` body."""
    futures = {name: asyncio.wrap_future(_check(name)) for name in CHECKS}
    await asyncio.wait([f for name, f in futures.items() if name != "database"], timeout=CHECK_SECONDS)
    await asyncio.wait([futures["database"]], timeout=DATABASE_CHECK_SECONDS)
    parts = {}
    for name, future in futures.items():
        if future.done():
            parts[name] = future.result()
        else:  # still running in its thread (the next probe waits on the same check): not read here
            parts[name] = {"state": CHECKS[name][1], "latency_ms": None, "reason": "timeout"}
    states = {part["state"] for part in parts.values()}
    status = "down" if "down" in states else "degraded" if "degraded" in states else "ok"
    return {"status": status, "parts": parts}


async def probe(path: str) -> tuple[int, dict[str, object]]:
    """(status, body) of probe ``path`` (``/healthz`` or ``/readyz``), for both doors: the Django views and
    ``asgi_probe``. ``/healthz``: 200 ``{"status": "ok"}``, nothing asked; ``/readyz``: ``readiness``, 503 when
    the database is down, else 200."""
    if path == "/healthz":
        return 200, {"status": "ok"}
    body = await readiness()
    return (503 if body["status"] == "down" else 200), body


def _no_store(response: JsonResponse) -> JsonResponse:
    response["Cache-Control"] = "no-store"
    return response


@require_safe
async def healthz(request: HttpRequest) -> JsonResponse:
    """``GET /healthz``: 200 ``{"status": "ok"}``; the process is alive (no dependency is asked)."""
    status, body = await probe("/healthz")
    return _no_store(JsonResponse(body, status=status))


@require_safe
async def readyz(request: HttpRequest) -> JsonResponse:
    """``GET /readyz``: the parts' states (``readiness``); 503 when the database is down, else 200."""
    status, body = await probe("/readyz")
    return _no_store(JsonResponse(body, status=status))


#: The probe paths ``asgi_probe`` answers ahead of Django (``oam_site.asgi.HttpRouter``).
PROBE_PATHS = frozenset({"/healthz", "/readyz"})


async def asgi_probe(scope, receive, send) -> None:
    """``/healthz`` and ``/readyz`` as a bare ASGI app, ahead of Django: a probe by IP address or by any Host
    name is answered (Django's ``ALLOWED_HOSTS`` check answered 400 to a load balancer probing
    ``http://10.0.0.5/healthz`` under the production settings, an outside attack found), without the HTTPS
    redirect, a session or a middleware. The same bodies and statuses as the Django views (``probe``; the views
    serve the test client and WSGI); GET and HEAD only (405 otherwise)."""
    method = scope.get("method", "GET")
    if method not in ("GET", "HEAD"):
        status, body, extra = 405, {"detail": "method not allowed"}, [(b"allow", b"GET, HEAD")]
    else:
        (status, body), extra = await probe(scope["path"]), []
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"cache-control", b"no-store"),
        (b"content-length", str(len(payload)).encode()), *extra]})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else payload})
