"""Extraction over HTTP: config on POST /api/threads, state at GET /api/threads/{id}/extraction."""

import pytest

from memory.llm.adapters import reset_llm
from memory.models import ExtractionJob, Thread
from tests.api.helpers import add_messages, error_fields
from tests.ids import key

pytestmark = pytest.mark.usefixtures("fresh_extraction_tracker")


def test_a_thread_is_created_with_its_extraction_config(api):
    resp = api.post("/api/threads", {"thread_id": "t1", "memory_extraction_config": {
        "extraction_mode": "inline", "memory_extraction_frequency": 4,
        "memory_extraction_inherit_message_metadata": ["tenant"], "memory_extraction_custom_instructions": "Food."}})
    assert resp.status_code == 201, resp.content
    config = Thread.objects.get(pk=key("t1")).config
    assert (config["extraction_mode"], config["memory_extraction_frequency"]) == ("INLINE", 4)  # given "inline"
    assert config["memory_extraction_inherit_message_metadata"] == ["tenant"]
    assert "memory_extraction_window" not in config  # the rest: unset, resolved to defaults on read
    state = api.get("/api/threads/t1/extraction").json()
    assert state["config"]["memory_extraction_window"] == -1
    assert state["config"]["memory_extraction_custom_instructions"] == "Food."


def test_an_unset_extract_memories_stays_unset_through_updates_without_an_llm(api, settings):
    """No LLM on the server: a stored config used to store the resolved extract_memories=True, so the
    next PATCH answered 422 loc body.llm 'extract_memories=True needs an LLM' (docs/python.md: an omitted
    extract_memories leaves extraction off without an LLM)."""
    settings.OAM_LLM_BASE_URL = ""
    reset_llm()
    resp = api.post("/api/threads", {"thread_id": "t1", "memory_extraction_config": {"memory_extraction_window": 5}})
    assert resp.status_code == 201, resp.content
    assert "extract_memories" not in Thread.objects.get(pk=key("t1")).config
    resp = api.patch("/api/threads/t1", {"memory_extraction_config": {"memory_extraction_window": 6}})
    assert resp.status_code == 200, resp.content
    config = Thread.objects.get(pk=key("t1")).config
    assert config["memory_extraction_window"] == 6 and "extract_memories" not in config
    # Python, the same service: still fine, and an explicit True is still refused without an LLM.
    from memory.client import AgentMemory, MemoryExtractionConfig
    client = AgentMemory(llm=None)
    client.update_thread("t1", memory_extraction_config=MemoryExtractionConfig(memory_extraction_window=7))
    assert "extract_memories" not in Thread.objects.get(pk=key("t1")).config
    with pytest.raises(ValueError, match="^llm: extract_memories=True needs an LLM"):
        client.update_thread("t1", memory_extraction_config=MemoryExtractionConfig(extract_memories=True))
    resp = api.patch("/api/threads/t1", {"memory_extraction_config": {"extract_memories": True}})
    assert resp.status_code == 422 and "llm" in error_fields(resp)


@pytest.mark.parametrize("config, field", [
    ({"extraction_mode": "soon"}, "extraction_mode"),
    ({"memory_extraction_window": "5"}, "memory_extraction_window"),
    ({"colour": "red"}, "colour"),
    ({"background_extraction_queue_put_timeout_seconds": -1}, "background_extraction_queue_put_timeout_seconds"),
])
def test_a_bad_extraction_config_is_422_naming_the_field(api, config, field):
    resp = api.post("/api/threads", {"thread_id": "t1", "memory_extraction_config": config})
    assert resp.status_code == 422
    assert field in error_fields(resp)
    assert not Thread.objects.exists()


