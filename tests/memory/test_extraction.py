"""Automatic memory extraction (memory.extraction) with a scripted LLM.

The LLM is ``ScriptedLlm`` (the only part replaced in these tests); the
database, embedder and Dramatiq broker are real. Background runs use the
embedded worker on the in-process ``StubBroker`` (``extraction_worker``).
"""

from __future__ import annotations

import dataclasses
import datetime
import threading
import time
import warnings

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from memory.client import (
    AgentMemory,
    BackgroundExtractionQueueFullBehavior,
    MemoryExtractionConfig,
    MemoryExtractionMode,
    thread_messages,
)
from memory.extraction import tracker
from memory.extraction.candidates import Candidate, Decision, JobResult
from memory.extraction.config import DEPRECATED_INLINE_PARAMETERS
from memory.extraction.jobs import _claim, jobs_fence
from memory.extraction.recovery import extraction_state, sweep
from memory.extraction.settings import default_retention, retry_backoff
from memory.llm.adapters import LlmTimeout, LlmUnavailable
from memory.llm.prompts import JUDGE_SCHEMA_NAME
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob, Memory, Message, RecordLink, SearchChunk, Thread, ThreadSummary
from memory.services.extraction import _commit, extraction_after_add, job_run
from memory.services.memories import memory_prepare
from memory.tasks import QUEUE, extract_job
from tests.ids import key

# review_memory_types=(): these tests are about extraction itself; the review queue (extracted guidelines and
# preferences wait for a reviewer by default) is tests/memory/test_review.py's.
INLINE = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, review_memory_types=())
BACKGROUND = MemoryExtractionConfig(extraction_mode="background", enable_context_summary=False, review_memory_types=())


def memories(*items):
    """A reply of the extraction call: (memory_type, content, [refs]) triples."""
    return {"memories": [{"memory_type": t, "content": c, "source_message_ids": list(r)} for t, c, r in items]}


def judged(relation):
    return {"relation": relation}


pytestmark = pytest.mark.usefixtures("fresh_extraction_tracker")


@pytest.fixture
def no_embedded_worker(settings):
    settings.OAM_EMBEDDED_WORKER = False


def make_thread(llm, config=INLINE, thread_id="t-x", **kwargs):
    return AgentMemory(llm=llm).create_thread(thread_id=thread_id, user_id="u1", agent_id="a1",
                                              memory_extraction_config=config, **kwargs)


CHAT = [
    {"role": "user", "content": "I'm Ann and I love green tea.", "metadata": {"channel": "web", "turn": 1}},
    {"role": "assistant", "content": "Noted! Anything else?", "metadata": {"channel": "web", "turn": 2}},
    {"role": "user", "content": "Always answer me in French.", "metadata": {"channel": "web", "turn": 3}},
]


# --- MemoryExtractionConfig ------------------------------------------------------------------


def test_config_defaults_follow_the_spec_where_it_gives_them():
    config = MemoryExtractionConfig()
    assert config.extract_memories is True
    assert config.memory_extraction_window == -1 and config.context_summary_update_frequency == -1
    assert config.enable_context_summary is True and config.memory_extraction_inherit_message_metadata is True
    assert config.extraction_mode is MemoryExtractionMode.BACKGROUND
    # the SDK 26.8.0 defaults (tests/memory/test_sdk_parity.py compares all of them)
    assert config.background_extraction_queue_full_behavior is BackgroundExtractionQueueFullBehavior.DROP
    assert config.background_extraction_queue_put_timeout_seconds == 300.0
    assert config.memory_extraction_token_limit == 100_000


def test_config_validates_and_normalises():
    assert MemoryExtractionConfig(extraction_mode="INLINE").extraction_mode is MemoryExtractionMode.INLINE
    keys = MemoryExtractionConfig(memory_extraction_inherit_message_metadata=["a", "b"])
    assert keys.memory_extraction_inherit_message_metadata == ("a", "b")
    with pytest.raises(TypeError, match="memory_extraction_inherit_message_metadata"):
        MemoryExtractionConfig(memory_extraction_inherit_message_metadata="tenant")
    with pytest.raises(TypeError, match="memory_extraction_window"):
        MemoryExtractionConfig(memory_extraction_window=True)
    with pytest.raises(ValueError, match="extraction_mode"):
        MemoryExtractionConfig(extraction_mode="later")
    with pytest.raises(ValueError, match="background_extraction_queue_put_timeout_seconds"):
        MemoryExtractionConfig(background_extraction_queue_put_timeout_seconds=-1)
    with pytest.raises(ValueError, match="memory_extraction_config.nope"):
        MemoryExtractionConfig.from_dict({"nope": 1})


