"""Staff pages through the Django test client on a real SQLite file.

Login, each page and its region ids, the thread list's filters and paging,
inline edits going through the services (re-embedding), delete
confirmation, manual memories, relations, htmx fragments and form errors.
"""

import datetime
import re

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

import staff.views.memories as memory_views
from memory.models import Memory, Message, RecordLink, SearchChunk, Thread
from memory.records.tenancy import get_project
from memory.services.threads import thread_create
from tests.ids import key

DETAIL = "/staff/projects/default/threads/t-main/"


def ids_in(html: bytes, attribute: str) -> list[str]:
    return re.findall(rf'{attribute}="([^"]+)"', html.decode())


def region(html: bytes, region_id: str) -> str:
    """The opening tag of the element with this id (fails when absent)."""
    match = re.search(rf'<[a-z]+ [^>]*id="{region_id}"[^>]*>', html.decode())
    assert match, f"#{region_id} missing"
    return match.group(0)


def embedding(record_id: str) -> np.ndarray:
    return SearchChunk.objects.get(record_id=key(record_id)).embedding.copy()


# --- login -------------------------------------------------------------------------------------


PAGES = ["/staff/", "/staff/projects/default/threads/", DETAIL, DETAIL + "context-card/",
         "/staff/projects/default/search/", DETAIL + "memories/"]


@pytest.mark.parametrize("url", PAGES)
def test_pages_need_a_staff_login(anon, thread, url):
    response = anon.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/staff/login/?next=")


def test_an_htmx_request_without_login_redirects_the_whole_page(thread):
    response = Client(headers={"HX-Request": "true", "HX-Current-URL": "http://testserver" + DETAIL}).get(
        DETAIL + "memories/")
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/staff/login/?next=%2Fstaff%2Fprojects%2Fdefault%2Fthreads%2Ft-main%2F"


def test_non_staff_users_are_refused(db, thread):
    member = get_user_model().objects.create_user("member", password="pw-for-tests-only")
    browser = Client()
    browser.force_login(member)
    assert browser.get("/staff/projects/default/threads/").status_code == 302
    response = Client().post("/staff/login/", {"username": "member", "password": "pw-for-tests-only"})
    assert response.status_code == 200
    assert b"staff account" in response.content  # the admin's login form refuses non-staff


def test_staff_log_in_and_out(staff_user):
    browser = Client()
    response = browser.post("/staff/login/", {"username": "staffer", "password": "pw-for-tests-only",
                                              "next": "/staff/projects/default/search/"})
    assert (response.status_code, response["Location"]) == (302, "/staff/projects/default/search/")
    assert browser.get("/staff/projects/default/threads/").status_code == 200
    assert browser.get("/staff/logout/").status_code == 405  # logging out is a POST
    assert browser.post("/staff/logout/")["Location"] == "/staff/login/"
    assert browser.get("/staff/projects/default/threads/").status_code == 302


def test_the_site_root_leads_to_the_staff_pages(anon):
    assert anon.get("/")["Location"] == "/staff/"


# --- pages and regions ------------------------------------------------------------------------------


def test_every_page_renders_its_regions(staff, filled):
    pages = {
        "/staff/projects/default/threads/": ["thread-list"],
        DETAIL: ["timeline", "memories", "summary", "relations", "extraction-progress"],
        DETAIL + "context-card/": ["context-card"],
        "/staff/projects/default/search/?query=lisbon": ["search-results"],
    }
    for url, regions in pages.items():
        response = staff.get(url)
        assert response.status_code == 200, url
        html = response.content
        assert b'<link rel="stylesheet" href="/static/staff/staff.css">' in html
        assert b"/static/django_htmx/htmx-2.min.js" in html  # htmx, vendored by django-htmx
        assert b'<main id="main"' in html and b'<h1>' in html
        for region_id in regions:
            region(html, region_id)


