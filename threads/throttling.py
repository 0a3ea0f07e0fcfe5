"""Per-key request rates for the JSON API, and a cap on wrong keys per client address.

Counting is a fixed one-minute window in Django's cache (``cache.add`` +
``cache.incr``, atomic in Redis and in the local-memory cache), so every process
that shares the cache shares the count: with ``OAM_REDIS_URL`` the cache is
Redis (settings), otherwise each process counts for itself. A cache that is
unreachable does not fail the request: the counters fail open to this process's
own (``memory.core.degraded``: a bounded ``FallbackCounter``, one warning a
minute, the cache shown ``degraded`` by ``/readyz``), so each process then
enforces the limits for itself until the cache answers again. A refused request is
HTTP 429 ``{"detail": ...}`` with ``Retry-After`` (whole seconds to the next
window, RFC 9110 section 10.2.3).

* ``ApiKeyRateThrottle``: at most ``OAM_API_RATE_LIMIT`` requests a minute per
  API key (a key's own ``rate_limit_per_minute`` wins when set; 0 = no limit).
* ``note_failed_key``/``check_failed_keys``: at most ``OAM_API_AUTH_FAILURE_LIMIT``
  requests with a missing or wrong key a minute per client address; past it,
  even a right key from that address is refused until the window ends, so
  guessing keys costs a minute per batch. Under daphne a body sent with a
  wrong key is counted by ``oam_site.request_gate`` before it is read, and a
  WebSocket handshake without valid credentials by ``threads.consumers``.

The API's operations are async (``threads.api``): ninja calls
``ApiKeyRateThrottle.allow_request`` on the event loop. It touches no database,
only the cache: a dictionary in this process, or with ``OAM_REDIS_URL`` one
Redis round trip on loopback, which the loop waits for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from ninja.errors import Throttled
from ninja.throttling import BaseThrottle

from memory.core import degraded

WINDOW_SECONDS = 60
#: This process's counters while the cache is unreachable (``memory.core.degraded.attempt``).
fallback_counts = degraded.FallbackCounter()


def seconds_to_next_window(now: float | None = None) -> int:
    """Whole seconds until the current one-minute window ends (1..60)."""
    now = time.time() if now is None else now
    return max(1, math.ceil(WINDOW_SECONDS - now % WINDOW_SECONDS))


def _window(now: float | None = None) -> int:
    return int((time.time() if now is None else now) // WINDOW_SECONDS)


def _cache_count(key: str) -> int:
    cache.add(key, 0, timeout=2 * WINDOW_SECONDS)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=2 * WINDOW_SECONDS)
        return 1


def _count(name: str, now: float | None = None) -> int:
    """Add one to counter ``name`` of the current window and return the new count (in the cache; in this
    process while the cache is unreachable)."""
    window = _window(now)
    key = f"oam:rate:{name}:{window}"
    return degraded.attempt("cache", lambda: _cache_count(key), lambda: fallback_counts.count(key, window))


def _peek(name: str) -> int:
    window = _window()
    key = f"oam:rate:{name}:{window}"
    return degraded.attempt("cache", lambda: cache.get(key, 0), lambda: fallback_counts.peek(key, window))


def client_address(source: HttpRequest | Mapping[str, Any]) -> str:
    """The client's address: an HTTP request's ``REMOTE_ADDR``, or a WebSocket scope's ``client``.

    Under ASGI, Django's ``REMOTE_ADDR`` is the scope's ``client`` host, so an
    HTTP request and a WebSocket handshake from one client count as one
    address; behind a proxy, daphne's ``--proxy-headers`` sets both from
    ``X-Forwarded-For`` (docs/projects-and-keys.md, "API keys").
    """
    if isinstance(source, HttpRequest):
        return source.META.get("REMOTE_ADDR") or "unknown"
    client = source.get("client")
    return (client[0] if client else None) or "unknown"


def failed_keys_exhausted(address: str) -> bool:
    """True when ``address`` sent ``OAM_API_AUTH_FAILURE_LIMIT`` wrong keys or more in the current window."""
    limit = settings.OAM_API_AUTH_FAILURE_LIMIT
    return bool(limit) and _peek(f"authfail:{address}") >= limit


def count_failed_key(address: str) -> bool:
    """Count one missing, wrong, revoked or expired key from ``address``; True once it is over the limit."""
    limit = settings.OAM_API_AUTH_FAILURE_LIMIT
    return bool(limit) and _count(f"authfail:{address}") > limit


def check_failed_keys(request: HttpRequest) -> None:
    """Raise ``Throttled`` when this address sent too many wrong keys in the current window."""
    if failed_keys_exhausted(client_address(request)):
        raise Throttled(wait=seconds_to_next_window())


def note_failed_key(request: HttpRequest) -> None:
    """Count a request whose key was missing, wrong, revoked or expired; ``Throttled`` once over the limit."""
    if count_failed_key(client_address(request)):
        raise Throttled(wait=seconds_to_next_window())


def key_request_allowed(key: Any) -> bool:
    """Count one request against API key ``key`` (a row, or anything with its ``pk``); False once the key is
    over its limit for this minute (``OAM_API_RATE_LIMIT``, or the key's own ``rate_limit_per_minute``).
    The JSON API (``ApiKeyRateThrottle``) and the MCP requests that are not tool calls (``threads.mcp``)
    count here."""
    if key is None or getattr(key, "pk", None) is None:
        return True
    limit = getattr(key, "rate_limit_per_minute", None)
    if limit is None:
        limit = settings.OAM_API_RATE_LIMIT
    if not limit:
        return True
    return _count(f"key:{key.pk}") <= limit


class ApiKeyRateThrottle(BaseThrottle):
    """At most N requests a minute per API key (``key_request_allowed``)."""

    def allow_request(self, request: HttpRequest) -> bool:
        """Count this request against its key; False once the key is over its limit for this minute."""
        return key_request_allowed(getattr(request, "auth", None))

    def wait(self) -> float:
        """Seconds until the window ends (the same for every key: windows are aligned to the minute)."""
        return float(seconds_to_next_window())