def test_config_is_stored_with_the_thread_and_kept_when_opened_later(db):
    config = MemoryExtractionConfig(extraction_mode="inline", memory_extraction_window=4,
                                    memory_extraction_inherit_message_metadata=("channel",),
                                    memory_extraction_custom_instructions="Only food.")
    make_thread(None, config)
    stored = Thread.objects.get(pk=key("t-x")).config
    assert stored["extraction_mode"] == "INLINE" and stored["memory_extraction_window"] == 4
    assert stored["memory_extraction_inherit_message_metadata"] == ["channel"]
    reopened = AgentMemory(llm=None).get_thread("t-x")
    assert reopened.memory_extraction_config == config


def test_enum_values_are_the_sdks_and_any_case_is_accepted():
    assert [m.value for m in MemoryExtractionMode] == ["INLINE", "BACKGROUND"]
    assert [m.value for m in BackgroundExtractionQueueFullBehavior] == ["DROP", "WAIT_THEN_DROP", "WAIT_THEN_RAISE"]
    for spelling in ("inline", "INLINE", "Inline"):
        assert MemoryExtractionMode(spelling) is MemoryExtractionMode.INLINE
    queue_full = BackgroundExtractionQueueFullBehavior
    for spelling, member in [("drop", queue_full.DROP), ("skip", queue_full.DROP), ("SKIP", queue_full.DROP),
                             ("wait_then_skip", queue_full.WAIT_THEN_DROP),
                             ("WAIT_THEN_SKIP", queue_full.WAIT_THEN_DROP),
                             ("wait_then_raise", queue_full.WAIT_THEN_RAISE)]:
        assert queue_full(spelling) is member
    assert queue_full.SKIP is queue_full.DROP and queue_full.WAIT_THEN_SKIP is queue_full.WAIT_THEN_DROP
    assert MemoryExtractionConfig(extraction_mode="inline").to_thread_config()["extraction_mode"] == "INLINE"


@pytest.mark.parametrize("stored_behaviour, behaviour", [
    ("drop", BackgroundExtractionQueueFullBehavior.DROP), ("skip", BackgroundExtractionQueueFullBehavior.DROP),
    ("wait_then_skip", BackgroundExtractionQueueFullBehavior.WAIT_THEN_DROP),
    ("wait_then_raise", BackgroundExtractionQueueFullBehavior.WAIT_THEN_RAISE)])
def test_a_config_stored_with_the_earlier_lower_case_values_still_loads_and_behaves(db, stored_behaviour, behaviour):
    """Thread configs written before the values became the SDK's upper-case ones (JSON written to the row)."""
    make_thread(None, MemoryExtractionConfig(enable_context_summary=False, review_memory_types=()))
    row = Thread.objects.get(pk=key("t-x"))
    Thread.objects.filter(pk=row.pk).update(config={
        **row.config, "extraction_mode": "inline", "background_extraction_queue_full_behavior": stored_behaviour})
    assert Thread.objects.get(pk=row.pk).config["extraction_mode"] == "inline"  # really stored lower case
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    thread = AgentMemory(llm=llm).get_thread("t-x")
    config = thread.memory_extraction_config
    assert config.extraction_mode is MemoryExtractionMode.INLINE
    assert config.background_extraction_queue_full_behavior is behaviour
    thread.add_messages(CHAT)  # INLINE: extracted before add_messages returns
    assert [m.content for m in Memory.objects.all()] == ["Ann loves green tea."]
    assert extraction_state(thread=thread.row)["mode"] == "INLINE"


def test_client_level_config_applies_to_threads_without_their_own(db):
    client = AgentMemory(llm=None, memory_extraction_config=MemoryExtractionConfig(memory_extraction_window=7))
    assert client.create_thread(thread_id="t-c").memory_extraction_config.memory_extraction_window == 7
    assert Thread.objects.get(pk=key("t-c")).config["memory_extraction_window"] == 7


def test_deprecated_inline_parameters_warn_and_still_work(db):
    with pytest.warns(DeprecationWarning, match="memory_extraction_window.*memory_extraction_config"):
        thread = AgentMemory(llm=None).create_thread(thread_id="t-d", memory_extraction_window=3,
                                                     memory_extraction_frequency=2)
    config = thread.memory_extraction_config
    assert (config.memory_extraction_window, config.memory_extraction_frequency) == (3, 2)
    assert set(DEPRECATED_INLINE_PARAMETERS) >= {"memory_extraction_window",
                                                 "memory_extraction_inherit_message_metadata"}


def test_grouped_and_inline_parameters_together_are_an_error(db):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="not both"):
            AgentMemory(llm=None).create_thread(memory_extraction_config=MemoryExtractionConfig(),
                                                enable_context_summary=False)
    assert not Thread.objects.exists()


# --- INLINE extraction -----------------------------------------------------------------------


