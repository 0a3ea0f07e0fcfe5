"""History of every memory (memory.records.history): versions from every door, undo, and what erasure does to it.

Real SQLite file, real embedder, real API and staff views (Django test
clients); the extraction LLM is ``ScriptedLlm``, as in tests/memory/test_extraction.py.
"""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from memory.client import AgentMemory
from memory.core.errors import NotFound
from memory.extraction.config import MemoryExtractionConfig
from memory.llm.scripted import ScriptedLlm
from memory.models import Memory, MemoryVersion, SearchChunk
from memory.records import history
from memory.records.tenancy import Tenant, get_project
from memory.services.erasure import expired_purge
from tests.api.helpers import JsonClient
from tests.ids import key
from threads.auth import api_key_create

# review_memory_types=(): these tests are about history; the review queue (extracted guidelines and
# preferences wait for a reviewer by default) is tests/memory/test_review.py's.
INLINE = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, review_memory_types=())
DETAIL = "/staff/projects/default/threads/t-h/"


def memories(*items):
    return {"memories": [{"memory_type": t, "content": c, "source_message_ids": list(r)} for t, c, r in items]}


def staff_browser() -> tuple[Client, str]:
    user = get_user_model().objects.create_user("curator", password="pw-for-tests-only", is_staff=True)
    get_project(None).members.add(user)
    browser = Client()
    browser.force_login(user)
    return browser, user.get_username()


@pytest.mark.usefixtures("fresh_extraction_tracker")
def test_a_memory_edited_through_the_api_the_staff_page_and_extraction_names_each_actor(db):
    llm = ScriptedLlm([memories(("preference", "Caroline likes hiking.", ["m1"])),
                       memories(("preference", "Caroline no longer likes hiking.", ["m1"])),
                       {"relation": "updates"}])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-h", user_id="u1", agent_id="a1",
                                                memory_extraction_config=INLINE)
    thread.add_messages([{"role": "user", "content": "I like hiking"}])
    [memory] = Memory.objects.all()
    mid = memory.public_id

    key_row, raw = api_key_create(name="editor")
    api = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    answer = api.patch(f"/api/threads/t-h/memories/{mid}", {"metadata": {"checked": True}})
    assert answer.status_code == 200, answer.content

    browser, username = staff_browser()
    answer = browser.post(f"{DETAIL}memories/{mid}/edit/", {
        "content": "Caroline likes hiking.", "memory_type": "preference", "status": "valid",
        "ttl_days": "30", "ttl_anchor": ""})
    assert answer.status_code == 302, answer.content[:500]

    thread.add_messages([{"role": "user", "content": "I stopped liking hiking"}])
    newer = Memory.objects.exclude(pk=memory.pk).get()
    job_id = newer.metadata["extraction"]["job_id"]

    versions = thread.get_memory_history(mid)
    assert [(v.version, v.action) for v in versions] == [
        (1, "create"), (2, "update"), (3, "update"), (4, "invalidate")]
    create, by_api, by_staff, by_extraction = versions
    first_job = memory.metadata["extraction"]["job_id"]  # as stored before the API replaced the metadata
    assert create.actor == {"kind": "extraction", "id": str(first_job)} and "new" in create.reason
    assert by_api.actor == {"kind": "api_key", "id": str(key_row.pk)}
    assert by_api.reason == f"PATCH /api/threads/t-h/memories/{mid}" and by_api.changed == ["metadata"]
    assert by_api.before["metadata"] == memory.metadata and by_api.after["metadata"] == {"checked": True}
    assert by_staff.actor == {"kind": "staff", "id": username} and by_staff.changed == ["expires_at"]
    assert by_staff.before["expires_at"] is None and by_staff.after["expires_at"] is not None
    relation = by_extraction.relation_id
    assert by_extraction.actor == {"kind": "relation", "id": relation,
                                   "via": {"kind": "extraction", "id": str(job_id)}}
    assert by_extraction.reason.startswith(f"supersedes {relation}") and f"job {job_id}" in by_extraction.reason
    assert (by_extraction.before["status"], by_extraction.after["status"]) == ("valid", "invalid")
    # the new memory's own history starts with its creation by the second job, with the decision as the why
    [made] = thread.get_memory_history(newer.public_id)
    assert made.actor == {"kind": "extraction", "id": str(job_id)} and f"updates of {mid}" in made.reason

    over_http = api.get(f"/api/threads/t-h/memories/{mid}/history")
    assert over_http.status_code == 200
    assert over_http.json()["count"] == 4
    assert [v["actor"]["kind"] for v in over_http.json()["items"]] == ["extraction", "api_key", "staff", "relation"]
    page_two = api.get(f"/api/threads/t-h/memories/{mid}/history?limit=2&offset=2").json()["items"]
    assert [v["version"] for v in page_two] == [3, 4]
    page = browser.get(DETAIL).content.decode()  # the staff thread page shows the timeline
    assert f'id="history-{mid}"' in page and "api_key" in page and username in page


