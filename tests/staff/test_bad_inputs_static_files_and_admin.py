"""Inputs at the edge of what the staff pages and the admin accept, and static files: never a server error or a bad
write.

* static files (staff CSS, htmx, the API docs' Swagger UI) are served when daphne runs without ``collectstatic``;
* a TTL whose expiry falls after year 9999, and context-card counts beyond SQL's
  64-bit integers, are errors next to their field (they were 500s, in the API too);
* a thread whose id holds a ``/`` no longer breaks the thread list and search pages;
* the Django admin shows the values the services refuse as field errors (they were
  500s), keeps a thread's ids fixed and creates threads through the services.
"""

import re

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import Client, override_settings

import memory.admin as memory_admin
from memory.models import Memory, RecordLink, SearchChunk, Thread
from memory.records.tenancy import get_project
from memory.services.threads import thread_update
from tests.ids import key

DETAIL = "/staff/projects/default/threads/t-main/"


def field_errors(html: bytes) -> list[str]:
    return re.findall(r'<ul class="errorlist[^"]*"[^>]*>\s*<li>([^<]+)</li>', html.decode())


# --- static files ----------------------------------------------------------------------------------


def test_static_files_are_served_without_collectstatic(db, tmp_path):
    with override_settings(STATIC_ROOT=tmp_path / "never-collected"):
        browser = Client()  # a new handler: WhiteNoise reads its settings when the first request loads it
        for path in ("/static/staff/staff.css", "/static/staff/extraction.js", "/static/django_htmx/htmx-2.min.js",
                     "/static/ninja/swagger-ui.css", "/static/ninja/swagger-ui-bundle.js",  # /api/docs (offline)
                     "/static/ninja/swagger-ui-init.js"):
            response = browser.get(path)
            assert response.status_code == 200, path
            b"".join(response.streaming_content)


# --- values beyond what dates and SQL integers hold ----------------------------------------------------


def test_a_ttl_past_year_9999_is_a_field_error_and_nothing_changes(staff, htmx, thread):
    memory_id = thread.add_memory("User lives in Rome", memory_type="fact", memory_id="m-rome")
    before = SearchChunk.objects.get(record_id=key(memory_id)).text
    for browser in (staff, htmx):
        response = browser.post(f"{DETAIL}memories/{memory_id}/edit/", {
            "content": "User lives in Milan", "memory_type": "fact", "status": "valid",
            "ttl_days": "99999999999999", "ttl_anchor": ""})
        assert response.status_code == 422
        assert any("after year 9999" in e for e in field_errors(response.content)), field_errors(response.content)
        assert f'aria-describedby="mem-{memory_id}-ttl-errors"' in response.content.decode()  # next to the TTL field
    row = Memory.objects.get(pk=key(memory_id))
    assert (row.content, row.expires_at) == ("User lives in Rome", None)
    assert SearchChunk.objects.get(record_id=key(memory_id)).text == before
    response = staff.post(f"{DETAIL}memories/add/", {"add-content": "x", "add-memory_type": "memory",
                                                     "add-status": "valid", "add-ttl_days": "3000000"})
    assert response.status_code == 422 and any("after year 9999" in e for e in field_errors(response.content))
    assert Memory.objects.filter(thread_id=key("t-main")).count() == 1


def test_the_api_refuses_a_ttl_past_year_9999(thread):
    with pytest.raises(ValueError, match="ttl_days: .*after year 9999"):
        thread.add_messages([{"role": "user", "content": "hi"}], ttl_days=3_000_000)
    with pytest.raises(ValueError, match="ttl_days"):
        thread.add_memory("x", ttl_days=99_999_999_999)
    assert thread.get_messages() == []


@pytest.mark.parametrize("field", ["fallback_message_count", "except_last_messages", "max_recent_messages"])
def test_context_card_counts_beyond_sql_integers_are_field_errors(staff, thread, field):
    thread.add_messages([{"role": "user", "content": "I moved to Lisbon."}])
    response = staff.get(f"{DETAIL}context-card/", {"preview": "1", field: "99999999999999999999",
                                                    "include_invalid_results": "on"})
    assert response.status_code == 422
    html = response.content.decode()
    group = html.split(f'for="id_{field}"')[1].split('<div class="field')[0]
    assert "must be at most 2147483647" in group  # the error sits in that field's group
    assert 'id="context-card"' not in html


# --- thread ids the URL router cannot route ----------------------------------------------------------


def test_a_thread_id_with_a_slash_does_not_break_the_list_or_search(staff, client):
    odd = client.create_thread(thread_id="team/alpha", user_id="u-odd", agent_id="a-odd")
    odd.add_messages([{"role": "user", "content": "The zebra crossing is on Alpha street."}])
    client.create_thread(thread_id="plain-thread", user_id="u-odd", agent_id="a-odd")
    page = staff.get("/staff/projects/default/threads/")
    assert page.status_code == 200
    html = page.content.decode()
    assert f'href="/admin/memory/thread/{quote(key("team/alpha"))}/change/"' in html  # the admin can open it
    assert '<a href="/staff/projects/default/threads/plain-thread/">plain-thread</a>' in html
    found = staff.get("/staff/projects/default/search/", {"query": "zebra crossing", "include_invalid_results": "on"})
    assert found.status_code == 200
    assert 'data-record-type="message"' in found.content.decode() and "team/alpha" in found.content.decode()


