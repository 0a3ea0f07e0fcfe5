"""What an ``oracleagentmemory`` application does in Python, over HTTP: image limits at thread creation, a
prebuilt ``scope`` on search, and a bounded long-poll wait for a thread's extraction (the SDK's
``wait_for_memory_extraction``)."""

import base64
import threading
import time

import pytest
from django.db import close_old_connections

from memory.models import ExtractionJob, Thread
from tests import image_samples as samples
from tests.api.helpers import error_fields
from tests.ids import key


def test_thread_creation_sets_image_limits(api):
    resp = api.post("/api/threads", {"thread_id": "t-lim", "user_id": "u", "agent_id": "a",
                                     "image_input_limit_config": {"max_raw_image_bytes": 100}})
    assert resp.status_code == 201, resp.content
    assert Thread.objects.get(pk=key("t-lim")).config["image_input_limit_config"] == {"max_raw_image_bytes": 100}
    data = samples.png()
    resp = api.post("/api/threads/t-lim/images", {"data": base64.b64encode(data).decode(), "description": "x"})
    assert resp.status_code == 422 and "the limit is 100 bytes" in resp.text


@pytest.mark.parametrize("limits, field", [
    ({"max_raw_image_bytes": 0}, "max_raw_image_bytes"),
    ({"max_raw_image_bytes": 32 * 1024 * 1024 + 1}, "max_raw_image_bytes"),
    ({"max_images_per_llm_request": "5"}, "max_images_per_llm_request"),
    ({"max_image_bytes": 5}, "max_image_bytes"),
])
def test_bad_image_limits_are_422_naming_the_field(api, limits, field):
    resp = api.post("/api/threads", {"thread_id": "t-bad", "image_input_limit_config": limits})
    assert resp.status_code == 422
    assert any(field in name for name in error_fields(resp)), resp.content
    assert not Thread.objects.filter(pk=key("t-bad")).exists()


@pytest.fixture
def two_users(api):
    for thread_id, user in (("t-u1", "u1"), ("t-u2", "u2")):
        assert api.post("/api/threads", {"thread_id": thread_id, "user_id": user, "agent_id": "a"}).status_code == 201
        resp = api.post(f"/api/threads/{thread_id}/memories", {"content": f"{user} drinks green tea"})
        assert resp.status_code == 201, resp.content


def test_search_takes_a_prebuilt_scope(api, two_users):
    resp = api.post("/api/search", {"query": "green tea", "scope": {"user_id": "u2", "exact_user_match": True}})
    assert resp.status_code == 200, resp.content
    assert [hit["content"] for hit in resp.json()] == ["u2 drinks green tea"]
    resp = api.post("/api/threads/t-u1/search", {"query": "green tea", "scope": {"exact_user_match": False,
                                                                               "exact_agent_match": False}})
    assert {hit["content"] for hit in resp.json()} == {"u1 drinks green tea", "u2 drinks green tea"}
    resp = api.post("/api/search", {"query": "green tea", "user_id": "u2", "scope": {"user_id": "u2"}})
    assert resp.status_code == 422 and "scope" in error_fields(resp)
    resp = api.post("/api/search", {"query": "green tea", "scope": {"user": "u2"}})
    assert resp.status_code == 422


def test_search_of_an_empty_query_is_422(api, two_users):
    resp = api.post("/api/search", {"query": "  ", "user_id": "u1"})
    assert resp.status_code == 422 and error_fields(resp) == ["query"]


def test_extraction_state_without_wait_is_not_settled_or_unsettled(api, two_users):
    state = api.get("/api/threads/t-u1/extraction").json()
    assert state["settled"] is None


def test_wait_returns_at_once_when_nothing_is_pending(api, two_users):
    started = time.monotonic()
    state = api.get("/api/threads/t-u1/extraction?wait=30").json()
    assert state["settled"] is True and time.monotonic() - started < 5


@pytest.mark.django_db(transaction=True)
def test_wait_runs_out_while_a_job_stays_queued(api, two_users):
    thread = Thread.objects.get(pk=key("t-u1"))
    ExtractionJob.objects.create(thread=thread, project_id=thread.project_id, from_seq=1, to_seq=1, status="queued")
    started = time.monotonic()
    resp = api.get("/api/threads/t-u1/extraction?wait=0.6")
    assert resp.status_code == 200 and resp.json()["settled"] is False and resp.json()["queued_jobs"] == 1
    assert 0.6 <= time.monotonic() - started < 5


@pytest.mark.django_db(transaction=True)
def test_wait_answers_when_the_running_job_finishes(api, two_users):
    thread = Thread.objects.get(pk=key("t-u1"))
    job = ExtractionJob.objects.create(thread=thread, project_id=thread.project_id, from_seq=1, to_seq=1,
                                       status="running")

    def finish():  # another process's worker, as far as the waiting request can tell
        time.sleep(0.8)
        ExtractionJob.objects.filter(pk=job.pk).update(status="failed")  # a failed job counts as finished
        close_old_connections()

    worker = threading.Thread(target=finish)
    worker.start()
    started = time.monotonic()
    state = api.get("/api/threads/t-u1/extraction?wait=20").json()
    worker.join()
    assert state["settled"] is True and state["running_jobs"] == 0
    assert 0.7 <= time.monotonic() - started < 10


@pytest.mark.parametrize("wait", ["-1", "61", "soon", "nan"])
def test_a_bad_wait_is_422(api, two_users, wait):
    resp = api.get(f"/api/threads/t-u1/extraction?wait={wait}")
    assert resp.status_code == 422 and error_fields(resp) == ["wait"]


# --- client-level lists, memory updates, profiles, thread settings ----------------------------------


