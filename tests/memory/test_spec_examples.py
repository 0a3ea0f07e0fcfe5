"""The spec's own examples (Oracle AI Agent Memory thread API), run against the real engine."""

import asyncio

import pytest


def test_add_memory_returns_caller_id(thread):
    assert thread.add_memory("Remember this preference", memory_id="mem-thread-docs") == "mem-thread-docs"


@pytest.mark.django_db(transaction=True)
def test_add_memory_async_returns_caller_id(client):
    # Async twins run in another thread with its own connection: the data must be committed.
    thread = client.create_thread(thread_id="t-async-add", user_id="u", agent_id="a")
    got = asyncio.run(thread.add_memory_async("Remember this preference", memory_id="mem-thread-docs-async"))
    assert got == "mem-thread-docs-async"
    assert thread.get_memory("mem-thread-docs-async").content == "Remember this preference"


def test_add_messages_then_last_message_content(thread):
    assert len(thread.add_messages([{"role": "user", "content": "Thread message from docs"}])) == 1
    assert len(thread.add_messages([{"role": "user", "content": "Stored message example"}])) == 1
    messages = thread.get_messages()
    assert messages[-1].content == "Stored message example"
    assert [m.content for m in messages] == ["Thread message from docs", "Stored message example"]


@pytest.mark.django_db(transaction=True)
def test_async_add_and_get_messages(client):
    thread = client.create_thread(thread_id="t-async", user_id="u", agent_id="a")
    message_ids = asyncio.run(thread.add_messages_async([{"role": "user", "content": "Stored message example"}]))
    assert len(message_ids) == 1
    messages = asyncio.run(thread.get_messages_async())
    assert messages[-1].content == "Stored message example"
    assert messages[-1].id == message_ids[0]


def test_update_message_returns_id(thread):
    message_id = thread.add_messages([{"role": "user", "content": "Draft message"}])[0]
    assert thread.update_message(message_id, content="Edited message") == message_id
    assert thread.get_message(message_id).content == "Edited message"


@pytest.mark.django_db(transaction=True)
def test_update_memory_async_returns_id(client):
    thread = client.create_thread(thread_id="t-async-mem", user_id="u", agent_id="a")
    memory_id = asyncio.run(thread.add_memory_async("Original memory"))
    assert asyncio.run(thread.update_memory_async(memory_id, content="Updated memory")) == memory_id
    assert thread.get_memory(memory_id).content == "Updated memory"


def test_delete_unknown_ids_return_zero(thread):
    assert thread.delete_message("123") == 0
    assert thread.delete_memory("456") == 0


@pytest.mark.django_db(transaction=True)
def test_async_deletes_of_unknown_ids_return_zero(client):
    thread = client.create_thread(thread_id="t-async-del", user_id="u", agent_id="a")
    assert asyncio.run(thread.delete_memory_async("456")) == 0
    assert asyncio.run(thread.delete_message_async("123")) == 0


def test_search_finds_memory_by_meaning(thread):
    thread.add_memory("User likes pizza", memory_id="mem-context-docs")
    thread.add_memory("The office is closed on Fridays", memory_id="mem-office")
    results = thread.search("what food does the user enjoy?")
    assert results[0].record_id == "mem-context-docs"
    assert results[0].record_type == "memory"
    assert 0.0 <= results[0].distance < results[1].distance
    assert results[0].score > results[1].score
