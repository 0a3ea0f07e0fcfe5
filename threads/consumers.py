"""WebSocket consumers: transport only (docs/architecture.md, "Layers").

``/ws/threads/<thread_id>/extraction/`` streams a thread's extraction
progress. Authentication: a staff session (``scope["user"]`` from
``AuthMiddlewareStack``), listening in the project named by ``?project=<slug>``
(default: the default project), or a usable API key, sent as
``Authorization: Bearer <key>`` or ``?api_key=<key>`` (browsers cannot set
headers on a WebSocket), listening in its project and, for a key with a fixed
user or agent, to that user's and agent's threads only.

Refusals carry an application close code: 4401 no valid credentials (no
session, or a wrong or inactive API key), 4403 a signed-in user who is not
active staff, 4404 no such thread (or project: a staff user who is not a
member of the named project, nor a superuser, gets the same 4404). A socket
opened with an API key closes with 4401 when that key is revoked or rotated
(``threads.auth.close_key_sockets``), and at the latest ``OAM_WS_KEY_RECHECK_SECONDS`` after it expired or was
revoked by another process. A staff session's socket re-checks its user as often and closes with the code a new
handshake would get once they may no longer see the project (4404 no longer a member, 4403 no longer active staff,
4401 deleted). A browser (no API key) is accepted first and then closed with that code, because a browser only sees
the code of a
close after ``accept`` (a refused handshake is 1006 to it); the staff page
(``static/staff/extraction.js``) shows the reason and stops reconnecting. A
client sending an API key is refused before ``accept``, with the HTTP status
the code mirrors (``deny``: 401, 403, 404, and 429 below) and a JSON body
``{"detail": ..., "field": null}``: daphne answers so through the ASGI
``websocket.http.response`` extension (``oam_site.websocket_denial``); a
server without it gets a close before ``accept`` with the code (daphne alone
would answer HTTP 403 to that). A cross-site Origin without an API key is
refused before ``accept`` by ``OriginValidatorUnlessApiKey``.

Handshakes without valid credentials (4401) count against the client's
address with the HTTP API's wrong keys (``threads.throttling``, one count,
``client_address``): past ``OAM_API_AUTH_FAILURE_LIMIT`` a minute an API-key
client gets 429 with ``Retry-After`` (close code 4429 without the extension),
before its key is even looked up, a right key included; a browser still gets
4401. Only the counted refusals within the limit are recorded as accesses
(``threads.audit``), like the API's 401s; those past it are not, like its 429s
(a flood of 620 wrong keys wrote 500 rows).

Frames sent, all JSON:

* on connect, ``{"event": "state", ...}``: ``memory.extraction.recovery.extraction_state``
  (watermark, last message seq, pending jobs, last job, config);
* then each event ``memory.core.progress`` sends for the thread, as
  ``{"event": "<name>", "thread_id", "job_id", ...}`` with ``<name>`` one of
  queued, started, progress, memory_created, memory_linked, finished, failed,
  repaired (the sweep made a queue that could not advance start after the watermark),
  fenced (a delete took a running job back; it runs again), retrying (the LLM was unreachable: the
  job waits ``retry_in`` seconds, its range ``from_seq``..``to_seq`` pending), rerun (a failed range
  was queued again); failed carries ``failure`` (transient or permanent), the range and ``reason``.
  The state frame lists the failed ranges still to re-run (``failed_ranges``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.contrib.auth import get_user_model

from memory.core import degraded, progress
from memory.core.errors import NotFound
from memory.extraction.recovery import extraction_state
from memory.records import selectors
from memory.records.tenancy import Tenant, staff_project
from threads.audit import record_access
from threads.auth import api_key_lookup, api_key_tenant, key_group
from threads.models import ApiKey
from threads.throttling import client_address, count_failed_key, failed_keys_exhausted, seconds_to_next_window


def scope_api_key(scope) -> str | None:
    """The API key a WebSocket handshake carries: ``Authorization: Bearer`` first, then ``?api_key=``; None when
    it carries neither. An empty one (``?api_key=``, ``Bearer`` and nothing) is ``""``: a key was sent, a wrong one
    (401 like any wrong key; it was taken for no key, so the Origin check answered 403)."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            if kind.lower() == "bearer":
                return token.strip()
    values = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True).get("api_key")
    return values[0] if values else None


