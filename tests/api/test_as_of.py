"""Recorded time over HTTP (issue #32): ``as_of`` on GET memory and the memory lists (query parameter) and on the
search routes (body field); 422 naming it for a bad or future value; ``X-OAM-Erased-Since: true`` when the user
asked about was erased since."""

import time

import pytest
from django.utils import timezone

from memory.client import AgentMemory
from tests.api.helpers import error_fields, items

URL = "/api/threads/t-main/memories"


def tick():
    time.sleep(0.005)
    moment = timezone.now().isoformat()
    time.sleep(0.005)
    return moment


@pytest.fixture
def story(api, make_thread):
    make_thread(thread_id="t-main", user_id="user-1", agent_id="agent-1")
    make_thread(thread_id="t-u", user_id="user-u", agent_id="agent-1")
    assert api.post("/api/threads/t-u/memories", {"content": "User U keeps bees", "memory_id": "e"}).status_code == 201
    t0 = tick()
    assert api.post(URL, {"content": "The user lives in Lyon", "memory_id": "a"}).status_code == 201
    t1 = tick()
    assert api.patch(f"{URL}/a", {"content": "The user lives in Paris"}).status_code == 200
    assert api.post(URL, {"content": "The user plays the cello", "memory_id": "b"}).status_code == 201
    t3 = tick()
    assert api.delete(f"{URL}/b").status_code == 204
    t4 = tick()
    assert api.post(URL, {"content": "The user drinks green tea", "memory_id": "c"}).status_code == 201
    AgentMemory(llm=None).erase_user("user-u")
    return {"t0": t0, "t1": t1, "t3": t3, "t4": t4}


@pytest.fixture
def admin(db):
    """An admin key's client: the erased-since header is for admin keys, as the erasure receipts are."""
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    return JsonClient(headers={"Authorization": f"Bearer {api_key_create(name='admin', permission='admin')[1]}"})


def query(at):
    return "as_of=" + at.replace("+", "%2B")


def test_get_memory_as_of(api, story):
    assert api.get(f"{URL}/a?{query(story['t1'])}").json()["content"] == "The user lives in Lyon"  # edited since
    assert api.get(f"{URL}/b?{query(story['t3'])}").json()["content"] == "The user plays the cello"  # deleted since
    assert api.get(f"{URL}/c?{query(story['t4'])}").status_code == 404  # absent then
    assert api.get(f"{URL}/a").json()["content"] == "The user lives in Paris"


def test_the_lists_as_of(api, admin, story):
    then = {m["id"]: m["content"] for m in items(api.get(f"{URL}?{query(story['t3'])}"))}
    assert then == {"a": "The user lives in Paris", "b": "The user plays the cello"}
    project = {m["id"] for m in items(api.get(f"/api/memories?user_id=user-1&{query(story['t1'])}"))}
    assert project == {"a"}
    erased = admin.get(f"/api/memories?user_id=user-u&{query(story['t0'])}")
    assert items(erased) == [] and erased.headers["X-OAM-Erased-Since"] == "true"  # erased: said, never shown
    assert "X-OAM-Erased-Since" not in admin.get(f"/api/memories?user_id=user-1&{query(story['t0'])}").headers


def test_search_as_of(api, admin, story):
    found = api.post("/api/threads/t-main/search", {"query": "cello", "as_of": story["t3"],
                                                   "record_types": ["memory"]})
    assert found.status_code == 200, found.content
    assert found.json()[0]["record"]["content"] == "The user plays the cello"
    later = api.post("/api/search", {"query": "cello", "user_id": "user-1", "as_of": story["t4"]}).json()
    assert "b" not in {hit["record"]["id"] for hit in later}
    lyon = api.post("/api/search", {"query": "Lyon", "user_id": "user-1", "as_of": story["t1"]}).json()
    assert lyon[0]["record"]["content"] == "The user lives in Lyon"
    erased = admin.post("/api/search", {"query": "bees", "user_id": "user-u", "as_of": story["t0"]})
    assert erased.json() == [] and erased.headers["X-OAM-Erased-Since"] == "true"


def test_only_an_admin_key_is_told_a_subject_was_erased_since(admin, story):
    """An outside attack: any read key learnt from the header whether a guessed user id was erased (and, bisecting
    ``as_of``, when), which ``GET /api/erasures`` tells admin keys only."""
    from tests.api.helpers import JsonClient
    from threads.auth import api_key_create

    for permission in ("read", "write"):
        raw = api_key_create(name=f"{permission}-key", permission=permission)[1]
        reader = JsonClient(headers={"Authorization": f"Bearer {raw}"})
        assert reader.get("/api/erasures").status_code == 403
        listed = reader.get(f"/api/memories?user_id=user-u&{query(story['t0'])}")
        searched = reader.post("/api/search", {"query": "bees", "user_id": "user-u", "as_of": story["t0"]})
        assert listed.status_code == searched.status_code == 200 and items(listed) == [] and searched.json() == []
        assert "X-OAM-Erased-Since" not in listed.headers and "X-OAM-Erased-Since" not in searched.headers
    assert admin.get(f"/api/memories?user_id=user-u&{query(story['t0'])}").headers["X-OAM-Erased-Since"] == "true"


@pytest.mark.parametrize("method, path, body, field", [
    ("get", f"{URL}/a?as_of=later", None, "as_of"),
    ("get", f"{URL}?as_of=later", None, "as_of"),
    ("get", "/api/memories?as_of=2999-01-01", None, "as_of"),
    ("post", "/api/threads/t-main/search", {"query": "q", "as_of": "x"}, "as_of"),
    ("post", "/api/search", {"query": "q", "user_id": "user-1", "as_of": "2999-01-01"}, "as_of"),
    ("post", "/api/search", {"query": "q", "user_id": "user-1", "as_of": "2024-01-01", "num_hops": 1}, "num_hops"),
    ("get", "/api/memories?as_of=2024-01-01&metadata_filter=%7B%22k%22%3A1%7D", None, "metadata_filter"),
])
def test_a_bad_as_of_is_422_naming_it(api, story, method, path, body, field):
    answer = getattr(api, method)(path, body) if body is not None else api.get(path)
    assert answer.status_code == 422, answer.content
    assert field in error_fields(answer) or field in answer.content.decode()