def test_inline_extraction_stores_typed_memories_linked_to_their_messages(db):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]),
                                ("guideline", "Answer Ann in French.", ["m3"]),
                                ("fact", "Ann talks to the assistant.", ["m1", "m2"]))])
    thread = make_thread(llm)
    ids = thread.add_messages(CHAT)
    rows = {m.content: m for m in Memory.objects.all()}
    assert set(rows) == {"Ann loves green tea.", "Answer Ann in French.", "Ann talks to the assistant."}
    assert rows["Ann loves green tea."].memory_type == "preference"
    assert rows["Ann loves green tea."].source_message_ids == [ids[0]]
    assert rows["Answer Ann in French."].source_message_ids == [ids[2]]
    assert rows["Ann talks to the assistant."].source_message_ids == ids[:2]
    # scope and search chunks like any memory
    for row in rows.values():
        assert (row.user_id, row.agent_id, row.thread_id) == ("u1", "a1", key("t-x"))
        assert SearchChunk.objects.filter(source_kind="memory", record_id=row.pk).exists()
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 3
    job = ExtractionJob.objects.get()
    assert (job.status, job.from_seq, job.to_seq, job.memories_created, job.attempts) == ("done", 1, 3, 3, 1)
    # the prompt: targets with refs, and a schema that only admits those refs
    request = llm.requests[0]
    assert "[m1] user: I'm Ann and I love green tea." in request.messages[-1]["content"]
    refs = request.schema["properties"]["memories"]["items"]["properties"]["source_message_ids"]["items"]
    assert refs["enum"] == ["m1", "m2", "m3"]
    assert [r.record_type for r in thread.search("What does Ann drink?", record_types=["preference"])] == ["preference"]


def test_replies_that_are_not_text_are_rejected_and_sources_kept_in_message_order(db):
    llm = ScriptedLlm([memories(("memory", '{"n "\u2013m "', ["m1"]),
                                ("fact", "Ann talks to the assistant.", ["m3", "m1"]),
                                ("fact", "Ann talks to the assistant.", ["m2"]))])
    thread = make_thread(llm)
    ids = thread.add_messages([{**m, "timestamp": f"2023-05-08T13:5{i}:00"} for i, m in enumerate(CHAT)])
    row = Memory.objects.get()
    assert row.source_message_ids == [ids[0], ids[2]] and row.timestamp == "2023-05-08T13:52:00"
    assert "rejected" not in row.metadata["extraction"]
    assert ExtractionJob.objects.get().memories_created == 1


def test_metadata_is_inherited_only_where_the_sources_agree(db):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]),
                                ("fact", "Ann talks to the assistant.", ["m1", "m2"]))])
    make_thread(llm).add_messages(CHAT)
    one = Memory.objects.get(content="Ann loves green tea.").metadata
    two = Memory.objects.get(content="Ann talks to the assistant.").metadata
    assert (one["channel"], one["turn"]) == ("web", 1)
    assert two["channel"] == "web" and "turn" not in two
    assert two["extraction"]["metadata_not_inherited"] == ["turn"]
    assert one["extraction"] == {"job_id": ExtractionJob.objects.get().pk, "decision": "new"}


@pytest.mark.parametrize("rule, expected", [(False, {}), (("turn", "missing"), {"turn": 1})])
def test_metadata_inheritance_rule(db, rule, expected):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False,
                                    memory_extraction_inherit_message_metadata=rule)
    make_thread(llm, config).add_messages(CHAT)
    metadata = Memory.objects.get().metadata
    assert {k: v for k, v in metadata.items() if k != "extraction"} == expected


def test_custom_instructions_reach_the_system_prompt(db):
    llm = ScriptedLlm([memories()])
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False,
                                    memory_extraction_custom_instructions="Only keep drinks.")
    make_thread(llm, config).add_messages(CHAT[:1])
    assert "Additional instructions:\nOnly keep drinks." in llm.requests[0].messages[0]["content"]


def test_an_llm_failure_never_loses_the_messages(db):
    """An LLM timeout leaves the messages stored and their range pending: the job waits to retry (issue #34)."""
    llm = ScriptedLlm([LlmTimeout("slow")])
    thread = make_thread(llm)
    ids = thread.add_messages(CHAT)  # no exception
    assert [m.id for m in thread.get_messages()] == ids
    job = ExtractionJob.objects.get()
    assert (job.status, job.failure) == ("queued", "transient") and "LlmTimeout" in job.error
    assert job.retry_at > job.retry_since
    assert not Memory.objects.exists()
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 0  # pending, not finished


