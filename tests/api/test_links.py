"""Relations over HTTP: create, list, patch, delete by id or endpoint tuple, add_memory's link
arguments, and num_hops / max_linked_results on both search endpoints."""

import pytest

from memory.models import Memory, RecordLink
from tests.api.helpers import error_fields
from tests.ids import key

LINKS = "/api/threads/t-main/links"


@pytest.fixture
def notes(api, thread):
    """tea and coffee preferences and a fact in t-main; a memory in another thread."""
    for body in ({"content": "User likes tea", "memory_id": "tea", "memory_type": "preference"},
                 {"content": "User now prefers coffee", "memory_id": "coffee", "memory_type": "preference"},
                 {"content": "Coffee contains caffeine", "memory_id": "fact", "memory_type": "fact"}):
        assert api.post("/api/threads/t-main/memories", body).status_code == 201
    assert api.post("/api/threads", {"thread_id": "t-2", "user_id": "user-1", "agent_id": "agent-1"}).status_code == 201
    assert api.post("/api/threads/t-2/memories", {"content": "theirs", "memory_id": "theirs"}).status_code == 201
    return thread


def link(api, **body):
    payload = {"source_record_id": "coffee", "source_record_type": "preference", "target_record_id": "tea",
               "target_record_type": "preference", "relation_type": "supersedes", **body}
    return api.post(LINKS, payload)


def status_of(memory_id):
    return Memory.objects.get(pk=key(memory_id)).status


def test_create_returns_201_with_the_stored_relation(api, notes):
    resp = link(api, relation_id="rel-1", timestamp="2024-05-01T10:00:00", metadata={"why": "changed taste"})
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert {k: body[k] for k in ("relation_id", "thread_id", "source_record_id", "target_record_id",
                                 "relation_type", "opposite_relation_type", "timestamp", "metadata")} == {
        "relation_id": "rel-1", "thread_id": "t-main", "source_record_id": "coffee", "target_record_id": "tea",
        "relation_type": "supersedes", "opposite_relation_type": "is_superseded_by",
        "timestamp": "2024-05-01T10:00:00", "metadata": {"why": "changed taste"}}
    assert status_of("tea") == "invalid"
    assert api.get(LINKS).json() == {"items": [body], "count": 1}
    assert api.get(LINKS, {"record_id": "fact"}).json() == {"items": [], "count": 0}


def test_create_errors(api, notes):
    assert link(api, relation_id="rel-1").status_code == 201
    resp = link(api, source_record_id="tea", target_record_id="coffee", relation_type="supports")
    assert resp.status_code == 409 and resp.json()["field"] == "target_record_id"
    assert link(api, source_record_id="coffee", target_record_id="fact", target_record_type="fact",
                relation_id="rel-1").status_code == 409
    resp = link(api, target_record_id="coffee")
    assert resp.status_code == 422 and error_fields(resp) == ["target_record_id"]
    resp = link(api, target_record_id="theirs", target_record_type="memory")
    assert resp.status_code == 422 and error_fields(resp) == ["target_record_id"]
    resp = link(api, target_record_type="message")
    assert resp.status_code == 422 and "target_record_type" in error_fields(resp)
    resp = link(api, weight=2)
    assert resp.status_code == 422
    assert api.post("/api/threads/nope/links", {"source_record_id": "a", "source_record_type": "memory",
                                                "target_record_id": "b", "target_record_type": "memory",
                                                "relation_type": "supports"}).status_code == 404
    assert RecordLink.objects.count() == 1


def test_custom_relation_types(api, notes):
    body = link(api, target_record_id="fact", target_record_type="fact", relation_type="explains").json()
    assert body["opposite_relation_type"] == "explains"
    assert status_of("fact") == "valid"


def test_patch_keeps_omitted_fields_and_sets_builtin_reverse_labels(api, notes):
    link(api, relation_id="rel-1", relation_type="explains", opposite_relation_type="explained_by",
         metadata={"k": 1})
    resp = api.patch(f"{LINKS}/rel-1", {"timestamp": "2024-01-01T00:00:00"})
    assert resp.status_code == 200
    assert (resp.json()["relation_type"], resp.json()["opposite_relation_type"], resp.json()["metadata"]) == (
        "explains", "explained_by", {"k": 1})
    resp = api.patch(f"{LINKS}/rel-1", {"relation_type": "refines", "metadata": None})
    body = resp.json()
    assert (body["relation_type"], body["opposite_relation_type"], body["metadata"], body["timestamp"]) == (
        "refines", "is_refined_by", {}, "2024-01-01T00:00:00")
    assert status_of("tea") == "invalid"
    assert api.patch(f"{LINKS}/rel-1", {"relation_type": "supports"}).status_code == 200
    assert status_of("tea") == "valid"
    assert api.patch(f"{LINKS}/missing", {"relation_type": "supports"}).status_code == 404
    assert api.patch(f"{LINKS}/rel-1", {"relation_type": ""}).status_code == 422
    assert api.patch(f"{LINKS}/rel-1", {"colour": "red"}).status_code == 422


