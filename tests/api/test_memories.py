"""Memories over HTTP: add, list, get, patch (omitted fields kept), delete (this thread's only)."""

import pytest

from memory.models import Memory, SearchChunk
from tests.api.helpers import error_fields
from tests.ids import key

URL = "/api/threads/t-main/memories"


def add(api, **body):
    resp = api.post(URL, body)
    assert resp.status_code == 201, resp.content
    return resp.json()


def test_add_returns_201_with_the_stored_memory_in_the_thread_scope(api, thread):
    resp = api.post(URL, {"content": "Prefers green tea", "memory_type": "preference", "memory_id": "mem-1",
                          "metadata": {"src": "chat"}, "timestamp": "2024-03-01T09:00:00"})
    assert resp.status_code == 201
    body = resp.json()
    assert body["id"] == "mem-1" and body["record_type"] == body["memory_type"] == "preference"
    assert (body["user_id"], body["agent_id"], body["thread_id"]) == ("user-1", "agent-1", "t-main")
    assert body["metadata"] == {"src": "chat"} and body["status"] == "valid"
    assert body["timestamp"] == "2024-03-01T09:00:00" and body["expires_at"] is None
    assert body["source_message_ids"] == []
    assert api.get(f"{URL}/mem-1").json() == body


def test_add_defaults_to_a_general_memory_with_a_generated_id(api, thread):
    body = add(api, content="Lives in Lisbon")
    assert body["memory_type"] == "memory" and len(body["id"]) == 36
    assert body["timestamp"] == body["created_at"]


def test_add_with_an_invalid_memory_type_is_422_naming_the_allowed_values(api, thread):
    resp = api.post(URL, {"content": "x", "memory_type": "opinion"})
    assert resp.status_code == 422
    (error,) = resp.json()["detail"]
    assert error["loc"][-1] == "memory_type"
    for allowed in ("memory", "fact", "guideline", "preference"):
        assert f"'{allowed}'" in error["msg"]
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    "body,field",
    [
        ({"content": "x", "status": "maybe"}, "status"),
        ({"content": "x", "ttl_anchor": "whenever"}, "ttl_anchor"),
        ({"content": "x", "ttl_days": 1.5}, "ttl_days"),
        ({"content": "x", "memory_id": None}, "memory_id"),
        ({"content": 3}, "content"),
        ({"memory_type": "fact"}, "content"),
        ({"content": "x", "colour": "red"}, "colour"),
    ],
)
def test_add_schema_errors_are_422_naming_the_field(api, thread, body, field):
    resp = api.post(URL, body)
    assert resp.status_code == 422
    assert field in error_fields(resp)
    assert not Memory.objects.exists()


def test_add_domain_errors_are_422_naming_the_field(api, thread):
    resp = api.post(URL, {"content": "   "})
    assert resp.status_code == 422
    assert resp.json()["detail"] == [{"loc": ["body", "content"], "msg": "must not be empty", "type": "value_error"}]
    resp = api.post(URL, {"content": "x", "ttl_anchor": "timestamp"})
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "ttl_anchor"]
    assert not Memory.objects.exists()


def test_add_with_a_taken_memory_id_is_409(api, thread):
    add(api, content="first", memory_id="mem-1")
    resp = api.post(URL, {"content": "second", "memory_id": "mem-1"})
    assert resp.status_code == 409
    assert resp.json() == {"detail": "memory_id 'mem-1' already exists", "field": "memory_id"}
    assert api.get(f"{URL}/mem-1").json()["content"] == "first"


def test_add_with_scope_overrides_and_explicit_nulls(api, thread):
    body = add(api, content="Shared fact", memory_type="fact", user_id=None, thread_id="elsewhere")
    assert body["user_id"] is None and body["agent_id"] == "agent-1" and body["thread_id"] == "elsewhere"
    # Not this thread's any more: not listed, not readable, not deletable here.
    assert api.get(URL).json()["items"] == []
    assert api.get(f"{URL}/{body['id']}").status_code == 404
    assert api.delete(f"{URL}/{body['id']}").status_code == 404
    assert Memory.objects.filter(pk=key(body["id"])).exists()


def test_add_already_expired_still_answers_201_with_the_record(api, thread):
    body = add(api, content="Old news", timestamp="2001-01-01T00:00:00Z", ttl_days=1, ttl_anchor="timestamp")
    assert body["expires_at"].startswith("2001-01-02")
    assert api.get(f"{URL}/{body['id']}").status_code == 404


