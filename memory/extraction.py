"""Automatic memory extraction: typed memories from a thread's messages, with provenance.

Flow (ARCHITECTURE.md, "Main flows"): ``add_messages`` commits the raw
messages first, then ``extraction_after_add`` decides whether extraction is
due and records an ``ExtractionJob`` over the new message range. INLINE runs
it at once (``run_inline``); BACKGROUND hands its id to the Dramatiq actor
``memory.tasks.extract_job`` after commit. ``job_run`` does the work:

1. claim the job (a transaction: it must be queued and, for ``add_messages``
   jobs, start right after the thread's watermark ``extracted_through_seq``);
2. split the range into LLM calls (``plan_slices``: at most
   ``memory_extraction_window`` target messages per call, under
   ``memory_extraction_token_limit`` prompt tokens) and ask the LLM for
   ``{"memories": [{memory_type, content, source_message_ids}]}`` against a
   JSON schema whose ``source_message_ids`` can only name the call's targets;
3. compare each candidate with the scope's stored memories (``decide``):
   cosine distance below ``DUPLICATE_DISTANCE`` is the same memory (skipped);
   below ``RELATED_DISTANCE`` a short LLM question tells restates / updates /
   contradicts / unrelated; updates and contradictions are stored with a
   relation (``memory.links``: supersedes / contradicts) and the decision in
   ``metadata["extraction"]``;
4. one transaction writes the memories and their chunks
   (``services.memory_add``), the relations, the new watermark and the job's
   counts, if and only if the job still holds its claim and the watermark is
   where it was: a range is never extracted twice, even when a message is
   delivered twice or a slow worker outlives its claim;
5. progress events go to the thread's channel-layer group after commit
   (``memory.progress``), then the durable summary is refreshed when due
   (``memory.context.summary_refresh_if_due``).

The watermark is the truth and the queue only a trigger: ``sweep`` (worker
start-up and every ``OAM_EXTRACTION_SWEEP_SECONDS``) re-queues jobs whose
worker died, re-sends jobs whose queue message was lost, and creates a job for
messages that never got one.

Failures never touch the raw messages. An LLM that is unreachable is retried
(Dramatiq backoff, ``OAM_EXTRACTION_MAX_ATTEMPTS`` claims in all); invalid
output after the adapter's retries skips that call; a job that fails for good
is marked failed and the watermark moves past it (spec: "Extraction failures
count as finished").

Editing a message (``extraction_after_edit``) re-extracts that message with
its earlier history as context when it was already extracted; such jobs
never move the watermark (spec: update_message Notes).

Projects: a job works in its thread's project. The per-process bookkeeping is
keyed by the thread's stored id (``memory.tenancy``); candidates are compared
with memories of the same project only; ids in events, metadata and
``source_message_ids`` are public.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from memory import progress, services
from memory.chunking import estimate_tokens
from memory.embedders import get_embedder
from memory.errors import InvalidArgument, InvalidType, NotFound
from memory.extraction_config import BackgroundExtractionQueueFullBehavior as QueueFull
from memory.extraction_config import MemoryExtractionConfig
from memory.fields import VectorDistance
from memory.llm import Llm, LlmError, LlmInvalidOutput, LlmRequestRejected, get_llm
from memory.models import MEMORY_TYPES, ExtractionJob, Memory, Message, SearchChunk, Thread, ThreadSummary
from memory.search import scope_q
from memory.selectors import live_q
from memory.tenancy import public_id, stored_id
from memory.types import MemoryRetentionConfig, RecordStatus, SearchScope

logger = logging.getLogger(__name__)

TRIGGER_ADD = "add_messages"
TRIGGER_EDIT = "update_message"
ACTIVE = ("queued", "running")

SCHEMA_NAME = "extracted_memories"
JUDGE_SCHEMA_NAME = "memory_relation"
#: Bounds on one reply, enforced by the schema: memories per call, characters per
#: memory, source messages per memory. A small model fills whatever room it gets
#: (SmolLM2 ran into a 1,024-token cap with 8 x 240 characters, and the cut reply
#: cost two retries), so the reply cap is derived from them: ~120 tokens per
#: memory at most, so a grammar-constrained reply always closes.
MAX_MEMORIES_PER_CALL = 6
CONTENT_MAX_CHARS = 200
MAX_SOURCES_PER_MEMORY = 4
MAX_OUTPUT_TOKENS = MAX_MEMORIES_PER_CALL * 120 + 40
#: Earlier messages shown with an edited message when the window is unbounded.
REEXTRACT_CONTEXT_MESSAGES = 10
#: Tokens kept for the prompt's own words besides the system text and schema.
PROMPT_OVERHEAD_TOKENS = 100
MIN_MESSAGE_BUDGET = 200
#: Stored memories compared with each candidate.
NEAREST_MEMORIES = 5
POLL_SECONDS = 0.1

#: Judge answers and what they make of a candidate.
RELATIONS = {"restates": "duplicate", "updates": "updates", "contradicts": "contradicts", "unrelated": "new"}
#: Relation stored from the new memory to the existing one (memory.links built-ins).
LINK_TYPES = {"updates": "supersedes", "contradicts": "contradicts"}


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def duplicate_distance() -> float:
    """Cosine distance under which a candidate restates a stored memory (``OAM_EXTRACTION_DUPLICATE_DISTANCE``, 0.08)."""
    return float(_setting("OAM_EXTRACTION_DUPLICATE_DISTANCE", 0.08))


def related_distance() -> float:
    """Cosine distance under which a candidate may update or contradict one (``OAM_EXTRACTION_RELATED_DISTANCE``, 0.25)."""
    return float(_setting("OAM_EXTRACTION_RELATED_DISTANCE", 0.25))


def max_attempts() -> int:
    """Claims of one job before it fails for good (``OAM_EXTRACTION_MAX_ATTEMPTS``, 4)."""
    return int(_setting("OAM_EXTRACTION_MAX_ATTEMPTS", 4))


class ExtractionRejected(Exception):
    """Extraction cannot run for this job and retrying will not help (e.g. no LLM configured)."""


# --- what this process knows beyond the database ----------------------------------------


@dataclass
class _Attached:
    llm: Llm | None
    config: MemoryExtractionConfig


class _Tracker:
    """Process-wide bookkeeping for ``wait_for_memory_extraction``.

    All three are keyed by the thread's stored id (``Thread.pk``).
    ``attached``: the LLM object and config a thread handle used, so that an
    in-process (embedded) worker extracts with the caller's LLM; workers in
    other processes use ``settings.OAM_LLM_*`` and ``Thread.config``.
    ``accepted``: per thread, the highest job id handed to the queue by this
    process. ``inflight``: calls that are storing messages and may be about
    to accept a job.
    """

    def __init__(self):
        self.cond = threading.Condition()
        self.attached: dict[str, _Attached] = {}
        self.accepted: dict[str, int] = {}
        self.inflight: dict[str, int] = {}


_tracker = _Tracker()


def attach(thread_id: str, *, llm: Llm | None, config: MemoryExtractionConfig) -> None:
    """Remember the LLM and config a thread handle extracts with, for this process's worker."""
    with _tracker.cond:
        _tracker.attached[thread_id] = _Attached(llm=llm, config=config)


def detach(thread_id: str) -> None:
    """Forget what ``attach`` remembered (the thread was deleted)."""
    with _tracker.cond:
        _tracker.attached.pop(thread_id, None)
        _tracker.accepted.pop(thread_id, None)


def _accepted(thread_id: str, job_id: int) -> None:
    with _tracker.cond:
        _tracker.accepted[thread_id] = max(job_id, _tracker.accepted.get(thread_id, 0))