def test_delete_by_id(api, notes):
    link(api, relation_id="rel-1")
    assert api.delete(f"{LINKS}/rel-1").status_code == 204
    assert status_of("tea") == "valid"
    assert api.delete(f"{LINKS}/rel-1").status_code == 404
    link(api, relation_id="rel-1")
    assert api.delete("/api/threads/t-2/links/rel-1").status_code == 404  # another thread's relation


def test_delete_by_endpoint_tuple(api, notes):
    link(api, relation_id="rel-1")
    tuple_ = {"source_record_id": "coffee", "source_record_type": "preference", "target_record_id": "tea",
              "target_record_type": "preference", "relation_type": "supersedes"}
    reverse = {**tuple_, "source_record_id": "tea", "target_record_id": "coffee"}
    assert api.delete(LINKS, QUERY_STRING=_qs(reverse)).status_code == 404
    resp = api.delete(LINKS, QUERY_STRING=_qs({k: v for k, v in tuple_.items() if k != "relation_type"}))
    assert resp.status_code == 422
    assert api.delete(LINKS, QUERY_STRING=_qs(tuple_)).status_code == 204
    assert not RecordLink.objects.exists() and status_of("tea") == "valid"


def _qs(params):
    from urllib.parse import urlencode

    return urlencode(params)


def test_add_memory_with_a_link(api, notes):
    resp = api.post("/api/threads/t-main/memories", {
        "content": "User now prefers espresso", "memory_id": "espresso", "memory_type": "preference",
        "memory_id_to_link": "coffee", "link_type": "supersedes", "link_id": "rel-e",
        "link_metadata": {"via": "api"}, "autonomous_linking": False,
    })
    assert resp.status_code == 201, resp.content
    assert resp.json()["status"] == "valid"
    row = RecordLink.objects.get(pk=key("rel-e"))
    assert (row.source_id, row.target_id, row.relation_type, row.metadata) == (
        key("espresso"), key("coffee"), "supersedes", {"via": "api"})
    assert status_of("coffee") == "invalid"
    resp = api.post("/api/threads/t-main/memories", {"content": "x", "memory_id_to_link": "coffee",
                                                     "link_type": "mentions"})
    assert resp.status_code == 422 and error_fields(resp)[-1] == "link_type"
    resp = api.post("/api/threads/t-main/memories", {"content": "x", "memory_id_to_link": "theirs",
                                                     "link_type": "supports"})
    assert resp.status_code == 422 and error_fields(resp) == ["memory_id_to_link"]
    assert not Memory.objects.filter(content="x").exists()


@pytest.mark.parametrize("path", ["/api/threads/t-main/search", "/api/search"])
def test_search_num_hops_attaches_linked_memories(api, notes, path):
    link(api, relation_id="rel-1")
    user = {"user_id": "user-1"} if path == "/api/search" else {}  # a client search names its user (SDK)
    resp = api.post(path, {"query": "coffee", "num_hops": 1, "record_types": ["preference"], **user})
    assert resp.status_code == 200, resp.content
    [coffee] = [hit for hit in resp.json() if hit["record_id"] == "coffee"]
    [tea] = coffee["linked"]
    assert {k: tea[k] for k in ("record_id", "record_type", "relation_type", "relation_id", "hops",
                                "from_record_id")} == {
        "record_id": "tea", "record_type": "preference", "relation_type": "supersedes", "relation_id": "rel-1",
        "hops": 1, "from_record_id": "coffee"}
    assert tea["record"]["status"] == "invalid" and tea["record"]["content"] == "User likes tea"
    resp = api.post(path, {"query": "coffee", "record_types": ["preference"], **user})
    assert resp.status_code == 200 and all(hit["linked"] == [] for hit in resp.json())
    resp = api.post(path, {"query": "coffee", "num_hops": 1, "max_linked_results": 0, **user})
    assert resp.status_code == 200 and all(hit["linked"] == [] for hit in resp.json())


@pytest.mark.parametrize("body, field", [({"num_hops": 6}, "num_hops"), ({"num_hops": -1}, "num_hops"),
                                         ({"num_hops": True}, "num_hops"),
                                         ({"max_linked_results": -1}, "max_linked_results"),
                                         ({"max_linked_results": 10**20}, "max_linked_results"),
                                         ({"max_results": 10**20}, "max_results")])
def test_search_num_hops_out_of_range_is_422(api, notes, body, field):
    resp = api.post("/api/threads/t-main/search", {"query": "coffee", **body})
    assert resp.status_code == 422 and field in error_fields(resp)