def test_list_is_paginated_oldest_first_and_filters_by_type(api, thread):
    ids = [add(api, content=f"item {i}", memory_type="fact" if i % 2 else "memory")["id"] for i in range(5)]
    page = api.get(URL + "?limit=2&offset=2").json()
    assert page["count"] == 5 and [m["id"] for m in page["items"]] == ids[2:4]
    facts = api.get(URL + "?memory_type=fact").json()
    assert [m["id"] for m in facts["items"]] == [ids[1], ids[3]]
    resp = api.get(URL + "?memory_type=opinion")
    assert resp.status_code == 422 and "memory_type" in error_fields(resp)


def test_patch_changes_given_fields_and_keeps_omitted_ones(api, thread):
    mem = add(api, content="Drinks coffee", memory_type="preference", metadata={"v": 1},
              timestamp="2024-01-01T00:00:00Z", status="invalid")
    url = f"{URL}/{mem['id']}"

    resp = api.patch(url, {"content": "Drinks green tea"})
    assert resp.status_code == 200
    body = resp.json()
    assert body["content"] == "Drinks green tea"
    for kept in ("metadata", "timestamp", "status", "memory_type", "expires_at", "user_id", "created_at"):
        assert body[kept] == mem[kept], kept

    body = api.patch(url, {"status": "valid", "metadata": {"v": 2}}).json()
    assert (body["status"], body["metadata"], body["content"]) == ("valid", {"v": 2}, "Drinks green tea")

    body = api.patch(url, {"ttl_days": 2, "ttl_anchor": "timestamp", "timestamp": "2030-06-01T00:00:00Z"}).json()
    assert body["expires_at"].startswith("2030-06-03") and body["timestamp"] == "2030-06-01T00:00:00Z"

    body = api.patch(url, {"timestamp": None, "metadata": None}).json()
    assert body["timestamp"] == body["created_at"] and body["metadata"] == {}
    assert body["expires_at"].startswith("2030-06-03")  # no ttl given: expiry unchanged
    assert api.get(url).json() == body

    hits = api.post("/api/threads/t-main/search", {"query": "green tea", "max_results": 1}).json()
    assert hits[0]["record_id"] == mem["id"] and hits[0]["content"] == "Drinks green tea"


def test_patch_errors(api, thread):
    mem = add(api, content="x")
    url = f"{URL}/{mem['id']}"
    resp = api.patch(url, {"status": "maybe"})
    assert resp.status_code == 422 and "status" in error_fields(resp)
    resp = api.patch(url, {"memory_type": "fact"})
    assert resp.status_code == 422 and "memory_type" in error_fields(resp)
    resp = api.patch(url, {"content": ""})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "content"]
    assert api.patch(f"{URL}/missing", {"content": "y"}).status_code == 404
    assert api.get(url).json() == mem


def test_patch_and_delete_touch_only_this_threads_memories(api, thread, client):
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    theirs = other.add_memory("Their memory", memory_id="theirs")
    mine = add(api, content="My memory", memory_id="mine")["id"]

    resp = api.patch(f"{URL}/{theirs}", {"content": "hijacked"})
    assert resp.status_code == 404
    assert resp.json() == {"detail": "no memory with id 'theirs'", "field": "memory_id"}
    resp = api.delete(f"{URL}/{theirs}")
    assert resp.status_code == 404 and resp.json()["field"] == "memory_id"
    assert other.get_memory(theirs).content == "Their memory"
    assert SearchChunk.objects.filter(record_id=key(theirs)).exists()

    assert api.delete(f"{URL}/{mine}").status_code == 204
    assert api.get(f"{URL}/{mine}").status_code == 404
    assert not SearchChunk.objects.filter(record_id=key(mine)).exists()
    assert api.delete(f"{URL}/{mine}").status_code == 404


def test_list_offset_and_limit_over_the_cap_are_422_naming_them(api, thread):
    add(api, content="kept")
    for query, field in (("offset=99999999999999999999", "offset"), ("limit=2147483648", "limit")):
        resp = api.get(f"{URL}?{query}")
        assert resp.status_code == 422 and error_fields(resp) == [field]
    assert api.get(f"{URL}?offset=2147483647").json() == {"items": [], "count": 1}


def test_content_with_a_lone_surrogate_is_422_and_stores_nothing(api, thread):
    # json.loads read "\udc00" as a str that SQLite and the embedder cannot encode: a 500.
    resp = api.post(URL, '{"content": "bad \\udc00 half", "memory_id": "m-bad"}')
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "content"] and resp.json()["detail"][0]["type"] == "json_invalid"
    assert not Memory.objects.exists() and not SearchChunk.objects.exists()