def test_thread_page_shows_timeline_memories_by_type_relations_and_summary(staff, filled):
    html = staff.get(DETAIL).content
    text = html.decode()
    assert ids_in(html, "data-message-id") == filled["messages"]  # the conversation in order
    assert text.count('class="role">user</span>') == 2 and 'class="role">assistant</span>' in text
    # memories grouped by type in the spec's order, with status and TTL
    groups = re.findall(r'data-memory-type="(\w+)"', text)
    assert groups == ["memory", "fact", "guideline", "preference"]
    fact_group = text.split('data-memory-type="fact"')[1].split('data-memory-type="guideline"')[0]
    assert "User lives in Porto" in fact_group and "User lives in Lisbon" in fact_group
    assert 'id="memory-mem-old" data-memory-id="mem-old"' in text
    old_item = text.split('id="memory-mem-old"')[1].split("</li>")[0]
    assert "badge-invalid" in old_item and "TTL: none" in old_item  # superseded by mem-new
    # relations: the list and the graph
    relations = text.split('id="relations"')[1]
    assert 'data-relation-id="rel-1"' in relations and "supersedes" in relations
    assert "<svg" in relations and relations.count('<g class="node') == 2 and relations.count('class="edge"') == 1
    # summary: the transcript fallback without an LLM
    summary = text.split('id="summary"')[1].split("</section>")[0]
    assert "user: I moved to Lisbon last spring." in summary
    # extraction state and the socket the page script opens
    progress = region(html, "extraction-progress")
    assert 'data-socket-path="/ws/threads/t-main/extraction/?project=default"' in progress
    assert 'data-state="idle"' in progress
    assert "/static/staff/extraction.js" in text


def test_unknown_thread_is_404(staff, db):
    assert staff.get("/staff/projects/default/threads/nope/").status_code == 404
    assert staff.get("/staff/projects/default/threads/nope/context-card/").status_code == 404


def test_expired_records_are_shown_flagged_without_edit_forms(staff, filled):
    past = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    Memory.objects.filter(pk=key("mem-pref")).update(expires_at=past)
    html = staff.get(DETAIL).content.decode()
    item = html.split('id="memory-mem-pref"')[1].split("</li>")[0]
    assert "badge-expired" in item and "Edit memory" not in item


def test_static_files_are_found(staff):
    from django.contrib.staticfiles import finders

    for path in ("staff/staff.css", "staff/extraction.js", "django_htmx/htmx-2.min.js"):
        assert finders.find(path), path


# --- thread list ----------------------------------------------------------------------------------


def make_threads(n, **fields):
    for i in range(n):
        thread_create(project=get_project(None), thread_id=f"bulk-{i:03d}", user_id=fields.get("user_id", f"u{i % 3}"),
                               agent_id=fields.get("agent_id", "agent-b"),
                               metadata={"team": "blue" if i % 2 else "red", "tags": ["t", str(i % 5)]})


def walk_pages(staff, url):
    """Follow 'Next' links from ``url`` and collect the thread ids of every page."""
    seen, pages = [], 0
    while url:
        html = staff.get(url).content.decode()
        seen += re.findall(r'<tr data-thread-id="([^"]+)">', html)
        match = re.search(r'<a href="(\?[^"]*)"[^>]*rel="next"', html)
        url = "/staff/projects/default/threads/" + match.group(1).replace("&amp;", "&") if match else None
        pages += 1
    return seen, pages


def test_pagination_reaches_every_thread_once(staff, db):
    make_threads(60)
    seen, pages = walk_pages(staff, "/staff/projects/default/threads/")
    assert pages == 3  # 25 per page
    assert len(seen) == 60 and set(seen) == {f"bulk-{i:03d}" for i in range(60)}


def test_paging_keeps_the_filters(staff, db):
    make_threads(60)
    seen, pages = walk_pages(staff, '/staff/projects/default/threads/?metadata={"team":"blue"}')
    assert pages == 2
    assert sorted(seen) == [f"bulk-{i:03d}" for i in range(60) if i % 2]