def test_an_llm_failure_after_the_horizon_fails_the_job(db, settings):
    """With no retry horizon left, a transient failure fails the job and the watermark passes it (spec:
    "Extraction failures count as finished"); ``failure`` says it was transient."""
    settings.OAM_EXTRACTION_RETRY_HORIZON_SECONDS = 0
    make_thread(ScriptedLlm([LlmTimeout("slow")])).add_messages(CHAT)
    job = ExtractionJob.objects.get()
    assert (job.status, job.failure) == ("failed", "transient") and "retry horizon ended: LlmTimeout" in job.error
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 3


def test_invalid_output_skips_that_call_only(db):
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, memory_extraction_window=2)
    llm = ScriptedLlm(["nope", "still not json", "{}",  # first call: three invalid attempts
                       memories(("guideline", "Answer Ann in French.", ["m1"]))], max_retries=2)
    make_thread(llm, config).add_messages(CHAT)
    job = ExtractionJob.objects.get()
    assert job.status == "done" and job.memories_created == 1 and "call 1/2" in job.error
    assert Memory.objects.get().content == "Answer Ann in French."


def test_every_call_invalid_fails_the_job(db):
    llm = ScriptedLlm(["x", "y", "z"], max_retries=2)
    make_thread(llm).add_messages(CHAT)
    assert ExtractionJob.objects.get().status == "failed"


def test_frequency_waits_for_enough_new_messages(db):
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False,
                                    memory_extraction_frequency=3)
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    thread = make_thread(llm, config)
    thread.add_messages(CHAT[:2])
    assert not ExtractionJob.objects.exists() and llm.requests == []
    thread.add_messages(CHAT[2:])
    job = ExtractionJob.objects.get()
    assert (job.from_seq, job.to_seq) == (1, 3)
    assert "[m3]" in llm.requests[0].messages[-1]["content"]


def test_window_splits_calls_and_fills_them_with_context(db):
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, memory_extraction_window=2)
    llm = ScriptedLlm([memories()] * 3)
    thread = make_thread(llm, config)
    thread.add_messages(CHAT[:1])
    thread.add_messages(CHAT[1:] + [{"role": "user", "content": "Bye"}])
    first, second = (r.messages[-1]["content"] for r in llm.requests[1:])
    assert "CONTEXT" not in first
    assert "[m1] assistant: Noted! Anything else?" in first and "[m2] user: Always answer" in first
    assert "CONTEXT messages" in second and "[c1] user: Always answer me in French." in second
    assert "[m1] user: Bye" in second


def test_token_limit_splits_a_long_batch(db):
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False,
                                    memory_extraction_token_limit=1)  # message budget: the minimum (200 tokens)
    batch = [{"role": "user", "content": f"Message {i}: " + "word " * 120} for i in range(4)]
    llm = ScriptedLlm([memories()] * 4)
    make_thread(llm, config).add_messages(batch)
    assert len(llm.requests) == 4  # ~160 tokens each: one per call
    assert ExtractionJob.objects.get().status == "done"


def test_extraction_off_or_without_llm_does_nothing(db):
    make_thread(None).add_messages(CHAT)
    make_thread(ScriptedLlm([]), MemoryExtractionConfig(extract_memories=False), thread_id="t-off").add_messages(CHAT)
    assert not ExtractionJob.objects.exists()


# --- duplicates, updates, contradictions -----------------------------------------------------


def test_a_restated_memory_is_not_stored_twice(db):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"])),
                       memories(("preference", "Ann loves green tea", ["m1"]),
                                ("preference", "Ann loves green tea!", ["m1"]))])
    thread = make_thread(llm)
    thread.add_messages(CHAT[:1])
    thread.add_messages([{"role": "user", "content": "Green tea is the best."}])
    assert Memory.objects.count() == 1
    assert ExtractionJob.objects.order_by("id").last().memories_created == 0


@pytest.mark.parametrize("verdict, decision, relation", [
    ("updates", "updates", "supersedes"),
    ("contradicts", "contradicts", "contradicts"),
])
def test_an_update_or_contradiction_is_stored_with_a_relation(db, verdict, decision, relation):
    llm = ScriptedLlm([memories(("preference", "Caroline likes hiking.", ["m1"])),
                       memories(("preference", "Caroline no longer likes hiking.", ["m1"])),
                       judged(verdict)])
    thread = make_thread(llm)
    thread.add_messages([{"role": "user", "content": "I like hiking"}])
    old = Memory.objects.get()
    thread.add_messages([{"role": "user", "content": "I stopped liking hiking"}])
    new = Memory.objects.exclude(pk=old.pk).get()
    note = new.metadata["extraction"]
    assert (note["decision"] == decision and note["related_memory_id"] == old.public_id
            and 0.08 <= note["distance"] < 0.25)
    link = RecordLink.objects.get()
    assert (link.source_id, link.target_id, link.relation_type) == (new.pk, old.pk, relation)
    assert llm.requests[-1].schema_name == JUDGE_SCHEMA_NAME
    assert ExtractionJob.objects.order_by("id").last().memories_linked == 1


