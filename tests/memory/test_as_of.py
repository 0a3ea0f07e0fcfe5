"""Recorded time ("as of", issue #32): get, list and search answer with what the store held at an instant.

A scripted history: A created (t1), A edited (t2), B created (t3), B deleted (t4), C created (t5), user U's
memory E created (t0) and U erased (t6). The four answers: absent-then (C before t5), edited-since (A at t1 has
its first text), deleted-since (B at t3 is present), erased (E never comes back; the answer says U was erased).
"""

import asyncio
import datetime as dt
import time

import pytest
from django.utils import timezone

from memory.models import HistoryVector, MemoryVersion
from memory.records.as_of import AsOfRecords, check_as_of
from memory.search import as_of as search_as_of


def tick():
    """An instant strictly between two writes."""
    time.sleep(0.005)
    moment = timezone.now()
    time.sleep(0.005)
    return moment


@pytest.fixture
def story(client, thread):
    """The scripted history; returns the instants and ids."""
    other = client.create_thread(thread_id="t-u", user_id="user-u", agent_id="agent-1")
    e = other.add_memory("User U keeps bees in the garden")
    t0 = tick()
    a = thread.add_memory("The user lives in Lyon", memory_type="fact")
    t1 = tick()
    thread.update_memory(a, content="The user lives in Paris")
    t2 = tick()
    b = thread.add_memory("The user plays the cello")
    t3 = tick()
    thread.delete_memory(b)
    t4 = tick()
    c = thread.add_memory("The user drinks green tea")
    t5 = tick()
    client.erase_user("user-u")
    t6 = tick()
    return dict(t0=t0, t1=t1, t2=t2, t3=t3, t4=t4, t5=t5, t6=t6, a=a, b=b, c=c, e=e)


def contents(records):
    return {r.id: r.content for r in records}


def test_get_answers_absent_then_edited_since_and_deleted_since(thread, story):
    s = story
    with pytest.raises(KeyError):
        thread.get_memory(s["c"], as_of=s["t4"])  # absent then
    assert thread.get_memory(s["c"], as_of=s["t5"]).content == "The user drinks green tea"
    assert thread.get_memory(s["a"], as_of=s["t1"]).content == "The user lives in Lyon"  # edited since
    assert thread.get_memory(s["a"], as_of=s["t2"]).content == "The user lives in Paris"
    assert thread.get_memory(s["a"]).content == "The user lives in Paris"  # now, as before
    old = thread.get_memory(s["b"], as_of=s["t3"])  # deleted since
    assert old.content == "The user plays the cello" and old.thread_id == "t-main" and old.user_id == "user-1"
    with pytest.raises(KeyError):
        thread.get_memory(s["b"], as_of=s["t4"])
    with pytest.raises(KeyError):
        thread.get_memory(s["a"], as_of=s["t0"])
    assert thread.get_memory(s["a"], as_of=s["t1"]).created_at <= s["t1"].isoformat()


def test_the_thread_list_as_of_each_instant(thread, story):
    s = story
    assert contents(thread.list_memories(as_of=s["t1"])) == {s["a"]: "The user lives in Lyon"}
    assert contents(thread.list_memories(as_of=s["t3"])) == {s["a"]: "The user lives in Paris",
                                                             s["b"]: "The user plays the cello"}
    assert contents(thread.list_memories(as_of=s["t4"])) == {s["a"]: "The user lives in Paris"}
    now = thread.list_memories(as_of=s["t6"])
    assert isinstance(now, AsOfRecords) and contents(now) == contents(thread.list_memories())
    assert [r.id for r in now] == [r.id for r in thread.list_memories()]  # same order
    assert contents(thread.list_memories("fact", as_of=s["t3"])) == {s["a"]: "The user lives in Paris"}
    assert now.erased_since is False


def test_the_client_list_and_the_erased_user(client, thread, story):
    s = story
    assert contents(client.list_memories(user_id="user-1", as_of=s["t3"])) == {
        s["a"]: "The user lives in Paris", s["b"]: "The user plays the cello"}
    erased = client.list_memories(user_id="user-u", as_of=s["t0"])
    assert erased == [] and erased.erased_since is True  # erasure wins over history, and says so
    assert client.list_memories(user_id="user-u", as_of=s["t6"]).erased_since is False
    assert s["e"] not in contents(client.list_memories(as_of=s["t5"]))
    assert MemoryVersion.objects.filter(user_id="user-u").count() == 0
    assert len(client.list_memories(as_of=s["t3"], limit=1)) == 1
    assert contents(client.list_memories(thread_id="t-main", as_of=s["t5"])) == contents(thread.list_memories())


