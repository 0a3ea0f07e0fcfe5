"""Memories: types, scope inheritance and overrides, status, updates and ownership."""

import pytest

from memory.core.types import RecordStatus
from memory.models import Memory, SearchChunk
from tests.ids import key


def test_memory_types_and_default(thread):
    plain = thread.add_memory("general note")
    fact = thread.add_memory("Paris is in France", memory_type="fact")
    assert thread.get_memory(plain).memory_type == "memory"
    assert thread.get_memory(fact).memory_type == "fact"
    assert SearchChunk.objects.get(record_id=key(fact)).record_type == "fact"


def test_invalid_memory_type_names_allowed_values(thread):
    with pytest.raises(ValueError, match="memory, fact, guideline, preference"):
        thread.add_memory("x", memory_type="opinion")
    assert Memory.objects.count() == 0


def test_scope_inherits_thread_and_accepts_overrides(thread):
    mid = thread.add_memory("shared across agents", agent_id="agent-2", user_id=None)
    row = Memory.objects.get(pk=key(mid))
    assert (row.user_id, row.agent_id, row.thread_id) == (None, "agent-2", key("t-main"))
    mid2 = thread.add_memory("inherits")
    row2 = Memory.objects.get(pk=key(mid2))
    assert (row2.user_id, row2.agent_id, row2.thread_id) == ("user-1", "agent-1", key("t-main"))


def test_status_initial_and_update(thread):
    mid = thread.add_memory("old fact", status=RecordStatus.INVALID)
    assert thread.get_memory(mid).status == "invalid"
    thread.update_memory(mid, status="valid")
    assert thread.get_memory(mid).status == "valid"
    assert SearchChunk.objects.get(record_id=key(mid)).status == "valid"
    with pytest.raises(ValueError, match="status"):
        thread.update_memory(mid, status="archived")


def test_update_memory_preserves_omitted_and_replaces_metadata(thread):
    mid = thread.add_memory("likes tea", metadata={"a": 1, "b": {"c": 2}}, timestamp="2024-02-02T10:00:00")
    thread.update_memory(mid, metadata={"b": {"d": 3}})
    got = thread.get_memory(mid)
    assert got.metadata == {"b": {"d": 3}}
    assert got.content == "likes tea" and got.timestamp == "2024-02-02T10:00:00"
    thread.update_memory(mid, timestamp=None)
    got = thread.get_memory(mid)
    assert got.timestamp == got.created_at  # cleared: the creation time is the effective timestamp


def test_memories_of_other_threads_are_untouchable(client, thread):
    other = client.create_thread(thread_id="t-2", user_id="user-1", agent_id="agent-1")
    mid = other.add_memory("theirs")
    with pytest.raises(KeyError):
        thread.update_memory(mid, content="mine now")
    assert thread.delete_memory(mid) == 0
    assert other.delete_memory(mid) == 1
    assert not SearchChunk.objects.filter(record_id=key(mid)).exists()


def test_memory_with_thread_override_is_not_owned_by_this_thread(thread):
    mid = thread.add_memory("filed elsewhere", thread_id="somewhere-else")
    with pytest.raises(KeyError):
        thread.get_memory(mid)
    assert thread.delete_memory(mid) == 0


def test_bad_content_and_duplicate_ids(thread):
    with pytest.raises(TypeError):
        thread.add_memory(42)
    with pytest.raises(ValueError):
        thread.add_memory("   ")
    thread.add_memory("a", memory_id="same")
    with pytest.raises(ValueError, match="same"):
        thread.add_memory("b", memory_id="same")
    with pytest.raises(TypeError):
        thread.add_memory("c", link_everything=True)
    assert Memory.objects.count() == 1


def test_delete_thread_removes_messages_memories_and_chunks(client, thread):
    thread.add_messages([{"role": "user", "content": "hello"}])
    thread.add_memory("remember me")
    keep = client.create_thread(thread_id="t-keep", user_id="user-1", agent_id="agent-1")
    keep.add_memory("keep me")
    assert client.delete_thread("t-main") == 1
    assert client.delete_thread("t-main") == 0
    with pytest.raises(KeyError):
        client.get_thread("t-main")
    assert list(SearchChunk.objects.values_list("thread_id", flat=True)) == [key("t-keep")]
    assert Memory.objects.filter(thread_id=key("t-main")).count() == 0


def test_create_thread_ids(client):
    t = client.create_thread()
    assert len(t.thread_id) == 36 and len(t.user_id) == 36 and len(t.agent_id) == 36
    with pytest.raises(ValueError, match="already exists"):
        client.create_thread(thread_id=t.thread_id)
    with pytest.raises(TypeError):
        client.create_thread(llm_model="x")
    assert client.get_thread(t.thread_id).user_id == t.user_id
