"""Refuse request bodies daphne should never read: too large, or sent to the API without a valid key.

daphne (through Twisted) stores a request's whole body and then hands all of it
to the application at once, before any middleware or view runs: a 100 MB
upload without a key grew the server by 1.1 GB before the 401.
``install()`` (called by ``oam_site.asgi`` when daphne serves it) hooks
daphne's ``WebRequest`` where Twisted has read the headers and not yet a byte
of the body, and answers there:

* ``413`` when ``Content-Length`` is over ``OAM_MAX_REQUEST_BYTES``
  (``settings.DATA_UPLOAD_MAX_MEMORY_SIZE``, default 32 MiB, files included),
  or a body without a length grows past it;
* ``414`` for a request line (method, path and query) over Twisted's line
  limit (``HTTPChannel.MAX_LENGTH``, 16,384 bytes), ``431`` for a header line
  over it: Twisted itself drops such a connection without a word (a
  schemathesis run met it with an 18 KB query string);
* ``401`` for a body sent to ``/api/`` or ``/mcp`` without ``Authorization: Bearer <key>``;
  with a key, reading stops (the socket is paused) while the key is looked up
  in a worker thread (``threads.auth.api_key_lookup``), and a key that is not
  active is a 401: the body is never read. Wrong keys count against the
  client's address like the API's own (``threads.throttling``): past
  ``OAM_API_AUTH_FAILURE_LIMIT`` a minute the answer is 429 with ``Retry-After``.

The answer is JSON like the API's (``{"detail": ..., "field": null}``) with
``Connection: close``; the connection closes once it is written, so a client
that sends ``Expect: 100-continue`` (curl does above 1 MB) sees it before
sending the body, and one that does not may see the connection reset instead.
Requests that pass go on to daphne untouched. ``decide`` is the rule, free of
Twisted, for tests and other servers.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.db import connection

from oam_site.websocket_denial import response_bytes
from threads.auth import WWW_AUTHENTICATE, api_key_check, bearer_token
from threads.mcp.http import mcp_path
from threads.throttling import seconds_to_next_window

logger = logging.getLogger(__name__)

API_PREFIX = b"/api/"


def keyed_path(path: bytes, root_path: bytes = b"") -> bool:
    """Whether a body sent to ``path`` needs an API key: the JSON API and the MCP endpoint.

    ``path`` is decoded as daphne decodes it (``/%61pi/`` is ``/api/``), and ``root_path`` (a client's
    ``Daphne-Root-Path`` header, which daphne honours) is taken off its front as Django does before routing,
    so ``/x/api/`` with root path ``/x`` is the API too.
    """
    path = unquote_to_bytes(path.split(b"?", 1)[0])
    root = unquote_to_bytes(root_path).rstrip(b"/")
    if root and (path == root or path.startswith(root + b"/")):
        path = path[len(root):]
    return path.startswith(API_PREFIX) or mcp_path(path.decode("latin-1"))


@dataclass
class Decision:
    """What to do with a request once its headers are in: refuse (``status``, ``detail``) or check ``key``."""

    status: int | None = None
    detail: str = ""
    key: str | None = None


def max_body_bytes() -> int:
    """The largest request body read, in bytes (``OAM_MAX_REQUEST_BYTES``)."""
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def decide(*, path: bytes, length: int | None, chunked: bool, authorization: bytes | None,
           root_path: bytes = b"") -> Decision:
    """The gate's rule for a request with these headers (``length``: Content-Length, None when absent).

    Returns a refusal (413 over ``max_body_bytes``; 401 for an API body
    without a bearer token), or the token to look up before the body is read
    (an API request with a body), or nothing to do.
    """
    limit = max_body_bytes()
    if length is not None and length > limit:
        return Decision(413, f"the request body is {length} bytes; the limit is {limit} (OAM_MAX_REQUEST_BYTES)")
    has_body = chunked or bool(length)
    if not has_body or not keyed_path(path, root_path):
        return Decision()
    token = bearer_token(authorization)
    if token is None:
        return Decision(401, "Unauthorized: send Authorization: Bearer <key> (the body was not read)")
    return Decision(key=token)


def _key_check(token: str, address: str) -> int | None:
    """None when ``token`` is an active API key, else the status to refuse with (``threads.auth.api_key_check``:
    401, or 429 past the wrong-key cap); runs in Twisted's thread pool. Each pool thread keeps its
    database connection open (closed only after an error): opening and closing
    SQLite connections in several threads at a high rate deadlocked SQLite
    3.51.1 (one thread in ``findReusableFd`` opening, another in
    ``unixIsSharingShmNode`` closing a WAL connection), which froze the whole
    server under a schemathesis run.
    """
    try:
        status, _row = api_key_check(token, address)
    except Exception:
        connection.close()
        raise
    return None if status == 200 else status


_installed = False


def install() -> None:
    """Hook daphne's ``WebRequest`` (once per process); a no-op without daphne."""
    global _installed
    if _installed:
        return
    try:  # deferred: daphne and twisted are there only when daphne serves
        from daphne.http_protocol import WebRequest
    except ImportError:  # another ASGI server
        return
    from twisted.internet.threads import deferToThread
    from twisted.web.http import HTTPChannel

    got_length = WebRequest.gotLength
    content_chunk = WebRequest.handleContentChunk
    request_received = WebRequest.requestReceived

    def answer(transport, status: int, detail: str) -> None:
        headers = [(b"Content-Type", b"application/json")]
        if status == 429:
            headers.append((b"Retry-After", str(seconds_to_next_window()).encode()))
        if status == 401:  # RFC 9110 section 15.5.2: a 401 names its scheme (MCP clients look for it)
            headers.append((b"WWW-Authenticate", WWW_AUTHENTICATE))
        transport.write(response_bytes(status, headers, json.dumps({"detail": detail, "field": None}).encode()))
        transport.loseConnection()

    def refuse(request, status: int, detail: str) -> None:
        request._oam_refused = True
        request.requestHeaders.removeHeader(b"expect")  # no "100 Continue" after a final answer
        transport = request.channel.transport if request.channel is not None else None
        if transport is not None:
            answer(transport, status, detail)

    def line_too_long(channel, line) -> None:
        limit = channel.MAX_LENGTH
        if getattr(channel, "_HTTPChannel__first_line", True):
            answer(channel.transport, 414, f"the request line (method, path and query) is over {limit} bytes")
        else:
            answer(channel.transport, 431, f"a request header line is over {limit} bytes")

    def gated_got_length(self, length):
        self._oam_refused, self._oam_pending, self._oam_received, self._oam_bytes = False, False, None, 0
        headers = self.requestHeaders
        # Every Transfer-Encoding header counts: Twisted decodes a body as chunked when any of them says so
        # ("identity" then "chunked" is a chunked body).
        chunked = any(b"chunked" in value.lower() for value in headers.getRawHeaders(b"transfer-encoding") or [])
        decision = decide(path=getattr(self.channel, "_path", b"") or b"", length=length, chunked=chunked,
                          root_path=(headers.getRawHeaders(b"daphne-root-path") or [b""])[0],
                          authorization=(headers.getRawHeaders(b"authorization") or [None])[0])
        if decision.status is not None:
            got_length(self, 0)  # an empty in-memory body: nothing of it is kept
            refuse(self, decision.status, decision.detail)
            return
        got_length(self, length)
        if decision.key is None:
            return
        self._oam_pending = True
        transport = self.channel.transport
        transport.pauseProducing()

        def checked(status: int | None) -> None:
            self._oam_pending = False
            if self.channel is None:
                return  # the client went away meanwhile
            if status == 401:
                refuse(self, 401, "Unauthorized: the key is not an active API key (the body was not read)")
                return
            if status == 429:
                refuse(self, 429, "Too many requests: too many wrong keys from this address (the body was not read)")
                return
            transport.resumeProducing()
            if self._oam_received is not None:
                request_received(self, *self._oam_received)

        def failed(failure) -> None:
            logger.warning("API key check before the body failed: %s", failure.getErrorMessage())
            checked(None)  # let the request through: the API checks the key again

        address = getattr(self.getClientAddress(), "host", None) or "unknown"
        deferToThread(_key_check, decision.key, address).addCallbacks(checked, failed)

    def gated_content_chunk(self, data):
        if getattr(self, "_oam_refused", False):
            return
        self._oam_bytes = getattr(self, "_oam_bytes", 0) + len(data)
        if self._oam_bytes > max_body_bytes():
            refuse(self, 413, f"the request body is over the limit of {max_body_bytes()} bytes (OAM_MAX_REQUEST_BYTES)")
            return
        content_chunk(self, data)

    def gated_request_received(self, command, path, version):
        if getattr(self, "_oam_refused", False):
            return
        if getattr(self, "_oam_pending", False):
            self._oam_received = (command, path, version)  # run once the key is known good
            return
        request_received(self, command, path, version)

    WebRequest.gotLength = gated_got_length
    WebRequest.handleContentChunk = gated_content_chunk
    WebRequest.requestReceived = gated_request_received
    HTTPChannel.lineLengthExceeded = line_too_long
    _installed = True
