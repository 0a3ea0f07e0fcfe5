"""Extraction catches up after an LLM outage, and failed ranges are re-run (issue #34, "Degrade, don't fall over").

The outage: the LLM is a real OpenAI-compatible HTTP server on 127.0.0.1 (``ScriptedLlmServer``), stopped
while messages arrive and started again on the same port; the worker is the embedded Dramatiq worker with
its real ``StubBroker`` (delayed sends included). Backoff and horizon are set short so the test takes
seconds: the rule is the same at the defaults (2 s doubling to 300 s, for 6 hours).
"""

from __future__ import annotations

import time

import pytest

from memory.extraction.recovery import extraction_state
from memory.llm.adapters import LlmRequestRejected, reset_llm
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob, Memory, Message, Thread
from memory.services.extraction import job_run
from memory.tasks import QUEUE, extract_job
from tests.browser.harness import ScriptedLlmServer
from tests.ids import key

#: Claims the job gets while the LLM is down: more than ``OAM_EXTRACTION_MAX_ATTEMPTS`` (4), which used to fail it.
OUTAGE_CLAIMS = 6
#: Generous bound for the worker to get through the outage and catch up (embedding model warm-up included).
CATCH_UP_SECONDS = 90

BACKGROUND = {"extraction_mode": "background", "enable_context_summary": False}
INLINE = {"extraction_mode": "inline", "enable_context_summary": False}


