"""Dependants over HTTP (issue #32 part 4): ``derived_from`` on ``POST /api/threads/{id}/memories``, the flag on
every memory body (lists, search, context card), ``GET /api/review/dependants`` and
``POST /api/review/dependants/{id}/clear``. Cross-tenant cases live in tests/api/test_cross_tenant.py."""

from __future__ import annotations

import pytest

from memory.client import AgentMemory
from memory.models import MemoryDerivation
from tests.api.helpers import JsonClient
from threads.auth import api_key_create


def bearer(permission: str = "write", **kwargs) -> JsonClient:
    _, raw = api_key_create(name=f"k-{permission}", permission=permission, **kwargs)
    return JsonClient(headers={"Authorization": f"Bearer {raw}"})


@pytest.fixture
def api(db) -> JsonClient:
    thread = AgentMemory().create_thread(thread_id="t-d", user_id="u1", agent_id="a1")
    thread.add_messages([{"role": "user", "content": "What could I do this winter in Boston?"}])
    return bearer()


def add(api: JsonClient, memory_id: str, content: str, **body):
    return api.post("/api/threads/t-d/memories", {"content": content, "memory_id": memory_id, **body})


def test_a_chain_added_over_http_is_flagged_listed_and_cleared(api):
    assert add(api, "a", "Caroline lives in Boston.", memory_type="fact").status_code == 201
    made = add(api, "b", "Caroline likes Boston's winters.", memory_type="preference", derived_from=["a"])
    assert made.status_code == 201, made.content
    assert made.json()["needs_review"] is False and made.json()["review_cause"] is None
    made = add(api, "c", "Suggest winter walks in Boston.", memory_type="guideline", derived_from=["b"])
    assert made.status_code == 201
    assert add(api, "a2", "Caroline moved to Denver.", memory_type="fact", memory_id_to_link="a",
               link_type="supersedes", link_id="r1").status_code == 201

    listed = api.get("/api/review/dependants").json()
    assert listed["count"] == 2 and {m["id"] for m in listed["items"]} == {"b", "c"}
    cause = api.get("/api/threads/t-d/memories/c").json()["review_cause"]
    assert cause["memory_id"] == "a" and cause["action"] == "supersede" and cause["via"] == "b"
    assert api.get("/api/review/dependants?memory_type=guideline").json()["count"] == 1
    hits = api.post("/api/threads/t-d/search", {"query": "winter in Boston", "max_results": 10}).json()
    flags = {h["record_id"]: h["record"]["needs_review"] for h in hits if h["record_type"] != "message"}
    assert flags["c"] is True and flags["a2"] is False
    card = api.post("/api/threads/t-d/context-card", {"max_relevant_results": 10}).json()
    assert "[needs review] Suggest winter walks in Boston." in card["content"]

    cleared = api.post("/api/review/dependants/c/clear", {"reason": "still a good idea"})
    assert cleared.status_code == 200, cleared.content
    body = cleared.json()
    assert body["action"] == "clear" and body["memory"]["needs_review"] is False and body["version"] >= 2
    again = api.post("/api/review/dependants/c/clear", {})
    assert again.status_code == 409 and again.json()["field"] == "memory_id"
    assert api.post("/api/review/dependants/nope/clear", {}).status_code == 404
    history = api.get("/api/threads/t-d/memories/c/history").json()["items"]
    assert [v["action"] for v in history][-2:] == ["flag", "unflag"]
    reader = bearer("read")
    assert reader.get("/api/review/dependants").status_code == 403
    assert reader.post("/api/review/dependants/b/clear", {}).status_code == 403


def test_derived_from_is_checked(api):
    add(api, "a", "A note.")
    missing = add(api, "x", "From nothing.", derived_from=["a", "nope"])
    assert missing.status_code == 404 and missing.json()["field"] == "derived_from"
    too_many = add(api, "y", "From too many.", derived_from=[f"m{i}" for i in range(101)])
    assert too_many.status_code == 422
    wrong = add(api, "z", "From a string.", derived_from="a")
    assert wrong.status_code == 422
    assert not MemoryDerivation.objects.exists()
