from __future__ import annotations

import datetime
import logging
import time

from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from memory.core import conf, progress
from memory.extraction.config import BackgroundExtractionQueueFullBehavior as QueueFull
from memory.extraction.config import MemoryExtractionConfig
from memory.extraction.queue import enqueue_job
from memory.extraction.settings import ACTIVE, POLL_SECONDS, TRIGGER_ADD, retry_backoff, retry_horizon
from memory.extraction.tracker import _accepted
from memory.models import ExtractionJob, Thread

logger = logging.getLogger(__name__)


class ExtractionRejected(Exception):
    """Extraction cannot run for this job and retrying will not help (e.g. no LLM configured)."""


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
    its next run reads the records as they are then. A fenced run is counted in
    ``fences``, not against ``OAM_EXTRACTION_MAX_ATTEMPTS`` (issue #34: a delete
    used up one of a job's attempts). This replaces waiting for the
    running job (a delete used to wait minutes for a hung LLM).
    """
    running = list(ExtractionJob.objects.filter(thread_id=thread_id, status="running").values_list("pk", flat=True))
    if running:
        ExtractionJob.objects.filter(pk__in=running, status="running").update(
            status="queued", error=f"{FENCED}: {reason}"[:2000], fences=F("fences") + 1)
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
    capacity = int(conf.get("OAM_EXTRACTION_QUEUE_CAPACITY"))

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


def _next_in_line(thread_id: str) -> ExtractionJob | None:
    """The queued ``add_messages`` job that starts right after the thread's watermark, if any."""
    watermark = Thread.objects.filter(pk=thread_id).values_list("extracted_through_seq", flat=True).first()
    if watermark is None:
        return None
    return (ExtractionJob.objects.filter(thread_id=thread_id, trigger=TRIGGER_ADD, status="queued",
                                         from_seq=watermark + 1).order_by("id").first())


def _claim(job_id: int) -> tuple[ExtractionJob, Thread, int] | None:
    """Take a queued job in a transaction; None when it is gone, taken, done, or not next in line.

    A job backing off after a transient failure (``retry_at`` later than now) is
    not taken. Decides on the thread and job rows read under the lock: an ``add_messages``
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
        if job.retry_at is not None and job.retry_at > now + RETRY_SLACK:
            return None  # backing off after a transient failure; its delayed send (or the sweep) comes back
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
                   chain: bool, failure: str = "permanent") -> None:
    """Mark a running job failed; an ``add_messages`` job moves the watermark past its range.

    ``failure``: ``permanent`` (the LLM refused, its output stayed invalid, no LLM) or ``transient`` (the
    retry horizon ended while the LLM stayed unreachable); stored on the job and sent with the
    ``extraction.failed`` event. The failed range stays listed (``memory.extraction.recovery.failed_ranges``)
    until a re-run (``memory.services.extraction.extraction_rerun``) covers it.
    """
    with transaction.atomic():
        held = _locked(job_id, attempt)
        if held is None:
            return
        job, thread = held
        seconds = time.perf_counter() - started
        job.status, job.error, job.finished_at = "failed", reason[:2000], timezone.now()
        job.seconds, job.llm_seconds = round(seconds, 3), round(llm_seconds, 3)
        job.failure, job.retry_at = failure, None
        job.save(update_fields=["status", "error", "finished_at", "seconds", "llm_seconds", "failure", "retry_at"])
        if job.trigger == TRIGGER_ADD and thread.extracted_through_seq == job.from_seq - 1:
            Thread.objects.filter(pk=thread.pk).update(extracted_through_seq=job.to_seq)
        progress.send(thread.pk, "failed", job_id=job.pk, reason=reason[:500], seconds=round(seconds, 3),
                      failure=failure, from_seq=job.from_seq, to_seq=job.to_seq)
        if chain:
            _chain_next(thread.pk)


def _release(job_id: int, attempt: int, reason: str) -> None:
    """Give a running job back to the queue for a retry (the claim count stays)."""
    ExtractionJob.objects.filter(pk=job_id, status="running", attempts=attempt).update(
        status="queued", error=f"attempt {attempt}: {reason}"[:2000])


#: A claim this early before ``retry_at`` is taken anyway (a delayed send's clock may run a little ahead).
RETRY_SLACK = datetime.timedelta(seconds=1)

#: The ``error`` of a job waiting to retry after its LLM was unreachable starts with this.
RETRYING = "retrying"


def retry_later(job_id: int, attempt: int, reason: str) -> float | None:
    """After a transient failure (LLM unreachable, timed out, rate-limited, 5xx): give the running job back
    to the queue, to be claimed again after a backoff, unless its retry horizon has ended. Returns the backoff
    in seconds; None when the horizon has ended (the caller fails the job, ``failure="transient"``); 0.0 when
    the job lost its claim (a delete fenced it: nothing is done).

    The horizon (``OAM_EXTRACTION_RETRY_HORIZON_SECONDS``) counts from the job's first transient failure
    (``retry_since``); the backoff is ``settings.retry_backoff`` of the seconds since then (doubling, at most
    ``OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS``). Until then the job stays queued, so its range stays
    pending and the watermark does not pass it (issue #34: "failed counts as finished" lost a five-minute
    outage's messages). The job is sent again with that delay after commit; a lost send is re-sent by the
    sweep, whose claim waits for ``retry_at`` too. Emits ``extraction.retrying``.
    """
    now = timezone.now()
    with transaction.atomic():
        held = _locked(job_id, attempt)
        if held is None:
            return 0.0
        job, thread = held
        since = job.retry_since or now
        if (now - since).total_seconds() >= retry_horizon():
            return None
        delay = retry_backoff((now - since).total_seconds())
        job.status, job.failure, job.retry_since = "queued", "transient", since
        job.retry_at = now + datetime.timedelta(seconds=delay)
        job.error = f"{RETRYING}: attempt {attempt}: {reason}"[:2000]
        job.save(update_fields=["status", "failure", "retry_since", "retry_at", "error"])
        progress.send(thread.pk, "retrying", job_id=job.pk, attempt=attempt, reason=reason[:500],
                      retry_in=round(delay, 3), from_seq=job.from_seq, to_seq=job.to_seq,
                      retry_until=(since + datetime.timedelta(seconds=retry_horizon())).isoformat())
        transaction.on_commit(lambda: enqueue_job(job_id, delay=delay))
    return delay