def test_undo_restores_content_type_and_status_and_search_finds_the_restored_text(thread):
    mid = thread.add_memory("The locker code is zebra forty two", memory_type="fact", memory_id="locker")
    thread.update_memory(mid, content="The locker code is giraffe nine", status="invalid")
    from memory.services.memories import memory_update

    memory_update(thread=thread.row, memory_id=mid, memory_type="guideline",
                           retention=thread._client.retention_config)
    row = Memory.objects.get(pk=key(mid))
    assert (row.content, row.memory_type, row.status) == ("The locker code is giraffe nine", "guideline", "invalid")

    number = thread.restore_memory_version(mid, 1)

    assert number == 4
    row = Memory.objects.get(pk=key(mid))
    assert (row.content, row.memory_type, row.status) == ("The locker code is zebra forty two", "fact", "valid")
    chunks = list(SearchChunk.objects.filter(record_id=row.pk).values_list("text", "record_type", "status"))
    assert chunks and all("zebra" in text and "giraffe" not in text for text, _, _ in chunks)
    assert {(t, s) for _, t, s in chunks} == {("fact", "valid")}
    found = thread.search("locker code zebra", max_results=5)
    assert found and found[0].record.id == mid and "zebra" in found[0].record.content
    for query in ("giraffe locker", "giraffe nine"):  # the replaced text is in no result, by vector or keyword
        assert all("giraffe" not in r.record.content for r in thread.search(query, max_results=10))
    assert not SearchChunk.objects.filter(text__contains="giraffe").exists()
    last = thread.get_memory_history(mid)[-1]
    assert (last.version, last.action, last.reason) == (4, "restore", "restore of version 1")
    assert last.before["content"].endswith("giraffe nine") and last.after["content"].endswith("zebra forty two")
    assert last.actor == {"kind": "client", "id": ""}


def test_restore_over_http_and_its_errors(thread, api_key_raw):
    api = JsonClient(headers={"Authorization": f"Bearer {api_key_raw}"})
    mid = thread.add_memory("Prefers tea", memory_type="preference")
    thread.update_memory(mid, content="Prefers coffee")
    answer = api.post(f"/api/threads/t-main/memories/{mid}/history/1/restore")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["version"] == 3 and body["memory"]["content"] == "Prefers tea"
    assert api.post(f"/api/threads/t-main/memories/{mid}/history/9/restore").status_code == 404
    assert api.post("/api/threads/t-main/memories/nope/history/1/restore").status_code == 404
    assert api.post(f"/api/threads/t-main/memories/{mid}/history/0/restore").status_code == 422
    assert api.get("/api/threads/t-main/memories/nope/history").status_code == 404
    with pytest.raises(KeyError):
        thread.restore_memory_version(mid, 99)
    with pytest.raises(TypeError):
        thread.restore_memory_version(mid, "1")


@pytest.fixture
def api_key_raw(db):
    return api_key_create(name="tests")[1]


def test_history_survives_a_delete_but_not_the_ttl_purge(thread):
    """A single delete keeps the history for undo; the expiry purge takes the history of what it deletes
    (found by a security review: nothing reads or restores it afterwards, and its text is what expired)."""
    gone = thread.add_memory("Temporary note")
    thread.delete_memory(gone)
    assert [v.action for v in thread.get_memory_history(gone)] == ["create", "delete"]
    assert thread.get_memory_history(gone)[-1].after is None
    expiring = thread.add_memory("Expires soon", ttl_days=1)
    thread.update_memory(expiring, content="Expires soon, edited")
    counts = expired_purge(now=timezone.now() + dt.timedelta(days=2))
    assert not Memory.objects.filter(pk=key(expiring)).exists()
    assert counts["memories"] == 1 and counts["memory_versions"] == 2
    assert not MemoryVersion.objects.filter(memory_id=key(expiring)).exists()
    with pytest.raises(NotFound):
        thread.get_memory_history(expiring)
    # the single delete's history survived the purge
    assert [v.action for v in thread.get_memory_history(gone)] == ["create", "delete"]


def test_a_threads_delete_takes_the_history_of_its_memories(client, thread):
    """Found by a security review: after a thread's delete the API answered 404 for its memories' history, yet
    every version stayed in oam_memory_versions, and a thread created again under the same id saw it."""
    kept = client.create_thread(thread_id="t-other", user_id="user-1").add_memory("Other thread's note")
    live = thread.add_memory("Live note")
    thread.update_memory(live, content="Live note, edited")
    earlier = thread.add_memory("Deleted before the thread")
    thread.delete_memory(earlier)
    assert MemoryVersion.objects.filter(thread_id=key("t-main")).count() == 4
    assert client.delete_thread("t-main") == 1
    assert not MemoryVersion.objects.filter(thread_id=key("t-main")).exists()
    assert not MemoryVersion.objects.filter(memory_id__in=[key(live), key(earlier)]).exists()
    assert MemoryVersion.objects.filter(memory_id=key(kept)).count() == 1  # another thread's history stays
    again = client.create_thread(thread_id="t-main", user_id="user-1")
    for mid in (live, earlier):
        with pytest.raises(NotFound):
            again.get_memory_history(mid)
        with pytest.raises(KeyError):
            again.restore_memory_version(mid, 1)


