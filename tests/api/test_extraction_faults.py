"""Deletes while the LLM hangs: they return at once and the running job writes nothing.

The LLM is a real OpenAI-compatible HTTP server on 127.0.0.1 (``ScriptedLlmServer``)
whose answers wait until the test releases them; the worker is the embedded
Dramatiq worker with its real ``StubBroker``; the database a real SQLite file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from memory.llm.adapters import reset_llm
from memory.models import ExtractionJob, Memory, Message, Thread
from memory.tasks import QUEUE, extract_job
from tests.browser.harness import ScriptedLlmServer, scripted_reply
from tests.ids import key

#: The issue's bound for a delete on a thread whose LLM hangs.
DELETE_SECONDS = 2.0
#: Generous bound for the worker to reach the LLM (embedding model warm-up included).
REACH_SECONDS = 60


@pytest.fixture
def hung_llm(settings) -> Iterator[tuple[ScriptedLlmServer, threading.Event]]:
    """An LLM endpoint that answers (``scripted_reply``) only once the event is set; settings point at it."""
    release = threading.Event()

    def answer(body):
        release.wait(120)
        return scripted_reply(body)

    server = ScriptedLlmServer(handler=answer).start()
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL, settings.OAM_LLM_TIMEOUT = server.base_url, "scripted", 120
    settings.OAM_LLM_MAX_RETRIES = 0
    reset_llm()
    try:
        yield server, release
    finally:
        release.set()
        extract_job.broker.join(QUEUE, timeout=60_000)
        server.stop()
        reset_llm()


def _wait_for_requests(server: ScriptedLlmServer, n: int) -> None:
    deadline = time.monotonic() + REACH_SECONDS
    while len(server.requests) < n:
        assert time.monotonic() < deadline, f"the worker never asked the LLM ({len(server.requests)} of {n})"
        time.sleep(0.05)


def _thread_with_hung_job(api, thread_id: str, server: ScriptedLlmServer, requests: int) -> list[str]:
    resp = api.post("/api/threads", {"thread_id": thread_id, "user_id": "u1", "agent_id": "a1",
                                     "memory_extraction_config": {"extraction_mode": "background",
                                                                  "enable_context_summary": False}})
    assert resp.status_code == 201, resp.content
    resp = api.post(f"/api/threads/{thread_id}/messages", {"messages": [
        {"role": "user", "content": "I love green tea."}, {"role": "user", "content": "I live in Lisbon."}]})
    assert resp.status_code == 201, resp.content
    _wait_for_requests(server, requests)
    assert ExtractionJob.objects.get(thread_id=key(thread_id)).status == "running"
    return resp.json()["ids"]


def test_a_thread_delete_does_not_wait_for_a_hung_llm(api, extraction_worker, fresh_extraction_tracker, hung_llm):
    server, release = hung_llm
    _thread_with_hung_job(api, "t-hung", server, 1)
    started = time.monotonic()
    resp = api.delete("/api/threads/t-hung")
    elapsed = time.monotonic() - started
    assert resp.status_code == 204 and elapsed < DELETE_SECONDS, (resp.status_code, elapsed)
    release.set()
    assert extract_job.broker.join(QUEUE, timeout=60_000) is None  # the worker came back from the LLM...
    # ...and its commit found its rows gone: it wrote nothing
    assert not Thread.objects.filter(pk=key("t-hung")).exists()
    assert not Memory.objects.exists() and not Message.objects.exists() and not ExtractionJob.objects.exists()


def test_a_message_delete_fences_the_running_job(api, extraction_worker, fresh_extraction_tracker, hung_llm):
    server, release = hung_llm
    ids = _thread_with_hung_job(api, "t-hung", server, 1)
    started = time.monotonic()
    resp = api.delete(f"/api/threads/t-hung/messages/{ids[0]}")
    elapsed = time.monotonic() - started
    assert resp.status_code == 204 and elapsed < DELETE_SECONDS, (resp.status_code, elapsed)
    _wait_for_requests(server, 2)  # the fenced job runs again, in the other worker thread
    release.set()
    extract_job.broker.join(QUEUE, timeout=60_000)
    # the first run (it saw both messages) wrote nothing; the second one saw only the message left
    assert "I love green tea." in str(server.requests[0]["messages"]) and \
        "I love green tea." not in str(server.requests[1]["messages"])
    assert [m.source_message_ids for m in Memory.objects.all()] == [[ids[1]]]
    job = ExtractionJob.objects.get()
    assert (job.status, job.attempts, job.fences) == ("done", 2, 1)  # the fenced claim is not an attempt
    assert Thread.objects.get(pk=key("t-hung")).extracted_through_seq == 2
    state = api.get("/api/threads/t-hung/extraction").json()
    assert state["stalled"] is None and state["pending_messages"] == 0


@pytest.fixture
def admin_browser(db):
    """A signed-in superuser's browser for the Django admin."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.create_superuser("admin-edge", "admin@example.com", "pw-for-tests-only")
    browser = Client()
    browser.force_login(user)
    return browser