def test_project_wide_lists(api, two_users):
    assert api.post("/api/threads/t-u1/messages", {"messages": [
        {"role": "user", "content": "hi from u1", "metadata": {"k": 1}}]}).status_code == 201
    assert api.post("/api/threads/t-u2/messages", {"messages": [{"role": "user", "content": "hi from u2"}]}
                    ).status_code == 201
    messages = api.get("/api/messages").json()
    assert [m["content"] for m in messages["items"]] == ["hi from u1", "hi from u2"] and messages["count"] == 2
    assert [m["content"] for m in api.get("/api/messages", {"user_id": "u2"}).json()["items"]] == ["hi from u2"]
    assert [m["content"] for m in api.get("/api/messages", {"metadata_filter": '{"k": 1}'}).json()["items"]] == [
        "hi from u1"]
    memories = api.get("/api/memories", {"thread_id": "t-u2"}).json()
    assert [m["content"] for m in memories["items"]] == ["u2 drinks green tea"]
    assert api.get("/api/memories", {"limit": 1}).json()["count"] == 2
    resp = api.post("/api/threads/t-u1/images", {"data": base64.b64encode(samples.png()).decode(),
                                                 "description": "a card", "image_id": "img-1"})
    assert resp.status_code == 201
    assert [i["id"] for i in api.get("/api/images", {"user_id": "u1"}).json()["items"]] == ["img-1"]
    assert api.get("/api/images", {"user_id": "u2"}).json()["count"] == 0
    assert api.get("/api/memories", {"metadata_filter": "{not json"}).status_code == 422


def test_update_a_memory_by_id(api, two_users):
    [memory] = api.get("/api/memories", {"user_id": "u1"}).json()["items"]
    resp = api.patch(f"/api/memories/{memory['id']}", {"content": "u1 drinks black tea", "metadata": {"v": 2}})
    assert resp.status_code == 200 and resp.json()["content"] == "u1 drinks black tea"
    assert resp.json()["metadata"] == {"v": 2}
    assert api.patch("/api/memories/missing", {"content": "x"}).status_code == 404


def test_profiles_over_http(api):
    resp = api.put("/api/profiles/users/u1", {"information": "Prefers concise answers.", "metadata": {"src": "crm"}})
    assert resp.status_code == 200
    assert resp.json() == {"record_type": "user_profile", "id": "u1", "content": "Prefers concise answers.",
                           "metadata": {"src": "crm"}, "timestamp": resp.json()["timestamp"]}
    assert api.put("/api/profiles/agents/a1", {"information": "Travel assistant."}).status_code == 200
    assert [p["id"] for p in api.get("/api/profiles/users").json()["items"]] == ["u1"]
    assert [p["id"] for p in api.get("/api/profiles/agents").json()["items"]] == ["a1"]
    assert api.get("/api/profiles/users", {"metadata_filter": '{"src": "web"}'}).json()["count"] == 0
    assert api.put("/api/profiles/users/u1", {"information": "  "}).status_code == 422
    assert api.put("/api/profiles/people/u1", {"information": "x"}).status_code == 422
    assert api.delete("/api/profiles/users/u1").status_code == 204
    assert api.delete("/api/profiles/users/u1").status_code == 404


def test_thread_settings_over_patch(api, two_users):
    resp = api.patch("/api/threads/t-u1", {"memory_extraction_config": {"memory_extraction_frequency": 3},
                                           "image_input_limit_config": {"max_raw_image_bytes": 200}})
    assert resp.status_code == 200, resp.content
    config = Thread.objects.get(pk=key("t-u1")).config
    assert config["memory_extraction_frequency"] == 3 and config["image_input_limit_config"] == {
        "max_raw_image_bytes": 200}
    state = api.get("/api/threads/t-u1/extraction").json()
    assert state["config"]["memory_extraction_frequency"] == 3
    assert api.patch("/api/threads/t-u1", {"image_input_limit_config": {"max_raw_image_bytes": 0}}
                     ).status_code == 422


def test_update_by_id_reaches_what_delete_by_id_reaches(api, two_users):
    """PATCH /api/memories/{id} follows DELETE's lookup and scoping: a memory stored with no thread, and a
    user-restricted key's own memory in another user's thread (both listed, both deletable) were 404."""
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    resp = api.post("/api/threads/t-u1/memories", {"thread_id": None, "memory_id": "n0", "content": "no thread"})
    assert resp.status_code == 201, resp.content
    resp = api.patch("/api/memories/n0", {"content": "still no thread"})
    assert resp.status_code == 200, resp.content
    assert resp.json()["content"] == "still no thread"
    resp = api.post("/api/threads/t-u2/memories", {"memory_id": "u1-in-u2", "user_id": "u1", "content": "u1 note"})
    assert resp.status_code == 201, resp.content
    _, raw = api_key_create(name="u1 widget", permission="write", user_id="u1")
    u1 = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    assert "u1-in-u2" in [m["id"] for m in u1.get("/api/memories").json()["items"]]
    resp = u1.patch("/api/memories/u1-in-u2", {"content": "u1 note, edited"})
    assert resp.status_code == 200, resp.content
    assert resp.json()["content"] == "u1 note, edited"
    [other] = api.get("/api/memories", {"user_id": "u2"}).json()["items"]
    assert u1.patch(f"/api/memories/{other['id']}", {"content": "x"}).status_code == 404  # another user's
    assert api.get("/api/memories", {"user_id": "u2"}).json()["items"][0]["content"] == "u2 drinks green tea"
    assert u1.delete("/api/memories/u1-in-u2").status_code == 204
    assert api.delete("/api/memories/n0").status_code == 204
