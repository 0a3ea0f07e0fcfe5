"""Valid time over HTTP (issue #32): ``valid_from``/``valid_to`` on the memory bodies and in memory JSON; ``valid_at``
on search, the lists and the context card; 422 naming the field for a bad value."""

import pytest

from tests.api.helpers import error_fields, items

URL = "/api/threads/t-main/memories"


@pytest.fixture
def homes(api, thread):
    for body in ({"content": "The user lives in Lyon", "memory_id": "lyon", "valid_to": "2024-06-01"},
                 {"content": "The user lives in Paris", "memory_id": "paris", "valid_from": "2024-06-01T00:00:00Z"},
                 {"content": "The user lives in a flat", "memory_id": "flat"}):
        assert api.post(URL, body).status_code == 201
    return thread


def card_ids(api, valid_at):
    api.post("/api/threads/t-main/messages", {"messages": [{"role": "user", "content": "Where do I live now?"}]})
    card = api.post("/api/threads/t-main/context-card", {"max_relevant_results": 10, "valid_at": valid_at})
    assert card.status_code == 200, card.content
    return ids(card.json()["relevant_results"])


def ids(answer):
    return {hit["record_id"] if "record_id" in hit else hit["id"] for hit in answer}


def test_the_window_is_stored_and_shown_and_patch_sets_and_clears_it(api, homes):
    lyon = api.get(f"{URL}/lyon").json()
    assert (lyon["valid_from"], lyon["valid_to"]) == (None, "2024-06-01T00:00:00+00:00")
    flat = api.get(f"{URL}/flat").json()
    assert (flat["valid_from"], flat["valid_to"]) == (None, None)
    patched = api.patch(f"{URL}/lyon", {"valid_from": "2019-05-05"})
    assert patched.status_code == 200
    assert patched.json()["valid_from"] == "2019-05-05T00:00:00+00:00"
    assert patched.json()["valid_to"] == "2024-06-01T00:00:00+00:00"  # omitted: kept
    cleared = api.patch("/api/memories/lyon", {"valid_to": None}).json()
    assert (cleared["valid_from"], cleared["valid_to"]) == ("2019-05-05T00:00:00+00:00", None)
    history = items(api.get(f"{URL}/lyon/history"))
    assert [entry["changed"] for entry in history[1:]] == [["valid_from"], ["valid_to"]]


@pytest.mark.parametrize("method, path, body, field", [
    ("post", URL, {"content": "x", "valid_from": "tomorrow"}, "valid_from"),
    ("post", URL, {"content": "x", "valid_from": "2025-01-02", "valid_to": "2025-01-01"}, "valid_to"),
    ("patch", f"{URL}/lyon", {"valid_to": "2000-13-01"}, "valid_to"),
    ("patch", "/api/memories/paris", {"valid_to": "2020-01-01"}, "valid_to"),  # before its stored valid_from
    ("post", "/api/threads/t-main/search", {"query": "lives", "valid_at": "someday"}, "valid_at"),
    ("post", "/api/search", {"query": "lives", "user_id": "user-1", "valid_at": "x"}, "valid_at"),
    ("post", "/api/threads/t-main/context-card", {"valid_at": "2024-02-30"}, "valid_at"),
    ("get", f"{URL}?valid_at=later", None, "valid_at"),
    ("get", "/api/memories?valid_at=later", None, "valid_at"),
])
def test_a_bad_value_is_422_naming_the_field(api, homes, method, path, body, field):
    answer = getattr(api, method)(path, body) if body is not None else api.get(path)
    assert answer.status_code == 422, answer.content
    assert field in error_fields(answer) or field in answer.content.decode()


def test_valid_at_filters_search_the_lists_and_the_context_card(api, homes):
    search = api.post("/api/threads/t-main/search", {"query": "where does the user live", "valid_at": "2023-01-01"})
    assert search.status_code == 200 and ids(search.json()) == {"lyon", "flat"}
    across = api.post("/api/search", {"query": "where does the user live", "user_id": "user-1",
                                      "valid_at": "2024-06-01"})
    assert ids(across.json()) == {"paris", "flat"}
    assert ids(items(api.get(f"{URL}?valid_at=2024-05-31T23:59:59Z"))) == {"lyon", "flat"}
    assert ids(items(api.get(f"{URL}?valid_at=2030-01-01&memory_type=memory"))) == {"paris", "flat"}
    assert ids(items(api.get("/api/memories?valid_at=2030-01-01"))) == {"paris", "flat"}
    assert ids(items(api.get("/api/memories"))) == {"lyon", "paris", "flat"}
    card = card_ids(api, "2030-01-01")
    assert "lyon" not in card and "paris" in card


def test_a_supersedes_relation_over_http_closes_the_older_window(api, homes):
    answer = api.post("/api/threads/t-main/links", {
        "source_record_id": "paris", "source_record_type": "memory", "target_record_id": "flat",
        "target_record_type": "memory", "relation_type": "supersedes", "relation_id": "r1"})
    assert answer.status_code == 201, answer.content
    assert api.get(f"{URL}/flat").json()["valid_to"] == "2024-06-01T00:00:00+00:00"
    assert api.delete("/api/threads/t-main/links/r1").status_code == 204
    assert api.get(f"{URL}/flat").json()["valid_to"] is None