def test_search_ranks_the_historical_contents(client, thread, story):
    s = story
    search_as_of.HISTORICAL_VECTORS.clear()
    then = thread.search("Where does the user live?", as_of=s["t1"], record_types=["fact"])
    assert [(r.id, r.record.content) for r in then] == [(s["a"], "The user lives in Lyon")]
    assert search_as_of.HISTORICAL_VECTORS.misses == 0  # the old text's vectors were kept with its history
    HistoryVector.objects.all().delete()  # as for a version written before they were kept (migration 0017)
    embedded = thread.search("Where does the user live?", as_of=s["t1"], record_types=["fact"])
    assert search_as_of.HISTORICAL_VECTORS.misses >= 1  # the old text was embedded, once
    again = thread.search("Where does the user live?", as_of=s["t1"], record_types=["fact"])
    assert again[0].distance == pytest.approx(then[0].distance) == pytest.approx(embedded[0].distance)
    assert search_as_of.HISTORICAL_VECTORS.hits >= 1
    cello = thread.search("cello", as_of=s["t3"], record_types=["memory"])
    assert cello[0].id == s["b"] and isinstance(cello, AsOfRecords)
    assert s["b"] not in {r.id for r in thread.search("cello", as_of=s["t4"])}
    assert s["c"] not in {r.id for r in thread.search("tea", as_of=s["t4"])}
    now = thread.search("Where does the user live?", as_of=s["t6"], record_types=["fact"])
    live = thread.search("Where does the user live?", record_types=["fact"])
    assert now[0].id == live[0].id and now[0].record.content == "The user lives in Paris"
    erased = client.search("bees", user_id="user-u", as_of=s["t0"])
    assert erased == [] and erased.erased_since is True


def test_search_as_of_includes_messages_created_by_then(thread):
    thread.add_messages([{"role": "user", "content": "I just adopted a puppy named Rex"}])
    before = tick()
    thread.add_messages([{"role": "user", "content": "Rex the puppy chewed my shoes"}])
    texts = [r.record.content for r in thread.search("puppy", as_of=before, record_types=["message"])]
    assert texts == ["I just adopted a puppy named Rex"]


@pytest.mark.django_db(transaction=True)
def test_the_async_twins_take_as_of():
    from memory.client import AgentMemory

    client = AgentMemory(llm=None)
    thread = client.create_thread(thread_id="t-async", user_id="user-1")
    a = thread.add_memory("The user lives in Lyon")
    t1 = tick()
    thread.update_memory(a, content="The user lives in Paris")

    async def both():
        return (await thread.get_memory_async(a, as_of=t1),
                await client.list_memories_async(user_id="user-1", as_of=t1),
                await thread.search_async("Lyon", as_of=t1), await client.search_async("Lyon", user_id="user-1",
                                                                                       as_of=t1))

    record, listed, found, everywhere = asyncio.run(both())
    assert record.content == "The user lives in Lyon" and contents(listed) == {a: "The user lives in Lyon"}
    assert found[0].id == a and everywhere[0].record.content == "The user lives in Lyon"


@pytest.mark.parametrize("value, error", [
    (20240101, TypeError), ("yesterday", ValueError), (True, TypeError),
])
def test_a_bad_as_of_names_it(thread, client, value, error):
    for call in (lambda: thread.get_memory("x", as_of=value), lambda: thread.list_memories(as_of=value),
                 lambda: client.list_memories(as_of=value), lambda: thread.search("q", as_of=value)):
        with pytest.raises(error, match="as_of"):
            call()


def test_as_of_in_the_future_and_unsupported_combinations_are_refused(thread, client):
    future = timezone.now() + dt.timedelta(days=1)
    with pytest.raises(ValueError, match="as_of"):
        thread.list_memories(as_of=future)
    assert check_as_of(timezone.now() + dt.timedelta(seconds=30)) is not None  # clock skew is allowed
    now = timezone.now()
    with pytest.raises(ValueError, match="metadata_filter"):
        thread.search("q", as_of=now, metadata_filter={"k": "v"})
    with pytest.raises(ValueError, match="num_hops"):
        thread.search("q", as_of=now, num_hops=1)
    with pytest.raises(ValueError, match="metadata_filter"):
        client.list_memories(as_of=now, metadata_filter={"k": "v"})
    with pytest.raises(TypeError):
        client.list_memories(as_of_x=now)


def test_as_of_with_valid_at_reads_the_window_held_then(thread):
    a = thread.add_memory("Works at Acme", valid_from="2020-01-01", valid_to="2021-01-01")
    t1 = tick()
    thread.update_memory(a, valid_to=None)
    assert thread.list_memories(valid_at="2022-06-01", as_of=t1) == []
    assert [r.id for r in thread.list_memories(valid_at="2022-06-01")] == [a]


def test_a_memory_without_history_is_its_row(thread):
    a = thread.add_memory("Predates history")
    MemoryVersion.objects.all().delete()
    assert thread.get_memory(a, as_of=timezone.now()).content == "Predates history"
    with pytest.raises(KeyError):
        thread.get_memory(a, as_of=timezone.now() - dt.timedelta(hours=1))


def test_a_restricted_client_never_sees_another_users_history(client, thread):
    from memory.client import AgentMemory
    from memory.records.tenancy import Tenant

    thread.add_memory("user-1's secret")
    other = client.create_thread(thread_id="t-2", user_id="user-2", agent_id="agent-1")
    mine = other.add_memory("user-2's note")
    t = tick()
    restricted = AgentMemory(tenant=Tenant(project=client.project, user_id="user-2"), llm=None)
    assert contents(restricted.list_memories(as_of=t)) == {mine: "user-2's note"}
    assert {r.id for r in restricted.search("secret", as_of=t)} <= {mine}
    with pytest.raises(ValueError):
        restricted.list_memories(user_id="user-1", as_of=t)