def test_link_extraction_mode_disabled_stores_no_relation(db):
    llm = ScriptedLlm([memories(("preference", "Caroline likes hiking.", ["m1"])),
                       memories(("preference", "Caroline no longer likes hiking.", ["m1"])),
                       judged("updates")])
    thread = make_thread(llm, dataclasses.replace(INLINE, memory_link_extraction_mode="DISABLED"))
    thread.add_messages([{"role": "user", "content": "I like hiking"}])
    thread.add_messages([{"role": "user", "content": "I stopped liking hiking"}])
    assert Memory.objects.count() == 2 and not RecordLink.objects.exists()
    assert ExtractionJob.objects.order_by("id").last().memories_linked == 0


def test_judge_restates_skips_and_unrelated_keeps(db):
    llm = ScriptedLlm([memories(("preference", "Caroline likes hiking.", ["m1"])),
                       memories(("preference", "Caroline hates hiking.", ["m1"]),
                                ("preference", "Caroline no longer likes hiking.", ["m1"])),
                       judged("restates"), judged("unrelated")])
    thread = make_thread(llm)
    thread.add_messages([{"role": "user", "content": "I like hiking"}])
    thread.add_messages([{"role": "user", "content": "Hiking, hmm"}])
    assert sorted(Memory.objects.values_list("content", flat=True)) == [
        "Caroline likes hiking.", "Caroline no longer likes hiking."]
    assert not RecordLink.objects.exists()


def test_a_failed_judge_keeps_the_memory_with_a_note(db):
    llm = ScriptedLlm([memories(("preference", "Caroline likes hiking.", ["m1"])),
                       memories(("preference", "Caroline hates hiking.", ["m1"])),
                       LlmUnavailable("down")])
    thread = make_thread(llm)
    thread.add_messages([{"role": "user", "content": "I like hiking"}])
    thread.add_messages([{"role": "user", "content": "I hate hiking"}])
    note = Memory.objects.get(content="Caroline hates hiking.").metadata["extraction"]
    assert note["decision"] == "new" and note["note"].startswith("relation unknown") and note["related_memory_id"]


def test_duplicates_are_found_across_threads_of_the_same_user_only(db):
    llm = ScriptedLlm([memories(("fact", "Ann lives in Lisbon.", ["m1"])),
                       memories(("fact", "Ann lives in Lisbon.", ["m1"])),
                       memories(("fact", "Ann lives in Lisbon.", ["m1"]))])
    make_thread(llm).add_messages(CHAT[:1])
    make_thread(llm, thread_id="t-y").add_messages(CHAT[:1])  # same user and agent: duplicate
    AgentMemory(llm=llm).create_thread(thread_id="t-z", user_id="someone-else", agent_id="a1",
                                       memory_extraction_config=INLINE).add_messages(CHAT[:1])
    assert sorted(Memory.objects.values_list("user_id", flat=True)) == ["someone-else", "u1"]


# --- the watermark and claims -------------------------------------------------------------


def test_a_job_delivered_twice_runs_once(db):
    thread = make_thread(ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))]), BACKGROUND)
    thread.add_messages(CHAT[:1])
    job = ExtractionJob.objects.get()
    assert job.status == "queued"
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    assert job_run(job_id=job.pk, llm=llm) == "done"
    assert job_run(job_id=job.pk, llm=llm) == "skipped"
    assert Memory.objects.count() == 1 and len(llm.requests) == 1


def test_a_worker_that_lost_its_claim_writes_nothing(db):
    thread = make_thread(ScriptedLlm([]), BACKGROUND)
    thread.add_messages(CHAT[:1])
    job = ExtractionJob.objects.get()
    claimed = _claim(job.pk)
    assert claimed is not None
    # the worker stalls; the sweep gives the job to another worker, which finishes it
    ExtractionJob.objects.filter(pk=job.pk).update(started_at=timezone.now() - datetime.timedelta(hours=1))
    assert sweep()["requeued"] == 1
    assert job_run(job_id=job.pk, llm=ScriptedLlm([memories(("fact", "Ann drinks tea.", ["m1"]))])) == "done"
    # the first worker comes back with its own result: refused
    candidate = Candidate("fact", "Ann drinks coffee.", [])
    decision = Decision(candidate, "new")
    prepared = memory_prepare(thread=Thread.objects.get(pk=key("t-x")), content=candidate.content,
                                       retention=default_retention())
    assert not _commit(job.pk, claimed[2], [(decision, prepared)], JobResult(),
                                  started=0.0, chain=False)
    assert list(Memory.objects.values_list("content", flat=True)) == ["Ann drinks tea."]