class OriginValidatorUnlessApiKey:
    """ASGI middleware: check the Origin header (``AllowedHostsOriginValidator``) unless an API key is sent.

    The Origin check protects cookie sessions from other sites; a request
    carrying an API key authenticates with the key itself, and agent clients
    usually send no Origin at all.
    """

    def __init__(self, app):
        self.app = app
        self.checked = AllowedHostsOriginValidator(app)

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "websocket" and scope_api_key(scope) is not None:
            return await self.app(scope, receive, send)
        return await self.checked(scope, receive, send)


#: Close codes of a refused connection: 4000 plus the HTTP status each mirrors.
NOT_AUTHENTICATED, FORBIDDEN, NO_SUCH_THREAD, TOO_MANY_WRONG_KEYS = 4401, 4403, 4404, 4429
#: The ASGI extension that lets an application answer a handshake with an HTTP response instead of accepting it.
DENIAL_EXTENSION = "websocket.http.response"
#: What an API-key client's refused handshake is told, by close code (``deny``).
DETAILS = {
    NOT_AUTHENTICATED: "Unauthorized: the key is not an active API key",
    FORBIDDEN: "Forbidden: a key listens in its own project only",
    NO_SUCH_THREAD: "Not found: no such thread",
    TOO_MANY_WRONG_KEYS: "Too many requests: too many wrong keys from this address",
}