@contextmanager
def inflight(thread_id: str) -> Iterator[None]:
    """Mark a call that may accept extraction work for ``thread_id`` (``wait_for_memory_extraction`` waits for it)."""
    with _tracker.cond:
        _tracker.inflight[thread_id] = _tracker.inflight.get(thread_id, 0) + 1
    try:
        yield
    finally:
        with _tracker.cond:
            left = _tracker.inflight[thread_id] - 1
            if left:
                _tracker.inflight[thread_id] = left
            else:
                del _tracker.inflight[thread_id]
            _tracker.cond.notify_all()


def thread_config(thread: Thread, default: MemoryExtractionConfig | None = None) -> MemoryExtractionConfig:
    """The thread's extraction config: ``Thread.config`` over the attached (client) config over the defaults."""
    with _tracker.cond:
        attached = _tracker.attached.get(thread.pk)
    base = default or (attached.config if attached else None)
    return MemoryExtractionConfig.from_thread_config(thread.config, base)


def thread_llm(thread_id: str) -> Llm | None:
    """The LLM to extract with: the one attached in this process, else ``get_llm()`` (None: none)."""
    with _tracker.cond:
        attached = _tracker.attached.get(thread_id)
    if attached is not None and attached.llm is not None:
        return attached.llm
    return get_llm()


def default_retention() -> MemoryRetentionConfig:
    """Retention of extracted memories when no client says otherwise (the settings' defaults)."""
    return MemoryRetentionConfig(default_ttl_days=settings.OAM_DEFAULT_TTL_DAYS, max_ttl_days=settings.OAM_MAX_TTL_DAYS)


# --- scheduling ----------------------------------------------------------------------------


def lock_queryset(model, pk):
    """``SELECT ... WHERE pk = :pk FOR UPDATE``: no ordering, no row limit.

    Not ``.first()``: Oracle cannot combine ``FOR UPDATE`` with a row limit
    (ORA-02014; Django's ``supports_select_for_update_with_limit`` is False there).
    """
    return model.objects.select_for_update().filter(pk=pk).order_by()


def lock_row(model, pk):
    """The row of ``model`` with primary key ``pk``, locked for the transaction (None when absent)."""
    rows = list(lock_queryset(model, pk))
    return rows[0] if rows else None


def _claimed_through(thread: Thread) -> int:
    """The last seq the watermark or an active ``add_messages`` job covers."""
    active = (ExtractionJob.objects.filter(thread_id=thread.pk, trigger=TRIGGER_ADD, status__in=ACTIVE)
              .aggregate(m=Max("to_seq"))["m"])
    return max(thread.extracted_through_seq, active or 0)


def _enqueue_on_commit(job: ExtractionJob) -> None:
    def send():
        from memory.tasks import enqueue_job

        _accepted(job.thread_id, job.pk)
        enqueue_job(job.pk)

    transaction.on_commit(send)


FENCED = "fenced by a delete"


def jobs_fence(*, thread_id: str, reason: str) -> list[int]:
    """Take back the thread's running jobs so their commits write nothing; return their ids.

    Call inside the transaction that deletes records of the thread, after it
    locked the thread: each running job goes back to queued (``error``
    notes ``FENCED`` and ``reason``). The worker still waiting for its LLM
    finds, at its commit, that its claim is gone (``_locked``: not running, or
    another attempt) and writes nothing; the job is sent again after commit and
    its next run reads the records as they are then. A fenced run counts as an
    attempt (``OAM_EXTRACTION_MAX_ATTEMPTS``). This replaces waiting for the
    running job (issue #13: a delete waited minutes for a hung LLM).
    """
    running = list(ExtractionJob.objects.filter(thread_id=thread_id, status="running").values_list("pk", flat=True))
    if running:
        ExtractionJob.objects.filter(pk__in=running, status="running").update(
            status="queued", error=f"{FENCED}: {reason}"[:2000])
        for job_id in running:
            progress.send(thread_id, "fenced", job_id=job_id, reason=reason)
            _enqueue_on_commit(ExtractionJob(pk=job_id, thread_id=thread_id))
    return running


def job_schedule(*, thread_id: str, trigger: str = TRIGGER_ADD, frequency: int = -1, seq: int | None = None,
                 send: bool) -> ExtractionJob | None:
    """Record an extraction job for a thread if one is due; return it, or None.

    ``add_messages`` (``trigger=TRIGGER_ADD``): due when the messages after the
    last claimed seq number at least ``frequency`` (any, when <= 0); the job
    covers all of them. ``update_message`` (``TRIGGER_EDIT``, ``seq`` given):
    one job for that message when extraction already read it (it is at or
    below the watermark, or in a running job).
    ``send``: hand the job to the Dramatiq queue after commit (BACKGROUND).
    Emits ``extraction.queued`` after commit.
    """
    with transaction.atomic():
        thread = lock_row(Thread, thread_id)
        if thread is None:
            return None
        if trigger == TRIGGER_ADD:
            claimed = _claimed_through(thread)
            last = thread.next_seq - 1
            pending = last - claimed
            if pending <= 0 or (frequency > 0 and pending < frequency):
                return None
            lo, hi = claimed + 1, last
        else:
            running = (ExtractionJob.objects.filter(thread_id=thread.pk, trigger=TRIGGER_ADD, status="running")
                       .aggregate(m=Max("to_seq"))["m"])
            if seq is None or seq > max(thread.extracted_through_seq, running or 0):
                return None  # not read yet: the queued or next regular run sees the new content
            lo = hi = seq
        job = ExtractionJob.objects.create(thread=thread, project_id=thread.project_id, from_seq=lo, to_seq=hi,
                                           trigger=trigger)
        progress.send(thread.pk, "queued", job_id=job.pk, trigger=trigger, from_seq=lo, to_seq=hi)
        if send:
            _enqueue_on_commit(job)
    return job


def queue_has_room(config: MemoryExtractionConfig) -> bool:
    """Apply the queue-full rule before accepting BACKGROUND work; True when there is room.

    The queue is the jobs waiting in the database (status queued), across
    threads; its capacity is ``settings.OAM_EXTRACTION_QUEUE_CAPACITY``.
    Raises ``TimeoutError`` under WAIT_THEN_RAISE when no room frees up in time.
    """
    capacity = int(_setting("OAM_EXTRACTION_QUEUE_CAPACITY", 1000))

    def full() -> bool:
        return ExtractionJob.objects.filter(status="queued").count() >= capacity

    if not full():
        return True
    behaviour = config.background_extraction_queue_full_behavior
    if behaviour is not QueueFull.SKIP:
        deadline = time.monotonic() + config.background_extraction_queue_put_timeout_seconds
        while time.monotonic() < deadline:
            time.sleep(min(POLL_SECONDS * 5, max(0.0, deadline - time.monotonic())))
            if not full():
                return True
        if behaviour is QueueFull.WAIT_THEN_RAISE:
            raise TimeoutError(
                f"the extraction queue stayed full ({capacity} jobs) for "
                f"{config.background_extraction_queue_put_timeout_seconds:g} s; the messages are stored"
            )
    logger.warning("extraction queue full (%s jobs): extraction deferred to the thread's next trigger", capacity)
    return False


def extraction_after_add(*, thread: Thread, llm: Llm | None, config: MemoryExtractionConfig,
                         retention: MemoryRetentionConfig | None = None) -> ExtractionJob | None:
    """Run or queue extraction after ``add_messages`` committed its messages; return the job or None.

    Does nothing unless ``config.extract_memories`` and an LLM. INLINE runs
    the job (and any earlier pending ones) before returning; extraction
    failures are logged and recorded on the job, never raised. BACKGROUND
    applies the queue-full rule (may raise ``TimeoutError``; the messages stay).
    """
    if not config.extract_memories or llm is None:
        return None
    attach(thread.pk, llm=llm, config=config)
    if config.is_background and not queue_has_room(config):
        return None
    job = job_schedule(thread_id=thread.pk, trigger=TRIGGER_ADD, frequency=config.memory_extraction_frequency,
                       send=config.is_background)
    if job is not None and not config.is_background:
        _run_inline_logged(job.pk, llm, retention)
    return job