def test_jobs_of_a_thread_run_in_order(db):
    thread = make_thread(ScriptedLlm([]), BACKGROUND)
    thread.add_messages(CHAT[:1])
    thread.add_messages(CHAT[1:])
    first, second = ExtractionJob.objects.order_by("id")
    assert (first.from_seq, first.to_seq, second.from_seq, second.to_seq) == (1, 1, 2, 3)
    llm = ScriptedLlm([memories(), memories()])
    assert job_run(job_id=second.pk, llm=llm) == "skipped"  # not its turn
    assert job_run(job_id=first.pk, llm=llm) == "done"
    assert job_run(job_id=second.pk, llm=llm) == "done"
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 3


def test_a_transient_error_is_retried_then_fails_for_good(db, settings):
    """Errors other than an unreachable LLM (here the database) keep Dramatiq's retries, up to
    ``OAM_EXTRACTION_MAX_ATTEMPTS`` claims."""
    settings.OAM_EXTRACTION_MAX_ATTEMPTS = 2
    make_thread(ScriptedLlm([]), BACKGROUND).add_messages(CHAT[:1])
    job = ExtractionJob.objects.get()
    with pytest.raises(OperationalError):
        job_run(job_id=job.pk, llm=ScriptedLlm([OperationalError("database is locked")]))
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("queued", 1) and "attempt 1" in job.error
    assert job_run(job_id=job.pk, llm=ScriptedLlm([OperationalError("database is locked")])) == "failed"
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("failed", 2)


def test_an_unreachable_llm_is_retried_with_backoff_until_the_horizon(db, settings):
    """LlmUnavailable (refused, timeout, 429, 5xx) does not use up attempts: the job waits ``retry_at``
    (claims before it are refused) and retries past ``OAM_EXTRACTION_MAX_ATTEMPTS``; when the LLM
    answers, the range is extracted and the watermark moves (issue #34)."""
    settings.OAM_EXTRACTION_MAX_ATTEMPTS = 2
    make_thread(ScriptedLlm([]), BACKGROUND).add_messages(CHAT[:1])
    job = ExtractionJob.objects.get()
    for attempt in (1, 2, 3):
        assert job_run(job_id=job.pk, llm=ScriptedLlm([LlmUnavailable("down")])) == "retrying"
        job.refresh_from_db()
        assert (job.status, job.failure, job.attempts) == ("queued", "transient", attempt)
        assert job_run(job_id=job.pk, llm=ScriptedLlm([])) == "skipped"  # backing off
        ExtractionJob.objects.filter(pk=job.pk).update(retry_at=timezone.now())
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 0
    assert job_run(job_id=job.pk, llm=ScriptedLlm([memories(("fact", "Ann drinks tea.", ["m1"]))])) == "done"
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 1
    assert Memory.objects.get().content == "Ann drinks tea."


def test_a_fence_by_a_delete_is_not_an_attempt(db, settings):
    """With one attempt allowed, a job fenced by a delete still gets its own attempt afterwards: an error in
    it is retried by Dramatiq (released, re-raised), not the job's end (issue #34)."""
    settings.OAM_EXTRACTION_MAX_ATTEMPTS = 2
    make_thread(ScriptedLlm([]), BACKGROUND).add_messages(CHAT[:1])
    job = ExtractionJob.objects.get()
    assert _claim(job.pk) is not None
    with transaction.atomic():
        assert jobs_fence(thread_id=key("t-x"), reason="message deleted") == [job.pk]
    job.refresh_from_db()
    assert (job.status, job.attempts, job.fences) == ("queued", 1, 1)
    with pytest.raises(OperationalError):  # claim 2, the first that counts: one attempt left
        job_run(job_id=job.pk, llm=ScriptedLlm([OperationalError("database is locked")]))
    job.refresh_from_db()
    assert (job.status, job.attempts, job.fences) == ("queued", 2, 1)


def test_the_backoff_doubles_up_to_its_cap(settings):
    settings.OAM_EXTRACTION_RETRY_BACKOFF_SECONDS, settings.OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS = 2, 300
    assert [retry_backoff(t) for t in (0, 2, 4, 8, 1000)] == [2, 2, 4, 8, 300]


def test_no_llm_in_the_worker_fails_the_job(db):
    make_thread(ScriptedLlm([]), BACKGROUND).add_messages(CHAT[:1])
    tracker._tracker.attached.clear()  # as in another process without OAM_LLM_BASE_URL
    job = ExtractionJob.objects.get()
    assert job_run(job_id=job.pk) == "failed"
    assert "no LLM configured" in ExtractionJob.objects.get().error


# --- update_message ------------------------------------------------------------------------------


