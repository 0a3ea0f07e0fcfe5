"""Streamable HTTP at ``/mcp``: the MCP server on the service's own daphne, behind its API keys.

``oam_site.asgi`` sends every HTTP request whose path is ``/mcp`` or below it here. Paths:

* ``/mcp``: the tools with ``thread_id`` as an argument;
* ``/mcp/threads/{thread_id}`` (the path as the ASGI server decoded it, once): the same server with that
  thread fixed (``threads.mcp.server.Caller``), so an
  agent's tools need no ids; anything else under ``/mcp`` is a 404.

Before the MCP SDK sees a request: the ``Host`` must be one of ``ALLOWED_HOSTS`` (400, as Django answers;
the MCP specification asks servers to guard against DNS rebinding), and ``Authorization: Bearer <API key>``
must name an active key (401 with ``WWW-Authenticate: Bearer`` otherwise), with the API's cap on wrong keys
per client address (``threads.throttling``: 429 and ``Retry-After``). Under daphne a body sent without a
usable key is refused before it is read, as on ``/api/`` (``oam_site.request_gate``); the SDK's own body
limit is ``OAM_MAX_REQUEST_BYTES`` too. Each tool call is then a JSON API request with the same key
(``threads.mcp.bridge``): the key's permission, user and agent restriction, rate limit and the API's limits
apply to it unchanged.

The SDK's session manager runs stateless (``mcp`` 2.x, MCP 2026-07-28: no ``initialize`` handshake and no
``Mcp-Session-Id``; an older client's ``initialize`` is answered too, each request standing alone), so any
daphne process can answer any request. Its task group is started by the first request, in a task that lives
as long as the event loop (daphne has no ASGI lifespan).
"""

from __future__ import annotations

import asyncio
import json
import re
import time

from asgiref.sync import ThreadSensitiveContext
from django.conf import settings
from django.db import close_old_connections
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from memory.core.aio import in_worker
from threads.auth import WWW_AUTHENTICATE, api_key_check, bearer_token, hash_key
from threads.mcp.server import CALLER, Caller, build_server
from threads.models import ApiKey
from threads.throttling import seconds_to_next_window

PREFIX = "/mcp"
_PATH = re.compile(r"^/mcp(?:/threads/(?P<thread_id>[^/]+))?/?$")


def mcp_path(path: str) -> bool:
    """Whether ``path`` belongs to the MCP endpoint (``/mcp`` or below it)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


async def _answer(send, status: int, detail: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"detail": detail, "field": None}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


#: Seconds a key found active here is taken as active without a lookup. Only the gate and the tool list use
#: it: every tool call is a JSON API request that checks the key again, so a key revoked meanwhile lists tools
#: for at most this long and calls none.
KNOWN_KEY_SECONDS = 30.0
_known: dict[str, tuple[ApiKey, float]] = {}


def _known_key(token: str | None) -> ApiKey | None:
    """The key ``token`` was found active as, within ``KNOWN_KEY_SECONDS``; checked on the loop, no database."""
    known = _known.get(hash_key(token)) if token else None
    return known[0] if known is not None and known[1] > time.monotonic() else None


def _key(token: str | None, address: str) -> tuple[int, ApiKey | None]:
    """``threads.auth.api_key_check`` in a worker, remembering an active key (``KNOWN_KEY_SECONDS``)."""
    try:
        status, row = api_key_check(token, address)
    finally:
        close_old_connections()
    if row is not None:
        if len(_known) > 10_000:
            _known.clear()
        _known[hash_key(token)] = (row, time.monotonic() + KNOWN_KEY_SECONDS)
    return status, row


class McpHttpApp:
    """The ASGI app of ``/mcp`` (see the module docstring)."""

    def __init__(self):
        self.manager = StreamableHTTPSessionManager(
            app=build_server(), stateless=True, json_response=False, security_settings=None,
            max_request_body_size=int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
        self._running: asyncio.Future | None = None

    async def _ensure_running(self) -> None:
        if self._running is None:
            loop = asyncio.get_running_loop()
            self._running = started = loop.create_future()

            async def run() -> None:
                async with self.manager.run():
                    started.set_result(None)
                    await asyncio.Event().wait()  # until the loop ends

            self._task = loop.create_task(run())
        await asyncio.shield(self._running)

    async def __call__(self, scope, receive, send) -> None:
        match = _PATH.match(scope["path"])
        if match is None or match.group("thread_id") in (".", ".."):
            await _answer(send, 404, "Not Found: the MCP endpoint is /mcp or /mcp/threads/{thread_id}")
            return
        headers = {name.lower(): value for name, value in scope.get("headers", [])}
        host = headers.get(b"host", b"").decode("latin-1")
        domain, _port = split_domain_port(host)
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            await _answer(send, 400, f"Bad Request: Host {host!r} is not in ALLOWED_HOSTS")
            return
        token = bearer_token(headers.get(b"authorization"))
        client = scope.get("client") or ("unknown", 0)
        status, key = 200, _known_key(token)
        if key is None:
            async with ThreadSensitiveContext():
                status, key = await in_worker(_key, token, client[0] or "unknown")
        if status == 429:
            await _answer(send, 429, "Too many requests: too many wrong keys from this address",
                          [(b"retry-after", str(seconds_to_next_window()).encode())])
            return
        if status != 200:
            await _answer(send, 401, "Unauthorized: send Authorization: Bearer <API key>",
                          [(b"www-authenticate", WWW_AUTHENTICATE)])
            return
        caller = Caller(token=token, permission=key.permission, thread_id=match.group("thread_id"),
                        client=(client[0] or "unknown", client[1] or 0), host=host, key=key)
        await self._ensure_running()
        await self.manager.handle_request({**scope, CALLER: caller}, receive, send)