def _run_inline_logged(job_id: int, llm: Llm, retention: MemoryRetentionConfig | None) -> None:
    """``run_inline`` for the client calls: the messages are stored, so an error is logged, not raised."""
    try:
        run_inline(job_id=job_id, llm=llm, retention=retention)
    except Exception:  # noqa: BLE001 - spec: raw messages remain stored while derived memories may be missing
        logger.exception("inline extraction job %s failed", job_id)


def extraction_after_edit(*, thread: Thread, message_id: str, llm: Llm | None, config: MemoryExtractionConfig,
                          retention: MemoryRetentionConfig | None = None) -> ExtractionJob | None:
    """Re-extract an edited message that was already extracted (spec: update_message Notes); return the job.

    ``message_id`` is public. Target: the edited message; context: the window's earlier messages. The
    job never moves the watermark, so later ``add_messages`` calls keep their
    frequency; existing memories stay and duplicates are skipped. INLINE runs
    it before returning; BACKGROUND queues it (queue-full rule applies).
    """
    if not config.extract_memories or llm is None:
        return None
    seq = (Message.objects.filter(pk=stored_id(thread.project_id, message_id), thread_id=thread.pk)
           .values_list("seq", flat=True).first())
    if seq is None:
        return None
    attach(thread.pk, llm=llm, config=config)
    if config.is_background and not queue_has_room(config):
        return None
    job = job_schedule(thread_id=thread.pk, trigger=TRIGGER_EDIT, seq=seq, send=config.is_background)
    if job is not None and not config.is_background:
        _run_inline_logged(job.pk, llm, retention)
    return job


def _next_in_line(thread_id: str) -> ExtractionJob | None:
    """The queued ``add_messages`` job that starts right after the thread's watermark, if any."""
    watermark = Thread.objects.filter(pk=thread_id).values_list("extracted_through_seq", flat=True).first()
    if watermark is None:
        return None
    return (ExtractionJob.objects.filter(thread_id=thread_id, trigger=TRIGGER_ADD, status="queued",
                                         from_seq=watermark + 1).order_by("id").first())


def run_inline(*, job_id: int, llm: Llm, retention: MemoryRetentionConfig | None = None,
               timeout: float | None = None) -> str:
    """Run a job in the calling thread, first any earlier jobs of its thread; return its final status.

    An ``add_messages`` job waits for the jobs before it (running them here
    when they are queued, polling when another worker holds one) for up to
    ``timeout`` seconds (``OAM_EXTRACTION_INLINE_WAIT``, 300); after that it is
    left queued for a worker and "queued" is returned.
    """
    timeout = float(_setting("OAM_EXTRACTION_INLINE_WAIT", 300)) if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while True:
        job = ExtractionJob.objects.filter(pk=job_id).first()
        if job is None or job.status not in ACTIVE:
            return job.status if job else "gone"
        runnable = job if job.trigger == TRIGGER_EDIT and job.status == "queued" else _next_in_line(job.thread_id)
        if runnable is not None:
            job_run(job_id=runnable.pk, llm=llm, retention=retention, background=False)
            continue
        if time.monotonic() >= deadline:
            logger.warning("inline extraction job %s left queued: earlier work of its thread is still running", job_id)
            return job.status
        time.sleep(POLL_SECONDS * 2)


# --- running a job ------------------------------------------------------------------------


@dataclass
class SourceMessage:
    """A message as shown to the LLM: ``ref`` ("m1" for targets, "c1" for context) maps replies back.

    ``id`` is the message's public id (what ``source_message_ids`` keeps).
    """

    ref: str
    id: str
    seq: int
    role: str
    text: str
    timestamp: str | None
    metadata: dict[str, Any]

    def line(self) -> str:
        when = f" ({self.timestamp})" if self.timestamp else ""
        return f"[{self.ref}]{when} {self.role}: {self.text}"


@dataclass
class Slice:
    """One LLM call: the target messages, earlier context messages and the summary before them."""

    targets: list[SourceMessage]
    context: list[SourceMessage] = field(default_factory=list)
    summary: str | None = None


@dataclass
class Candidate:
    """A memory the LLM proposed, with the target messages it cited."""

    memory_type: str
    content: str
    sources: list[SourceMessage]


@dataclass
class Decision:
    """What happens to a candidate: ``new``, ``duplicate`` (skipped), ``updates`` or ``contradicts``.

    ``related_memory_id`` is the public id of the stored memory it was compared with.
    """

    candidate: Candidate
    action: str
    related_memory_id: str | None = None
    distance: float | None = None
    note: str | None = None


@dataclass
class JobResult:
    """Counts of a finished job (also in the ``extraction.finished`` event)."""

    memories_created: int = 0
    memories_linked: int = 0
    duplicates_skipped: int = 0
    rejected_candidates: int = 0
    llm_calls: int = 0
    failed_calls: int = 0
    llm_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def _claim(job_id: int) -> tuple[ExtractionJob, Thread, int] | None:
    """Take a queued job in a transaction; None when it is gone, taken, done, or not next in line.

    Decides on the thread and job rows read under the lock: an ``add_messages``
    job the watermark passed is done; one whose head the watermark passed is
    trimmed to start after it (noted in ``error``) and taken.
    """
    thread_id = ExtractionJob.objects.filter(pk=job_id).values_list("thread_id", flat=True).first()
    if thread_id is None:
        return None
    now = timezone.now()
    with transaction.atomic():
        thread = lock_row(Thread, thread_id)
        job = lock_row(ExtractionJob, job_id)
        if thread is None or job is None or job.status != "queued":
            return None
        if job.trigger == TRIGGER_ADD:
            if job.to_seq <= thread.extracted_through_seq:
                job.status, job.finished_at, job.error = "done", now, "covered by an earlier job"
                job.save(update_fields=["status", "finished_at", "error"])
                return None
            if job.from_seq <= thread.extracted_through_seq:  # its head was extracted: run the rest
                job.error = f"claim: from_seq {job.from_seq} -> {thread.extracted_through_seq + 1} (head extracted)"
                job.from_seq = thread.extracted_through_seq + 1
                job.save(update_fields=["from_seq", "error"])
            if job.from_seq != thread.extracted_through_seq + 1:
                return None  # an earlier range is still pending; the chain or the sweep sends this later
        job.status, job.started_at, job.attempts = "running", now, job.attempts + 1
        job.save(update_fields=["status", "started_at", "attempts"])
        progress.send(thread.pk, "started", job_id=job.pk, attempt=job.attempts, from_seq=job.from_seq,
                      to_seq=job.to_seq)
    return job, thread, job.attempts


def _chain_next(thread_id: str) -> None:
    """After commit, send the thread's next queued ``add_messages`` job (background runs only)."""
    def send():
        job = _next_in_line(thread_id)
        if job is not None:
            from memory.tasks import enqueue_job

            enqueue_job(job.pk)

    transaction.on_commit(send)


def _locked(job_id: int, attempt: int) -> tuple[ExtractionJob, Thread] | None:
    """Inside a transaction: the job and its thread, locked, if the job is still running under ``attempt``.

    Locks the thread first, then the job, as ``_claim`` does: one order, no deadlock.
    """
    thread_id = ExtractionJob.objects.filter(pk=job_id).values_list("thread_id", flat=True).first()
    thread = lock_row(Thread, thread_id) if thread_id else None
    job = lock_row(ExtractionJob, job_id) if thread else None
    if job is None or job.status != "running" or job.attempts != attempt:
        return None
    return job, thread