def test_list_shows_counts_and_last_activity(staff, filled):
    html = staff.get("/staff/projects/default/threads/").content.decode()
    row = html.split('<tr data-thread-id="t-main">')[1].split("</tr>")[0]
    assert re.findall(r'<td class="num">(\d+)</td>', row) == ["3", "3"]  # messages, memories
    assert "<time datetime=" in row


@pytest.mark.parametrize(("query", "expected"), [
    ("q=bulk-00", [f"bulk-00{i}" for i in range(10)]),
    ("q=U2", [f"bulk-{i:03d}" for i in range(30) if i % 3 == 2]),  # user id substring, any case
    ("user_id=u1", [f"bulk-{i:03d}" for i in range(30) if i % 3 == 1]),
    ("user_id=u", []),  # exact, not a substring
    ("agent_id=agent-b&metadata=%7B%22tags%22%3A%7B%22%24array_contains%22%3A%224%22%7D%7D",
     ["bulk-004", "bulk-009", "bulk-014", "bulk-019", "bulk-024", "bulk-029"]),
])
def test_list_filters_by_ids_and_metadata(staff, db, query, expected):
    make_threads(30)
    seen, _ = walk_pages(staff, f"/staff/projects/default/threads/?{query}")
    assert sorted(seen) == expected


@pytest.mark.parametrize(("metadata", "message"), [
    ("{not json", "not valid JSON"),
    ('["a"]', "must be a JSON object"),
    ('{"$bad": 1}', "metadata_filter"),
])
def test_a_bad_metadata_filter_is_shown_next_to_its_field(staff, htmx, db, metadata, message):
    for browser in (staff, htmx):
        response = browser.get("/staff/projects/default/threads/", {"metadata": metadata})
        assert response.status_code == 422
        html = response.content.decode()
        field = html.split('id="id_metadata"')[0].rsplit("<label", 1)[1] + html.split('id="id_metadata"')[1][:600]
        assert message in field and "errorlist" in field


def test_htmx_gets_the_list_fragment(htmx, staff, filled):
    response = htmx.get("/staff/projects/default/threads/", {"q": "t-main"})
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<div id="thread-browser">') and 'data-thread-id="t-main"' in html
    assert "HX-Request" in response["Vary"]
    assert "<html" in staff.get("/staff/projects/default/threads/").content.decode()


# --- messages --------------------------------------------------------------------------------------


def edit_message(browser, message_id, **data):
    return browser.post(f"{DETAIL}messages/{message_id}/edit/", data)


def test_editing_a_message_goes_through_the_service_and_reembeds(staff, filled):
    mid = filled["messages"][0]
    before = embedding(mid)
    response = edit_message(staff, mid, content="I moved to Reykjavik in winter.", metadata='{"topic": "move"}')
    assert response.status_code == 302 and response["Location"] == f"{DETAIL}#message-1"
    row = Message.objects.get(pk=key(mid))
    assert (row.content, row.metadata) == ("I moved to Reykjavik in winter.", {"topic": "move"})
    chunk = SearchChunk.objects.get(record_id=key(mid))
    assert chunk.text == "user: I moved to Reykjavik in winter." and chunk.metadata == {"topic": "move"}
    assert not np.array_equal(chunk.embedding, before)
    hits = filled["thread"].search("Iceland capital", record_types=["message"], max_results=1)
    assert hits[0].record_id == mid
    assert "Message saved." in staff.get(DETAIL).content.decode()  # the flash after the redirect


def test_unchanged_content_is_not_reembedded(staff, filled):
    mid = filled["messages"][0]
    before = embedding(mid)
    response = edit_message(staff, mid, content="I moved to Lisbon last spring.", metadata='{"topic": "city"}')
    assert response.status_code == 302
    assert Message.objects.get(pk=key(mid)).metadata == {"topic": "city"}
    assert np.array_equal(embedding(mid), before)