def test_editing_an_extracted_message_re_extracts_it_without_moving_the_watermark(db):
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False,
                                    memory_extraction_frequency=1)
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"])),
                       memories(("preference", "Ann loves black coffee.", ["m1"]))])
    thread = make_thread(llm, config)
    ids = thread.add_messages(CHAT)
    thread.update_message(ids[2], content="Actually I love black coffee.")
    edit = ExtractionJob.objects.order_by("id").last()
    assert (edit.trigger, edit.from_seq, edit.to_seq, edit.status) == ("update_message", 3, 3, "done")
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 3
    prompt = llm.requests[-1].messages[-1]["content"]
    assert "[m1] user: Actually I love black coffee." in prompt and "[c1] user: I'm Ann" in prompt
    assert Memory.objects.get(content="Ann loves black coffee.").source_message_ids == [ids[2]]
    assert Memory.objects.filter(content="Ann loves green tea.").exists()  # existing memories stay
    # metadata-only edits and edits of messages not extracted yet do not re-extract
    thread.update_message(ids[0], metadata={"x": 1})
    assert ExtractionJob.objects.count() == 2


def test_editing_a_message_not_yet_extracted_waits_for_the_regular_run(db):
    thread = make_thread(ScriptedLlm([]), BACKGROUND)
    ids = thread.add_messages(CHAT[:1])  # queued, not started
    thread.update_message(ids[0], content="changed")
    assert list(ExtractionJob.objects.values_list("trigger", flat=True)) == ["add_messages"]


# --- BACKGROUND mode, the queue and waiting ------------------------------------------------------------


def test_background_queues_a_job_after_commit(db, no_embedded_worker, django_capture_on_commit_callbacks):
    broker = extract_job.broker
    broker.flush_all()
    thread = make_thread(ScriptedLlm([]), BACKGROUND)
    with django_capture_on_commit_callbacks(execute=True):
        thread.add_messages(CHAT)
    assert broker.queues[QUEUE].qsize() == 1
    assert ExtractionJob.objects.get().status == "queued"
    broker.flush_all()


@pytest.mark.parametrize("behaviour", ["skip", "wait_then_skip"])
def test_a_full_queue_skips_and_keeps_the_messages(db, settings, behaviour):
    settings.OAM_EXTRACTION_QUEUE_CAPACITY = 0
    config = MemoryExtractionConfig(background_extraction_queue_full_behavior=behaviour,
                                    background_extraction_queue_put_timeout_seconds=0.2)
    thread = make_thread(ScriptedLlm([]), config)
    ids = thread.add_messages(CHAT)
    assert len(thread.get_messages()) == len(ids) and not ExtractionJob.objects.exists()


def test_a_full_queue_can_raise_timeout(db, settings):
    settings.OAM_EXTRACTION_QUEUE_CAPACITY = 0
    config = MemoryExtractionConfig(background_extraction_queue_full_behavior="wait_then_raise",
                                    background_extraction_queue_put_timeout_seconds=0.2)
    thread = make_thread(ScriptedLlm([]), config)
    with pytest.raises(TimeoutError, match="messages are stored"):
        thread.add_messages(CHAT)
    assert Message.objects.count() == 3


def test_wait_times_out_on_unfinished_accepted_work_and_deletes_do_not_wait(
        db, no_embedded_worker, django_capture_on_commit_callbacks):
    thread = make_thread(ScriptedLlm([]), BACKGROUND)
    with django_capture_on_commit_callbacks(execute=True):
        ids = thread.add_messages(CHAT)  # accepted; no worker runs it
    mid = thread.add_memory("Ann likes tea", autonomous_linking=False)
    with pytest.raises(TimeoutError):
        thread.wait_for_memory_extraction(timeout=0.3)
    # deletes fence running extraction instead of waiting for it: they delete at once
    assert thread.delete_message(ids[0]) == 1 and thread.delete_memory(mid) == 1
    assert not Message.objects.filter(pk=key(ids[0])).exists() and not Memory.objects.filter(pk=key(mid)).exists()
    with pytest.raises(TypeError):
        thread.wait_for_memory_extraction(timeout="soon")
    extract_job.broker.flush_all()


def test_wait_returns_at_once_without_accepted_work(db):
    thread = make_thread(None)
    thread.wait_for_memory_extraction(timeout=0)
    thread.wait_for_memory_extraction(timeout=None)


def test_background_extraction_runs_in_the_embedded_worker(extraction_worker):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"])),
                       memories(("guideline", "Answer Ann in French.", ["m1"]))])
    thread = make_thread(llm, BACKGROUND)
    thread.add_messages(CHAT[:2])
    thread.add_messages(CHAT[2:])
    thread.wait_for_memory_extraction(timeout=60)
    assert sorted(Memory.objects.values_list("content", flat=True)) == ["Ann loves green tea.", "Answer Ann in French."]
    assert list(ExtractionJob.objects.values_list("status", flat=True)) == ["done", "done"]
    assert Thread.objects.get(pk=key("t-x")).extracted_through_seq == 3
    assert thread.delete_memory(Memory.objects.get(content="Ann loves green tea.").public_id) == 1


