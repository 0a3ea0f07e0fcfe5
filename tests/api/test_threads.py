"""Threads over HTTP: create, read, list (paginated), patch metadata, delete with everything in it."""

import pytest

from memory.models import Memory, Message, SearchChunk
from tests.api.helpers import add_messages, error_fields, items
from tests.ids import key


def test_create_with_ids_returns_201_and_the_thread(api):
    resp = api.post("/api/threads", {"thread_id": "t1", "user_id": "u1", "agent_id": "a1", "metadata": {"k": "v"}})
    assert resp.status_code == 201
    assert resp.json() == {"thread_id": "t1", "user_id": "u1", "agent_id": "a1", "metadata": {"k": "v"}}
    assert api.get("/api/threads/t1").json() == resp.json()


def test_create_generates_omitted_ids_and_keeps_explicit_nulls(api):
    body = api.post("/api/threads", {"agent_id": None}).json()
    assert len(body["thread_id"]) == 36 and len(body["user_id"]) == 36
    assert body["thread_id"] != body["user_id"]
    assert body["agent_id"] is None
    assert body["metadata"] == {}


def test_create_with_a_taken_id_is_409_naming_the_field(api, thread):
    resp = api.post("/api/threads", {"thread_id": "t-main"})
    assert resp.status_code == 409
    assert resp.json()["field"] == "thread_id"
    assert "t-main" in resp.json()["detail"]


def test_create_rejects_unknown_keys_and_bad_types(api):
    resp = api.post("/api/threads", {"thread_id": "t9", "colour": "red"})
    assert resp.status_code == 422
    assert "colour" in error_fields(resp)
    resp = api.post("/api/threads", {"thread_id": "t9", "metadata": [1, 2]})
    assert resp.status_code == 422
    assert "metadata" in error_fields(resp)
    assert api.get("/api/threads/t9").status_code == 404


def test_create_with_an_empty_id_is_a_domain_422(api):
    resp = api.post("/api/threads", {"thread_id": "   "})
    assert resp.status_code == 422
    assert resp.json() == {
        "detail": [{"loc": ["body", "thread_id"], "msg": "must not be empty", "type": "value_error"}]
    }


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/api/threads/nope"),
        ("patch", "/api/threads/nope"),
        ("delete", "/api/threads/nope"),
        ("get", "/api/threads/nope/messages"),
        ("post", "/api/threads/nope/messages"),
        ("get", "/api/threads/nope/messages/m1"),
        ("get", "/api/threads/nope/memories"),
        ("delete", "/api/threads/nope/memories/m1"),
        ("post", "/api/threads/nope/search"),
    ],
)
def test_unknown_thread_is_404_naming_thread_id(api, method, path):
    if method == "patch":
        body = {"metadata": {"k": 1}}
    else:
        body = {"messages": [{"role": "user", "content": "hi"}]} if path.endswith("/messages") else {"query": "x"}
    resp = getattr(api, method)(path, body) if method in ("post", "patch") else getattr(api, method)(path)
    assert resp.status_code == 404
    assert resp.json() == {"detail": "no thread with id 'nope'", "field": "thread_id"}


def test_patch_replaces_metadata_and_omission_keeps_it(api, make_thread):
    make_thread(thread_id="t1", user_id="u1", metadata={"a": 1, "b": 2})
    resp = api.patch("/api/threads/t1", {"metadata": {"c": 3}})
    assert resp.status_code == 200
    assert resp.json()["metadata"] == {"c": 3}  # replaced, not merged
    assert api.patch("/api/threads/t1", {}).json()["metadata"] == {"c": 3}
    assert api.get("/api/threads/t1").json()["metadata"] == {"c": 3}
    assert api.patch("/api/threads/t1", {"metadata": None}).json()["metadata"] == {}
    assert api.get("/api/threads/t1").json()["user_id"] == "u1"


def test_delete_removes_the_thread_with_messages_memories_and_chunks(api, make_thread):
    make_thread(thread_id="t1", user_id="u1", agent_id="a1")
    make_thread(thread_id="t2", user_id="u1", agent_id="a1")
    assert add_messages(api, "t1", [{"role": "user", "content": "I own a red bicycle"}]).status_code == 201
    resp = api.post("/api/threads/t1/memories", {"content": "Owns a red bicycle", "memory_id": "mem1"})
    assert resp.status_code == 201
    assert add_messages(api, "t2", [{"role": "user", "content": "I own a blue car"}]).status_code == 201

    resp = api.delete("/api/threads/t1")
    assert resp.status_code == 204
    assert resp.content == b""
    assert api.get("/api/threads/t1").status_code == 404
    assert not Message.objects.filter(thread_id=key("t1")).exists()
    assert not Memory.objects.filter(pk=key("mem1")).exists()
    assert not SearchChunk.objects.filter(thread_id=key("t1")).exists()
    hits = api.post("/api/search", {"query": "bicycle", "user_id": "u1"}).json()
    assert [h["record"]["thread_id"] for h in hits] == ["t2"]
    assert api.delete("/api/threads/t1").status_code == 404
    assert len(items(api.get("/api/threads/t2/messages"))) == 1


