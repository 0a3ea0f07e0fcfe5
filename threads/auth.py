"""API-key authentication for the JSON API (``Authorization: Bearer <key>``) and the WebSockets.

A key is ``secrets.token_urlsafe(32)``; the database keeps its SHA-256 digest
and a short prefix, so a leaked table does not leak usable keys.
"""

from __future__ import annotations

import hashlib
import secrets

from django.http import HttpRequest
from ninja.security import HttpBearer

from threads.models import ApiKey
from threads.throttling import check_failed_keys, note_failed_key

PREFIX_LENGTH = 8


def hash_key(key: str) -> str:
    """Return the SHA-256 hex digest under which ``key`` is stored."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def api_key_create(*, name: str) -> tuple[ApiKey, str]:
    """Create an active key named ``name``; return the row and the raw key (shown once, never stored)."""
    raw = secrets.token_urlsafe(32)
    row = ApiKey(name=name, prefix=raw[:PREFIX_LENGTH], key_hash=hash_key(raw))
    row.full_clean()
    row.save()
    return row, raw


def api_key_lookup(raw: str | None) -> ApiKey | None:
    """Return the active key whose digest matches the raw key ``raw``, or None (also for empty input)."""
    if not raw:
        return None
    return ApiKey.objects.filter(key_hash=hash_key(raw), is_active=True).first()


class ApiKeyAuth(HttpBearer):
    """Bearer-token auth: ``request.auth`` is the active ``ApiKey``; None (HTTP 401) otherwise."""

    def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        """Return the active key whose digest matches ``token``, or None.

        An address that sent too many wrong keys this minute gets 429 before the
        key is even looked up (``threads.throttling``).
        """
        check_failed_keys(request)
        key = api_key_lookup(token)
        if key is None:
            note_failed_key(request)
        return key

    def __call__(self, request: HttpRequest):
        """ninja's bearer check; a request with no bearer key at all also counts as a failed key."""
        result = super().__call__(request)
        if result is None and not request.headers.get("Authorization", "").lower().startswith("bearer "):
            check_failed_keys(request)
            note_failed_key(request)
        return result