def test_a_message_edit_over_htmx_returns_the_item(htmx, filled):
    mid = filled["messages"][1]
    response = edit_message(htmx, mid, content="Do you like Lisbon?", metadata="")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<li class="message" id="message-2"') and "Do you like Lisbon?" in html


def test_bad_message_metadata_is_refused_next_to_the_field(htmx, staff, filled):
    mid = filled["messages"][0]
    response = edit_message(htmx, mid, content="changed", metadata="[1, 2]")
    html = response.content.decode()
    assert response.status_code == 422
    assert 'id="msg-1-metadata-errors"' in html and "must be a JSON object" in html
    assert 'aria-invalid="true" aria-describedby="msg-1-metadata-errors"' in html
    assert "<details class=\"edit\" open>" in html and "changed</textarea>" in html  # what was typed stays
    assert Message.objects.get(pk=key(mid)).content == "I moved to Lisbon last spring."  # nothing written
    full = edit_message(staff, mid, content="changed", metadata='{"a": NaN}')
    assert full.status_code == 422 and b'id="timeline"' in full.content  # no JS: the whole page


def test_message_delete_asks_first_then_deletes(staff, htmx, filled):
    mid = filled["messages"][2]
    url = f"{DETAIL}messages/{mid}/delete/"
    page = staff.get(url)
    assert page.status_code == 200 and b"I love the tram rides" in page.content and b"<html" in page.content
    assert f'action="{url}"'.encode() in page.content
    fragment = htmx.get(url)
    assert b"<html" not in fragment.content and b'class="confirm card"' in fragment.content
    assert Message.objects.filter(pk=key(mid)).exists()  # asking deletes nothing
    response = htmx.post(url)
    # nothing replaces the list item; only the header counts come, out of band 
    body = response.content.decode().strip()
    assert response.status_code == 200 and body.startswith('<dl class="thread-facts" id="thread-counts" '
                                                            'hx-swap-oob="true">') and body.endswith("</dl>")
    assert not Message.objects.filter(pk=key(mid)).exists()
    assert not SearchChunk.objects.filter(record_id=key(mid)).exists()
    assert staff.post(url).status_code == 404


# --- memories --------------------------------------------------------------------------------------


def edit_memory(browser, memory_id, **data):
    fields = {"content": "", "memory_type": "fact", "status": "valid", "ttl_days": "", "ttl_anchor": ""}
    return browser.post(f"{DETAIL}memories/{memory_id}/edit/", {**fields, **data})


def test_editing_a_memory_persists_and_reembeds(staff, filled):
    before = embedding("mem-new")
    response = edit_memory(staff, "mem-new", content="User lives in Reykjavik", memory_type="memory",
                           status="valid", ttl_days="30")
    assert response.status_code == 302 and response["Location"] == f"{DETAIL}#memory-mem-new"
    row = Memory.objects.get(pk=key("mem-new"))
    assert (row.content, row.memory_type, row.status) == ("User lives in Reykjavik", "memory", "valid")
    assert row.expires_at - row.created_at == datetime.timedelta(days=30)
    chunk = SearchChunk.objects.get(record_id=key("mem-new"))
    assert (chunk.text, chunk.record_type, chunk.expires_at) == ("User lives in Reykjavik", "memory", row.expires_at)
    assert not np.array_equal(chunk.embedding, before)
    # the relation's endpoint type follows the retyped memory
    link = RecordLink.objects.get(pk=key("rel-1"))
    assert (link.source_type, link.target_type) == ("memory", "fact")
    hits = filled["thread"].search("Iceland", record_types=["memory"], max_results=1)
    assert hits[0].record_id == "mem-new"
    assert "User lives in Reykjavik" in staff.get(DETAIL).content.decode().split('data-memory-type="memory"')[1]