def _finish_failed(job_id: int, attempt: int, reason: str, *, started: float, llm_seconds: float,
                   chain: bool) -> None:
    """Mark a running job failed; an ``add_messages`` job moves the watermark past its range."""
    with transaction.atomic():
        held = _locked(job_id, attempt)
        if held is None:
            return
        job, thread = held
        seconds = time.perf_counter() - started
        job.status, job.error, job.finished_at = "failed", reason[:2000], timezone.now()
        job.seconds, job.llm_seconds = round(seconds, 3), round(llm_seconds, 3)
        job.save(update_fields=["status", "error", "finished_at", "seconds", "llm_seconds"])
        if job.trigger == TRIGGER_ADD and thread.extracted_through_seq == job.from_seq - 1:
            Thread.objects.filter(pk=thread.pk).update(extracted_through_seq=job.to_seq)
        progress.send(thread.pk, "failed", job_id=job.pk, reason=reason[:500], seconds=round(seconds, 3))
        if chain:
            _chain_next(thread.pk)


def _release(job_id: int, attempt: int, reason: str) -> None:
    """Give a running job back to the queue for a retry (the claim count stays)."""
    ExtractionJob.objects.filter(pk=job_id, status="running", attempts=attempt).update(
        status="queued", error=f"attempt {attempt}: {reason}"[:2000])


def job_run(*, job_id: int, llm: Llm | None = None, retention: MemoryRetentionConfig | None = None,
            background: bool = True) -> str:
    """Run one extraction job; return "done", "failed" or "skipped" (not claimed, or its claim was lost).

    ``llm`` defaults to ``thread_llm`` (attached in this process, else the
    settings'). ``background``: a Dramatiq delivery, where a transient error
    (LLM unreachable, database busy) releases the job and is re-raised for
    Dramatiq's retry until ``max_attempts()`` claims; inline, any error fails
    the job at once. Permanent errors (no LLM, request rejected, every call
    invalid) fail it without raising. Raw messages are never touched.
    """
    claimed = _claim(job_id)
    if claimed is None:
        return "skipped"
    job, thread, attempt = claimed
    started = time.perf_counter()
    result = JobResult()
    llm = llm or thread_llm(thread.pk)
    config = thread_config(thread)
    try:
        if llm is None:
            raise ExtractionRejected("no LLM configured (set OAM_LLM_BASE_URL or give the thread an llm)")
        candidates = _extract_candidates(thread, job, config, llm, result)
        decisions = decide(candidates, thread=thread, llm=llm, result=result)
        planned = _prepare(thread, job, decisions, retention or default_retention(), config)
        committed = _commit(job.pk, attempt, planned, result, started=started, chain=background)
    except (ExtractionRejected, LlmRequestRejected, LlmInvalidOutput) as exc:
        _finish_failed(job.pk, attempt, f"{type(exc).__name__}: {exc}", started=started,
                       llm_seconds=result.llm_seconds, chain=background)
        return "failed"
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        if background and attempt < max_attempts():
            _release(job.pk, attempt, reason)
            raise
        logger.warning("extraction job %s failed: %s", job.pk, reason, exc_info=not isinstance(exc, LlmError))
        _finish_failed(job.pk, attempt, reason, started=started, llm_seconds=result.llm_seconds, chain=background)
        return "failed"
    if committed and job.trigger == TRIGGER_ADD:
        _refresh_summary(thread.pk, llm)
    return "done" if committed else "skipped"


def _refresh_summary(thread_id: str, llm: Llm) -> None:
    """Hook: refresh the durable summary after a due extraction (``memory.context.summary_refresh_if_due``).

    The spec: "When memory extraction is enabled, the check is after each due
    extraction". A failure is logged: the memories are committed already.
    """
    try:
        from memory.context import summary_refresh_if_due
    except ImportError:  # summaries not installed in this build
        return
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None:
        return
    try:
        summary_refresh_if_due(thread=thread, llm=llm)
    except LlmError as exc:
        logger.warning("summary refresh of thread %s after extraction failed: %s", thread_id, exc)


def _extract_candidates(thread: Thread, job: ExtractionJob, config: MemoryExtractionConfig, llm: Llm,
                        result: JobResult) -> list[Candidate]:
    """Ask the LLM about each slice of the job's range; return the candidates in order.

    A call whose reply stays invalid after the adapter's retries is skipped and
    noted; when every call fails the job fails (``LlmInvalidOutput``).
    """
    slices = plan_slices(thread, job, config)
    candidates: list[Candidate] = []
    last_error: LlmInvalidOutput | None = None
    for step, piece in enumerate(slices, 1):
        refs = [m.ref for m in piece.targets]
        try:
            reply = llm.complete_json(extraction_prompt(piece, config), extraction_schema(refs),
                                      schema_name=SCHEMA_NAME, max_tokens=MAX_OUTPUT_TOKENS)
        except LlmInvalidOutput as exc:
            last_error = exc
            result.failed_calls += 1
            result.errors.append(f"call {step}/{len(slices)}: {exc}")
            found = []
        else:
            found, rejected = parse_candidates(reply, piece)
            result.rejected_candidates += rejected
        finally:
            result.llm_calls += 1
            result.llm_seconds += _last_seconds(llm)
        candidates += found
        progress.send(thread.pk, "progress", job_id=job.pk, step=step, steps=len(slices), candidates=len(found))
    if slices and result.failed_calls == len(slices) and last_error is not None:
        raise last_error
    return candidates


def _last_seconds(llm: Llm) -> float:
    stats = getattr(llm, "last_call", None)
    return float(stats.seconds) if stats is not None else 0.0


def _commit(job_id: int, attempt: int, planned: list[tuple[Decision, services.PreparedMemory | None]],
            result: JobResult, *, started: float, chain: bool) -> bool:
    """Write the job's memories, relations, watermark and counts in one transaction; False if it lost its claim.

    ``planned`` comes from ``_prepare``: everything slow (embedding) is done,
    so the write lock is held only for the inserts.
    """
    with transaction.atomic():
        held = _locked(job_id, attempt)
        if held is None:
            return False
        job, thread = held
        if job.trigger == TRIGGER_ADD and thread.extracted_through_seq != job.from_seq - 1:
            return False  # another run got this range in first
        for decision, prepared in planned:
            if prepared is None:
                result.duplicates_skipped += 1
                continue
            _store(thread, job, decision, prepared, result)
        if job.trigger == TRIGGER_ADD:
            Thread.objects.filter(pk=thread.pk).update(extracted_through_seq=job.to_seq)
        seconds = time.perf_counter() - started
        job.status, job.finished_at = "done", timezone.now()
        job.memories_created, job.memories_linked = result.memories_created, result.memories_linked
        job.seconds, job.llm_seconds = round(seconds, 3), round(result.llm_seconds, 3)
        job.error = "; ".join(result.errors)[:2000]
        job.save(update_fields=["status", "finished_at", "memories_created", "memories_linked", "seconds",
                                "llm_seconds", "error"])
        progress.send(
            thread.pk, "finished", job_id=job.pk, memories_created=result.memories_created,
            memories_linked=result.memories_linked, duplicates_skipped=result.duplicates_skipped,
            rejected_candidates=result.rejected_candidates, llm_calls=result.llm_calls, failed_calls=result.failed_calls, seconds=job.seconds,
            llm_seconds=job.llm_seconds,
            watermark=job.to_seq if job.trigger == TRIGGER_ADD else thread.extracted_through_seq,
        )
        if chain:
            _chain_next(thread.pk)
    return True


