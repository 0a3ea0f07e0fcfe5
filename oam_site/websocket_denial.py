"""daphne answers a refused WebSocket handshake with the application's HTTP response (ASGI's denial extension).

The ASGI ``websocket.http.response`` extension lets an application refuse a
handshake with an HTTP response of its own (``websocket.http.response.start``
with a status and headers, then ``websocket.http.response.body``). daphne 4.2
does not offer it: a close before ``accept`` is always HTTP 403 ("Access
denied"), so an API-key client could not tell a wrong key from a flood limit,
an unknown thread or a path with no route. ``install`` adds it to daphne's
WebSocket protocol (every way daphne starts, as ``oam_site.websocket_timeouts``
does; ``oam_site.asgi`` calls it):

* every WebSocket scope lists the extension (``scope["extensions"]``), so the
  application knows it may use it (``threads.consumers.deny``);
* the two messages, before ``accept``, refuse the handshake as daphne's own
  close does (``serverReject``: the application is told the client left,
  daphne logs "rejected"), but the client gets the status, headers and body
  the application sent, and the connection closes.

Without daphne (another ASGI server, Channels' test communicator) it is a no-op
and ``deny`` falls back to a close with the code.
"""

from __future__ import annotations

from http import HTTPStatus

EXTENSION = "websocket.http.response"
#: RFC 9110's reason phrases where Python 3.11's ``HTTPStatus`` still has the older ones.
_PHRASES = {413: "Content Too Large", 414: "URI Too Long"}


def _reason(status: int) -> str:
    if status in _PHRASES:
        return _PHRASES[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Refused"


def response_bytes(status: int, headers: list, body: bytes) -> bytes:
    """The HTTP/1.1 response of a denial, and of ``oam_site.request_gate``'s refusals: status line (RFC 9110's
    reason phrase), the given headers (``Content-Length`` added when none is given) and ``Connection: close``,
    then the body."""
    lines = [f"HTTP/1.1 {status} {_reason(status)}"]
    names = set()
    for name, value in headers:
        name, value = bytes(name).decode("latin-1"), bytes(value).decode("latin-1")
        if name.lower() == "connection" or "\r" in name + value or "\n" in name + value:
            continue
        names.add(name.lower())
        lines.append(f"{name}: {value}")
    if "content-length" not in names:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


_installed = False


def install() -> None:
    """Give daphne's WebSocket protocol the denial extension (once per process); a no-op without daphne."""
    global _installed
    if _installed:
        return
    try:  # deferred: daphne is there only when daphne serves
        from daphne.server import Server
        from daphne.ws_protocol import WebSocketProtocol
    except ImportError:  # another ASGI server
        return

    create_application = Server.create_application
    handle_reply = WebSocketProtocol.handle_reply
    send_http_error = WebSocketProtocol.sendHttpErrorResponse

    def create_with_extension(self, protocol, scope):
        if scope.get("type") == "websocket":
            scope["extensions"] = {**(scope.get("extensions") or {}), EXTENSION: {}}
        return create_application(self, protocol, scope)

    def handle_denial(self, message):
        kind = message.get("type")
        if kind not in ("websocket.http.response.start", "websocket.http.response.body"):
            return handle_reply(self, message)
        if self.state != self.STATE_CONNECTING or not hasattr(self, "handshake_deferred"):
            raise ValueError(f"{kind} after the handshake ended")
        if kind == "websocket.http.response.start":
            self._oam_denial = (int(message["status"]), list(message.get("headers", [])), bytearray())
            return
        denial = getattr(self, "_oam_denial", None)
        if denial is None:
            raise ValueError("websocket.http.response.body before websocket.http.response.start")
        denial[2].extend(message.get("body", b""))
        if not message.get("more_body", False):
            self.serverReject()  # daphne's own refusal; sendHttpErrorResponse below writes the denial

    def send_denial(self, code, reason, responseHeaders=None):  # noqa: N803 - autobahn's name
        denial = getattr(self, "_oam_denial", None)
        if denial is None:
            return send_http_error(self, code, reason, responseHeaders)
        status, headers, body = denial
        self.sendData(response_bytes(status, headers, bytes(body)))

    Server.create_application = create_with_extension
    WebSocketProtocol.handle_reply = handle_denial
    WebSocketProtocol.sendHttpErrorResponse = send_denial
    _installed = True