def test_memory_status_and_expiry_can_be_cleared(staff, filled):
    assert edit_memory(staff, "mem-pref", content="User likes pastries", memory_type="preference",
                       ttl_days="5").status_code == 302
    assert Memory.objects.get(pk=key("mem-pref")).expires_at is not None
    assert edit_memory(staff, "mem-pref", content="User likes pastries", memory_type="preference",
                       status="invalid", no_expiry="on").status_code == 302
    row = Memory.objects.get(pk=key("mem-pref"))
    assert (row.status, row.expires_at) == ("invalid", None)
    assert SearchChunk.objects.get(record_id=key("mem-pref")).status == "invalid"


@pytest.mark.parametrize(("data", "field", "message"), [
    ({"content": "   "}, "content", "must not be empty"),
    ({"content": "x", "ttl_days": "-1"}, "ttl", "0 or more days"),
    ({"content": "x", "ttl_days": "2", "no_expiry": "on"}, "ttl", "leave empty"),
    ({"content": "x", "memory_type": "opinion"}, None, "Select a valid choice"),
])
def test_memory_form_errors_show_next_to_the_field(htmx, filled, data, field, message):
    response = edit_memory(htmx, "mem-pref", **{"memory_type": "preference", **data})
    html = response.content.decode()
    assert response.status_code == 422
    assert html.lstrip().startswith('<section id="memories"') and 'hx-swap-oob="true"' in html
    item = html.split('id="memory-mem-pref"')[1].split("</li>")[0]
    assert message in item and '<details class="edit" open>' in item
    if field:
        assert f'id="mem-mem-pref-{field}-errors"' in item
    row = Memory.objects.get(pk=key("mem-pref"))
    assert (row.content, row.expires_at) == ("User likes pastries", None)


def test_a_memory_edit_over_htmx_swaps_memories_and_relations(htmx, filled):
    response = edit_memory(htmx, "mem-new", content="User lives in Lisbon", status="invalid")
    html = response.content.decode()
    assert response.status_code == 200
    memories, relations = html.split('<section id="relations"')
    assert memories.lstrip().startswith('<section id="memories"') and "hx-swap-oob" not in memories
    assert 'hx-swap-oob="true"' in relations.split(">", 1)[0]
    assert Memory.objects.get(pk=key("mem-new")).status == "invalid"


def test_memory_delete_asks_then_removes_relations_and_revalidates(staff, htmx, filled):
    url = f"{DETAIL}memories/mem-new/delete/"
    page = staff.get(url)
    assert page.status_code == 200 and b"User lives in Lisbon" in page.content
    assert b"Its relations go with it" in page.content
    assert Memory.objects.filter(pk=key("mem-new")).exists()
    response = htmx.post(url)
    assert response.status_code == 200 and b'<section id="memories"' in response.content
    assert not Memory.objects.filter(pk=key("mem-new")).exists()
    assert not SearchChunk.objects.filter(record_id=key("mem-new")).exists()
    assert not RecordLink.objects.filter(pk=key("rel-1")).exists()
    assert Memory.objects.get(pk=key("mem-old")).status == "valid"  # no longer superseded
    assert b'data-relation-id="rel-1"' not in response.content


def add_memory(browser, **data):
    fields = {"add-content": "", "add-memory_type": "memory", "add-status": "valid"}
    return browser.post(f"{DETAIL}memories/add/", {**fields, **{f"add-{k}": v for k, v in data.items()}})


def test_adding_a_manual_memory(staff, filled):
    response = add_memory(staff, content="User is allergic to peanuts", memory_type="fact",
                          metadata='{"source": "staff"}', timestamp="2024-05-01T10:00:00Z", ttl_days="90")
    assert response.status_code == 302
    row = Memory.objects.get(content="User is allergic to peanuts")
    assert (row.memory_type, row.metadata, row.thread_id, row.user_id) == ("fact", {"source": "staff"},
                                                                             key("t-main"), "user-1")
    assert row.timestamp == "2024-05-01T10:00:00Z" and row.expires_at is not None
    hits = filled["thread"].search("food allergy", record_types=["fact"], max_results=1)
    assert hits[0].record_id == row.public_id