def test_the_extraction_state_of_a_thread(api, make_thread, settings):
    make_thread(thread_id="t1", memory_extraction_config={"extraction_mode": "background"})
    state = api.get("/api/threads/t1/extraction").json()
    assert state == {**state, "thread_id": "t1", "enabled": False, "mode": "BACKGROUND", "watermark": 0,
                     "last_message_seq": 0, "pending_messages": 0, "queued_jobs": 0, "running_jobs": 0,
                     "last_job": None}
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL = "http://127.0.0.1:9/v1", "m"  # configured, not called
    reset_llm()
    try:
        assert add_messages(api, "t1", [{"role": "user", "content": "hi"}] * 1).status_code == 201
        state = api.get("/api/threads/t1/extraction").json()
    finally:
        reset_llm()
    assert state["enabled"] is True and state["pending_messages"] == 1 and state["queued_jobs"] == 1
    job = state["last_job"]
    assert (job["status"], job["trigger"], job["from_seq"], job["to_seq"]) == ("queued", "add_messages", 1, 1)
    assert ExtractionJob.objects.get().pk == job["job_id"]


def test_without_an_llm_the_state_says_why_and_the_first_add_warns_once(api, make_thread, settings, caplog):
    """Issue #33 frictions 4 and 5: extraction on in the config and no LLM stored nothing and said nothing."""
    from memory.extraction.tracker import REASON_CONFIG_OFF, REASON_NO_LLM

    settings.OAM_LLM_BASE_URL = ""
    reset_llm()
    make_thread(thread_id="t1", memory_extraction_config={"extraction_mode": "inline"})
    make_thread(thread_id="t2", memory_extraction_config={"extract_memories": False})
    state = api.get("/api/threads/t1/extraction").json()
    assert (state["enabled"], state["reason"], state["config"]["extract_memories"]) == (False, REASON_NO_LLM, True)
    assert "OAM_LLM_BASE_URL" in state["reason"]
    assert api.get("/api/threads/t2/extraction").json()["reason"] == REASON_CONFIG_OFF
    assert add_messages(api, "t1", [{"role": "user", "content": "I like tea"}]).status_code == 201
    assert [(r.levelname, r.getMessage()) for r in caplog.records if "No LLM is configured" in r.getMessage()] == [
        ("WARNING", f"thread t1: {REASON_NO_LLM} (said once per process)")]
    caplog.clear()
    assert add_messages(api, "t1", [{"role": "user", "content": "and coffee"}]).status_code == 201
    assert add_messages(api, "t2", [{"role": "user", "content": "off on purpose"}]).status_code == 201
    assert not [r for r in caplog.records if "No LLM is configured" in r.getMessage()]  # once, not per call


def test_with_an_llm_the_state_has_no_reason(api, make_thread, settings):
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL = "http://127.0.0.1:9/v1", "m"  # configured, not called
    reset_llm()
    try:
        make_thread(thread_id="t1")
        state = api.get("/api/threads/t1/extraction").json()
    finally:
        reset_llm()
    assert (state["enabled"], state["reason"]) == (True, None)


def test_state_of_an_unknown_thread_is_404(api):
    resp = api.get("/api/threads/nope/extraction")
    assert resp.status_code == 404 and resp.json()["field"] == "thread_id"


def test_the_state_needs_an_api_key(anon, make_thread):
    make_thread(thread_id="t1")
    assert anon.get("/api/threads/t1/extraction").status_code == 401


def test_a_queue_that_stays_full_under_wait_then_raise_is_503_and_the_messages_stay(api, make_thread, settings):
    """TimeoutError reaches HTTP only from a full extraction queue now: deletes no longer wait."""
    from memory.llm.adapters import reset_llm

    settings.OAM_EXTRACTION_QUEUE_CAPACITY = 0
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL = "http://127.0.0.1:9/v1", "m"  # never called
    reset_llm()
    try:
        make_thread(thread_id="t1", memory_extraction_config={
            "background_extraction_queue_full_behavior": "wait_then_raise",
            "background_extraction_queue_put_timeout_seconds": 0.2})
        resp = add_messages(api, "t1", [{"role": "user", "content": "hi"}])
    finally:
        reset_llm()
    assert resp.status_code == 503 and "messages are stored" in resp.json()["detail"]
    assert api.get("/api/threads/t1/messages").json()["count"] == 1