async def deny(scope: Mapping[str, Any], send: Callable, code: int, detail: str) -> None:
    """Refuse a WebSocket handshake before ``accept``: the HTTP status ``code`` mirrors (``code - 4000``) with
    a JSON body ``{"detail": detail, "field": null}`` (and ``Retry-After`` for 429) where the server offers the
    ASGI ``websocket.http.response`` extension; else a close with ``code``."""
    if DENIAL_EXTENSION not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": code})
        return
    status = code - 4000
    body = json.dumps({"detail": detail, "field": None}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 429:
        headers.append((b"retry-after", str(seconds_to_next_window()).encode()))
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


#: The status an accepted connection is recorded with (``threads.audit``): HTTP 101, Switching Protocols.
ACCEPTED = 101
ROUTE = "/ws/threads/{thread_id}/extraction/"


def _named_project(scope) -> str | None:
    """The ``?project=<slug>`` of the handshake, or None."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("project")
    return values[0] if values and values[0] else None


@dataclass
class Listener:
    """Who may listen: the tenant whose threads it may open, and the API key it used (None: a staff session,
    whose username is ``staff_user``)."""

    tenant: Tenant
    key: ApiKey | None = None
    staff_user: str = ""

    @property
    def key_id(self) -> int | None:
        """The id of the API key used, None for a staff session."""
        return self.key.pk if self.key is not None else None


def _authorize(scope) -> Listener | int:
    """The ``Listener`` of a handshake, or its refusal's close code.

    An API key (any permission: listening is reading) acts for its tenant
    (``threads.auth.api_key_tenant``: its project, fixed user and agent); a
    ``?project=`` naming another project is refused (4403). A staff session
    listens in the project it names (default: the default project). 4401: no
    valid key or session; 4403: signed in but not active staff; 4404: no such project, or one the staff
    user may not see (``memory.records.tenancy.staff_project``: not a member, not a superuser), alike.
    """
    raw = scope_api_key(scope)
    named = _named_project(scope)
    if raw is not None:
        row = api_key_lookup(raw)
        if row is None:
            return NOT_AUTHENTICATED
        if named is not None and named != row.project.slug:
            return FORBIDDEN
        return Listener(tenant=api_key_tenant(row), key=row)
    return _staff_listener(scope.get("user"), named)


def _staff_listener(user, named: str | None) -> Listener | int:
    """The ``Listener`` of a staff ``user`` in the project slug ``named`` (None: default), or the close code
    refusing them (``_authorize``'s 4401, 4403, 4404)."""
    if user is None or not user.is_authenticated:
        return NOT_AUTHENTICATED
    if not (user.is_active and user.is_staff):
        return FORBIDDEN
    try:
        return Listener(tenant=Tenant(project=staff_project(user, named)), staff_user=user.get_username())
    except NotFound:
        return NO_SUCH_THREAD


def _recheck_key(raw: str) -> int | None:
    """None while the key ``raw`` is usable; else the close code (4401)."""
    return None if api_key_lookup(raw) is not None else NOT_AUTHENTICATED


def _recheck_staff(user_pk: Any, named: str | None) -> int | None:
    """None while the staff user (read afresh) may still see the project; else the code a new handshake would
    get: 4401 the user is gone, 4403 no longer active staff, 4404 no longer a member (nor a superuser)."""
    user = get_user_model()._default_manager.filter(pk=user_pk).first()
    found = _staff_listener(user, named) if user is not None else NOT_AUTHENTICATED
    return found if isinstance(found, int) else None


def _recheck_socket(credentials: Callable[[], int | None], listener: Listener, thread_id: str,
                    stored: str) -> int | None:
    """None while the socket may stay open; else its close code. ``credentials`` first (the key, or the staff
    user read afresh); then the thread: deleted (4404), or by now a thread the listener's tenant may not see
    (deleted and made again under the same id for another user: 4404, as a new handshake would get)."""
    code = credentials()
    if code is not None:
        return code
    try:
        row = selectors.thread_get(project=listener.tenant.project, thread_id=thread_id)
    except NotFound:
        return NO_SUCH_THREAD
    return None if row.pk == stored and listener.tenant.allows(row) else NO_SUCH_THREAD


def _state(listener: Listener, thread_id: str) -> tuple[str, dict] | None:
    """(the thread's stored id, its extraction state), or None when the listener's tenant has no such thread
    (another user's or agent's thread of a restricted key counts as none)."""
    try:
        row = selectors.thread_get(project=listener.tenant.project, thread_id=thread_id)
    except NotFound:
        return None
    if not listener.tenant.allows(row):
        return None
    try:
        return row.pk, extraction_state(thread=row)
    except NotFound:
        return None


def _record(listener: Listener | int, thread_id: str, status: int) -> None:
    """An access record of a connection attempt: accepted (101) or refused with ``status`` (its close code)."""
    known = listener if isinstance(listener, Listener) else None
    record_access(channel="websocket", method="GET", route=ROUTE, status=status,
                  project=known.tenant.project if known else None, api_key=known.key if known else None,
                  staff_user=known.staff_user if known else "", thread_id=thread_id)


def _handshake(scope, thread_id: str) -> tuple[Listener | int, tuple[str, dict] | None, int | None]:
    """(listener or refusal code, (stored thread id, state) or None, refusal or None), recorded as an access.

    One trip to a worker thread for the whole handshake instead of three
    (authorize, state, record): under load each trip waits for a thread, and a
    handshake that outlasts daphne's ``--websocket_connect_timeout`` (5 s) ends
    in an abnormal close, which a browser takes as a reason to reconnect (a
    browser test saw two attempts instead of one twice on a loaded machine).

    A refusal for want of credentials (4401) counts against the client's address
    (``threads.throttling.count_failed_key``); once that is over the limit it is
    not recorded, and an API-key client is refused with 4429 (429) instead.
    """
    listener = _authorize(scope)
    found, refusal = None, listener if isinstance(listener, int) else None
    if refusal == NOT_AUTHENTICATED and count_failed_key(client_address(scope)):
        return listener, None, TOO_MANY_WRONG_KEYS if scope_api_key(scope) is not None else NOT_AUTHENTICATED
    if refusal is None:
        found = _state(listener, thread_id)
        if found is None:
            refusal = NO_SUCH_THREAD
    _record(listener, thread_id, refusal or ACCEPTED)
    return listener, found, refusal


#: What ``layer_receive`` gets while the channel layer fails (no message).
_NO_MESSAGE = object()


async def layer_receive(receive: Callable[[], Any]) -> Any:
    """The next message of this socket's channel (``receive()``: the layer's ``receive`` for it), waiting out
    a channel layer that is down: each failure is reported (``memory.core.degraded``) and the layer asked
    again after ``degraded.RETRY_SECONDS``, so the socket stays open without live events instead of failing.
    """
    while (message := await degraded.attempt_async("channels", receive, lambda: _NO_MESSAGE)) is _NO_MESSAGE:
        await asyncio.sleep(degraded.RETRY_SECONDS)
    return message


class ExtractionConsumer(AsyncJsonWebsocketConsumer):
    """Relays one thread's extraction events to the client; the client sends nothing."""

    @property
    def channel_receive(self) -> Callable[[], Any]:
        """What the consumer's loop awaits for channel-layer messages: the layer's ``receive`` for this
        socket, guarded by ``layer_receive`` (channels' ``AsyncConsumer.__call__`` sets it unguarded)."""
        return self._channel_receive

    @channel_receive.setter
    def channel_receive(self, receive: Callable[[], Any]) -> None:
        self._channel_receive = partial(layer_receive, receive)

    async def connect(self):
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        if scope_api_key(self.scope) is not None and failed_keys_exhausted(client_address(self.scope)):
            # on the event loop, like the API's throttle (the cache only): no worker thread, no key looked up
            await self._refuse(TOO_MANY_WRONG_KEYS)
            return
        listener, found, refusal = await database_sync_to_async(_handshake)(self.scope, thread_id)
        if refusal is not None:
            await self._refuse(refusal)
            return
        key, state = found
        progress.bind_event_loop(asyncio.get_running_loop())
        self.group = progress.group_name(key)
        await self._group("add", self.group)
        if listener.key_id is not None:  # revoking or rotating the key closes this socket
            self.key_group = key_group(listener.key_id)
            await self._group("add", self.key_group)
            credentials = partial(_recheck_key, scope_api_key(self.scope))
        else:
            credentials = partial(_recheck_staff, self.scope["user"].pk, _named_project(self.scope))
        recheck = partial(_recheck_socket, credentials, listener, thread_id, key)
        await self.accept()
        await self.send_json({"event": "state", **state})
        self.watch = asyncio.create_task(self._watch(recheck))

    async def _watch(self, recheck: Callable[[], int | None]) -> None:
        """Close with the code ``recheck`` returns once it returns one: asked every ``OAM_WS_KEY_RECHECK_SECONDS``.

        For a key (``_recheck_key``): revoking or rotating through the API
        closes the socket at once (the channel layer); this also catches a key
        that expired, or was revoked by ``manage.py revoke_api_key`` in another
        process whose message cannot reach this one (the in-memory channel
        layer), or deleted by an erasure. For a staff session (``_recheck_staff``):
        a user removed from the project (``manage.py add_project_member --remove``,
        the admin), no longer staff or active, or deleted. Both found by a security review.
        Then the thread (``_recheck_socket``): deleted, or made again for a user a restricted key may not
        see, closes with 4404 (found by a security review: a socket outlived its thread and followed the
        reused id to another user).
        """
        while True:
            await asyncio.sleep(settings.OAM_WS_KEY_RECHECK_SECONDS)
            code = await database_sync_to_async(recheck)()
            if code is not None:
                await self.close(code=code)
                return

    async def _refuse(self, code: int) -> None:
        """Close with ``code`` after ``accept`` for a browser (so it sees the code); refuse an API-key client
        before ``accept`` (``deny``: the HTTP status the code mirrors)."""
        if scope_api_key(self.scope) is None:
            await self.accept()
            await self.close(code=code)
            return
        await deny(self.scope, self.base_send, code, DETAILS[code])

    async def disconnect(self, code):
        watch = getattr(self, "watch", None)
        if watch is not None and watch is not asyncio.current_task():
            watch.cancel()
        for group in (getattr(self, "group", None), getattr(self, "key_group", None)):
            if group:
                await self._group("discard", group)

    async def _group(self, action: str, group: str) -> None:
        """``group_add`` or ``group_discard`` (``action``) this socket; a channel layer that fails (or failed
        a moment ago) is reported degraded (``memory.core.degraded``, ``/readyz``) and skipped, not raised:
        the socket still gets its state, and ``_watch`` still closes it for a revoked key or a deleted
        thread, only without live events."""
        call = self.channel_layer.group_add if action == "add" else self.channel_layer.group_discard
        # bounded: a hung layer would hold the handshake past daphne's own timeout, which cancels it (a
        # CancelledError, not an Exception: the layer was never reported and no socket opened)
        await degraded.attempt_async("channels", lambda: degraded.bounded(call(group, self.channel_name)),
                                     lambda: None)

    async def key_revoked(self, event):
        """The key this socket was opened with was revoked or rotated: close with 4401."""
        await self.close(code=NOT_AUTHENTICATED)

    async def receive_json(self, content, **kwargs):
        """Clients only listen; anything they send is ignored."""

    async def _relay(self, event: dict) -> None:
        await self.send_json({"event": event["type"].split(".", 1)[1],
                              **{k: v for k, v in event.items() if k != "type"}})

    async def extraction_queued(self, event):
        await self._relay(event)

    async def extraction_started(self, event):
        await self._relay(event)

    async def extraction_progress(self, event):
        await self._relay(event)

    async def extraction_memory_created(self, event):
        await self._relay(event)

    async def extraction_memory_linked(self, event):
        await self._relay(event)

    async def extraction_finished(self, event):
        await self._relay(event)

    async def extraction_failed(self, event):
        await self._relay(event)

    async def extraction_repaired(self, event):
        await self._relay(event)

    async def extraction_fenced(self, event):
        await self._relay(event)

    async def extraction_retrying(self, event):
        await self._relay(event)

    async def extraction_rerun(self, event):
        await self._relay(event)

    async def extraction_derived_memories(self, event):
        """Memories invalidated or deleted because their source messages went (``memory.records.provenance``)."""
        await self._relay(event)