@pytest.mark.parametrize("edge", ["api", "admin"])
def test_a_thread_deleted_through_any_edge_leaves_its_running_extraction_and_is_detached(
        edge, api, admin_browser, extraction_worker, fresh_extraction_tracker, hung_llm):
    """The admin's thread delete is the API's: it returns without waiting for the hung LLM, the running job's
    commit finds its rows gone and writes nothing, and this process forgets the thread (``extraction.detach``)."""
    from django.contrib.admin.utils import quote

    from memory.extraction import tracker

    server, release = hung_llm
    _thread_with_hung_job(api, "t-hung", server, 1)
    with tracker._tracker.cond:
        assert key("t-hung") in tracker._tracker.attached and key("t-hung") in tracker._tracker.accepted
    started = time.monotonic()
    if edge == "api":
        resp = api.delete("/api/threads/t-hung")
        assert resp.status_code == 204, resp.content
    else:
        resp = admin_browser.post(f"/admin/memory/thread/{quote(key('t-hung'))}/delete/", {"post": "yes"})
        assert resp.status_code == 302, resp.content
    elapsed = time.monotonic() - started
    assert elapsed < DELETE_SECONDS, elapsed
    with tracker._tracker.cond:
        assert key("t-hung") not in tracker._tracker.attached and key("t-hung") not in tracker._tracker.accepted
    release.set()
    assert extract_job.broker.join(QUEUE, timeout=60_000) is None
    assert not Thread.objects.filter(pk=key("t-hung")).exists()
    assert not Memory.objects.exists() and not Message.objects.exists() and not ExtractionJob.objects.exists()


@pytest.mark.parametrize("edge", ["api", "admin"])
def test_a_message_deleted_through_any_edge_fences_the_running_job(
        edge, api, admin_browser, extraction_worker, fresh_extraction_tracker, hung_llm):
    """The admin's message delete fences the thread's running extraction as the API's does: the first run
    writes nothing and the job runs again without the deleted message."""
    from django.contrib.admin.utils import quote

    server, release = hung_llm
    ids = _thread_with_hung_job(api, "t-hung", server, 1)
    if edge == "api":
        assert api.delete(f"/api/threads/t-hung/messages/{ids[0]}").status_code == 204
    else:
        resp = admin_browser.post(f"/admin/memory/message/{quote(key(ids[0]))}/delete/", {"post": "yes"})
        assert resp.status_code == 302, resp.content
    _wait_for_requests(server, 2)
    release.set()
    extract_job.broker.join(QUEUE, timeout=60_000)
    assert "I love green tea." not in str(server.requests[1]["messages"])
    assert [m.source_message_ids for m in Memory.objects.all()] == [[ids[1]]]
    assert (ExtractionJob.objects.get().status, ExtractionJob.objects.get().attempts) == ("done", 2)