def _wait(condition, what: str, seconds: float = CATCH_UP_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_messages_said_during_an_llm_outage_end_with_their_memories(api, settings, extraction_worker,
                                                                     fresh_extraction_tracker):
    """The LLM goes down for longer than the four attempts that used to fail the job; while it is down the
    range stays pending (GET .../extraction: the job is queued, stalled ``llm_unavailable``, watermark 0);
    it comes back at the same address and every message of the outage ends with its memory, no manual step."""
    server = ScriptedLlmServer().start()
    port = server._server.server_address[1]
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL, settings.OAM_LLM_TIMEOUT = server.base_url, "scripted", 2
    settings.OAM_LLM_MAX_RETRIES = 0
    settings.OAM_EXTRACTION_RETRY_BACKOFF_SECONDS, settings.OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS = 0.1, 0.3
    settings.OAM_EXTRACTION_RETRY_HORIZON_SECONDS = 600
    reset_llm()
    server.stop()  # the outage starts
    revived = None
    try:
        assert api.post("/api/threads", {"thread_id": "t-out", "user_id": "u1", "agent_id": "a1",
                                         "memory_extraction_config": BACKGROUND}).status_code == 201
        said = ["I love green tea.", "I live in Lisbon.", "My sister is called Ana."]
        for text in said:  # three add_messages calls: three jobs, the later ones behind the first
            resp = api.post("/api/threads/t-out/messages", {"messages": [{"role": "user", "content": text}]})
            assert resp.status_code == 201, resp.content
        first = ExtractionJob.objects.order_by("id").first()
        _wait(lambda: ExtractionJob.objects.get(pk=first.pk).attempts >= OUTAGE_CLAIMS,
              "the worker did not keep retrying while the LLM was down")
        state = api.get("/api/threads/t-out/extraction").json()
        assert (state["watermark"], state["pending_messages"], state["failed_ranges"]) == (0, 3, [])
        assert state["stalled"]["reason"] == "llm_unavailable" and state["stalled"]["job_id"] == first.pk
        assert state["last_job"]["status"] == "queued"
        job = ExtractionJob.objects.get(pk=first.pk)
        assert (job.status, job.failure) == ("queued", "transient") and "LlmUnavailable" in job.error
        assert not Memory.objects.exists()

        revived = ScriptedLlmServer(port=port).start()  # the outage ends, same address
        _wait(lambda: Thread.objects.get(pk=key("t-out")).extracted_through_seq == 3,
              "the thread did not catch up after the LLM came back")
        extract_job.broker.join(QUEUE, timeout=60_000)
        sources = sorted(source for m in Memory.objects.all() for source in m.source_message_ids)
        assert sources == sorted(m.public_id for m in Message.objects.filter(thread_id=key("t-out")))
        assert Memory.objects.count() == 3
        assert set(ExtractionJob.objects.values_list("status", flat=True)) == {"done"}
        state = api.get("/api/threads/t-out/extraction").json()
        assert (state["watermark"], state["pending_messages"], state["stalled"], state["failed_ranges"]) == (
            3, 0, None, [])
    finally:
        extract_job.broker.join(QUEUE, timeout=60_000)
        for llm_server in (server, revived):
            if llm_server is not None:
                llm_server.stop()
        reset_llm()


def test_a_permanently_failed_range_is_listed_and_rerun_through_the_api(api, settings, monkeypatch,
                                                                         fresh_extraction_tracker):
    """A 400 from the LLM fails the job for good (``failure`` permanent) and the watermark passes it; GET
    .../extraction lists the range with its reason; POST .../extraction/rerun queues it again, and its run
    stores the memories without moving the watermark."""
    bad = ScriptedLlm([LlmRequestRejected("400 Bad Request: model not found", status_code=400)])
    monkeypatch.setattr("memory.llm.adapters.get_llm", lambda: bad)
    assert api.post("/api/threads", {"thread_id": "t-bad", "user_id": "u1", "agent_id": "a1",
                                     "memory_extraction_config": INLINE}).status_code == 201
    ids = api.post("/api/threads/t-bad/messages", {"messages": [{"role": "user", "content": "I keep bees."}]}
                   ).json()["ids"]
    state = api.get("/api/threads/t-bad/extraction").json()
    assert state["watermark"] == 1  # a permanent failure counts as finished (spec) ...
    [failed] = state["failed_ranges"]  # ... and stays visible
    assert (failed["status"], failed["failure"], failed["from_seq"], failed["to_seq"]) == ("failed", "permanent", 1, 1)
    assert "400 Bad Request" in failed["error"]

    assert api.post("/api/threads/t-bad/extraction/rerun", {"job_id": failed["job_id"] + 99}).status_code == 404
    assert api.post("/api/threads/t-bad/extraction/rerun", {"job_id": "x"}).status_code == 422
    assert api.post("/api/threads/nope/extraction/rerun", {}).status_code == 404
    resp = api.post("/api/threads/t-bad/extraction/rerun", {"job_id": failed["job_id"]})
    assert resp.status_code == 200, resp.content
    [queued] = resp.json()["jobs"]
    assert (queued["job_id"], queued["status"], queued["trigger"], queued["failure"]) == (
        failed["job_id"], "queued", "rerun", None)
    assert "rerun by api after a permanent failure" in queued["error"]
    assert api.get("/api/threads/t-bad/extraction").json()["failed_ranges"] == []

    good = ScriptedLlm([{"memories": [{"memory_type": "fact", "content": "User keeps bees.",
                                       "source_message_ids": ["m1"]}]}])
    assert job_run(job_id=failed["job_id"], llm=good) == "done"  # what the worker does with the sent job
    assert [(m.content, m.source_message_ids) for m in Memory.objects.all()] == [("User keeps bees.", ids)]
    assert Thread.objects.get(pk=key("t-bad")).extracted_through_seq == 1
    assert api.post("/api/threads/t-bad/extraction/rerun", {}).json()["jobs"] == []  # nothing failed now


def test_the_extraction_state_reports_a_job_waiting_for_the_llm(db, fresh_extraction_tracker):
    """``extraction_state`` of a thread whose job waits out an unreachable LLM: stalled ``llm_unavailable``,
    the job queued with ``failure`` transient and its ``retry_at``."""
    from memory.client import AgentMemory, MemoryExtractionConfig
    from memory.llm.adapters import LlmUnavailable

    thread = AgentMemory(llm=ScriptedLlm([LlmUnavailable("connection refused")])).create_thread(
        thread_id="t-w", user_id="u", agent_id="a",
        memory_extraction_config=MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False))
    thread.add_messages([{"role": "user", "content": "hello"}])
    state = extraction_state(thread=Thread.objects.get(pk=key("t-w")))
    assert state["stalled"]["reason"] == "llm_unavailable" and "retries at" in state["stalled"]["detail"]
    assert (state["last_job"]["status"], state["last_job"]["failure"]) == ("queued", "transient")
    assert state["last_job"]["retry_at"] and state["watermark"] == 0 and state["failed_ranges"] == []


@pytest.mark.parametrize("body", [{"jobId": 3}, {"job": 3}, [3], '"x"', "null", "", {"job_id": True},
                                  {"job_id": "3"}])
def test_a_rerun_body_that_is_not_the_schema_is_a_422_not_a_rerun_of_everything(api, body):
    """An outside attack: a misspelt key, a list, a string, null or no body re-ran every failed range (200), and
    ``true`` / ``"3"`` were read as jobs 1 and 3."""
    resp = api.post("/api/threads", {"thread_id": "t-body", "user_id": "u1", "agent_id": "a1"})
    assert resp.status_code == 201, resp.content
    resp = api.post("/api/threads/t-body/extraction/rerun", body)
    assert resp.status_code == 422, resp.content