# --- the admin -------------------------------------------------------------------------------------


@pytest.fixture
def root(db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    browser = Client()
    browser.force_login(user)
    return browser


def test_admin_metadata_the_services_refuse_is_a_field_error(root, thread):
    [message_id] = thread.add_messages([{"role": "user", "content": "hello"}])
    memory_id = thread.add_memory("likes Rome", memory_type="preference", memory_id="m-a")
    thread.add_memory("visits Rome", memory_type="fact", memory_id="m-b")
    thread.link_records("m-b", "fact", "m-a", "preference", "supports", relation_id="r-1")
    posts = {
        f"/admin/memory/memory/{quote(key(memory_id))}/change/": {
            "memory_type": "preference", "content": "likes Milan", "metadata": "[1, 2]", "status": "valid",
            "timestamp": "", "expires_at_0": "", "expires_at_1": ""},
        f"/admin/memory/message/{quote(key(message_id))}/change/": {
            "content": "hello again", "metadata": '"text"', "status": "valid", "expires_at_0": "", "expires_at_1": ""},
        f"/admin/memory/recordlink/{quote(key('r-1'))}/change/": {
            "relation_type": "supports", "opposite_relation_type": "is_supported_by", "metadata": "[]",
            "timestamp": ""},
        f"/admin/memory/thread/{quote(key('t-main'))}/change/": {
            "metadata": "[1]", "messages-TOTAL_FORMS": "0", "messages-INITIAL_FORMS": "0"},
    }
    for url, data in posts.items():
        response = root.post(url, data)
        assert response.status_code == 200, url  # the form again, not a redirect or a 500
        assert any(e.startswith("must be a dict or None") for e in field_errors(response.content)), url
    assert Memory.objects.get(pk=key(memory_id)).content == "likes Rome"
    assert Memory.objects.get(pk=key(memory_id)).metadata == {}
    assert RecordLink.objects.get(pk=key("r-1")).metadata == {}
    assert Thread.objects.get(pk=key("t-main")).metadata == {}


def test_an_inverted_window_in_the_admin_is_a_field_error_not_a_500(root, thread):
    """An outside attack (issue #32): valid_to before valid_from passed the form and failed in ``save_model``."""
    memory_id = thread.add_memory("lives in Lyon", memory_id="m-w")
    response = root.post(f"/admin/memory/memory/{quote(key(memory_id))}/change/", {
        "memory_type": "memory", "content": "lives in Lyon", "metadata": "{}", "status": "valid", "timestamp": "",
        "expires_at_0": "", "expires_at_1": "", "valid_from_0": "2026-05-01", "valid_from_1": "00:00:00",
        "valid_to_0": "2026-04-01", "valid_to_1": "00:00:00"})
    assert response.status_code == 200  # the form again, with the error next to valid_to
    assert any(e.startswith("must not be before valid_from") for e in field_errors(response.content))
    row = Memory.objects.get(pk=key(memory_id))
    assert (row.valid_from, row.valid_to) == (None, None)


def test_admin_keeps_a_threads_ids_and_edits_metadata_through_the_services(root, thread, monkeypatch):
    page = root.get(f"/admin/memory/thread/{quote(key('t-main'))}/change/").content.decode()
    for name in ("id", "user_id", "agent_id", "config"):
        assert f'name="{name}"' not in page, name  # shown, not editable: the thread's records carry them
    calls = []
    update = thread_update
    monkeypatch.setattr(memory_admin, "thread_update", lambda **kw: calls.append(kw) or update(**kw))
    response = root.post(f"/admin/memory/thread/{quote(key('t-main'))}/change/", {
        "id": "t-renamed", "user_id": "someone-else", "metadata": '{"team": "blue"}',
        "messages-TOTAL_FORMS": "0", "messages-INITIAL_FORMS": "0"})
    assert response.status_code == 302
    assert [(kw["thread"].public_id, kw["metadata"]) for kw in calls] == [("t-main", {"team": "blue"})]
    assert list(Thread.objects.values_list("id", "user_id", "metadata")) == [(key("t-main"), "user-1",
                                                                               {"team": "blue"})]


def test_admin_creates_threads_through_the_services(root, db):
    blank = root.post("/admin/memory/thread/add/", {"id": "   ", "metadata": "{}", "messages-TOTAL_FORMS": "0",
                                                    "messages-INITIAL_FORMS": "0"})
    assert blank.status_code == 200 and not Thread.objects.exists()
    response = root.post("/admin/memory/thread/add/", {
        "id": "t-admin", "project": get_project(None).pk, "user_id": "u-admin", "agent_id": "",
        "metadata": '{"k": 1}', "config": '{"x": 1}',
        "messages-TOTAL_FORMS": "0", "messages-INITIAL_FORMS": "0"})
    assert response.status_code == 302
    row = Thread.objects.get(pk=key("t-admin"))
    assert (row.user_id, row.agent_id, row.metadata, row.config) == ("u-admin", None, {"k": 1}, {})