@pytest.mark.parametrize(("data", "field", "message"), [
    ({"content": ""}, "content", "This field is required"),
    ({"content": "ok", "timestamp": "yesterday", "ttl_days": "3", "ttl_anchor": "timestamp"}, "ttl_anchor",
     "TIMESTAMP anchoring needs a concrete ISO-8601 timestamp"),
    ({"content": "ok", "metadata": "{"}, "metadata", "not valid JSON"),
])
def test_adding_a_memory_shows_errors(htmx, filled, data, field, message):
    before = Memory.objects.count()
    response = add_memory(htmx, **data)
    html = response.content.decode()
    assert response.status_code == 422
    form = html.split('<details class="add" open>')[1].split("</form>")[0]
    after_field = form.split(f'id="id_add-{field}"')[0].rsplit("<div", 1)[1] + form.split(f'id="id_add-{field}"')[1]
    assert message in after_field
    assert Memory.objects.count() == before


# --- relations --------------------------------------------------------------------------------------


def add_relation(browser, **data):
    return browser.post(f"{DETAIL}relations/add/", {f"rel-{k}": v for k, v in data.items()})


def test_relations_can_be_added_and_removed(staff, htmx, filled):
    response = add_relation(htmx, source_record_id="mem-pref", relation_type="supports",
                            target_record_id="mem-new")
    assert response.status_code == 200
    relations, memories = response.content.decode().split('<section id="memories"')
    assert relations.lstrip().startswith('<section id="relations"') and "supports" in relations
    link = RecordLink.objects.get(source_id=key("mem-pref"))
    assert (link.target_id, link.relation_type, link.opposite_relation_type) == (key("mem-new"), "supports",
                                                                                  "is_supported_by")
    assert (link.source_type, link.target_type) == ("preference", "fact")
    # a custom relation
    add_relation(staff, source_record_id="mem-pref", relation_type="custom", custom_relation_type="inspired_by",
                 target_record_id="mem-old")
    assert RecordLink.objects.get(source_id=key("mem-pref"), target_id=key("mem-old")).relation_type == "inspired_by"
    # removing the supersedes relation makes the old memory valid again
    url = f"{DETAIL}relations/rel-1/delete/"
    assert b"becomes valid again" in staff.get(url).content
    assert RecordLink.objects.filter(pk=key("rel-1")).exists()
    assert staff.post(url).status_code == 302
    assert not RecordLink.objects.filter(pk=key("rel-1")).exists()
    assert Memory.objects.get(pk=key("mem-old")).status == "valid"


@pytest.mark.parametrize(("data", "field", "message"), [
    ({"source_record_id": "mem-new", "target_record_id": "mem-new"}, "target_record_id", "cannot be related to itself"),
    ({"source_record_id": "mem-old", "target_record_id": "mem-new"}, "target_record_id", "already related"),
    ({"source_record_id": "mem-x", "target_record_id": "mem-new"}, "source_record_id", "Select a valid choice"),
    ({"source_record_id": "mem-pref", "target_record_id": "mem-new", "relation_type": "custom"},
     "custom_relation_type", "name the custom relation"),
])
def test_relation_errors_show_next_to_the_field(htmx, filled, data, field, message):
    response = add_relation(htmx, **{"relation_type": "supports", **data})
    html = response.content.decode()
    assert response.status_code == 422
    form = html.split("<summary>Relate two memories</summary>")[1].split("</form>")[0]
    around = form.split(f'id="id_rel-{field}"')[0].rsplit("<div", 1)[1] + form.split(f'id="id_rel-{field}"')[1][:400]
    assert message in around
    assert RecordLink.objects.count() == 1


# --- extraction ------------------------------------------------------------------------------------


def test_extract_now_without_an_llm_says_so(htmx, filled):
    response = htmx.post(f"{DETAIL}extract/")
    html = response.content.decode()
    assert response.status_code == 409
    assert html.lstrip().startswith('<div id="extraction-state">') and "no LLM is configured" in html


