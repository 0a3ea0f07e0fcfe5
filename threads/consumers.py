"""WebSocket consumers: transport only (STYLE.md section 6).

``/ws/threads/<thread_id>/extraction/`` streams a thread's extraction
progress. Authentication: a staff session (``scope["user"]`` from
``AuthMiddlewareStack``) or an active API key, sent as ``Authorization: Bearer
<key>`` or ``?api_key=<key>`` (browsers cannot set headers on a WebSocket).
A refused connection is closed before ``accept`` (the handshake fails).

Frames sent, all JSON:

* on connect, ``{"event": "state", ...}``: ``memory.extraction.extraction_state``
  (watermark, last message seq, pending jobs, last job, config);
* then each event ``memory.progress`` sends for the thread, as
  ``{"event": "<name>", "thread_id", "job_id", ...}`` with ``<name>`` one of
  queued, started, progress, memory_created, memory_linked, finished, failed.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.security.websocket import AllowedHostsOriginValidator

from memory import extraction, progress
from memory.errors import NotFound
from threads.auth import api_key_lookup


def scope_api_key(scope) -> str | None:
    """The API key a WebSocket handshake carries: ``Authorization: Bearer`` first, then ``?api_key=``."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            if kind.lower() == "bearer" and token.strip():
                return token.strip()
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("api_key")
    return values[0] if values and values[0] else None


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
        if scope.get("type") == "websocket" and scope_api_key(scope):
            return await self.app(scope, receive, send)
        return await self.checked(scope, receive, send)


def _authorized(scope) -> bool:
    key = scope_api_key(scope)
    if key is not None:
        return api_key_lookup(key) is not None
    user = scope.get("user")
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def _state(thread_id: str) -> dict | None:
    try:
        return extraction.extraction_state(thread_id=thread_id)
    except NotFound:
        return None


class ExtractionConsumer(AsyncJsonWebsocketConsumer):
    """Relays one thread's extraction events to the client; the client sends nothing."""

    async def connect(self):
        if not await database_sync_to_async(_authorized)(self.scope):
            await self.close(code=4401)
            return
        thread_id = self.scope["url_route"]["kwargs"]["thread_id"]
        state = await database_sync_to_async(_state)(thread_id)
        if state is None:
            await self.close(code=4404)
            return
        progress.bind_event_loop(asyncio.get_running_loop())
        self.group = progress.group_name(thread_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.send_json({"event": "state", **state})

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

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