def _prepare(thread: Thread, job: ExtractionJob, decisions: list[Decision], retention: MemoryRetentionConfig,
             config: MemoryExtractionConfig) -> list[tuple[Decision, services.PreparedMemory | None]]:
    """Outside any transaction: validate and embed the memory each decision stores (None: a duplicate, skipped).

    Metadata: what the sources agree on (``inherited_metadata``) plus the
    decision in ``metadata["extraction"]``.
    """
    planned: list[tuple[Decision, services.PreparedMemory | None]] = []
    for decision in decisions:
        if decision.action == "duplicate":
            planned.append((decision, None))
            continue
        candidate = decision.candidate
        inherited, conflicts = inherited_metadata(candidate.sources, config.memory_extraction_inherit_message_metadata)
        note: dict[str, Any] = {"job_id": job.pk, "decision": decision.action}
        if decision.related_memory_id:
            note["related_memory_id"] = decision.related_memory_id
        if decision.distance is not None:
            note["distance"] = round(decision.distance, 4)
        if decision.note:
            note["note"] = decision.note
        if conflicts:
            note["metadata_not_inherited"] = conflicts
        planned.append((decision, services.memory_prepare(
            thread=thread, content=candidate.content, memory_type=candidate.memory_type,
            metadata={**inherited, "extraction": note}, timestamp=candidate.sources[-1].timestamp,
            source_message_ids=[m.id for m in candidate.sources], retention=retention,
        )))
    return planned


def _store(thread: Thread, job: ExtractionJob, decision: Decision, prepared: services.PreparedMemory,
           result: JobResult) -> None:
    """Inside the job's commit: insert one prepared memory, then (for updates/contradictions) its relation."""
    candidate = decision.candidate
    memory_id = services.memory_insert(prepared)
    result.memories_created += 1
    progress.send(thread.pk, "memory_created", job_id=job.pk, memory_id=memory_id,
                  memory_type=candidate.memory_type, decision=decision.action,
                  related_memory_id=decision.related_memory_id,
                  source_message_ids=[m.id for m in candidate.sources])
    if decision.action in LINK_TYPES and decision.related_memory_id and _linking_on(thread):
        relation_id = _link(thread, memory_id, decision)
        result.memories_linked += 1
        progress.send(thread.pk, "memory_linked", job_id=job.pk, memory_id=memory_id,
                      related_memory_id=decision.related_memory_id, relation=decision.action,
                      relation_type=LINK_TYPES[decision.action], relation_id=relation_id)


def _linking_on(thread: Thread) -> bool:
    """Whether the thread's ``memory_link_extraction_mode`` lets extraction store relations (not DISABLED)."""
    from memory.extraction_config import MemoryLinkExtractionMode

    mode = MemoryExtractionConfig.from_thread_config(thread.config).memory_link_extraction_mode
    return mode is not MemoryLinkExtractionMode.DISABLED


def _link(thread: Thread, memory_id: str, decision: Decision) -> str | None:
    """Relate the new memory to the one it updates or contradicts (``memory.links``); None when not possible.

    Relations join records of one thread, so a related memory of another
    thread of the same user keeps the decision in metadata only.
    """
    try:
        from memory import links
    except ImportError:  # relations not installed in this build: metadata only
        return None
    related = (Memory.objects.filter(pk=stored_id(thread.project_id, decision.related_memory_id))
               .values_list("thread_id", "memory_type").first())
    if related is None or related[0] != thread.pk:
        return None
    try:
        with transaction.atomic():
            return links.link_create(
                thread=thread, source_record_id=memory_id, source_record_type=decision.candidate.memory_type,
                target_record_id=decision.related_memory_id, target_record_type=related[1],
                relation_type=LINK_TYPES[decision.action],
                metadata={"origin": "extraction", "distance": decision.distance},
            )
    except ValueError as exc:  # e.g. the pair is related already
        logger.info("no relation from %s to %s: %s", memory_id, decision.related_memory_id, exc)
        return None


# --- prompts ----------------------------------------------------------------------------------

SYSTEM_PROMPT = """You maintain the long-term memory of an AI agent. Read the TARGET messages of a conversation and write down what is worth remembering later, as short self-contained statements.

Memory types:
- fact: a stable fact about a person or the world ("Caroline lives in Boston.")
- preference: what someone likes, dislikes or wants ("Melanie prefers tea to coffee.")
- guideline: an instruction on how the agent should behave ("Answer in French.")
- memory: an event or experience ("Caroline went to a support group on 7 May 2023.")

Rules:
- Extract only from the TARGET messages; the summary and CONTEXT messages only help you understand them.
- Name people instead of using pronouns; turn relative dates into dates using the message time.
- source_message_ids lists the ids of the TARGET messages each memory comes from.
- Skip greetings and small talk. Reply {"memories": []} when nothing is worth keeping."""


def system_prompt(config: MemoryExtractionConfig) -> str:
    """The system prompt, with the thread's custom instructions appended (spec: memory_extraction_custom_instructions)."""
    extra = (config.memory_extraction_custom_instructions or "").strip()
    return f"{SYSTEM_PROMPT}\n\nAdditional instructions:\n{extra}" if extra else SYSTEM_PROMPT


