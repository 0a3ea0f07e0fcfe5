"""Request bodies refused before daphne reads them (``oam_site.request_gate``).

A real daphne process on 127.0.0.1 with a SQLite file of its own; clients are raw
sockets, so the body really is offered to the server; its peak memory is read
from ``/proc/<pid>/status`` (``VmHWM``). Before the gate, a 100 MB upload without
a key grew daphne by 1.1 GB.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from tests.browser.harness import migrate_with_key, server_env, start_daphne, stop_process

MB = 1024 * 1024
#: "Does not grow the server by more than a few MB".
GROWTH_MB = 8
BOUNDARY = "oam-gate-boundary"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(daphne process, port, an active API key)."""
    directory = tmp_path_factory.mktemp("gate")
    env = server_env(directory)
    env["OAM_EMBEDDED_WORKER"] = "false"
    key = migrate_with_key(env, "gate")
    process, url = start_daphne(env, Path(directory) / "daphne.log")
    try:
        yield process, int(url.rsplit(":", 1)[1]), key
    finally:
        stop_process(process)


def peak_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status)[1]) / 1024


def upload(port: int, size: int, *, key: str | None = None, expect: bool = False,
           path: str = "/api/threads/t1/images") -> tuple[int | None, bytes]:
    """POST a multipart image of ``size`` bytes; return (status or None, response bytes)."""
    head = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n"
            "Content-Type: image/png\r\n\r\n").encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    headers = [f"POST {path} HTTP/1.1", "Host: 127.0.0.1",
               f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
               f"Content-Length: {len(head) + size + len(tail)}"]
    if key:
        headers.append(f"Authorization: Bearer {key}")
    if expect:
        headers.append("Expect: 100-continue")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        reply = b""
        if expect:  # like curl: wait for "100 Continue" or a final answer before sending the body
            reply = sock.recv(65536)
            if not reply.startswith(b"HTTP/1.1 100"):
                return int(reply.split()[1]), reply
        try:
            sock.sendall(head)
            chunk = b"\0" * MB
            for offset in range(0, size, MB):
                sock.sendall(chunk[: min(MB, size - offset)])
            sock.sendall(tail)
        except OSError:
            pass  # the server answered and closed: the rest of the body was never read
        try:
            while not re.search(rb"HTTP/1.1 [2-5]\d\d", reply):
                data = sock.recv(65536)
                if not data:
                    break
                reply += data
        except OSError:
            pass
    found = re.search(rb"HTTP/1.1 ([2-5]\d\d)", reply)
    return (int(found[1]) if found else None), reply


def api(port: int, method: str, path: str, body: dict, key: str) -> tuple[int, dict]:
    data = json.dumps(body).encode()
    request = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               f"Authorization: Bearer {key}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(request + data)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body_bytes = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body_bytes or b"null")


def test_a_100_mb_upload_without_a_key_does_not_grow_the_server(live):
    process, port, _ = live
    before = peak_mb(process.pid)
    status, _ = upload(port, 100 * MB)
    assert peak_mb(process.pid) - before < GROWTH_MB
    assert status in (413, None)  # refused by its size, before a byte of the body is read


def test_uploads_under_the_size_cap_without_a_valid_key_are_401_before_the_body(live):
    process, port, key = live
    before = peak_mb(process.pid)
    for bad_key in (None, "not-a-key"):
        status, _ = upload(port, 30 * MB, key=bad_key)
        assert status in (401, None)
    assert peak_mb(process.pid) - before < GROWTH_MB
    # a client that waits for "100 Continue" (curl) gets the answer instead, and sends nothing
    assert upload(port, 30 * MB, expect=True)[0] == 401
    assert upload(port, 30 * MB, key="not-a-key", expect=True)[0] == 401
    assert upload(port, 100 * MB, key=key, expect=True)[0] == 413
    assert json.loads(upload(port, 30 * MB, expect=True)[1].split(b"\r\n\r\n", 1)[1])["field"] is None


