"""Extraction under faults: the sweep racing a commit, stalled queues, deletes
during a hung LLM, and the write lock while embedding or calling the LLM.

Real SQLite file, real embedder, real threads; the LLM is ``ScriptedLlm`` or a
real HTTP server on 127.0.0.1 that never answers.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.extraction.recovery import extraction_state, sweep
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob, Thread
from memory.services.extraction import job_run
from tests.ids import key

BACKGROUND = MemoryExtractionConfig(extraction_mode="background", enable_context_summary=False)
CHAT = [
    {"role": "user", "content": "I'm Ann and I love green tea."},
    {"role": "assistant", "content": "Noted! Anything else?"},
    {"role": "user", "content": "Always answer me in French."},
]
#: Safety net for the hand-offs between threads below: never reached when the code is right.
HANDOFF_SECONDS = 10

pytestmark = pytest.mark.usefixtures("fresh_extraction_tracker")


def memories(*items):
    return {"memories": [{"memory_type": t, "content": c, "source_message_ids": list(r)} for t, c, r in items]}


def make_thread(llm, config=BACKGROUND, thread_id="t-f"):
    return AgentMemory(llm=llm).create_thread(thread_id=thread_id, user_id="u1", agent_id="a1",
                                              memory_extraction_config=config)


def _reads_watermark(sql: str) -> bool:
    return sql.lstrip().upper().startswith("SELECT") and '"oam_threads"."extracted_through_seq"' in sql


def _writes_watermark(sql: str) -> bool:
    return sql.lstrip().startswith('UPDATE "oam_threads" SET "extracted_through_seq"')


def test_the_sweep_never_acts_on_a_watermark_a_commit_is_moving(transactional_db, settings):
    """The sweep read the watermark, waited for the write lock while job B committed, then
    "repaired a gap" with the stale value, rewriting the next job to start too early: stuck forever.

    The sweep runs until it is about to read the watermark (or to take the lock to read it under,
    ``BEGIN``) and waits there; job B (1..2) then runs and is held inside its commit, after its
    watermark UPDATE, until the sweep has read the watermark (old code: a read outside any
    transaction) or has asked for the lock; only then does B commit. Job C (3..3) must stay claimable.
    """
    settings.OAM_EMBEDDED_WORKER = False
    thread = make_thread(ScriptedLlm([]))
    thread.add_messages(CHAT[:2])
    thread.add_messages(CHAT[2:])
    job_b, job_c = ExtractionJob.objects.order_by("id")
    assert (job_b.from_seq, job_b.to_seq, job_c.from_seq, job_c.to_seq) == (1, 2, 3, 3)

    sweep_ready, b_in_commit, sweep_reached = threading.Event(), threading.Event(), threading.Event()
    results: dict[str, object] = {}

    def worker_wrapper(execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("BEGIN"):
            sweep_ready.wait(HANDOFF_SECONDS)  # B claims only once the sweep stands before the watermark
        out = execute(sql, params, many, context)
        if _writes_watermark(sql):
            b_in_commit.set()
            sweep_reached.wait(HANDOFF_SECONDS)
        return out

    def sweep_wrapper(execute, sql, params, many, context):
        begins = sql.lstrip().upper().startswith("BEGIN")
        if not (begins or _reads_watermark(sql)):
            return execute(sql, params, many, context)
        sweep_ready.set()
        b_in_commit.wait(HANDOFF_SECONDS)
        if begins:
            sweep_reached.set()  # about to wait for the lock B holds
            return execute(sql, params, many, context)
        out = execute(sql, params, many, context)
        sweep_reached.set()
        return out

    def run_b():
        try:
            with connection.execute_wrapper(worker_wrapper):
                results["b"] = job_run(job_id=job_b.pk, llm=ScriptedLlm([memories()]), background=False)
        finally:
            connection.close()

    def run_sweep():
        try:
            with connection.execute_wrapper(sweep_wrapper):
                results["sweep"] = sweep(boot=True)
        finally:
            connection.close()

    threads = [threading.Thread(target=run_b), threading.Thread(target=run_sweep)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results["b"] == "done" and b_in_commit.is_set() and sweep_reached.is_set()
    job_c.refresh_from_db()
    assert (job_c.from_seq, job_c.to_seq, job_c.status) == (3, 3, "queued")
    assert job_run(job_id=job_c.pk, llm=ScriptedLlm([memories()]), background=False) == "done"
    assert Thread.objects.get(pk=key("t-f")).extracted_through_seq == 3


# --- a queue that cannot advance: detected, repaired, reported ---------------------------------------


@pytest.mark.parametrize("from_seq, why", [(2, "head was extracted"), (4, "no job covered 3..3")])
def test_the_sweep_repairs_a_queue_that_could_not_advance_and_the_state_reports_it(db, settings, from_seq, why):
    settings.OAM_EMBEDDED_WORKER = False
    thread = make_thread(ScriptedLlm([]))
    thread.add_messages(CHAT[:2])
    thread.add_messages(CHAT[2:] + [{"role": "user", "content": "And tea at five."}])
    job_b, job_c = ExtractionJob.objects.order_by("id")
    assert job_run(job_id=job_b.pk, llm=ScriptedLlm([memories()]), background=False) == "done"
    ExtractionJob.objects.filter(pk=job_c.pk).update(from_seq=from_seq)  # the state the race left behind
    state = extraction_state(thread=Thread.objects.get(pk=key("t-f")))
    assert state["stalled"]["reason"] == "blocked" and state["stalled"]["job_id"] == job_c.pk
    assert state["last_repair"] is None

    counts = sweep(boot=True)
    assert (counts["repaired"], counts["resent"]) == (1, 1)
    job_c.refresh_from_db()
    assert (job_c.from_seq, job_c.to_seq) == (3, 4) and why in job_c.error
    state = extraction_state(thread=Thread.objects.get(pk=key("t-f")))
    assert state["stalled"] is None
    assert state["last_repair"]["job_id"] == job_c.pk and f"from_seq {from_seq} -> 3" in state["last_repair"]["detail"]
    assert job_run(job_id=job_c.pk, llm=ScriptedLlm([memories()]), background=False) == "done"
    assert Thread.objects.get(pk=key("t-f")).extracted_through_seq == 4
    assert sweep(boot=True)["repaired"] == 0


def test_a_claim_trims_a_job_whose_head_was_extracted(db, settings):
    settings.OAM_EMBEDDED_WORKER = False
    thread = make_thread(ScriptedLlm([]))
    thread.add_messages(CHAT[:2])
    thread.add_messages(CHAT[2:])
    job_b, job_c = ExtractionJob.objects.order_by("id")
    assert job_run(job_id=job_b.pk, llm=ScriptedLlm([memories()]), background=False) == "done"
    ExtractionJob.objects.filter(pk=job_c.pk).update(from_seq=2)
    llm = ScriptedLlm([memories()])
    assert job_run(job_id=job_c.pk, llm=llm, background=False) == "done"
    prompt = llm.requests[0].messages[-1]["content"].split("TARGET messages", 1)[1]
    assert "Always answer me in French." in prompt and "Noted!" not in prompt  # message 2 is not a target again
    assert ExtractionJob.objects.get(pk=job_c.pk).from_seq == 3


def test_the_state_reports_a_lost_worker_and_a_job_nobody_takes(db, settings):
    import datetime

    from django.utils import timezone

    settings.OAM_EMBEDDED_WORKER = False
    make_thread(ScriptedLlm([])).add_messages(CHAT)
    job = ExtractionJob.objects.get()
    assert extraction_state(thread=Thread.objects.get(pk=key("t-f")))["stalled"] is None  # just queued
    an_hour_ago = timezone.now() - datetime.timedelta(hours=1)
    ExtractionJob.objects.filter(pk=job.pk).update(created_at=an_hour_ago)
    assert extraction_state(thread=Thread.objects.get(pk=key("t-f")))["stalled"]["reason"] == "waiting_for_worker"
    ExtractionJob.objects.filter(pk=job.pk).update(status="running", started_at=an_hour_ago)
    assert extraction_state(thread=Thread.objects.get(pk=key("t-f")))["stalled"]["reason"] == "worker_lost"


# --- broker trouble ------------------------------------------------------------------------------------


@pytest.fixture
def unreachable_broker():
    """The extraction actor sends to a real Redis broker on a closed port of 127.0.0.1."""
    from dramatiq.brokers.redis import RedisBroker

    from memory.tasks import extract_job

    before = extract_job.broker
    extract_job.broker = RedisBroker(url="redis://127.0.0.1:1/0")
    yield extract_job.broker
    extract_job.broker = before


def test_a_broker_that_cannot_be_reached_shows_in_the_state(db, unreachable_broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        make_thread(ScriptedLlm([])).add_messages(CHAT)
    state = extraction_state(thread=Thread.objects.get(pk=key("t-f")))
    assert state["broker"]["kind"] == "redis" and state["broker"]["ok"] is False
    assert state["broker"]["error"].startswith("the broker could not be reached")
    assert "127.0.0.1" not in state["broker"]["error"] + state["stalled"]["detail"]  # read keys see both
    assert state["stalled"]["reason"] == "not_queued" and "broker refused it" in state["stalled"]["detail"]
    from memory.core import degraded

    assert degraded.states()["broker"].reason == "unreachable"  # /readyz shows it (tests/api/test_health.py)


def test_a_reachable_redis_broker_is_ok(db):
    from dramatiq.brokers.redis import RedisBroker

    from memory.tasks import extract_job
    from oam_site.worker import broker_status

    before = extract_job.broker
    extract_job.broker = RedisBroker(url="redis://127.0.0.1:6379/0")
    try:
        assert broker_status() == {"kind": "redis", "ok": True, "error": None}
    finally:
        extract_job.broker = before
    assert broker_status()["kind"] == "in-process"


# --- the write lock while embedding or calling the LLM ---------------------------------------------------


class WriteLockProbe:
    """Asks for SQLite's write lock from a connection of its own, without waiting (``BEGIN IMMEDIATE``).

    The connection comes from the backend's own DB-API module (``connection.Database``,
    maybe ``pysqlite3``): two SQLite libraries in one process do not see each other's locks.
    """

    def __init__(self, path: str):
        self.path, self.checks, self.held = path, [], []

    def check(self, where: str) -> None:
        database = connection.Database
        self.checks.append(where)
        probe = database.connect(self.path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
        except database.OperationalError as exc:
            self.held.append((where, str(exc)))
        finally:
            probe.close()


@pytest.mark.backend("sqlite")
def test_extraction_never_holds_the_write_lock_while_embedding_or_calling_the_llm(transactional_db, settings,
                                                                                  monkeypatch):
    from memory import embedders

    settings.OAM_EXTRACTION_DUPLICATE_DISTANCE, settings.OAM_EXTRACTION_RELATED_DISTANCE = 0.0, 2.0  # always judge
    probe = WriteLockProbe(connection.settings_dict["NAME"])
    real = embedders.get_embedder()

    class ProbingEmbedder:
        dimensions = real.dimensions

        def embed(self, texts):
            probe.check("embed")
            return real.embed(texts)

    class ProbingLlm(ScriptedLlm):
        def _request(self, messages, **kwargs):
            probe.check("llm")
            return super()._request(messages, **kwargs)

    monkeypatch.setattr(embedders, "_embedder", ProbingEmbedder())
    llm = ProbingLlm([memories(("preference", "Ann adores green tea.", ["m1"])), {"relation": "updates"},
                      {"summary": "Ann loves green tea.", "topics": ["tea"]}])
    # review_memory_types=(): the relation is made at once (a pending memory's waits for its approval)
    thread = make_thread(llm, MemoryExtractionConfig(extraction_mode="inline", review_memory_types=()))
    thread.add_memory("Ann loves green tea.")
    thread.add_messages(CHAT[:1])
    assert ExtractionJob.objects.get().memories_linked == 1  # stored, judged, related, summarised
    assert probe.checks.count("llm") == 3 and probe.checks.count("embed") >= 4
    assert probe.held == []