def extraction_schema(refs: Sequence[str]) -> dict:
    """The reply's JSON schema; ``source_message_ids`` may only name ``refs`` (the call's targets)."""
    return {
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "maxItems": MAX_MEMORIES_PER_CALL,
                "items": {
                    "type": "object",
                    "properties": {
                        "memory_type": {"type": "string", "enum": list(MEMORY_TYPES)},
                        "content": {"type": "string", "minLength": 3, "maxLength": CONTENT_MAX_CHARS},
                        "source_message_ids": {
                            "type": "array", "minItems": 1, "maxItems": min(len(refs), MAX_SOURCES_PER_MEMORY),
                            "items": {"type": "string", "enum": list(refs)},
                        },
                    },
                    "required": ["memory_type", "content", "source_message_ids"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["memories"],
        "additionalProperties": False,
    }


def extraction_prompt(piece: Slice, config: MemoryExtractionConfig) -> list[dict[str, str]]:
    """Chat messages for one call: the system prompt, then summary, CONTEXT and TARGET messages."""
    parts = []
    if piece.summary:
        parts.append(f"Summary of the conversation before these messages:\n{piece.summary}")
    if piece.context:
        parts.append("CONTEXT messages (for understanding only):\n" + "\n".join(m.line() for m in piece.context))
    parts.append("TARGET messages (extract memories from these):\n" + "\n".join(m.line() for m in piece.targets))
    return [{"role": "system", "content": system_prompt(config)}, {"role": "user", "content": "\n\n".join(parts)}]


def message_budget(config: MemoryExtractionConfig) -> int | None:
    """Prompt tokens left for messages and summary under ``memory_extraction_token_limit`` (None: no cap)."""
    limit = config.memory_extraction_token_limit
    if limit <= 0:
        return None
    window = config.memory_extraction_window
    fixed = (estimate_tokens(system_prompt(config))
             + estimate_tokens(json.dumps(extraction_schema([f"m{i}" for i in range(1, (window if window > 0 else 64) + 1)])))
             + PROMPT_OVERHEAD_TOKENS)
    return max(MIN_MESSAGE_BUDGET, limit - fixed)


def _clip(text: str, tokens: int | None) -> str:
    if tokens is None or estimate_tokens(text) <= tokens:
        return text
    return text[: max(0, tokens * 4 - 8)] + " …[cut]"


def _source(row: Message, ref: str, budget: int | None) -> SourceMessage:
    return SourceMessage(ref=ref, id=row.public_id, seq=row.seq, role=row.role, text=_clip(row.content, budget),
                         timestamp=row.timestamp, metadata=dict(row.metadata or {}))


def plan_slices(thread: Thread, job: ExtractionJob, config: MemoryExtractionConfig) -> list[Slice]:
    """Split the job's live messages into LLM calls.

    Each call has at most ``memory_extraction_window`` targets (no limit when
    <= 0) whose lines fit the token budget (one message bigger than the whole
    budget is cut); with a window, earlier messages fill the rest of it as
    context while they fit. A re-extraction (``update_message``) job targets
    its one message with up to ``window - 1`` (else ``REEXTRACT_CONTEXT_MESSAGES``)
    earlier messages. A stored summary that ends before a call's first target
    leads its prompt when ``enable_context_summary`` is on.
    """
    now = timezone.now()
    budget = message_budget(config)
    live = Message.objects.filter(live_q(now), thread_id=thread.pk)
    rows = list(live.filter(seq__gte=job.from_seq, seq__lte=job.to_seq).order_by("seq"))
    window = config.memory_extraction_window
    groups: list[list[Message]] = []
    used = 0
    for row in rows:
        cost = estimate_tokens(_source(row, "m00", budget).line())
        if groups and ((window > 0 and len(groups[-1]) >= window)
                       or (budget is not None and used + cost > budget)):
            groups.append([])
            used = 0
        if not groups:
            groups.append([])
        groups[-1].append(row)
        used += cost
    summary = None
    if config.enable_context_summary:
        summary = ThreadSummary.objects.filter(thread_id=thread.pk).values_list("content", "through_seq").first()
    slices = []
    for group in groups:
        targets = [_source(row, f"m{i}", budget) for i, row in enumerate(group, 1)]
        room = None if budget is None else budget - sum(estimate_tokens(t.line()) for t in targets)
        text = None
        if summary and summary[0] and summary[1] < group[0].seq:
            text = _clip(summary[0], None if room is None else max(0, room // 4))
            room = None if room is None else room - estimate_tokens(text)
        if job.trigger == TRIGGER_EDIT:
            want = window - 1 if window > 0 else REEXTRACT_CONTEXT_MESSAGES
        else:
            want = window - len(group) if window > 0 else 0
        earlier = list(live.filter(seq__lt=group[0].seq).order_by("-seq")[:max(0, want)])
        context: list[SourceMessage] = []
        for row in earlier:  # newest first, while they fit
            line = _source(row, "c0", budget)
            cost = estimate_tokens(line.line())
            if room is not None and cost > room:
                break
            room = None if room is None else room - cost
            context.insert(0, line)
        for i, item in enumerate(context, 1):
            item.ref = f"c{i}"
        slices.append(Slice(targets=targets, context=context, summary=text))
    return slices


_WORD = re.compile(r"[^\W\d_]{2,}")


def parse_candidates(reply: dict, piece: Slice) -> tuple[list[Candidate], int]:
    """Turn a schema-valid reply into candidates; return them and how many items were rejected.

    Whitespace is normalised; an item is rejected when it repeats an earlier
    one, names no target message, or is not text (fewer than two words of two
    or more letters: a small model sometimes fills the string with symbols).
    Sources are kept in message order, so the last is the latest.
    """
    by_ref = {m.ref: m for m in piece.targets}
    seen: set[str] = set()
    out, rejected = [], 0
    for item in reply.get("memories", []):
        content = " ".join(str(item.get("content", "")).split())
        refs = set(item.get("source_message_ids", []))
        sources = [m for m in piece.targets if m.ref in refs]
        if (len(_WORD.findall(content)) < 2 or not sources or content.casefold() in seen
                or item.get("memory_type") not in MEMORY_TYPES):
            rejected += 1
            continue
        seen.add(content.casefold())
        out.append(Candidate(memory_type=item["memory_type"], content=content, sources=sources))
    return out, rejected


_MISSING = object()


def inherited_metadata(sources: Sequence[SourceMessage], rule: bool | tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """Return (metadata a memory inherits from its source messages, keys left out because they differ).

    ``rule``: True (every key), a tuple of top-level keys, or False (none). A
    key is inherited when every source message has it with the same value
    (spec: "the selected metadata must match across those messages"); a key
    some sources lack or disagree on is reported instead.
    """
    if rule is False or not sources:
        return {}, []
    keys = list(dict.fromkeys(k for m in sources for k in m.metadata)) if rule is True else list(rule)
    inherited, conflicts = {}, []
    for key in keys:
        values = [m.metadata.get(key, _MISSING) for m in sources]
        if all(v is _MISSING for v in values):
            continue
        if all(v is not _MISSING and v == values[0] for v in values):
            inherited[key] = values[0]
        else:
            conflicts.append(key)
    return inherited, conflicts


# --- duplicates, updates and contradictions ------------------------------------------------

JUDGE_SYSTEM_PROMPT = (
    "Compare a NEW memory with an EXISTING memory of an AI agent. Answer with one word: "
    "restates (the same information), updates (newer or more precise information about the same thing), "
    "contradicts (both cannot be true), or unrelated."
)
JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"relation": {"type": "string", "enum": list(RELATIONS)}},
    "required": ["relation"],
    "additionalProperties": False,
}


def nearest_memories_queryset(*, vector, project_id: int, user_id: str | None, agent_id: str | None, now,
                              limit: int = NEAREST_MEMORIES):
    """Chunks of live, valid memories of this user and agent (any thread of the project), nearest ``vector`` first.

    Rows are ``(record_id, distance)`` with stored record ids; the distance is
    ranked in SQL (``VectorDistance``, cosine) against the stored,
    date-prefixed embeddings.
    """
    scope = SearchScope(user_id=user_id, agent_id=agent_id, exact_user_match=True, exact_agent_match=True,
                        exact_thread_match=False)
    return (SearchChunk.objects.filter(live_q(now), scope_q(scope, project_id), source_kind="memory",
                                       status=RecordStatus.VALID.value)
            .annotate(distance=VectorDistance("embedding", vector))
            .order_by("distance", "id")
            .values_list("record_id", "distance")[:limit])


def decide(candidates: list[Candidate], *, thread: Thread, llm: Llm, result: JobResult) -> list[Decision]:
    """Decide for each candidate: new, duplicate, updates or contradicts (see the module docstring).

    Distances compare the plain contents (both sides embedded without the date
    prefix the search index carries), so a fact restated in a later session
    still matches. Candidates are also compared with those accepted before them
    in the same job. A judge call that fails leaves the candidate new, noted.
    """
    if not candidates:
        return []
    embedder = get_embedder()
    vectors = embedder.embed([c.content for c in candidates])
    now = timezone.now()
    shortlists = [[rid for rid, _ in nearest_memories_queryset(vector=v, project_id=thread.project_id,
                                                               user_id=thread.user_id, agent_id=thread.agent_id,
                                                               now=now)]
                  for v in vectors]
    ids = list(dict.fromkeys(rid for shortlist in shortlists for rid in shortlist))
    stored = dict(Memory.objects.filter(pk__in=ids).values_list("pk", "content"))
    ids = [i for i in ids if i in stored]
    stored_vectors = dict(zip(ids, embedder.embed([stored[i] for i in ids]))) if ids else {}
    dup, related = duplicate_distance(), related_distance()
    decisions: list[Decision] = []
    accepted: list[np.ndarray] = []
    for candidate, vector, shortlist in zip(candidates, vectors, shortlists):
        if any(1.0 - float(np.dot(vector, other)) < dup for other in accepted):
            decisions.append(Decision(candidate, "duplicate", note="repeats a memory of the same job"))
            continue
        best_id, best = None, 2.0
        for rid in shortlist:
            if rid in stored_vectors:
                distance = 1.0 - float(np.dot(vector, stored_vectors[rid]))
                if distance < best:
                    best_id, best = rid, distance
        if best_id is not None and best < dup:
            decisions.append(Decision(candidate, "duplicate", related_memory_id=public_id(best_id), distance=best))
            continue
        decision = Decision(candidate, "new")
        if best_id is not None and best < related:
            decision = _judge(candidate, public_id(best_id), stored[best_id], best, llm, result)
        decisions.append(decision)
        if decision.action != "duplicate":
            accepted.append(vector)
    return decisions


def _judge(candidate: Candidate, memory_id: str, existing: str, distance: float, llm: Llm,
           result: JobResult) -> Decision:
    """Ask the LLM how a candidate relates to a close stored memory."""
    messages = [{"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                {"role": "user", "content": f"EXISTING: {existing}\nNEW: {candidate.content}"}]
    try:
        reply = llm.complete_json(messages, JUDGE_SCHEMA, schema_name=JUDGE_SCHEMA_NAME, max_tokens=20)
    except LlmError as exc:
        return Decision(candidate, "new", related_memory_id=memory_id, distance=distance,
                        note=f"relation unknown: {type(exc).__name__}")
    finally:
        result.llm_calls += 1
        result.llm_seconds += _last_seconds(llm)
    action = RELATIONS[reply["relation"]]
    return Decision(candidate, action, related_memory_id=memory_id, distance=distance)


# --- recovery ---------------------------------------------------------------------------------


def sweep(*, boot: bool = False) -> dict[str, int]:
    """Recover extraction work from the database; return what was done, by kind.

    * ``requeued``: running jobs whose claim is older than
      ``OAM_EXTRACTION_STALE_SECONDS`` (their worker died) go back to queued
      (one UPDATE whose WHERE is the compare-and-set);
    * per thread with queued jobs older than ``OAM_EXTRACTION_RESEND_SECONDS``
      (all of them at ``boot``), in one transaction holding the thread's lock
      (``queue_repair``): ``covered`` queued ``add_messages`` jobs the
      watermark already passed are done; ``repaired`` the next one is made to
      start right after the watermark when it does not (a queue that could not
      advance); ``resent`` it is sent again, with re-extraction jobs, once
      the lock is released. A duplicate delivery is harmless (the claim is a compare-and-set);
    * ``created``: a job for threads whose messages after the watermark never
      got one (the process died between commit and job, or the queue was full)
      when extraction is due by the thread's stored config and an LLM is
      configured here; only threads that had extraction jobs or a stored config.

    Every decision is taken on values read under the thread's lock (issue #13:
    a watermark read before a job's commit and acted on after it rewrote the
    next job to start too early, and the thread never advanced again). Safe to
    run anywhere, any number of times, concurrently.
    """
    from memory.tasks import enqueue_job

    now = timezone.now()
    stale = now - datetime.timedelta(seconds=float(_setting("OAM_EXTRACTION_STALE_SECONDS", 1500)))
    cutoff = now if boot else now - datetime.timedelta(seconds=float(_setting("OAM_EXTRACTION_RESEND_SECONDS", 300)))
    counts = {"requeued": 0, "covered": 0, "repaired": 0, "resent": 0, "created": 0}
    counts["requeued"] = ExtractionJob.objects.filter(status="running", started_at__lt=stale).update(
        status="queued", error="requeued by the sweep: the worker holding it stopped answering")
    thread_ids = set(ExtractionJob.objects.filter(status="queued", created_at__lte=cutoff)
                     .values_list("thread_id", flat=True).distinct()[:1000])
    for thread_id in sorted(thread_ids):
        with transaction.atomic():
            thread = lock_row(Thread, thread_id)
            if thread is None:
                continue
            done = queue_repair(thread, now=now)
            send = [done["next_job_id"]] if done["next_job_id"] is not None else []
            send += list(ExtractionJob.objects.filter(thread_id=thread_id, status="queued", trigger=TRIGGER_EDIT,
                                                      created_at__lte=cutoff).values_list("pk", flat=True))
        for job_id in send:  # after the lock is released
            if enqueue_job(job_id):
                ExtractionJob.objects.filter(pk=job_id, status="queued", error__startswith=NOT_QUEUED).update(error="")
        counts["covered"] += done["covered"]
        counts["repaired"] += done["repaired"]
        counts["resent"] += len(send)
    counts["created"] = _sweep_orphans(now if boot else cutoff)
    return counts


REPAIRED = "repaired by the sweep"


def queue_repair(thread: Thread, *, now) -> dict[str, Any]:
    """Make the thread's ``add_messages`` queue able to advance; call inside a transaction holding its lock.

    ``thread`` is the row read under that lock: its watermark is the value
    every decision uses. Queued jobs the watermark passed are marked done;
    when no job runs, the first queued one (by ``from_seq``) must start at
    watermark + 1 for ``_claim`` to take it: one that starts earlier (its head
    was extracted) or later (a gap no job covers) gets ``from_seq =
    watermark + 1``, the repair noted in its ``error`` (``REPAIRED``) and sent
    as an ``extraction.repaired`` event after commit. Returns ``{"covered":
    n, "repaired": 0 or 1, "next_job_id": id or None}`` (the job to send).
    """
    watermark = thread.extracted_through_seq
    queued = ExtractionJob.objects.filter(thread_id=thread.pk, status="queued", trigger=TRIGGER_ADD)
    covered = queued.filter(to_seq__lte=watermark).update(status="done", finished_at=now,
                                                         error="covered by an earlier job")
    done = {"covered": covered, "repaired": 0, "next_job_id": None}
    if ExtractionJob.objects.filter(thread_id=thread.pk, trigger=TRIGGER_ADD, status="running").exists():
        return done  # its commit chains the next job
    first = queued.order_by("from_seq", "id").first()
    if first is None:
        return done
    if first.from_seq != watermark + 1:
        why = ("its head was extracted already" if first.from_seq <= watermark
               else f"no job covered {watermark + 1}..{first.from_seq - 1}")
        note = f"{REPAIRED}: from_seq {first.from_seq} -> {watermark + 1} ({why})"
        ExtractionJob.objects.filter(pk=first.pk, status="queued", from_seq=first.from_seq).update(
            from_seq=watermark + 1, error=note)
        progress.send(thread.pk, "repaired", job_id=first.pk, from_seq=watermark + 1, to_seq=first.to_seq,
                      was_from_seq=first.from_seq, reason=note)
        done["repaired"] = 1
    done["next_job_id"] = first.pk
    return done


def orphan_threads_queryset():
    """Threads with messages after the watermark and no queued or running job, by id."""
    return (Thread.objects.filter(next_seq__gt=F("extracted_through_seq") + 1)
            .exclude(extraction_jobs__status__in=ACTIVE).order_by("pk"))


def _sweep_orphans(cutoff) -> int:
    """Create jobs for due messages that have none (see ``sweep``); return how many."""
    if get_llm() is None:
        return 0
    created = 0
    for thread in orphan_threads_queryset()[:1000]:
        config = MemoryExtractionConfig.from_thread_config(thread.config)
        known = thread.extraction_jobs.exists() or config.stores_in(thread.config)
        if not known or not config.extract_memories:
            continue
        last = Message.objects.filter(thread_id=thread.pk).aggregate(m=Max("created_at"))["m"]
        if last is None or last > cutoff:
            continue  # a live request may still be queueing it
        if job_schedule(thread_id=thread.pk, frequency=config.memory_extraction_frequency, send=True):
            created += 1
    return created


# --- waiting ------------------------------------------------------------------------------------


def wait_for_extraction(*, thread_id: str, timeout: float | None) -> None:
    """Wait until the thread's extraction accepted by this process before the call has finished.

    First waits for calls of this process that are storing messages for the
    thread (they may be about to accept work), then for every job of the
    thread up to the last one this process handed to the queue. Failed jobs
    count as finished. ``timeout`` in seconds (None: no limit). Raises
    ``TimeoutError`` when time runs out (spec: wait_for_memory_extraction).
    """
    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    with _tracker.cond:
        while _tracker.inflight.get(thread_id):
            remaining = left()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"extraction for thread {thread_id!r} is still being accepted after {timeout:g} s")
            _tracker.cond.wait(remaining)
        last = _tracker.accepted.get(thread_id)
    if last is None:
        return
    pending = ExtractionJob.objects.filter(thread_id=thread_id, pk__lte=last, status__in=ACTIVE)
    while pending.exists():
        remaining = left()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"background extraction for thread {thread_id!r} did not finish within {timeout:g} s")
        time.sleep(POLL_SECONDS if remaining is None else min(POLL_SECONDS, remaining))


def accepted_threads(*, prefix: str = "") -> list[str]:
    """Stored ids (starting with ``prefix``) of the threads this process accepted extraction work for,
    or is about to (for the client-level ``wait_for_memory_extraction``)."""
    with _tracker.cond:
        keys = set(_tracker.accepted) | set(_tracker.inflight)
    return sorted(k for k in keys if k.startswith(prefix))


def check_timeout(timeout: Any) -> float | None:
    """``timeout`` of the wait methods: None or a number of seconds >= 0 (TypeError/ValueError otherwise)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidType("timeout", "must be a number of seconds or None")
    if timeout < 0 or timeout != timeout:
        raise InvalidArgument("timeout", "must be 0 or more")
    return float(timeout)


# --- state --------------------------------------------------------------------------------------


def job_summary(job: ExtractionJob) -> dict[str, Any]:
    """A job as plain values (the extraction-state endpoint)."""
    return {
        "job_id": job.pk, "trigger": job.trigger, "status": job.status, "from_seq": job.from_seq,
        "to_seq": job.to_seq, "attempts": job.attempts, "memories_created": job.memories_created,
        "memories_linked": job.memories_linked, "seconds": job.seconds, "llm_seconds": job.llm_seconds,
        "error": job.error or None, "created_at": job.created_at.isoformat(),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
    }


NOT_QUEUED = "not queued"


def note_not_queued(job_id: int, exc: BaseException) -> None:
    """Note on a queued job that sending it to the broker failed (``queue_stall`` reports it); never raises."""
    try:
        ExtractionJob.objects.filter(pk=job_id, status="queued").update(
            error=f"{NOT_QUEUED}: the broker refused it ({type(exc).__name__}: {exc})"[:2000])
    except Exception:  # noqa: BLE001 - the database may be what failed; the sweep re-sends the job anyway
        logger.warning("could not note the failed send of extraction job %s", job_id, exc_info=True)


def queue_stall(thread: Thread, *, now=None) -> dict[str, Any] | None:
    """Why the thread's extraction queue is not advancing, or None when it is (or has nothing to do).

    Returns ``{"reason", "job_id", "detail", "since"}`` (``since``: ISO time
    the job was created, or claimed for ``worker_lost``); ``reason`` is

    * ``worker_lost``: a job has been running longer than
      ``OAM_EXTRACTION_STALE_SECONDS`` (the sweep requeues it);
    * ``blocked``: no job runs and the next queued one does not start right
      after the watermark, so no claim can take it (the sweep repairs it);
    * ``not_queued``: the next job's last send to the broker failed
      (``memory.tasks.enqueue_job`` notes it; the sweep re-sends it);
    * ``waiting_for_worker``: the next job has waited longer than
      ``OAM_EXTRACTION_RESEND_SECONDS`` plus one sweep period for a worker
      (no worker runs, or the broker lost it).
    """
    now = now or timezone.now()
    jobs = ExtractionJob.objects.filter(thread_id=thread.pk, trigger=TRIGGER_ADD)
    stale = float(_setting("OAM_EXTRACTION_STALE_SECONDS", 1500))
    running = jobs.filter(status="running").order_by("started_at", "id").first()
    if running is not None:
        if running.started_at and (now - running.started_at).total_seconds() > stale:
            return {"reason": "worker_lost", "job_id": running.pk, "since": running.started_at.isoformat(),
                    "detail": f"job {running.pk} has been running for more than {stale:g} s; its worker "
                              "stopped answering and the sweep gives it to another"}
        return None
    first = jobs.filter(status="queued").order_by("from_seq", "id").first()
    if first is None:
        return None
    since = first.created_at.isoformat()
    watermark = thread.extracted_through_seq
    if first.from_seq != watermark + 1:
        return {"reason": "blocked", "job_id": first.pk, "since": since,
                "detail": f"the next job starts at message {first.from_seq} but the watermark is {watermark}: "
                          "no worker can claim it until the sweep repairs it"}
    if first.error.startswith(NOT_QUEUED):
        return {"reason": "not_queued", "job_id": first.pk, "since": since, "detail": first.error}
    waited = (now - first.created_at).total_seconds()
    limit = float(_setting("OAM_EXTRACTION_RESEND_SECONDS", 300)) + float(_setting("OAM_EXTRACTION_SWEEP_SECONDS", 60))
    if waited > limit:
        return {"reason": "waiting_for_worker", "job_id": first.pk, "since": since,
                "detail": f"job {first.pk} has waited {waited:.0f} s for a worker (more than {limit:g} s): "
                          "no worker runs, or the broker lost it"}
    return None


def repairs_queryset(thread_id: str):
    """The thread's jobs the sweep repaired (``queue_repair`` notes ``REPAIRED`` in ``error``), newest first."""
    return ExtractionJob.objects.filter(thread_id=thread_id, error__startswith=REPAIRED).order_by("-id")


def last_repair(thread_id: str) -> dict[str, Any] | None:
    """The thread's latest queue repair by the sweep (``queue_repair``): ``{"job_id", "detail"}``, or None."""
    job = repairs_queryset(thread_id).values_list("pk", "error").first()
    return {"job_id": job[0], "detail": job[1]} if job else None


def extraction_state(*, thread: Thread) -> dict[str, Any]:
    """The extraction state of a thread row: config, watermark, last message seq, pending work, last job.

    ``enabled`` says whether this process would extract for the thread
    (``extract_memories`` and an LLM from the settings or attached here).
    ``pending_messages`` counts live messages after the watermark; ``thread_id`` is public.
    ``stalled`` is ``queue_stall`` (None when the queue advances),
    ``last_repair`` ``last_repair`` and ``broker`` the live
    ``memory.worker.broker_status``. Raises KeyError (``NotFound``) when the
    thread is gone.
    """
    from memory.worker import broker_status

    fresh = Thread.objects.filter(pk=thread.pk).first()  # the watermark moves
    if fresh is None:
        raise NotFound("thread_id", thread.public_id)
    thread = fresh
    config = thread_config(thread)
    jobs = ExtractionJob.objects.filter(thread_id=thread.pk)
    last_job = jobs.order_by("-id").first()
    last_seq = Message.objects.filter(thread_id=thread.pk).aggregate(m=Max("seq"))["m"] or 0
    return {
        "thread_id": thread.public_id,
        "enabled": config.extract_memories and thread_llm(thread.pk) is not None,
        "mode": config.extraction_mode.value,
        "watermark": thread.extracted_through_seq,
        "last_message_seq": last_seq,
        "pending_messages": Message.objects.filter(live_q(timezone.now()), thread_id=thread.pk,
                                                   seq__gt=thread.extracted_through_seq).count(),
        "queued_jobs": jobs.filter(status="queued").count(),
        "running_jobs": jobs.filter(status="running").count(),
        "last_job": job_summary(last_job) if last_job else None,
        "stalled": queue_stall(thread),
        "last_repair": last_repair(thread.pk),
        "broker": broker_status(),
        "config": config.to_thread_config(),
    }
