"""Summaries and context cards over HTTP: GET /api/threads/{id}/summary, POST /api/threads/{id}/context-card."""

import pytest

from memory.llm.adapters import reset_llm
from tests.api.helpers import add_messages, error_fields


@pytest.fixture(autouse=True)
def no_llm(settings):
    """The HTTP layer uses ``get_llm()``: make sure it finds none (transcript summaries)."""
    settings.OAM_LLM_BASE_URL = ""
    reset_llm()
    yield
    reset_llm()


@pytest.fixture
def pizza(api, make_thread):
    make_thread(thread_id="t-card", user_id="u1", agent_id="a1")
    for body in ({"content": "User likes pizza", "memory_id": "mem-pizza"},
                 {"content": "Pizza margherita is the favourite", "memory_type": "preference", "memory_id": "pref"},
                 {"content": "Mention prices in euros", "memory_type": "guideline", "memory_id": "guide",
                  "metadata": {"source": "chat"}}):
        assert api.post("/api/threads/t-card/memories", body).status_code == 201
    resp = add_messages(api, "t-card", [
        {"role": "user", "content": "Tell me about pizza", "id": "m1"},
        {"role": "assistant", "content": "Pizza comes from <Naples>", "id": "m2"},
    ])
    assert resp.status_code == 201


def card(api, body=None, thread_id="t-card"):
    resp = api.post(f"/api/threads/{thread_id}/context-card", body or {})
    assert resp.status_code == 200, resp.content
    return resp.json()


def test_default_card(api, pizza):
    data = card(api)
    assert set(data) == {"content", "formatted_content", "summary", "topics", "relevant_results", "recent_messages"}
    assert data["content"] == data["formatted_content"]
    # the SDK renderer's layout: <topics> always, the summary on lines of its own
    assert data["content"].startswith(
        "<context_card>\n  <topics></topics>\n  <summary>\n    user: Tell me about pizza\n"
    )
    assert "User likes pizza" in data["content"]
    assert "Pizza comes from &lt;Naples&gt;" in data["content"]  # escaped in the summary
    assert data["summary"] == "user: Tell me about pizza\nassistant: Pizza comes from <Naples>"
    assert data["topics"] == [] and data["recent_messages"] == []
    assert {r["record_id"] for r in data["relevant_results"]} == {"mem-pizza", "pref", "guide"}
    hit = data["relevant_results"][0]
    assert {"record_type", "record_id", "formatted_content", "record", "score"} <= set(hit)


def test_card_options(api, pizza):
    data = card(api, {"max_relevant_results": 1, "min_relevant_results_by_type": {"message": 1, "guideline": 1},
                      "max_recent_messages": 1, "fallback_message_count": 1})
    assert [r["record_id"] for r in data["relevant_results"]] == ["m1", "guide"]
    assert [m["id"] for m in data["recent_messages"]] == ["m2"]
    assert data["summary"] == "assistant: Pizza comes from <Naples>"
    assert "<recent_messages>" in data["content"]
    data = card(api, {"except_last_messages": 1, "max_recent_messages": 1, "metadata_filter": {"source": "chat"}})
    assert data["summary"] == "user: Tell me about pizza"
    assert [r["record_id"] for r in data["relevant_results"]] == ["guide"]
    assert [m["id"] for m in data["recent_messages"]] == ["m2"]


def test_omitted_and_null_are_kept_apart(api, pizza):
    # null budgets disable them, null minimums and filter mean none: same as omitted here.
    data = card(api, {"token_budget": None, "soft_token_budget": None, "min_relevant_results_by_type": None,
                      "metadata_filter": None})
    assert len(data["relevant_results"]) == 3
    assert card(api, {"token_budget": 1})["relevant_results"] == []
    assert len(card(api, {"soft_token_budget": 1})["relevant_results"]) == 1
    assert len(card(api, {"include_invalid_results": False})["relevant_results"]) == 3


@pytest.mark.parametrize("body, field", [
    ({"except_last_messages": 2, "max_recent_messages": 1}, "max_recent_messages"),
    ({"max_relevant_results": -1}, "max_relevant_results"),
    ({"max_relevant_results": "3"}, "max_relevant_results"),
    ({"min_relevant_results_by_type": {"image": 1}}, "min_relevant_results_by_type"),
    ({"min_relevant_results_by_type": {"memory": -1}}, "min_relevant_results_by_type"),
    ({"include_invalid_results": "yes"}, "include_invalid_results"),
    ({"max_relevant_resultz": 3}, "max_relevant_resultz"),
])
def test_card_errors_are_422_naming_the_field(api, pizza, body, field):
    resp = api.post("/api/threads/t-card/context-card", body)
    assert resp.status_code == 422, resp.content
    assert field in error_fields(resp)


def test_empty_card_and_unknown_thread(api, make_thread):
    make_thread(thread_id="t-empty")
    data = card(api, thread_id="t-empty")
    assert data["content"] == "" and data["summary"] == "" and data["relevant_results"] == []
    assert api.post("/api/threads/nope/context-card", {}).status_code == 404
    assert api.get("/api/threads/nope/summary").status_code == 404


def test_summary(api, pizza):
    resp = api.get("/api/threads/t-card/summary")
    assert resp.status_code == 200, resp.content
    assert resp.json() == {"content": "user: Tell me about pizza\nassistant: Pizza comes from <Naples>",
                           "formatted_content": "user: Tell me about pizza\nassistant: Pizza comes from <Naples>"}
    assert api.get("/api/threads/t-card/summary?except_last=1").json()["content"] == "user: Tell me about pizza"
    assert api.get("/api/threads/t-card/summary?token_budget=3").json()["content"] == "assistant: …"
    assert api.get("/api/threads/t-card/summary?token_budget=0").json()["content"].endswith("<Naples>")


def test_summary_errors(api, pizza, anon):
    resp = api.get("/api/threads/t-card/summary?except_last=-1")
    assert resp.status_code == 422 and "except_last" in error_fields(resp)
    resp = api.get("/api/threads/t-card/summary?token_budget=abc")
    assert resp.status_code == 422 and "token_budget" in error_fields(resp)
    assert anon.get("/api/threads/t-card/summary").status_code == 401
    assert anon.post("/api/threads/t-card/context-card", {}).status_code == 401
