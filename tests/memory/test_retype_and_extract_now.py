"""Engine support for the staff pages: retyping a memory, and extracting pending messages on demand."""

import pytest

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.llm.scripted import ScriptedLlm
from memory.models import Memory, RecordLink, SearchChunk
from memory.services.memories import memory_update
from tests.ids import key


def retype(thread, memory_id, **changes):
    return memory_update(thread=thread._row, memory_id=memory_id, retention=thread._client.retention_config,
                                  **changes)


def test_a_new_type_moves_the_memory_its_chunks_and_its_relation_endpoints(thread):
    a = thread.add_memory("Prefers window seats", memory_type="preference", memory_id="m-a")
    b = thread.add_memory("Booked seat 14A", memory_type="fact", memory_id="m-b")
    thread.link_records(b, "fact", a, "preference", "supports", relation_id="r-1")
    before = SearchChunk.objects.get(record_id=key(b)).embedding.copy()
    assert retype(thread, b, memory_type="memory") == b
    assert Memory.objects.get(pk=key(b)).memory_type == "memory"
    chunk = SearchChunk.objects.get(record_id=key(b))
    assert chunk.record_type == "memory" and (chunk.embedding == before).all()  # same text: no re-embedding
    assert RecordLink.objects.filter(pk=key("r-1")).values_list("source_type", "target_type").get() == ("memory",
                                                                                                  "preference")
    assert [r.record_id for r in thread.search("seat 14A", record_types=["memory"], max_results=1)] == [b]
    assert thread.search("seat 14A", record_types=["fact"]) == []
    # the endpoint tuple of the relation now names the new type
    assert thread.delete_record_link(b, "fact", a, "preference", "supports") == 0
    assert thread.delete_record_link(b, "memory", a, "preference", "supports") == 1


def test_type_and_content_change_together_in_one_write(thread):
    m = thread.add_memory("Likes tea", memory_type="preference")
    retype(thread, m, memory_type="fact", content="Drinks three cups of tea a day")
    row = Memory.objects.get(pk=key(m))
    assert (row.memory_type, row.content) == ("fact", "Drinks three cups of tea a day")
    assert SearchChunk.objects.get(record_id=key(m)).text == "Drinks three cups of tea a day"


def test_an_unknown_type_writes_nothing(thread):
    m = thread.add_memory("Likes tea", memory_type="preference")
    with pytest.raises(ValueError, match=r"^memory_type: must be one of: memory, fact, guideline, preference$"):
        retype(thread, m, memory_type="opinion", content="changed")
    row = Memory.objects.get(pk=key(m))
    assert (row.memory_type, row.content) == ("preference", "Likes tea")


def test_the_spec_method_still_refuses_memory_type(thread):
    m = thread.add_memory("Likes tea", memory_type="preference")
    with pytest.raises(TypeError, match="memory_type"):
        thread.update_memory(m, memory_type="fact")  # spec: unexpected keyword arguments are rejected


def test_extract_pending_messages_ignores_the_frequency(db, fresh_extraction_tracker):
    llm = ScriptedLlm([{"memories": [{"memory_type": "fact", "content": "Ann keeps bees.",
                                      "source_message_ids": ["m1"]}]}])
    config = MemoryExtractionConfig(extraction_mode="inline", memory_extraction_frequency=10,
                                    enable_context_summary=False)
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-now", user_id="u", agent_id="a",
                                                memory_extraction_config=config)
    [mid] = thread.add_messages([{"role": "user", "content": "I keep bees."}])
    assert Memory.objects.filter(thread_id=key("t-now")).count() == 0  # 1 message < frequency 10: not due yet
    job_id = thread.extract_pending_messages()
    assert isinstance(job_id, int)
    assert list(Memory.objects.filter(thread_id=key("t-now")).values_list("content", "source_message_ids")) == [
        ("Ann keeps bees.", [mid])]
    assert thread.extract_pending_messages() is None  # nothing pending any more


def test_extract_pending_messages_without_an_llm_does_nothing(client):
    thread = AgentMemory(llm=None).create_thread(thread_id="t-off", user_id="u", agent_id="a")
    thread.add_messages([{"role": "user", "content": "hello"}])
    assert thread.extract_pending_messages() is None
    off = AgentMemory(llm=ScriptedLlm([])).create_thread(
        thread_id="t-off2", memory_extraction_config=MemoryExtractionConfig(extract_memories=False))
    off.add_messages([{"role": "user", "content": "hello"}])
    assert off.extract_pending_messages() is None