def test_the_thread_page_says_why_extraction_is_off(staff, filled, settings):
    """Issue #33 friction 4: the staff page names the reason (here: no LLM configured), not a guess between two."""
    from django.utils.html import escape

    from memory.extraction.tracker import REASON_NO_LLM
    from memory.llm.adapters import reset_llm

    settings.OAM_LLM_BASE_URL = ""
    reset_llm()
    html = staff.get(DETAIL).content.decode()
    state = html.split('<div id="extraction-state">')[1].split("</p>")[0]
    assert f'<span class="extraction-off">Off: {escape(REASON_NO_LLM)}</span>' in state


def test_extract_now_runs_extraction_through_the_thread(staff, htmx, monkeypatch, client, fresh_extraction_tracker):
    from memory.client import MemoryExtractionConfig
    from memory.llm.scripted import ScriptedLlm

    thread = client.create_thread(thread_id="t-x", user_id="u", agent_id="a", memory_extraction_config=(
        MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False)))
    ids = thread.add_messages([{"role": "user", "content": "I keep bees on my roof."}])  # no LLM yet: stored only
    llm = ScriptedLlm([{"memories": [{"memory_type": "fact", "content": "User keeps bees.",
                                      "source_message_ids": ["m1"]}]}])
    monkeypatch.setattr("memory.llm.adapters.get_llm", lambda: llm)
    response = htmx.post("/staff/projects/default/threads/t-x/extract/")
    html = response.content.decode()
    assert response.status_code == 200 and "Extraction job" in html and "started" in html
    assert "finished</strong>" in html and "1 memory created" in html
    row = Memory.objects.get(thread_id=key("t-x"))
    assert (row.content, row.source_message_ids) == ("User keeps bees.", ids)
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 1
    again = staff.post("/staff/projects/default/threads/t-x/extract/")
    assert again.status_code == 302  # nothing pending: a note, no new job
    assert "Nothing to extract" in staff.get("/staff/projects/default/threads/t-x/").content.decode()


def test_the_timeline_pages_through_long_conversations(staff, htmx, filled, monkeypatch):
    from memory.reports import browse

    monkeypatch.setattr(browse, "MESSAGES_PER_PAGE", 2)
    first = staff.get(DETAIL).content.decode()
    assert ids_in(first.encode(), "data-message-id") == filled["messages"][:2]
    assert 'hx-get="/staff/projects/default/threads/t-main/timeline/?page=2"' in first and 'href="?page=2"' in first
    second = htmx.get(f"{DETAIL}timeline/", {"page": "2"})
    html = second.content.decode()
    assert html.lstrip().startswith('<section id="timeline"') and "<html" not in html
    assert ids_in(second.content, "data-message-id") == filled["messages"][2:]
    assert '<ol class="timeline" start="3">' in html
    assert staff.get(f"{DETAIL}timeline/?page=2")["Location"] == f"{DETAIL}?page=2"  # no JS: the page itself



def test_a_bad_input_is_shown_but_a_programming_error_is_a_500(staff, filled, monkeypatch):
    """The staff views catch the engine's ``DomainError`` (a bad input, shown next to its field with a 422), not
    every ``ValueError``: one that is not a domain error is a bug and surfaces (a 500)."""
    from memory.core.errors import DomainError, InvalidArgument

    assert issubclass(InvalidArgument, DomainError) and issubclass(InvalidArgument, ValueError)

    def bad_input(**kwargs):
        raise InvalidArgument("content", "is refused by the test")

    monkeypatch.setattr(memory_views, "memory_update", bad_input)
    response = edit_memory(staff, "mem-new", content="User lives in Oslo")
    assert response.status_code == 422 and "is refused by the test" in response.content.decode()

    def bug(**kwargs):
        raise ValueError("a programming error")

    monkeypatch.setattr(memory_views, "memory_update", bug)
    with pytest.raises(ValueError, match="a programming error"):
        edit_memory(staff, "mem-new", content="User lives in Oslo")
    assert Memory.objects.get(pk=key("mem-new")).content == "User lives in Lisbon"
