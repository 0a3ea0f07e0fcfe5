"""Flagged dependants on the staff review page (issue #32 part 4; staff/views/review.py): a chain of three whose
root is superseded is listed with the change that flagged it (the source, what happened, when, through which
memory), the thread page marks them, and the clear button clears one flag (POST, CSRF, redirect back), as an
``unflag`` history entry naming the staff user."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from memory.client import AgentMemory
from memory.models import Memory, MemoryVersion
from tests.ids import key

QUEUE = "/staff/projects/default/review/"


@pytest.fixture
def flagged(db):
    thread = AgentMemory().create_thread(thread_id="t-dep", user_id="u1", agent_id="a1")
    thread.add_memory("Caroline lives in Boston.", memory_id="a", memory_type="fact")
    thread.add_memory("Caroline likes Boston's winters.", memory_id="b", memory_type="preference",
                      derived_from=["a"])
    thread.add_memory("Suggest winter walks in Boston.", memory_id="c", memory_type="guideline", derived_from=["b"])
    thread.add_memory("Caroline moved to Denver.", memory_id="a2", memory_type="fact", memory_id_to_link="a",
                      link_type="supersedes", link_id="r-move")
    return thread


def article(page: str, memory_id: str) -> str:
    match = re.search(rf'<article class="dependant-item card" id="dependant-{memory_id}".*?</article>', page, re.S)
    assert match, f"no dependant {memory_id}"
    return match.group(0)


def test_the_chain_is_listed_with_its_cause_and_cleared(staff, staff_user, flagged):
    html = staff.get(QUEUE).content.decode()
    assert 'id="dependants-count" data-count="2"' in html
    c = article(html, "c")
    assert 'data-cause-action="supersede" data-cause-memory="a"' in c
    assert "Caroline lives in Boston." in c and "superseded" in c and "<code>r-move</code>" in c
    assert "through memory <code>b</code>" in c
    b = article(html, "b")
    assert "through memory" not in b and 'name="csrfmiddlewaretoken"' in b
    assert 'id="dependant-a2"' not in html and 'id="dependant-a"' not in html
    assert "style=" not in html and "<script>" not in html
    thread_page = staff.get("/staff/projects/default/threads/t-dep/").content.decode()
    assert thread_page.count(">needs review</a>") == 2
    assert 'data-count="1"' in staff.get(QUEUE + "?memory_type=guideline").content.decode().split(
        'id="review-dependants"')[1]

    answer = staff.post(f"{QUEUE}dependants/c/clear/", {"reason": "still fine"})
    assert answer.status_code == 302 and answer["Location"] == QUEUE
    assert not Memory.objects.get(pk=key("c")).needs_review
    newest = MemoryVersion.objects.filter(memory_id=key("c")).order_by("-version").first()
    assert newest.action == "unflag" and newest.actor_kind == "staff" and "still fine" in newest.reason
    assert newest.actor_id == staff_user.get_username()
    again = staff.post(f"{QUEUE}dependants/c/clear/", {})
    assert again.status_code == 409 and "not flagged" in again.content.decode()
    assert staff.post(f"{QUEUE}dependants/nope/clear/", {}).status_code == 404
    assert staff.get(f"{QUEUE}dependants/b/clear/").status_code == 405


def test_the_clear_button_needs_the_csrf_token(staff_user, flagged):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff_user)
    assert browser.post(f"{QUEUE}dependants/b/clear/", {}).status_code == 403
    assert Memory.objects.get(pk=key("b")).needs_review


def test_the_page_says_when_the_walk_stopped_at_its_bound(staff, staff_user, db, monkeypatch):
    from memory.records import derivations

    thread = AgentMemory().create_thread(thread_id="t-fan", user_id="u1", agent_id="a1")
    thread.add_memory("The office is in Leeds.", memory_id="root", memory_type="fact")
    for i in range(3):
        thread.add_memory(f"Meeting {i} in Leeds.", memory_id=f"d{i}", derived_from=["root"])
    monkeypatch.setattr(derivations, "MAX_DEPENDANTS", 2)
    thread.update_memory("root", content="The office is in York.")
    html = staff.get(QUEUE).content.decode()
    assert 'id="dependants-count" data-count="2"' in html
    assert html.count("The walk stopped at its bound") == 2 and "at most 2 memories flagged" in html
    thread.add_memory("Unbounded.", memory_id="s0")
    thread.add_memory("From unbounded.", memory_id="s1", derived_from=["s0"])
    thread.update_memory("s0", content="Unbounded, edited.")
    assert "The walk stopped" not in article(staff.get(QUEUE).content.decode(), "s1")
