"""daphne's WebSocket close handshake, given time enough for a busy browser (every way daphne starts).

A browser's extraction socket that this site refuses is accepted, then closed with its refusal code
(``threads/consumers.py``: 4401, 4403, 4404), and the page does not reconnect after a refusal
(``static/staff/extraction.js``). autobahn, under daphne, waits ``closeHandshakeTimeout`` seconds for the
peer to answer the close frame and then resets the connection. Its default is 1 s, and its timers are
batched to whole seconds (txaio's ``_BatchedTimer`` rounds the deadline down), so the reset came anywhere
from 0 to 1 s after the close: a browser that answered later found its answer refused by the reset, and
the page saw a close without the refusal code and reconnected (a browser test failed so, now and then, in
a full run; a raw client answering 0.1 s after the close was reset in 1 of 6 tries:
``tests/browser/test_harness.py::test_a_refusal_reaches_a_client_slow_to_read_it``).

``install`` sets the timeout on daphne's protocol class, which autobahn reads before the factory's options,
so it holds however daphne is started: ``make serve`` (``python -m oam_site.serve``), the ``daphne`` command
of ``deploy/systemd/oam-web.service``, or ``manage.py runserver``. ``oam_site.asgi`` calls it.
"""

from __future__ import annotations

#: Seconds a WebSocket peer has to answer the server's close frame before autobahn resets the connection;
#: with its whole-second timers the reset comes 4 to 5 s after the close. A peer that never answers holds
#: its connection that long at most.
CLOSE_HANDSHAKE_TIMEOUT = 5


def install() -> None:
    """Give every daphne WebSocket connection ``CLOSE_HANDSHAKE_TIMEOUT``; a no-op without daphne."""
    try:  # deferred: daphne is there only when daphne serves
        from daphne.ws_protocol import WebSocketProtocol
    except ImportError:  # another ASGI server
        return
    WebSocketProtocol.closeHandshakeTimeout = CLOSE_HANDSHAKE_TIMEOUT
