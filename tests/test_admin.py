"""Django admin lists and edits threads, messages and memories through the services."""

import pytest
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model

from memory.models import Memory, SearchChunk
from tests.ids import key


def admin_id(public: str) -> str:
    """The admin's URL segment of a record: its stored id (the primary key), quoted the admin's way."""
    return quote(key(public))


@pytest.fixture
def staff(db, client):
    user = get_user_model().objects.create_superuser("staff", "staff@example.com", "pw-for-tests-only")
    from django.test import Client

    browser = Client()
    browser.force_login(user)
    return browser


def test_changelists_and_forms_render(staff, thread):
    [mid] = thread.add_messages([{"role": "user", "content": "hello admin"}])
    mem = thread.add_memory("admin can see me", memory_type="fact")
    for url in ("/admin/memory/thread/", "/admin/memory/message/", "/admin/memory/memory/",
                f"/admin/memory/thread/{admin_id(thread.thread_id)}/change/",
                f"/admin/memory/message/{admin_id(mid)}/change/", f"/admin/memory/memory/{admin_id(mem)}/change/"):
        response = staff.get(url)
        assert response.status_code == 200, url
    assert b"admin can see me" in staff.get("/admin/memory/memory/").content
    assert b"hello admin" in staff.get("/admin/memory/message/?q=hello").content


def test_editing_a_memory_in_admin_reembeds_it(staff, thread):
    mem = thread.add_memory("likes tea", memory_type="preference")
    before = SearchChunk.objects.get(record_id=key(mem)).embedding.copy()
    row = Memory.objects.get(pk=key(mem))
    response = staff.post(f"/admin/memory/memory/{admin_id(mem)}/change/", {
        "memory_type": "fact", "content": "climbed Kilimanjaro", "metadata": "{}", "status": "invalid",
        "timestamp": "", "expires_at_0": "", "expires_at_1": "",
    })
    assert response.status_code == 302, response.content[:2000]
    row.refresh_from_db()
    chunk = SearchChunk.objects.get(record_id=key(mem))
    assert (row.content, row.memory_type, row.status) == ("climbed Kilimanjaro", "fact", "invalid")
    assert (chunk.text, chunk.record_type, chunk.status) == ("climbed Kilimanjaro", "fact", "invalid")
    assert not (chunk.embedding == before).all()
    assert thread.search("mountain climbing", max_results=1)[0].record_id == mem