def test_async_wait(extraction_worker):
    import asyncio

    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    thread = make_thread(llm, BACKGROUND)

    async def scenario():
        await thread.add_messages_async(CHAT[:1])
        await thread.wait_for_memory_extraction_async(timeout=60)

    asyncio.run(scenario())
    assert Memory.objects.count() == 1


def test_wait_covers_a_concurrent_add_messages_call(extraction_worker, monkeypatch):
    release = threading.Event()
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    thread = make_thread(llm, BACKGROUND)
    original = extraction_after_add

    def slow_after_add(**kwargs):  # the messages are stored; the job is not accepted yet
        release.wait(5)
        return original(**kwargs)

    def add():
        try:
            thread.add_messages(CHAT[:1])
        finally:
            connection.close()

    monkeypatch.setattr(thread_messages, "extraction_after_add", slow_after_add)
    adder = threading.Thread(target=add)
    adder.start()
    while not tracker._tracker.inflight:
        time.sleep(0.01)
    threading.Timer(0.3, release.set).start()
    thread.wait_for_memory_extraction(timeout=60)
    assert Memory.objects.count() == 1
    adder.join()


# --- recovery --------------------------------------------------------------------------------------


def test_the_sweep_resends_lost_jobs_in_order(db, no_embedded_worker):
    thread = make_thread(ScriptedLlm([]), BACKGROUND)
    thread.add_messages(CHAT[:1])
    thread.add_messages(CHAT[1:])
    broker = extract_job.broker
    broker.flush_all()
    assert sweep() == {"requeued": 0, "covered": 0, "repaired": 0, "resent": 0, "created": 0}  # too fresh
    counts = sweep(boot=True)
    assert counts["resent"] == 1 and broker.queues[QUEUE].qsize() == 1  # only the one next in line
    broker.flush_all()


def test_the_sweep_marks_jobs_the_watermark_passed(db, no_embedded_worker):
    make_thread(ScriptedLlm([]), BACKGROUND).add_messages(CHAT)
    Thread.objects.filter(pk=key("t-x")).update(extracted_through_seq=3)
    assert sweep(boot=True)["covered"] == 1
    assert ExtractionJob.objects.get().status == "done"
    extract_job.broker.flush_all()


def test_the_sweep_creates_a_job_for_messages_that_never_got_one(db, no_embedded_worker, settings):
    from memory.llm.adapters import reset_llm

    make_thread(None, BACKGROUND).add_messages(CHAT)  # no LLM at the time: no job
    Message.objects.update(created_at=timezone.now() - datetime.timedelta(hours=1))
    assert sweep(boot=True)["created"] == 0  # no LLM configured here either
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL = "http://127.0.0.1:9/v1", "m"
    reset_llm()
    try:
        assert sweep(boot=True)["created"] == 1
    finally:
        reset_llm()
    job = ExtractionJob.objects.get()
    assert (job.from_seq, job.to_seq, job.status) == (1, 3, "queued")
    extract_job.broker.flush_all()


# --- summaries --------------------------------------------------------------------------------------


def test_the_summary_is_refreshed_after_a_due_extraction(db):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"])),
                       {"summary": "Ann loves green tea.", "topics": ["tea"]},
                       memories(),
                       {"summary": "Ann loves green tea and said bye.", "topics": ["tea"]}])
    thread = make_thread(llm, MemoryExtractionConfig(extraction_mode="inline"))
    thread.add_messages(CHAT)
    summary = ThreadSummary.objects.get(thread_id=key("t-x"))
    assert (summary.content, summary.through_seq) == ("Ann loves green tea.", 3)
    # and the next extraction sees the summary of what came before its targets
    thread.add_messages([{"role": "user", "content": "Bye"}])
    assert "Summary of the conversation before these messages:\nAnn loves green tea." in \
        llm.requests[2].messages[-1]["content"]


# --- the HTTP state ------------------------------------------------------------------------------------


def test_extraction_state(db):
    llm = ScriptedLlm([memories(("preference", "Ann loves green tea.", ["m1"]))])
    thread = make_thread(llm)
    thread.add_messages(CHAT)
    state = extraction_state(thread=thread.row)
    assert (state["watermark"], state["last_message_seq"], state["pending_messages"]) == (3, 3, 0)
    assert state["last_job"]["memories_created"] == 1 and state["last_job"]["status"] == "done"
    assert state["mode"] == "INLINE" and state["enabled"] is True
    assert state["thread_id"] == "t-x"  # the public id
    AgentMemory().delete_thread("t-x")
    with pytest.raises(KeyError):
        extraction_state(thread=thread.row)  # gone