def test_list_is_paginated_and_walking_pages_reaches_every_thread(api, make_thread):
    created = {make_thread(thread_id=f"t{i}", user_id="u1" if i % 2 else "u2")["thread_id"] for i in range(7)}
    first = api.get("/api/threads?limit=3").json()
    assert first["count"] == 7 and len(first["items"]) == 3

    seen, offset = [], 0
    while True:
        page = api.get(f"/api/threads?limit=3&offset={offset}").json()
        if not page["items"]:
            break
        seen += [t["thread_id"] for t in page["items"]]
        # Activity on a thread not listed yet must not make the walk skip it or repeat others.
        if unseen := sorted(created - set(seen)):
            add_messages(api, unseen[-1], [{"role": "user", "content": f"ping {offset}"}])
        offset += 3
    assert len(seen) == len(set(seen)) == 7
    assert set(seen) == created


def test_list_filters_by_user_and_agent(api, make_thread):
    make_thread(thread_id="a", user_id="u1", agent_id="x")
    make_thread(thread_id="b", user_id="u1", agent_id="y")
    make_thread(thread_id="c", user_id="u2", agent_id="x")
    ids = lambda q: sorted(t["thread_id"] for t in api.get(f"/api/threads?{q}").json()["items"])  # noqa: E731
    assert ids("user_id=u1") == ["a", "b"]
    assert ids("agent_id=x") == ["a", "c"]
    assert ids("user_id=u1&agent_id=x") == ["a"]
    assert ids("") == ["a", "b", "c"]


def test_list_limit_and_offset_over_the_cap_are_422_naming_them(api, make_thread):
    # Unbounded, an offset past 2**63 reached SQLite as OFFSET and was a 500 ("datatype mismatch").
    make_thread(thread_id="only")
    for query, field in (("offset=1148434139345343557218074624", "offset"), ("limit=2147483648", "limit"),
                         ("offset=-1", "offset"), ("limit=0", "limit")):
        resp = api.get(f"/api/threads?{query}")
        assert resp.status_code == 422, query
        assert error_fields(resp) == [field]
    page = api.get("/api/threads?limit=1000&offset=2147483647").json()  # limit: at most OAM_API_MAX_PAGE
    assert page == {"items": [], "count": 1}


def test_too_many_query_parameters_is_413_json(api, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 3  # Django alone answered with an HTML 400
    resp = api.get("/api/threads?a=1&b=2&c=3&d=4")
    assert resp.status_code == 413
    assert "DATA_UPLOAD_MAX_NUMBER_FIELDS" in resp.json()["detail"] and resp.json()["field"] is None


@pytest.mark.parametrize(
    "body,rule",
    [
        ('{"thread_id": "bad",}', "trailing comma"),
        ('{"thread_id": "bad"', "EOF"),
        ('{"thread_id": "bad", "metadata": ' + '{"a": ' * 300 + "1" + "}" * 301, "recursion limit"),
        ('"\\ud800"', "surrogate"),  # the whole body is the string
    ],
)
def test_a_body_that_is_not_json_is_422_naming_the_body_and_stores_nothing(api, body, rule):
    resp = api.post("/api/threads", body)
    assert resp.status_code == 422
    [item] = resp.json()["detail"]
    assert item["loc"] == ["body"] and item["type"] == "json_invalid"
    assert item["msg"].startswith("Invalid JSON: ") and rule in item["msg"]
    assert api.get("/api/threads/bad").status_code == 404


@pytest.mark.parametrize(
    "body,loc",
    [
        ('{"thread_id": "bad\\ud800"}', ["body", "thread_id"]),  # a lone surrogate: no UTF-8 form, was a 500
        ('{"thread_id": "bad", "metadata": {"tags": ["ok", "x\\udc00"]}}', ["body", "metadata", "tags", 1]),
        ('{"thread_id": "bad", "metadata": {"k\\udc00": 1}}', ["body", "metadata"]),  # in a key: its object
        ('{"thread_id": "bad", "memory_extraction_config": {"memory_extraction_custom_instructions": "\\ud800"}}',
         ["body", "memory_extraction_config", "memory_extraction_custom_instructions"]),
    ],
)
def test_a_lone_surrogate_is_422_naming_the_field_that_holds_it(api, body, loc):
    resp = api.post("/api/threads", body)
    assert resp.status_code == 422
    [item] = resp.json()["detail"]
    assert item["loc"] == loc and item["type"] == "json_invalid" and "lone UTF-16 surrogate" in item["msg"]
    assert api.get("/api/threads/bad").status_code == 404


def test_schema_errors_name_the_field_without_the_views_parameter_name(api):
    """ninja puts the view's body parameter (``payload``) after "body"; the docs show ``["body", field, ...]``."""
    cases = [
        ({"thread_id": 5}, ["body", "thread_id"]),
        ({"thread_id": "x", "colour": "red"}, ["body", "colour"]),
        ({"memory_extraction_config": {"extraction_mode": "never"}},
         ["body", "memory_extraction_config", "extraction_mode"]),
        ([1], ["body"]),  # not an object at all: the body
    ]
    for body, loc in cases:
        resp = api.post("/api/threads", body)
        assert resp.status_code == 422, body
        assert [item["loc"] for item in resp.json()["detail"]] == [loc], body
    resp = api.post("/api/threads", "")
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body"]


def test_json_text_that_pydantic_and_json_loads_both_read_is_unchanged(api):
    # A surrogate pair is one character; NaN is still read, and refused by the domain naming the field.
    resp = api.post("/api/threads", '{"thread_id": "smile-\\ud83d\\ude00", "metadata": {"k": "\\u00e9"}}')
    assert resp.status_code == 201
    assert resp.json()["thread_id"] == "smile-\U0001F600" and resp.json()["metadata"] == {"k": "é"}
    resp = api.post("/api/threads", '{"thread_id": "nan", "metadata": {"x": NaN}}')
    assert resp.status_code == 422 and error_fields(resp) == ["metadata"]
