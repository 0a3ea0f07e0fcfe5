"""One JSON API request made in process: how an MCP tool reaches the engine.

An MCP tool call becomes the JSON API request it names (``threads.mcp.tools``)
and goes through Django's own ASGI handler, so it meets exactly what a REST
client meets: the API key's auth, permission and rate limit
(``threads.auth``, ``threads.throttling``), the request's validators and size
caps (``threads.schemas``), the error mapping (``oam_site.api``), the access
record (``threads.audit``) and memory history's actor
(``oam_site.middleware.HistoryActorMiddleware``). Nothing is parsed or checked
twice in another way, and REST and MCP cannot drift apart.

``api_call`` returns the status and the decoded JSON body. The request has the
caller's bearer key, its client address (rate limits and wrong-key counts are
per address), ``Content-Type: application/json`` and the ``Host`` of the MCP
request, so ``ALLOWED_HOSTS`` applies as it does on ``/api/``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from django.core.handlers.asgi import ASGIHandler

#: Every tool's request goes to the JSON API under this prefix (``oam_site.urls``).
API_ROOT = "/api"

_handler: ASGIHandler | None = None


def _django() -> ASGIHandler:
    global _handler
    if _handler is None:
        _handler = ASGIHandler()
    return _handler


@dataclass(frozen=True)
class Answer:
    """A JSON API answer: HTTP ``status``, the decoded JSON ``body`` (None for 204) and the headers kept
    (``retry_after``: seconds, on 429; ``erased_since``: ``X-OAM-Erased-Since: true``, an as-of answer whose user
    or agent was erased since, issue #32)."""

    status: int
    body: Any
    retry_after: str | None = None
    erased_since: bool = False

    @property
    def ok(self) -> bool:
        """True for a 2xx answer."""
        return 200 <= self.status < 300


def api_path(template: str, values: dict[str, Any]) -> str:
    """``template`` (``/threads/{thread_id}/search``) with each ``{name}`` replaced by its value, under
    ``API_ROOT``: the decoded path, as an ASGI server hands it to Django (``api_call`` sends its percent-encoded
    form as ``raw_path``). A value must be one path segment: ``ValueError`` for one holding ``/`` (the tools
    refuse such an id first, ``threads.mcp.server``; over HTTP it cannot be reached either)."""
    path = template
    for name, value in values.items():
        text = str(value)
        if "/" in text:
            raise ValueError(f"{name} holds '/': not one path segment")
        path = path.replace("{" + name + "}", text)
    return API_ROOT + path


def query_string(query: dict[str, Any] | None) -> bytes:
    """``query`` as a URL query: a list value repeats its parameter (``?a=1&a=2``), None is left out, booleans
    are ``true``/``false``, dicts and lists inside are JSON text. ``UnicodeEncodeError`` for a lone surrogate
    (the tools refuse it first, naming the field)."""
    pairs = [(name, item) for name, value in (query or {}).items() if value is not None
             for item in (value if isinstance(value, list) else [value])]
    return urlencode([(k, query_text(v)) for k, v in pairs]).encode("ascii")


async def api_call(method: str, path: str, *, token: str, query: dict[str, Any] | None = None,
                   body: Any = None, client: tuple[str, int] | None = None, host: str | None = None) -> Answer:
    """Make one JSON API request in this process and return its ``Answer``.

    ``path`` is the full decoded path (``api_path``); ``query`` as ``query_string`` takes it; ``body`` is sent
    as JSON when not None. The handler runs the
    request as the ASGI server would (its own thread-sensitive context, middleware, the operation's worker
    thread); ``http.disconnect`` is reported only when this coroutine is cancelled, so a long-poll runs on.
    """
    payload = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    headers = [(b"authorization", f"Bearer {token}".encode("latin-1", "replace")),
               (b"host", (host or "localhost").encode("latin-1", "replace")),
               (b"accept", b"application/json")]
    if body is not None:
        headers += [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method.upper(),
        "scheme": "http", "path": path, "raw_path": quote(path, safe="/").encode("ascii"),
        "query_string": query_string(query),
        "root_path": "", "headers": headers, "client": client or ("127.0.0.1", 0), "server": None,
    }
    sent = False
    forever = asyncio.Event()

    async def receive() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": payload, "more_body": False}
        await forever.wait()  # never set: the peer of an in-process request does not go away
        return {"type": "http.disconnect"}

    status, retry_after, erased, chunks = 500, None, False, []

    async def send(message: dict) -> None:
        nonlocal status, retry_after, erased
        if message["type"] == "http.response.start":
            status = message["status"]
            for name, value in message.get("headers", []):
                if name.lower() == b"retry-after":
                    retry_after = value.decode("latin-1")
                elif name.lower() == b"x-oam-erased-since":
                    erased = value == b"true"
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await _django()(scope, receive, send)
    raw = b"".join(chunks)
    try:
        decoded = json.loads(raw) if raw else None
    except ValueError:
        decoded = {"detail": raw.decode("utf-8", "replace")[:500], "field": None}
    return Answer(status, decoded, retry_after, erased)


def query_text(value: Any) -> str:
    """One query value as text: booleans ``true``/``false``, dicts and lists JSON, anything else ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
