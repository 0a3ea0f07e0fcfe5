"""The browser harness works: Chromium logs into the admin served by daphne, sees the imported
LoCoMo thread, loads the admin's static CSS, and watches a thread's extraction over the WebSocket.

Page tests of the staff UI build on the same fixtures (``tests/browser/conftest.py``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import time
import uuid
from urllib.parse import urlsplit

import pytest
from django.contrib.admin.utils import quote
from playwright.sync_api import expect

from memory.core.ids import stored_id
from memory.dev import locomo
from tests.browser.harness import LiveAppError, login, open_socket


def _session_messages(sample_id: str, number: int) -> list[dict]:
    """The messages ``import_locomo`` stored for one session, read from the shared LoCoMo file."""
    sample = next(s for s in locomo.iter_samples(locomo.default_data_path()) if s.sample_id == sample_id)
    session = next(s for s in sample.sessions if s.number == number)
    return locomo.session_messages(sample_id, session)


def test_staff_logs_into_the_admin_and_sees_the_imported_thread(page, live_app, screenshot):
    login(page, live_app.url, *live_app.staff, login_path="/admin/login/", next_path="/admin/")
    expect(page).to_have_url(re.compile(r"/admin/$"))
    expect(page.locator("#site-name")).to_be_visible()
    expect(page.get_by_role("link", name="Log out").or_(page.get_by_role("button", name="Log out"))).to_be_visible()

    thread_id = live_app.seed["thread_id"]
    stored = stored_id(live_app.seed["default_project_id"], thread_id)  # the admin's key (memory.records.tenancy)
    page.goto(f"/admin/memory/thread/{quote(stored)}/change/")
    expect(page.locator("h1")).to_contain_text("Change thread")
    messages = _session_messages(live_app.seed["sample"], 1)
    assert [m["id"] for m in messages] == live_app.seed["message_ids"]
    inline = page.locator(".inline-group").filter(has_text=messages[0]["content"])
    expect(inline.locator("tbody tr.has_original")).to_have_count(len(messages))
    for message in (messages[0], messages[len(messages) // 2], messages[-1]):
        expect(inline).to_contain_text(message["content"])
        expect(inline).to_contain_text(message["role"])
    path = screenshot(page, "admin-thread-change")
    assert path.stat().st_size > 10_000  # a real rendering, not an empty canvas


def test_the_admin_css_is_served_by_daphne(page, live_app):
    status, headers, body = live_app.get("/static/admin/css/base.css")
    assert status == 200 and headers["content-type"].startswith("text/css") and b"body" in body

    styles = []
    page.on("response", lambda r: styles.append((r.url, r.status)) if r.request.resource_type == "stylesheet" else None)
    page.goto("/admin/login/")
    page.wait_for_load_state("networkidle")
    assert any(url.endswith("/static/admin/css/base.css") for url, _ in styles), styles
    assert all(status == 200 for _, status in styles), styles
    # The stylesheet applies: the admin's header gets its dark background, not the default transparent one.
    background = page.locator("#header").evaluate("el => getComputedStyle(el).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background


def test_a_user_who_is_not_staff_cannot_log_in(page, live_app):
    with pytest.raises(AssertionError, match="login as 'viewer'"):
        login(page, live_app.url, *live_app.viewer, login_path="/admin/login/")
    status, headers, _ = live_app.get("/admin/")
    assert status == 302 and "/admin/login/" in headers["location"]


def test_the_extraction_websocket_accepts_a_staff_session(logged_in_page, live_app):
    thread_id = live_app.seed["thread_id"]
    socket = open_socket(logged_in_page, f"{live_app.ws_url}/ws/threads/{thread_id}/extraction/")
    assert socket.opened, socket.close_code
    state = socket.wait_for("state", timeout=30)
    # Nothing of the imported history is extracted yet, and the boot sweep queued nothing for it.
    assert state["thread_id"] == thread_id
    assert state["watermark"] == 0
    assert state["last_job"] is None
    socket.close()


def test_the_extraction_websocket_refuses_an_anonymous_browser(page, live_app):
    page.goto("/admin/login/")  # same origin as the socket: only the missing session is wrong
    socket = open_socket(page, f"{live_app.ws_url}/ws/threads/{live_app.seed['thread_id']}/extraction/")
    # accepted, then closed with 4401 at once, so the browser sees why (a refused handshake is 1006 to it)
    page.wait_for_function("(key) => window.__oamSockets[key].closeCode !== null", arg=socket.key)
    assert page.evaluate("(key) => window.__oamSockets[key].closeCode", socket.key) == 4401
    assert socket.events() == []  # nothing about the thread was sent


def test_extraction_in_the_server_streams_its_events_to_the_browser(logged_in_page, live_app):
    if live_app.llm_mode == "none":
        pytest.skip("OAM_BROWSER_LLM=none: the live server has no LLM to extract with")
    thread_id = f"browser-ws-{uuid.uuid4().hex[:8]}"
    status, body = live_app.api("POST", "/threads", {"thread_id": thread_id, "user_id": "browser-user",
                                                     "agent_id": "browser-agent"})
    assert status == 201, body
    socket = open_socket(logged_in_page, f"{live_app.ws_url}/ws/threads/{thread_id}/extraction/")
    assert socket.opened, socket.close_code
    assert socket.wait_for("state")["watermark"] == 0

    status, body = live_app.api("POST", f"/threads/{thread_id}/messages", {"messages": [
        {"role": "user", "content": "I love green tea."},
        {"role": "user", "content": "I live in Lisbon."},
    ]})
    assert status == 201, body
    ids = body["ids"]
    timeout = 300 if live_app.llm_mode == "local" else 90
    logged_in_page.wait_for_function(
        "(key) => window.__oamSockets[key].events.some((e) => ['finished', 'failed'].includes(e.event))",
        arg=socket.key, timeout=timeout * 1000)
    names = [e["event"] for e in socket.events()]
    assert names[:3] == ["state", "queued", "started"], names
    assert names[-1] == "finished", socket.events()
    finished = socket.events()[-1]
    assert finished["thread_id"] == thread_id and finished["watermark"] == 2

    if live_app.llm_mode == "scripted":  # deterministic replies: check what was stored from them
        created = [e for e in socket.events() if e["event"] == "memory_created"]
        assert len(created) == 2 == finished["memories_created"]
        stored = live_app.python(
            f"from memory.models import Memory\nrows = Memory.objects.filter(thread_id=key({thread_id!r}))\n"
            "result = {m.public_id: [m.content, m.source_message_ids] for m in rows}"
        )
        assert sorted(stored.values()) == [["user said: I live in Lisbon.", [ids[1]]],
                                           ["user said: I love green tea.", [ids[0]]]]
        assert {e["memory_id"] for e in created} == set(stored)
        assert any(r["response_format"]["json_schema"]["name"] == "extracted_memories" for r in live_app.llm.requests)
    socket.close()


def test_live_app_helpers_reach_the_server_database(live_app):
    seed = live_app.seed
    counts = live_app.python(
        "from memory.models import ExtractionJob, Memory, Message, Thread\n"
        f"result = {{'threads': Thread.objects.filter(user_id={seed['sample']!r}).count(),\n"
        f"          'messages': Message.objects.filter(thread__user_id={seed['sample']!r}).count(),\n"
        f"          'memories': {{m.public_id: m.status for m in "
        f"Memory.objects.filter(thread_id=key({seed['thread_id']!r}))}},\n"
        f"          'jobs': ExtractionJob.objects.filter(thread__user_id={seed['sample']!r}).count()}}"
    )
    sample = next(s for s in locomo.iter_samples(locomo.default_data_path()) if s.sample_id == seed["sample"])
    assert counts["threads"] == len(sample.sessions) == len(seed["thread_ids"])
    assert counts["messages"] == sample.turn_count
    assert counts["jobs"] == 0  # the server's boot sweep left the imported threads alone
    memories = seed["memory_ids"]
    assert counts["memories"] == {memories["superseded"]: "invalid", memories["current"]: "valid",
                                  memories["preference"]: "valid"}

    status, links = live_app.api("GET", f"/threads/{seed['thread_id']}/links")
    assert status == 200 and links["count"] == 2
    assert {(r["relation_id"], r["relation_type"], r["source_record_id"], r["target_record_id"])
            for r in links["items"]} == {
        (seed["relation_ids"]["supersedes"], "supersedes", memories["current"], memories["superseded"]),
        (seed["relation_ids"]["supports"], "supports", memories["preference"], memories["current"]),
    }
    assert live_app.api("GET", "/threads/conv-30-s1", key="wrong-key")[0] == 401
    with pytest.raises(LiveAppError, match="ZeroDivisionError"):
        live_app.python("result = 1 / 0")


def _slow_websocket_client(live_app, path: str, wait: float) -> tuple[bytes, OSError | None]:
    """Open ``path`` over a raw TCP socket as a same-origin client with no session, read nothing for ``wait``
    seconds (a busy browser), then read until a close frame's code has arrived and answer it, as a browser
    does: (the bytes read, the error that sending the answer met, None when it was sent)."""
    where = urlsplit(live_app.url)
    conn = socket.create_connection((where.hostname, where.port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall((f"GET {path} HTTP/1.1\r\nHost: {where.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nOrigin: {live_app.url}\r\n\r\n").encode())
    time.sleep(wait)
    data = b""
    with conn:
        while chunk := conn.recv(4096):
            data += chunk
            frames = data.partition(b"\r\n\r\n")[2]
            if frames[:1] == b"\x88" and len(frames) >= 4:  # a close frame with its code: answer it
                try:
                    conn.sendall(b"\x88\x82\x00\x00\x00\x00" + frames[2:4])  # masked with a zero mask
                except OSError as exc:  # the answer could not be sent: Chromium reports 1006
                    return data, exc
                with contextlib.suppress(ConnectionResetError):  # autobahn resets once the handshake is done
                    conn.recv(4096)
                break
    return data, None


def test_a_refusal_reaches_a_client_slow_to_read_it(live_app):
    """A browser busy for two seconds still gets its refusal (4401) closed cleanly, so it does not reconnect
    (static/staff/extraction.js): its answer to the close frame is not met by a reset. With autobahn's
    default close-handshake timeout (1 s, on whole-second timers) it was, and the page saw a close without
    the refusal code (``oam_site.websocket_timeouts``, installed by ``oam_site.asgi`` however daphne starts)."""
    data, answer_error = _slow_websocket_client(live_app, f"/ws/threads/{live_app.seed['thread_id']}/extraction/",
                                                2.0)
    head, _, frames = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), data
    assert frames[:1] == b"\x88" and int.from_bytes(frames[2:4], "big") == 4401, data
    assert answer_error is None, answer_error
