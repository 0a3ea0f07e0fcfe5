"""WebSocket handshakes refused by a real daphne: wrong keys, a flooding address, unrouted paths (issue #29).

From an outside attack on a live daphne: 620 wrong-key handshakes in 4 s all got 403, never 429, did not count
toward the per-address wrong-key cap and each wrote an ``oam_access_log`` row; an upgrade to a path no WebSocket
route matches answered 500 with a ``ValueError: No route found`` traceback in the log. Clients are raw sockets,
so the test sees exactly what goes over the wire (``docs/api.md``, the WebSocket refusals).
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.browser.harness import ROOT, migrate_with_key, server_env, start_daphne, stop_process

#: ``OAM_API_AUTH_FAILURE_LIMIT`` of the server: wrong keys a minute per address before 429.
LIMIT = 3


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(daphne process, port, an active API key, environment, log path) with a wrong-key cap of ``LIMIT``."""
    directory = tmp_path_factory.mktemp("wsrefusals")
    env = server_env(directory)
    env.update({"OAM_EMBEDDED_WORKER": "false", "OAM_API_AUTH_FAILURE_LIMIT": str(LIMIT)})
    key = migrate_with_key(env, "ws")
    subprocess.run([sys.executable, "manage.py", "shell", "-c",
                    "from memory.client import AgentMemory; AgentMemory(llm=None).create_thread(thread_id='t1')"],
                   cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=300)
    log = Path(directory) / "daphne.log"
    process, url = start_daphne(env, log)
    try:
        yield process, int(url.rsplit(":", 1)[1]), key, env, log
    finally:
        stop_process(process)


def upgrade(port: int, path: str, *, key: str | None = None, origin: bool = False) -> tuple[int, dict, bytes]:
    """A WebSocket handshake for ``path`` (``key`` as ``Authorization: Bearer``; ``origin``: same-origin, as
    a browser sends): (HTTP status, headers, what follows them: the body of a refusal, or the first frame
    after a 101)."""
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}"]
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    if origin:
        lines.append(f"Origin: http://127.0.0.1:{port}")
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        status = int(head.split()[1])
        headers = dict(line.decode("latin-1").lower().split(": ", 1) for line in head.split(b"\r\n")[1:])
        wanted = int(headers.get("content-length", 0)) if status != 101 else 4
        try:
            while len(rest) < wanted and (chunk := sock.recv(65536)):
                rest += chunk
        except OSError:
            pass
    return status, headers, rest


def close_code(frame: bytes) -> int | None:
    """The code of a close frame (an unmasked server frame), None for any other frame."""
    return int.from_bytes(frame[2:4], "big") if frame[:1] == b"\x88" else None


def access_rows(env: dict) -> list[list]:
    """(channel, project slug, status) of every access record of the server's database, in order."""
    code = ("import json; from threads.models import AccessRecord; print(json.dumps(list(AccessRecord.objects"
            ".order_by('id').values_list('channel', 'project__slug', 'status'))))")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True, timeout=300).stdout
    return json.loads(out.strip().splitlines()[-1])


def api_status(port: int, key: str) -> tuple[int, dict]:
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"GET /api/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                     f"Connection: close\r\n\r\n".encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head = reply.partition(b"\r\n\r\n")[0]
    return int(head.split()[1]), dict(line.decode("latin-1").lower().split(": ", 1) for line in head.split(b"\r\n")[1:])


@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/threads/a%2Fb/extraction/", "/api/threads", "/staff/"])
def test_an_upgrade_to_a_path_no_websocket_route_matches_is_a_404_without_a_traceback(live, path):
    """Was: HTTP 500, and ``ValueError: No route found`` with its traceback in the server's log."""
    _, port, key, _, log = live
    for kwargs in ({"origin": True}, {"key": "not-a-key"}, {"key": key}):
        status, headers, body = upgrade(port, path, **kwargs)
        assert status == 404, (kwargs, status, body)
        assert json.loads(body)["detail"].startswith("Not found")
    text = log.read_text(errors="replace")
    assert "No route found" not in text and "Traceback" not in text, text[-3000:]


def test_wrong_keys_at_the_websocket_count_toward_the_address_cap_and_get_429_past_it(live):
    """Was: every wrong key 403 at the handshake, never 429, not counted with the HTTP API's wrong keys, one
    access record each. Now a wrong key is HTTP 401 at the handshake, counted against the address with the
    API's (``threads.throttling``); past ``OAM_API_AUTH_FAILURE_LIMIT`` a minute it is 429 with Retry-After,
    before the key is looked up (a right key too), and it writes no access record."""
    _, port, key, env, log = live
    if 60 - time.time() % 60 < 20:  # the counts are per clock minute: start the flood in a fresh one
        time.sleep(60 - time.time() % 60 + 0.5)
    # a right key: accepted; refusals of a right key say what is wrong and do not count
    status, _, frame = upgrade(port, "/ws/threads/t1/extraction/", key=key)
    assert status == 101 and frame[:1] == b"\x81"  # the state frame
    assert upgrade(port, "/ws/threads/nope/extraction/", key=key)[0] == 404
    assert upgrade(port, "/ws/threads/t1/extraction/?project=other", key=key)[0] == 403
    # wrong keys: the API's and the WebSocket's share one count
    assert api_status(port, "wrong-0")[0] == 401
    for i in range(1, LIMIT):
        status, _, body = upgrade(port, "/ws/threads/t1/extraction/", key=f"wrong-{i}")
        assert status == 401 and json.loads(body)["detail"].startswith("Unauthorized"), (status, body)
    flood = [upgrade(port, "/ws/threads/t1/extraction/", key=f"wrong-{i}") for i in range(LIMIT, LIMIT + 60)]
    assert {status for status, _, _ in flood} == {429}
    assert all(re.fullmatch(r"\d+", headers.get("retry-after", "")) for _, headers, _ in flood)
    assert json.loads(flood[0][2])["detail"].startswith("Too many requests")
    assert upgrade(port, "/ws/threads/t1/extraction/", key=key)[0] == 429  # the right key waits too
    assert upgrade(port, f"/ws/threads/t1/extraction/?api_key={key}")[0] == 429
    status, headers = api_status(port, key)
    assert status == 429 and "retry-after" in headers  # and so does the HTTP API
    # a browser (no key) is still accepted and closed with a code it can show
    status, _, frame = upgrade(port, "/ws/threads/t1/extraction/", origin=True)
    assert status == 101 and close_code(frame) == 4401
    # one access record per counted refusal, none past the cap
    rows = access_rows(env)
    websocket = [row for row in rows if row[0] == "websocket"]
    assert websocket == [["websocket", "default", 101], ["websocket", "default", 4404],
                         ["websocket", None, 4403]] + [["websocket", None, 4401]] * (LIMIT - 1), rows
    assert "Traceback" not in log.read_text(errors="replace")