def test_the_admins_bulk_delete_keeps_history_as_a_single_delete_does(thread):
    """The admin's "Delete selected" deletes each memory through the same service as a single delete
    (``services.memory_delete_by_id``), so it keeps the history (it survives the memory's deletion)."""
    browser = Client()
    browser.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only"))
    a = thread.add_memory("Bulk one", memory_id="bulk-a")
    b = thread.add_memory("Bulk two", memory_id="bulk-b")
    answer = browser.post("/admin/memory/memory/", {"action": "delete_selected", "post": "yes",
                                                     "_selected_action": [key(a), key(b)]})
    assert answer.status_code == 302 and not Memory.objects.filter(pk__in=[key(a), key(b)]).exists()
    for mid in (a, b):
        last = thread.get_memory_history(mid)[-1]
        assert last.action == "delete" and last.actor["kind"] == "admin"
    assert thread.get_memory_history(a)[0].after["content"] == "Bulk one"


def test_a_restricted_client_sees_only_its_users_history(client, thread):
    mine = thread.add_memory("user-1's note")
    other = thread.add_memory("someone else's note", user_id="user-2")
    restricted = AgentMemory(tenant=Tenant(project=client.project, user_id="user-1")).get_thread("t-main")
    assert [v.action for v in restricted.get_memory_history(mine)] == ["create"]
    with pytest.raises(NotFound):
        restricted.get_memory_history(other)
    with pytest.raises(NotFound):
        restricted.restore_memory_version(other, 1)


def test_the_actor_of_a_request_does_not_outlive_it(thread, api_key_raw):
    api = JsonClient(headers={"Authorization": f"Bearer {api_key_raw}"})
    mid = thread.add_memory("Likes jazz")
    assert api.patch(f"/api/threads/t-main/memories/{mid}", {"content": "Likes blues"}).status_code == 200
    assert history.current_actor() == history.Actor()
    thread.update_memory(mid, content="Likes soul")
    assert [v.actor["kind"] for v in thread.get_memory_history(mid)] == ["client", "api_key", "client"]


def test_versions_are_numbered_per_memory_and_unique(thread):
    a = thread.add_memory("first")
    b = thread.add_memory("second")
    thread.update_memory(a, content="first, edited")
    assert list(MemoryVersion.objects.filter(memory_id=key(a)).values_list("version", flat=True)) == [1, 2]
    assert list(MemoryVersion.objects.filter(memory_id=key(b)).values_list("version", flat=True)) == [1]
    thread.update_memory(a, content="first, edited")  # nothing changed: no version
    assert MemoryVersion.objects.filter(memory_id=key(a)).count() == 2


def test_the_staff_timeline_restores_a_version(thread):
    browser, username = staff_browser()
    mid = thread.add_memory("Allergic to peanuts", memory_type="fact", memory_id="allergy")
    thread.update_memory(mid, content="Allergic to nothing", status="invalid")
    page = browser.get("/staff/projects/default/threads/t-main/").content.decode()
    timeline = page.split('id="history-allergy"')[1].split("</details>")[0]
    assert 'data-version="1" data-action="create"' in timeline and 'data-version="2" data-action="update"' in timeline
    assert 'name="version" value="1"' in timeline and 'value="2"' not in timeline  # the current one is not offered
    answer = browser.post("/staff/projects/default/threads/t-main/memories/allergy/restore/", {"version": "1"})
    assert answer.status_code == 302
    row = Memory.objects.get(pk=key(mid))
    assert (row.content, row.status) == ("Allergic to peanuts", "valid")
    last = thread.get_memory_history(mid)[-1]
    assert last.action == "restore" and last.actor == {"kind": "staff", "id": username}
    bad = browser.post("/staff/projects/default/threads/t-main/memories/allergy/restore/", {"version": "x"})
    assert bad.status_code == 400
    missing = browser.post("/staff/projects/default/threads/t-main/memories/allergy/restore/", {"version": "9"})
    assert missing.status_code == 404


@pytest.mark.backend("sqlite")
def test_a_thread_delete_that_takes_only_history_is_scrubbed_by_the_next_purge(client, thread):
    """The periodic purge scrubs the file when something was deleted since the last scrub; a thread whose only
    trace of a memory is the history of its earlier delete deletes no search chunk, only history."""
    from django.db import connection

    from memory.services import scrub

    thread.delete_memory(thread.add_memory("Deleted long ago"))
    scrub._remember_scrubbed_deletes(connection)  # the state the last scrub left
    assert scrub.chunk_deletes_since_scrub() is False
    assert client.delete_thread("t-main") == 1 and not MemoryVersion.objects.exists()
    assert scrub.chunk_deletes_since_scrub() is True