def test_requests_with_a_valid_key_pass_the_gate(live):
    _, port, key = live
    status, answer = api(port, "POST", "/api/threads", {"thread_id": "t1", "metadata": {"note": "x" * (2 * MB)}}, key)
    assert status == 422 and answer["detail"][0]["loc"] == ["body", "metadata"]  # the API read the 2 MB body
    status, thread = api(port, "POST", "/api/threads", {"thread_id": "t1", "metadata": {"note": "x" * 60_000}}, key)
    assert status == 201 and len(thread["metadata"]["note"]) == 60_000
    status, body = upload(port, 25 * MB, key=key)  # over the thread's 20 MiB image limit: the API answers
    assert status == 422 and b"image" in body


def test_bodies_with_wrong_keys_count_against_the_address_and_end_in_429(tmp_path):
    """The gate answers wrong keys itself (the body is never read), so it must count them too
    (``threads.throttling``): past ``OAM_API_AUTH_FAILURE_LIMIT`` the address gets 429 with Retry-After,
    before the key is even looked up, a right key included."""
    env = server_env(tmp_path)
    env.update({"OAM_EMBEDDED_WORKER": "false", "OAM_API_AUTH_FAILURE_LIMIT": "3"})
    key = migrate_with_key(env, "gate")
    process, url = start_daphne(env, tmp_path / "daphne.log")
    try:
        port = int(url.rsplit(":", 1)[1])
        statuses = [upload(port, 1000, key=f"wrong-key-{i}", expect=True)[0] for i in range(4)]
        assert statuses == [401, 401, 401, 429]
        status, reply = upload(port, 1000, key=key, expect=True)
        assert status == 429 and re.search(rb"Retry-After: \d+", reply)
    finally:
        stop_process(process)


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply


def test_a_request_line_or_header_over_twisteds_line_limit_is_answered_not_dropped(live):
    """A schemathesis run met an 18 KB query string: Twisted dropped the connection without an answer."""
    _, port, key = live
    query = "target_record_id=" + "%C3%8B" * 3100  # 18.6 KB, over HTTPChannel.MAX_LENGTH (16,384)
    reply = _raw(port, f"DELETE /api/threads/t1/links?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                       f"Authorization: Bearer {key}\r\n\r\n".encode())
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 414 ") and b"request line" in json.loads(body)["detail"].encode()
    reply = _raw(port, f"GET /api/threads HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Long: {'a' * 17000}\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 431 ")
    status, _ = api(port, "GET", "/api/threads", {}, key)  # the server is fine afterwards
    assert status == 200


def _first_answer(port: int, head: list[str]) -> int:
    """Send a request's head with ``Expect: 100-continue`` and no body; return the status of the first answer
    (100 when the server would read the body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join([*head, "Host: 127.0.0.1", "Expect: 100-continue"]) + "\r\n\r\n").encode())
        return int(sock.recv(65536).split()[1])


@pytest.mark.parametrize("head", [
    # Twisted decodes the body as chunked when any Transfer-Encoding says so (found by an outside attack)
    ["POST /api/threads HTTP/1.1", "Transfer-Encoding: identity", "Transfer-Encoding: chunked"],
    ["POST /mcp HTTP/1.1", "Transfer-Encoding: identity", "Transfer-Encoding: chunked"],
    # daphne honours a client's Daphne-Root-Path and Django routes /x/api/... to the API
    ["POST /x/api/threads HTTP/1.1", "Daphne-Root-Path: /x", "Content-Length: 4000000"],
    ["POST /x/%61pi/threads HTTP/1.1", "Daphne-Root-Path: /x", "Content-Length: 4000000"],
    # percent-encoded paths decode to /mcp and /api
    ["POST /mc%70 HTTP/1.1", "Content-Length: 4000000"],
    ["POST /%61pi/threads HTTP/1.1", "Content-Length: 4000000"],
])
def test_a_body_without_a_key_is_refused_however_its_path_and_length_are_spelled(live, head):
    _, port, _ = live
    assert _first_answer(port, head) == 401
