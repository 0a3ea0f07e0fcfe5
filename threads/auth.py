"""API keys: creating, rotating, revoking and checking them, for the JSON API and the WebSockets.

A key is ``secrets.token_urlsafe(32)``; the database keeps its SHA-256 digest
and a short prefix, so a leaked table does not leak usable keys. The raw key
is returned once, by ``api_key_create`` and ``api_key_rotate``, and never
stored. Every way of managing keys (``manage.py`` commands, the admin, the
``/api/keys`` endpoints) calls the functions here.

A key acts for its project, with its permission (``threads.models.PERMISSIONS``:
read < write < admin) and, when it has them, for its fixed user and agent
only: ``api_key_tenant`` turns it into the ``memory.records.tenancy.Tenant`` the
engine enforces. ``ApiKeyAuth(permission)`` is the ninja auth of a route: no
usable key (missing, wrong, revoked, expired) is a 401, too weak a permission
a 403 (``KeyForbidden``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from memory.core import progress
from memory.core.aio import in_worker
from memory.core.batching import set_embedding_flow
from memory.core.errors import InvalidArgument, InvalidType, NotFound, check_text
from memory.models import Project
from memory.records import history
from memory.records.admin_log import admin_log_erase
from memory.records.tenancy import Tenant, get_project
from memory.records.validators import check_scope_id
from threads.models import PERMISSIONS, ApiKey
from threads.throttling import check_failed_keys, count_failed_key, failed_keys_exhausted, note_failed_key

PREFIX_LENGTH = 8
#: ``last_used_at`` is written at most this often per key (seconds): not one write per request.
TOUCH_SECONDS = 60
NAME_LENGTH = ApiKey._meta.get_field("name").max_length


class KeyForbidden(Exception):
    """A usable key whose permission or restriction does not allow the operation (HTTP 403)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def hash_key(key: str) -> str:
    """Return the SHA-256 hex digest under which ``key`` is stored."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_permission(value: Any, field: str = "permission") -> str:
    """One of ``read``, ``write``, ``admin`` (ValueError naming ``field`` otherwise)."""
    if value not in PERMISSIONS:
        raise InvalidArgument(field, f"must be one of: {', '.join(PERMISSIONS)}")
    return value


def permits(granted: str, needed: str) -> bool:
    """Whether permission ``granted`` includes ``needed`` (read < write < admin)."""
    return PERMISSIONS.index(granted) >= PERMISSIONS.index(needed)


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        raise InvalidType("name", "must be a string")
    if not name.strip():
        raise InvalidArgument("name", "must not be empty")
    if len(name) > NAME_LENGTH:
        raise InvalidArgument("name", f"must be at most {NAME_LENGTH} characters")
    return check_text(name, "name")


def _check_expiry(value: Any, now: dt.datetime) -> dt.datetime | None:
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        raise InvalidType("expires_at", "must be a datetime or None")
    if timezone.is_naive(value):
        raise InvalidArgument("expires_at", "must carry a time zone")
    if value <= now:
        raise InvalidArgument("expires_at", "must be in the future")
    return value


def _new_secret() -> tuple[str, str, str]:
    """(raw key, its prefix, its digest)."""
    raw = secrets.token_urlsafe(32)
    return raw, raw[:PREFIX_LENGTH], hash_key(raw)


def api_key_create(*, name: Any, project: Project | None = None, permission: Any = "write", user_id: Any = None,
                   agent_id: Any = None, expires_at: Any = None, created_by: str = "") -> tuple[ApiKey, str]:
    """Create an active key; return the row and the raw key (shown once, never stored).

    ``project``: a ``Project`` (None: the default project). ``permission``:
    read, write (default) or admin. ``user_id``/``agent_id``: None, or the one
    end user/agent the key acts for. ``expires_at``: None (never) or an aware
    datetime in the future. ``created_by`` says who asked (for the audit
    trail). Raises ValueError/TypeError naming the field.
    """
    now = timezone.now()
    row = ApiKey(
        name=_check_name(name), project=get_project(project), permission=check_permission(permission),
        user_id=check_scope_id(user_id, "user_id"), agent_id=check_scope_id(agent_id, "agent_id"),
        expires_at=_check_expiry(expires_at, now), created_by=created_by[:200], created_at=now,
    )
    raw, row.prefix, row.key_hash = _new_secret()
    row.save()
    return row, raw


def api_key_lookup(raw: str | None, *, now: dt.datetime | None = None) -> ApiKey | None:
    """The usable key whose digest matches ``raw`` (active, not expired), with its project; None otherwise
    (also for empty input)."""
    if not raw:
        return None
    row = ApiKey.objects.select_related("project").filter(key_hash=hash_key(raw), is_active=True).first()
    if row is None or (row.expires_at is not None and row.expires_at <= (now or timezone.now())):
        return None
    return row


#: The challenge of a 401 for a missing or wrong key (RFC 9110 section 15.5.2: a 401 names its scheme; MCP
#: clients look for it): ``oam_site.request_gate`` and ``/mcp`` (``threads.mcp.http``).
WWW_AUTHENTICATE = b'Bearer realm="oam-site"'


def bearer_token(authorization: bytes | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.decode("latin-1").strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def api_key_check(token: str | None, address: str) -> tuple[int, ApiKey | None]:
    """(200, the active key) for ``token``, else the refusal: (401, None) for a missing or inactive key,
    counted against ``address`` (the API's wrong-key cap, ``threads.throttling``), (429, None) when
    ``address`` is over that cap (then the key is not even looked up). For the doors that check a key before
    Django does: the request gate (``oam_site.request_gate``) and ``/mcp`` (``threads.mcp.http``)."""
    if failed_keys_exhausted(address):
        return 429, None
    row = api_key_lookup(token)
    if row is None:
        return (429 if count_failed_key(address) else 401), None
    return 200, row


def api_key_touch(row: ApiKey, *, now: dt.datetime | None = None) -> None:
    """Record that ``row`` was used, at most once every ``TOUCH_SECONDS`` (one UPDATE of that row)."""
    now = now or timezone.now()
    if row.last_used_at is None or (now - row.last_used_at).total_seconds() >= TOUCH_SECONDS:
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=now)
        row.last_used_at = now


def api_key_get(*, project: Project, key_id: Any) -> ApiKey:
    """The key ``key_id`` of ``project`` (revoked ones included); KeyError (``NotFound``) otherwise."""
    if not isinstance(key_id, int) or isinstance(key_id, bool):
        raise InvalidType("key_id", "must be an int")
    row = ApiKey.objects.select_related("project").filter(pk=key_id, project=project).first()
    if row is None:
        raise NotFound("key_id", str(key_id))
    return row


def api_key_list(*, project: Project | None = None, include_revoked: bool = True) -> list[ApiKey]:
    """Keys, newest first: of ``project`` (None: every project), revoked ones too unless ``include_revoked`` is
    False."""
    qs = ApiKey.objects.select_related("project").order_by("-created_at", "-id")
    if project is not None:
        qs = qs.filter(project=project)
    if not include_revoked:
        qs = qs.filter(is_active=True)
    return list(qs)


def api_key_rotate(*, key: ApiKey) -> tuple[ApiKey, str]:
    """Give an active key a new secret; return the row and the new raw key. The old raw key stops working at
    once; the key keeps its id, project, permission, restriction and expiry. ValueError for a revoked key."""
    with transaction.atomic():
        row = ApiKey.objects.select_for_update().get(pk=key.pk)
        if not row.is_active:
            raise InvalidArgument("key_id", f"key {row.pk} is revoked; create a new one")
        raw, row.prefix, row.key_hash = _new_secret()
        row.rotated_at = timezone.now()
        row.save(update_fields=["prefix", "key_hash", "rotated_at"])
        close_key_sockets(row.pk)  # they were opened with the old secret
    return row, raw


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke a key for good (idempotent): it is refused from now on and the WebSockets it opened close
    (``close_key_sockets``). The row stays, for the audit trail. Returns the row.
    """
    with transaction.atomic():
        row = ApiKey.objects.select_for_update().get(pk=key.pk)
        if row.is_active:
            row.is_active, row.revoked_at = False, timezone.now()
            row.save(update_fields=["is_active", "revoked_at"])
        close_key_sockets(row.pk)
    return row


def key_group(key_id: int) -> str:
    """The channel-layer group of the WebSockets opened with key ``key_id`` (``threads.consumers``)."""
    return f"apikey.{int(key_id)}"


def close_key_sockets(key_id: int) -> None:
    """After commit, tell every WebSocket opened with key ``key_id`` to close (code 4401), in every process
    the channel layer reaches (``memory.core.progress.publish``)."""
    progress.publish(key_group(key_id), {"type": "key.revoked", "key_id": int(key_id)})


def subject_keys_erase(sender, *, project: Project, subject: str, subject_id: str, **kwargs) -> dict[str, int]:
    """``memory.signals.subject_erased``: delete every key of ``project`` fixed to the erased user or agent;
    return the rows deleted (``api_keys``, and ``admin_log_entries``: the admin's history of those keys).

    Found by a security review: a key created with ``user_id="u1"`` stayed
    active after ``DELETE /api/users/u1`` and could write new data for u1.
    Deleted rather than revoked and scrubbed: the key's ``user_id`` (and,
    usually, its name, e.g. "widget for u1") is data about the erased
    subject; a revoked row without its ``user_id`` would be a key with no
    restriction, one flag away from reaching every user of the project; and
    nothing is lost that the audit needs: access records keep their route,
    status and time, their ``api_key`` becomes NULL (``on_delete=SET_NULL``),
    and the receipt's ``requested_by`` keeps the erasing key's id. A key of
    ``user_id`` u1 and ``agent_id`` a1 goes with u1 and with a1. Its open
    WebSockets close (4401) when the erasure commits (``close_key_sockets``;
    the periodic re-check of ``threads.consumers`` would find the key gone too).
    """
    keys = list(ApiKey.objects.filter(project=project, **{f"{subject}_id": subject_id}).values_list("pk", flat=True))
    if not keys:
        return {"api_keys": 0}
    history = admin_log_erase(ApiKey, keys)
    ApiKey.objects.filter(pk__in=keys).delete()
    for key_id in keys:
        close_key_sockets(key_id)
    return {"api_keys": len(keys), "admin_log_entries": history}


def api_key_tenant(row: ApiKey) -> Tenant:
    """What the engine enforces for a key: its project, fixed user and fixed agent."""
    return Tenant(project=row.project, user_id=row.user_id, agent_id=row.agent_id)


class ApiKeyAuth(HttpBearer):
    """Bearer-token auth of a route needing ``permission``: ``request.auth`` is the usable ``ApiKey``.

    No usable key: None (HTTP 401). A key with a weaker permission: ``KeyForbidden`` (HTTP 403).
    Asynchronous, for the API's ``async def`` operations: the lookup runs in the request's worker
    thread (``memory.core.aio.in_worker``), never on the event loop.
    """

    def __init__(self, permission: str = "read"):
        super().__init__()
        self.permission = check_permission(permission)

    async def authenticate(self, request: HttpRequest, token: str) -> ApiKey | None:
        """Return the usable key whose digest matches ``token`` (recording its use), or None."""
        return await in_worker(self.authenticate_sync, request, token)

    def authenticate_sync(self, request: HttpRequest, token: str) -> ApiKey | None:
        """``authenticate``'s work, in a worker thread.

        An address that sent too many wrong keys this minute gets 429 before the
        key is even looked up (``threads.throttling``); a missing, wrong, revoked
        or expired key counts against it.
        """
        check_failed_keys(request)
        row = api_key_lookup(token)
        if row is None:
            note_failed_key(request)
            return None
        request.auth = row  # the refusal below is recorded against the key (threads.audit)
        if not permits(row.permission, self.permission):
            raise KeyForbidden(f"this key's permission is {row.permission!r}; this operation needs "
                               f"{self.permission!r}")
        api_key_touch(row)
        # Memory history names the key (``memory.records.history``); ``oam_site.middleware.HistoryActorMiddleware``
        # scopes this to the request.
        history.set_actor("api_key", row.pk, f"{request.method} {request.path}")
        # Embeddings of this request take their turn with the rest of its project's (fair across projects,
        # ``memory.core.batching.MicroBatchingEmbedder``); the same middleware scopes it to the request.
        set_embedding_flow(("project", row.project_id))
        return row

    async def __call__(self, request: HttpRequest):
        """ninja's bearer check; a request with no bearer key at all also counts as a failed key."""
        pending = super().__call__(request)  # the coroutine of ``authenticate``, or None without a bearer key
        if pending is not None:
            return await pending
        if not request.headers.get("Authorization", "").lower().startswith("bearer "):
            await in_worker(_note_missing_key, request)
        return None


def _note_missing_key(request: HttpRequest) -> None:
    check_failed_keys(request)
    note_failed_key(request)
