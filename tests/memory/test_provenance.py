"""Derived memories follow their source (memory.records.provenance): deleting or expiring a message invalidates (or
deletes) the memories that came only from it, reports it, and writes their history.

Real SQLite, embedder, API (Django test client) and extraction with ``ScriptedLlm``.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from django.utils import timezone

from memory.client import AgentMemory
from memory.extraction.config import MemoryExtractionConfig
from memory.llm.scripted import ScriptedLlm
from memory.models import Memory, SearchChunk
from memory.records import provenance
from memory.services.erasure import expired_purge
from memory.services.memories import memory_add
from tests.api.helpers import JsonClient
from tests.ids import key
from threads.auth import api_key_create

INLINE = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False)


def derived(thread, content, sources, memory_id):
    return memory_add(thread=thread.row, content=content, memory_id=memory_id, source_message_ids=sources,
                               retention=thread._client.retention_config)


@pytest.fixture
def sourced(thread):
    thread.add_messages([{"role": "user", "content": "I live in Oslo", "id": "m1"},
                         {"role": "user", "content": "I work in Bergen", "id": "m2"}])
    derived(thread, "Lives in Oslo", ["m1"], "only-m1")
    derived(thread, "Lives in Oslo and works in Bergen", ["m1", "m2"], "both")
    derived(thread, "Works in Bergen", ["m2"], "only-m2")
    thread.add_memory("Manual note without sources", memory_id="manual")
    return thread


def status(memory_id):
    return Memory.objects.get(pk=key(memory_id)).status


def test_deleting_a_message_over_http_invalidates_what_came_only_from_it_and_says_so(sourced):
    key_row, raw = api_key_create(name="deleter")
    api = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    answer = api.delete("/api/threads/t-main/messages/m1")
    assert answer.status_code == 204 and answer.content == b""
    assert json.loads(answer["OAM-Derived-Memories"]) == {"messages": ["m1"], "invalidated": ["only-m1"],
                                                          "deleted": []}
    assert (status("only-m1"), status("both"), status("only-m2"), status("manual")) == (
        "invalid", "valid", "valid", "valid")
    assert set(SearchChunk.objects.filter(record_id=key("only-m1")).values_list("status", flat=True)) == {"invalid"}
    hits = [r.record.id for r in sourced.search("Lives in Oslo", max_results=10, include_invalid_results=False)]
    assert "only-m1" not in hits and "both" in hits  # hidden from search unless invalid results are asked for
    last = sourced.get_memory_history("only-m1")[-1]
    assert last.action == "invalidate" and last.actor == {"kind": "api_key", "id": str(key_row.pk)}
    assert last.reason.startswith("source message m1 deleted")
    assert [v.action for v in sourced.get_memory_history("both")] == ["create"]  # left alone, no entry
    # the second source goes: now "both" came only from deleted messages
    answer = api.delete("/api/threads/t-main/messages/m2")
    assert json.loads(answer["OAM-Derived-Memories"])["invalidated"] == ["both", "only-m2"]
    assert (status("both"), status("only-m2"), status("manual")) == ("invalid", "invalid", "valid")
    # a delete that touches no memory sends no header
    sourced.add_messages([{"role": "user", "content": "hello", "id": "m3"}])
    answer = api.delete("/api/threads/t-main/messages/m3")
    assert answer.status_code == 204 and "OAM-Derived-Memories" not in answer


def test_the_python_return_value_is_the_specs_and_a_collector_gets_the_receipt(sourced):
    with provenance.collecting() as receipt:
        assert sourced.delete_message("m1") == 1
    assert receipt.to_dict() == {"messages": ["m1"], "invalidated": ["only-m1"], "deleted": []}
    assert sourced.delete_message("m1") == 0
    assert sourced.get_memory_history("only-m1")[-1].actor == {"kind": "client", "id": ""}


def test_the_delete_policy_deletes_them_and_keeps_their_history(sourced, settings):
    settings.OAM_DERIVED_MEMORY_POLICY = "delete"
    with provenance.collecting() as receipt:
        sourced.delete_message("m1")
    assert receipt.deleted == ["only-m1"] and receipt.invalidated == []
    assert not Memory.objects.filter(pk=key("only-m1")).exists()
    assert not SearchChunk.objects.filter(record_id=key("only-m1")).exists()
    assert status("both") == "valid"
    last = sourced.get_memory_history("only-m1")[-1]
    assert last.action == "delete" and last.reason.startswith("source message m1 deleted")


def test_an_expired_message_invalidates_what_came_only_from_it(thread):
    thread.add_messages([{"role": "user", "content": "Short-lived fact", "id": "m-exp"}], ttl_days=1)
    thread.add_messages([{"role": "user", "content": "Lasting fact", "id": "m-keep"}])
    derived(thread, "From the short-lived message", ["m-exp"], "d-exp")
    derived(thread, "From both messages", ["m-exp", "m-keep"], "d-both")
    expired_purge(now=timezone.now() + dt.timedelta(days=2))
    assert (status("d-exp"), status("d-both")) == ("invalid", "valid")
    last = thread.get_memory_history("d-exp")[-1]
    assert last.actor == {"kind": "ttl", "id": ""} and last.reason.startswith("source message m-exp expired")


@pytest.mark.usefixtures("fresh_extraction_tracker")
def test_extracted_memories_follow_their_source_message(db):
    llm = ScriptedLlm([{"memories": [
        {"memory_type": "fact", "content": "Ann has a cat named Tom.", "source_message_ids": ["m1"]},
        {"memory_type": "preference", "content": "Ann prefers window seats on trains.", "source_message_ids": ["m2"]},
    ]}])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-x", user_id="u1", memory_extraction_config=INLINE)
    first, second = thread.add_messages([{"role": "user", "content": "My cat is Tom"},
                                         {"role": "user", "content": "I like window seats on trains"}])
    cat = Memory.objects.get(content__startswith="Ann has a cat")
    seat = Memory.objects.get(content__startswith="Ann prefers")
    assert cat.source_message_ids == [first] and seat.source_message_ids == [second]
    thread.delete_message(first)
    cat.refresh_from_db()
    seat.refresh_from_db()
    assert (cat.status, seat.status) == ("invalid", "valid")


def test_a_like_match_on_a_longer_id_is_not_a_source(thread):
    thread.add_messages([{"role": "user", "content": "a", "id": "m1"}, {"role": "user", "content": "b", "id": "m10"}])
    derived(thread, "From m10 only", ["m10"], "d10")
    derived(thread, "Upper-case source", ["M1"], "dM1")  # icontains matches case-insensitively; the check does not
    thread.delete_message("m1")
    assert (status("d10"), status("dM1")) == ("valid", "valid")
