"""Card replay over HTTP (issue #32, part 3): ``as_of`` on POST /api/threads/{id}/context-card answers the card
served then, exactly, with ``served_at``; 404 naming ``as_of`` when none was; 422 naming it for a bad value."""

import datetime as dt

from django.utils import timezone

from tests.api.helpers import add_messages, error_fields
from tests.api.test_context import no_llm  # noqa: F401 - the autouse fixture: transcript summaries


def card(api, body, thread_id="t-replay"):
    answer = api.post(f"/api/threads/{thread_id}/context-card", body)
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_as_of_replays_each_card_with_when_it_was_served(api, make_thread):
    make_thread(thread_id="t-replay", user_id="u1", agent_id="a1")
    body = {"max_recent_messages": 1}
    steps = []
    for text in ("I like jazz", "I moved to Porto", "I play the cello"):
        assert add_messages(api, "t-replay", [{"role": "user", "content": text}]).status_code == 201
        assert api.post("/api/threads/t-replay/memories", {"content": f"The user says: {text}"}).status_code == 201
        served = card(api, body)
        steps.append((timezone.now().isoformat(), served))
    for at, served in steps:
        replayed = card(api, {**body, "as_of": at})
        assert dt.datetime.fromisoformat(replayed.pop("served_at")) <= dt.datetime.fromisoformat(at)
        assert replayed == served
        assert replayed["content"].encode() == served["content"].encode()
    assert "served_at" not in steps[0][1]  # the present card's body is as it was
    other = api.post("/api/threads/t-replay/context-card", {"max_recent_messages": 2, "as_of": steps[-1][0]})
    assert other.status_code == 404 and other.json()["field"] == "as_of"
    assert "no context card" in other.json()["detail"]
    early = api.post("/api/threads/t-replay/context-card", {**body, "as_of": "2000-01-01"})
    assert early.status_code == 404 and early.json()["field"] == "as_of"
    bad = api.post("/api/threads/t-replay/context-card", {**body, "as_of": "soon"})
    assert bad.status_code == 422 and error_fields(bad) == ["as_of"]
    assert api.delete("/api/threads/t-replay").status_code == 204
    make_thread(thread_id="t-replay", user_id="u1", agent_id="a1")
    gone = api.post("/api/threads/t-replay/context-card", {**body, "as_of": steps[-1][0]})
    assert gone.status_code == 404 and gone.json()["field"] == "as_of"
