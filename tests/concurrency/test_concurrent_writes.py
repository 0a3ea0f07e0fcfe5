"""Concurrent writers on a database with real row locks: what SQLite's single writer can never show.

PostgreSQL-only (``@pytest.mark.backend("postgresql")``): SQLite serialises every
writer and drops ``FOR UPDATE``, so none of these interleavings can happen there.
Each test runs its writers in threads with their own connections
(``transactional_db``) and forces one interleaving with a lock the test holds or
a ``Pause`` inside the engine, waiting for observable states (``tests/concurrency/race.py``).
The lock order they check is the one ``memory/core/locking.py`` documents.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.core.errors import NotFound
from memory.extraction.jobs import lock_row
from memory.extraction.settings import default_retention
from memory.index import writer as index
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob, Image, Memory, MemoryVersion, Message, SearchChunk, Thread
from memory.records import history
from memory.records.tenancy import Tenant, get_project
from memory.services import erasure
from memory.services.erasure import subject_erase
from memory.services.extraction import job_run
from memory.services.memories import memory_delete, memory_delete_by_id, memory_update
from memory.services.messages import messages_add
from tests.concurrency.race import Pause, Worker, start, wait_blocked, wait_done, wait_for, waiting_sessions
from tests.ids import key

pytestmark = [pytest.mark.backend("postgresql"), pytest.mark.django_db(transaction=True)]


def _thread_row(public: str = "t-race") -> Thread:
    return Thread.objects.get(pk=key(public))


def _versions(memory_key: str) -> list[tuple[int, str]]:
    return list(MemoryVersion.objects.filter(memory_id=memory_key).order_by("version")
                .values_list("version", "action"))


# --- 1. two writers append to one thread --------------------------------------------------------------


def test_two_writers_appending_to_one_thread_get_unbroken_unique_seqs_and_consistent_chunks():
    """Holds on the code as it was: ``messages_add`` numbers the batch under the thread's row lock
    (``lock_thread``), and its statements after the lock see the other writer's committed messages
    (READ COMMITTED), so the neighbours' keyword context is computed from them.

    Both writers are queued behind a lock the test holds on the thread row, then released together; a
    second round runs them free. Checks: seq 1..n with no gap or repeat, every message stored, one chunk
    set per message with the thread's scope, no chunk without a message, and every stored context equal
    to what ``refresh_message_contexts`` recomputes from the final thread.
    """
    client = AgentMemory()
    client.create_thread(thread_id="t-race", user_id="u1", agent_id="a1")
    batches = {name: [[{"role": "user", "content": f"{name} says {word} in round {r}"} for word in ("one", "two")]
                      for r in range(3)] for name in ("w1", "w2")}

    def writer(name):
        handle = AgentMemory().get_thread("t-race")
        return [handle.add_messages(batch) for batch in batches[name]]

    with transaction.atomic():
        lock_row(Thread, key("t-race"))  # both writers queue behind this lock
        w1, w2 = start(Worker("w1", lambda: writer("w1")), Worker("w2", lambda: writer("w2")))
        wait_blocked(2)
    ids = [i for w in (w1, w2) for batch in w.outcome() for i in batch]

    thread = _thread_row()
    seqs = list(Message.objects.filter(thread=thread).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 13)) and thread.next_seq == 13
    assert set(Message.objects.filter(thread=thread).values_list("pk", flat=True)) == {key(i) for i in ids}
    for batch in (b for w in (w1, w2) for b in w.result):  # each batch is contiguous: one transaction
        got = [Message.objects.get(pk=key(i)).seq for i in batch]
        assert got == list(range(got[0], got[0] + len(batch)))
    chunks = SearchChunk.objects.filter(source_kind="message")
    assert set(chunks.values_list("record_id", flat=True)) == {key(i) for i in ids}
    assert set(chunks.values_list("thread_id", "user_id", "agent_id")) == {(thread.pk, "u1", "a1")}
    stored = dict(chunks.values_list("pk", "context"))
    with transaction.atomic():
        index.refresh_message_contexts(thread.pk, 1, 12)
    assert dict(SearchChunk.objects.filter(source_kind="message").values_list("pk", "context")) == stored


# --- 2. two deletes of one memory ------------------------------------------------------------------------


def test_two_concurrent_deletes_of_one_memory_do_not_deadlock():
    """FAILED on the code before the lock order (``memory_delete_by_id`` locked the memory then the thread,
    ``erase_fenced`` the thread then, deleting it, the memory): PostgreSQL detected a deadlock and aborted
    one delete with ``OperationalError: deadlock detected`` (a 500). Holds once both lock the thread row first,
    then the memory row (``memory/core/locking.py``).

    Interleaving: the test locks the memory's search chunks; the thread-door delete (``memory_delete``)
    takes its locks and queues on the chunks; the project-door delete (``memory_delete_by_id``) starts and
    queues too; the test lets go. Exactly one delete deletes (1), the other finds nothing (0); the memory
    and its chunks are gone, the memory it refined is valid again, and its history has one ``delete`` version.
    """
    client = AgentMemory()
    thread = client.create_thread(thread_id="t-race", user_id="u1", agent_id="a1")
    other = thread.add_memory("Ann drinks tea.")
    mid = thread.add_memory("Ann drinks green tea.", memory_id_to_link=other, link_type="refines")
    assert Memory.objects.get(pk=key(other)).status == "invalid"  # refined by mid, valid again once it goes
    row, project = _thread_row(), get_project(None)

    with transaction.atomic():
        list(SearchChunk.objects.select_for_update().filter(source_kind="memory", record_id=key(mid)))
        by_thread = start(Worker("by-thread", lambda: memory_delete(thread=row, memory_id=mid)))[0]
        wait_blocked(1)
        by_id = start(Worker("by-id", lambda: memory_delete_by_id(project=project, memory_id=mid)))[0]
        wait_blocked(2)
    results = sorted([by_thread.outcome(), by_id.outcome()])

    assert results == [0, 1]
    assert not Memory.objects.filter(pk=key(mid)).exists()
    assert not SearchChunk.objects.filter(record_id=key(mid)).exists()
    assert Memory.objects.get(pk=key(other)).status == "valid"
    assert [action for _, action in _versions(key(mid))] == ["create", "delete"]


# --- 3. concurrent history versions of one memory ----------------------------------------------------------


def test_concurrent_writes_of_one_memory_number_its_history_without_a_gap_or_a_duplicate(monkeypatch):
    """Two updates: held on the code before (``memory_update`` locks the memory row before numbering).
    An update racing a delete: FAILED before (``erase_fenced`` did not lock the memory row, so the delete
    numbered its version ``MAX+1`` while the update's uncommitted N+1 was invisible to it, and its insert hit
    the unique constraint ``oam_memver_uq``: ``IntegrityError`` on (memory_id, version)). Holds once every
    writer takes the thread row, then the memory row, before numbering, and ``history.record_many`` locks
    the rows it numbers (``memory/records/history.py``).

    Round 1: the test locks the memory row, two ``memory_update`` calls queue behind it: versions 2 and 3.
    Round 2: the update stops after writing its version 4 (uncommitted); the delete starts, and once it is
    queued (or, before the fix, blocked on the update's index entry) the update commits: 4 update, 5 delete.
    """
    client = AgentMemory()
    thread = client.create_thread(thread_id="t-race", user_id="u1", agent_id="a1")
    mid = thread.add_memory("Ann drinks green tea.")
    row, retention = _thread_row(), default_retention()

    def update(text):
        return lambda: memory_update(thread=row, memory_id=mid, metadata={"who": text}, retention=retention)

    with transaction.atomic():
        lock_row(Memory, key(mid))
        a, b = start(Worker("a", update("a")), Worker("b", update("b")))
        wait_blocked(2)
    a.outcome(), b.outcome()
    assert _versions(key(mid)) == [(1, "create"), (2, "update"), (3, "update")]

    pause = Pause(monkeypatch, history, "record", who="updater", after=True)
    updater = start(Worker("updater", update("c")))[0]
    pause.wait_arrived()
    deleter = start(Worker("deleter", lambda: memory_delete(thread=row, memory_id=mid)))[0]
    wait_blocked(1)
    pause.go()
    assert updater.outcome() == mid
    assert deleter.outcome() == 1
    assert _versions(key(mid)) == [(1, "create"), (2, "update"), (3, "update"), (4, "update"), (5, "delete")]


# --- 4. two extraction workers claim one job ----------------------------------------------------------------


def test_two_extraction_workers_claiming_one_job_run_the_llm_once(settings, fresh_extraction_tracker):
    """Holds on the code as it was: ``_claim`` locks the thread row, then the job row, and takes the job only
    while it is ``queued``; the second worker, queued on the thread lock, then reads ``running`` and skips.

    Both workers (``job_run`` with a ``ScriptedLlm`` each, one reply each) queue behind a lock the test holds
    on the thread row and are released together: exactly one LLM request in all, one "done" and one
    "skipped", one memory, the watermark at the job's end, one claim (``attempts`` 1).
    """
    settings.OAM_EMBEDDED_WORKER = False
    config = MemoryExtractionConfig(extraction_mode="background", enable_context_summary=False,
                                    review_memory_types=())
    reply = {"memories": [{"memory_type": "preference", "content": "Ann loves green tea.",
                           "source_message_ids": ["m1"]}]}
    thread = AgentMemory(llm=ScriptedLlm([])).create_thread(thread_id="t-race", user_id="u1", agent_id="a1",
                                                            memory_extraction_config=config)
    thread.add_messages([{"id": "m1", "role": "user", "content": "I'm Ann and I love green tea."}])
    job = ExtractionJob.objects.get()
    assert job.status == "queued"
    llms = {name: ScriptedLlm([reply]) for name in ("x1", "x2")}

    with transaction.atomic():
        lock_row(Thread, key("t-race"))
        x1, x2 = start(*(Worker(name, lambda name=name: job_run(job_id=job.pk, llm=llms[name], background=False))
                         for name in ("x1", "x2")))
        wait_blocked(2)
    assert sorted([x1.outcome(), x2.outcome()]) == ["done", "skipped"]

    assert sum(len(llm.requests) for llm in llms.values()) == 1
    assert list(Memory.objects.values_list("content", flat=True)) == ["Ann loves green tea."]
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("done", 1)
    assert _thread_row().extracted_through_seq == job.to_seq == 1


# --- 5. an erasure racing add_messages -------------------------------------------------------------------------


def _nothing_of(user: str) -> dict[str, int]:
    return {"threads": Thread.objects.filter(user_id=user).count(),
            "messages": Message.objects.filter(thread__user_id=user).count(),
            "orphan messages": Message.objects.exclude(thread_id__in=Thread.objects.values("pk")).count(),
            "memories": Memory.objects.filter(user_id=user).count(),
            "images": Image.objects.filter(user_id=user).count(),
            "chunks": SearchChunk.objects.filter(user_id=user).count()}


@pytest.mark.parametrize("first", ["add", "erase"])
def test_an_erasure_racing_add_messages_leaves_nothing_of_the_user(monkeypatch, first):
    """FAILED on the code before (``first="add"``): the erasure listed and deleted the user's thread
    without locking it. It deleted the chunks of the thread's earlier message, whose keyword context the
    writer (holding the thread row) refreshes, then queued on the thread row to delete it: PostgreSQL
    detected the deadlock and aborted the erasure (``OperationalError: deadlock detected ... while deleting
    tuple in relation "oam_threads"``, a 500, nothing erased). Had it not met that chunk, it would have deleted
    the thread under the writer's committed messages and failed at commit on their foreign key. Holds once
    ``subject_erase`` locks the subject's thread rows first (``memory/core/locking.py``): the erasure waits
    for the writer and erases its messages too, or the writer waits for the erasure and finds no thread
    (``NotFound``, a 404).

    ``first="add"``: ``add_messages`` stops after inserting its messages and chunks (uncommitted), the
    erasure starts and queues, then the writer commits. ``first="erase"``: the erasure stops before deleting
    the threads, the writer starts (and queues, or runs), then the erasure goes on. Either way, after both:
    no thread, message, memory, image or chunk of the user, and no message without a thread.
    """
    client = AgentMemory()
    thread = client.create_thread(thread_id="t-race", user_id="u1", agent_id="a1")
    thread.add_messages([{"role": "user", "content": "My name is Ann."}])
    thread.add_memory("Ann's name is Ann.")
    row, tenant = _thread_row(), Tenant(project=get_project(None))
    new = [{"role": "user", "content": "I live in Lisbon."}, {"role": "assistant", "content": "Noted."}]

    def add():
        return messages_add(thread=row, messages=new, retention=client.retention_config)

    def erase():
        return subject_erase(tenant=tenant, subject="user", value="u1")

    if first == "add":
        pause = Pause(monkeypatch, index, "index_rows", who="adder", after=True)
        adder = start(Worker("adder", add))[0]
        pause.wait_arrived()
        eraser = start(Worker("eraser", erase))[0]
        wait_blocked(1)
        pause.go()
        added = adder.outcome()
        receipt = eraser.outcome()
        assert len(added) == 2 and receipt.counts["messages"] == 3  # it waited, and erased the new ones too
    else:
        pause = Pause(monkeypatch, erasure, "threads_erase", who="eraser")
        eraser = start(Worker("eraser", erase))[0]
        pause.wait_arrived()
        adder = start(Worker("adder", add))[0]
        wait_for(lambda: not adder.is_alive() or waiting_sessions() >= 1)
        pause.go()
        receipt = eraser.outcome()
        wait_done(adder)
        if adder.error is not None:  # it waited for the erasure's lock, then found no thread
            assert isinstance(adder.error, NotFound), repr(adder.error)
            assert receipt.counts["messages"] == 1
        else:  # it committed before the erasure deleted anything: erased with the rest
            assert receipt.counts["messages"] == 3
    assert _nothing_of("u1") == dict.fromkeys(_nothing_of("u1"), 0)

