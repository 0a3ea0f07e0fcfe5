"""Search over HTTP: thread defaults, client-level scope, result shape and argument errors."""

import pytest

from tests.api.helpers import add_messages, error_fields


@pytest.fixture
def world(api, make_thread):
    """Three threads about bicycles: two for (u1, a1), one for u2; plus a note and a message in t-a."""
    make_thread(thread_id="t-a", user_id="u1", agent_id="a1")
    make_thread(thread_id="t-b", user_id="u1", agent_id="a1")
    make_thread(thread_id="t-c", user_id="u2", agent_id="a1")
    for tid in ("t-a", "t-b", "t-c"):
        resp = api.post(f"/api/threads/{tid}/memories", {"content": f"Rides a bicycle to work ({tid})",
                                                          "memory_id": f"mem-{tid}", "memory_type": "fact"})
        assert resp.status_code == 201
    add_messages(api, "t-a", [{"role": "user", "content": "My bicycle has a flat tyre", "id": "msg-a"}])


def ids(resp):
    assert resp.status_code == 200, resp.content
    return sorted(hit["record_id"] for hit in resp.json())


def test_thread_search_defaults_to_same_user_and_agent_across_threads(api, world):
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle"})
    assert ids(resp) == ["mem-t-a", "mem-t-b", "msg-a"]


def test_thread_search_exact_thread_match_restricts_to_this_thread(api, world):
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "exact_thread_match": True})
    assert ids(resp) == ["mem-t-a", "msg-a"]
    resp = api.post("/api/threads/t-b/search", {"query": "bicycle", "exact_thread_match": True})
    assert ids(resp) == ["mem-t-b"]


def test_thread_search_overrides_only_the_given_dimension(api, world):
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "user_id": "u2"})
    assert ids(resp) == ["mem-t-c"]
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "exact_user_match": False})
    assert ids(resp) == ["mem-t-a", "mem-t-b", "mem-t-c", "msg-a"]
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "user_id": None})
    assert ids(resp) == []  # explicit null with exact matching: only stored nulls


def test_client_search_is_one_users_with_agent_and_thread_open(api, world):
    assert ids(api.post("/api/search", {"query": "bicycle", "user_id": "u1"})) == ["mem-t-a", "mem-t-b", "msg-a"]
    assert ids(api.post("/api/search", {"query": "bicycle", "user_id": "u2"})) == ["mem-t-c"]
    resp = api.post("/api/search", {"query": "bicycle", "user_id": "u1", "thread_id": "t-b"})
    assert ids(resp) == ["mem-t-a", "mem-t-b", "msg-a"]  # a given thread is open unless exact_thread_match
    resp = api.post("/api/search",
                    {"query": "bicycle", "user_id": "u1", "thread_id": "t-b", "exact_thread_match": True})
    assert ids(resp) == ["mem-t-b"]


def test_result_shape(api, world):
    hits = api.post("/api/threads/t-a/search", {"query": "flat tyre on my bicycle", "exact_thread_match": True}).json()
    assert [h["record_type"] for h in hits] == ["message", "fact"]  # best first
    assert hits[0]["distance"] <= hits[1]["distance"]
    msg = hits[0]
    assert msg["record_id"] == "msg-a" and msg["content"] == "My bicycle has a flat tyre"
    assert hits[0]["score"] >= hits[1]["score"] > 0  # fused rank score, best first
    assert "<record_id>msg-a</record_id>" in msg["formatted_content"]
    assert "<role>user</role>" in msg["formatted_content"]
    assert msg["record"]["role"] == "user" and msg["record"]["thread_id"] == "t-a"
    assert msg["record"]["status"] == "valid" and msg["record"]["timestamp"]
    fact = hits[1]
    assert fact["record"]["memory_type"] == "fact" and fact["record"]["user_id"] == "u1"
    assert fact["formatted_content"].startswith("<fact>")


def test_max_results_bounds_the_results_and_below_one_is_422(api, world):
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "max_results": 1})
    assert len(resp.json()) == 1
    for url in ("/api/threads/t-a/search", "/api/search"):
        resp = api.post(url, {"query": "bicycle", "max_results": 0})
        assert resp.status_code == 422
        (error,) = resp.json()["detail"]
        assert error["loc"][-1] == "max_results"
        assert "greater than or equal to 1" in error["msg"]


def test_record_types_and_metadata_filter(api, world):
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "record_types": ["message"]})
    assert ids(resp) == ["msg-a"]
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "record_types": ["opinion"]})
    assert resp.status_code == 422 and "record_types" in error_fields(resp)
    api.patch("/api/threads/t-b/memories/mem-t-b", {"metadata": {"tags": ["commute"]}})
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "metadata_filter": {"tags": ["commute"]}})
    assert ids(resp) == ["mem-t-b"]
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "metadata_filter": {"tags": {"$regex": "c.*"}}})
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"][0] == "body"
    assert "operator" in resp.json()["detail"][0]["msg"]


def test_include_invalid_results(api, world):
    api.patch("/api/threads/t-b/memories/mem-t-b", {"status": "invalid"})
    assert "mem-t-b" in ids(api.post("/api/threads/t-a/search", {"query": "bicycle"}))
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "include_invalid_results": False})
    assert ids(resp) == ["mem-t-a", "msg-a"]


def test_token_budget(api, world):
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "token_budget": 1})
    assert resp.json() == []  # the first result does not fit
    resp = api.post("/api/threads/t-a/search", {"query": "bicycle", "soft_token_budget": 1})
    assert len(resp.json()) == 1  # the result reaching the target is kept


@pytest.mark.parametrize(
    "body,field",
    [
        ({"query": "x", "exact_user_match": "yes"}, "exact_user_match"),
        ({"query": "x", "max_results": "3"}, "max_results"),
        ({"query": "x", "scope": {"user": "u"}}, "scope"),  # scope is an SDK argument now: its keys are checked
        ({}, "query"),
    ],
)
def test_search_schema_errors(api, world, body, field):
    resp = api.post("/api/threads/t-a/search", body)
    assert resp.status_code == 422
    assert field in error_fields(resp)


def test_a_search_across_threads_needs_a_user_and_exact_matching(api, thread):
    """The SDK's client-search rules over HTTP (tests/memory/test_search_scope.py): 422 naming the field."""
    thread.add_memory("user-1 keeps a pet iguana", memory_id="pet")
    response = api.post("/api/search", {"query": "iguana"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "user_id"]
    response = api.post("/api/search", {"query": "iguana", "user_id": "user-1", "exact_user_match": False})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "exact_user_match"]
    response = api.post("/api/search", {"query": "iguana", "user_id": "user-1", "max_results": 1001})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "max_results"
    found = api.post("/api/search", {"query": "pet iguana", "user_id": "user-1", "record_types": ["memory"]})
    assert [r["record_id"] for r in found.json()] == ["pet"]


def test_a_user_restricted_key_searches_without_user_id(api, world):
    """"A user-restricted key never needs to pass user_id" (was a 422, found by an attacker)."""
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    _, raw = api_key_create(name="u2 widget", permission="read", user_id="u2")
    u2 = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    assert ids(u2.post("/api/search", {"query": "bicycle"})) == ["mem-t-c"]
    assert ids(u2.post("/api/search", {"query": "bicycle", "agent_id": "a1"})) == ["mem-t-c"]
    assert u2.post("/api/search", {"query": "bicycle", "user_id": "u1"}).status_code == 403
    response = u2.post("/api/search", {"query": "bicycle", "exact_user_match": False})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "exact_user_match"]
    assert api.post("/api/search", {"query": "bicycle"}).status_code == 422  # an unrestricted key still must
