from __future__ import annotations

import datetime
from typing import Any

from django.db import transaction
from django.db.models import F, Max
from django.utils import timezone

from memory.core import conf, progress
from memory.core.errors import NotFound
from memory.extraction.config import MemoryExtractionConfig
from memory.extraction.jobs import job_schedule, lock_row
from memory.extraction.queue import NOT_QUEUED, broker_status, enqueue_job
from memory.extraction.settings import ACTIVE, SIDE_TRIGGERS, TRIGGER_ADD
from memory.extraction.tracker import off_reason, thread_config, thread_llm
from memory.llm.adapters import get_llm
from memory.models import ExtractionJob, Message, Thread
from memory.records.selectors import live_q

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

    Every decision is taken on values read under the thread's lock: once
    a watermark read before a job's commit and acted on after it rewrote the
    next job to start too early, and the thread never advanced again. Safe to
    run anywhere, any number of times, concurrently.
    """
    now = timezone.now()
    stale = now - datetime.timedelta(seconds=float(conf.get("OAM_EXTRACTION_STALE_SECONDS")))
    cutoff = now if boot else now - datetime.timedelta(seconds=float(conf.get("OAM_EXTRACTION_RESEND_SECONDS")))
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
            send += list(ExtractionJob.objects.filter(thread_id=thread_id, status="queued", trigger__in=SIDE_TRIGGERS,
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


# --- state --------------------------------------------------------------------------------------


def job_summary(job: ExtractionJob) -> dict[str, Any]:
    """A job as plain values (the extraction-state endpoint)."""
    return {
        "job_id": job.pk, "trigger": job.trigger, "status": job.status, "from_seq": job.from_seq,
        "to_seq": job.to_seq, "attempts": job.attempts, "memories_created": job.memories_created,
        "memories_linked": job.memories_linked, "seconds": job.seconds, "llm_seconds": job.llm_seconds,
        "error": job.error or None, "created_at": job.created_at.isoformat(),
        "finished_at": job.finished_at.isoformat() if job.finished_at else None,
        "failure": job.failure or None,
        "retry_at": job.retry_at.isoformat() if job.retry_at and job.status == "queued" else None,
    }


#: Failed ranges ``extraction_state`` lists, newest first.
FAILED_RANGES_SHOWN = 50


def failed_ranges(thread_id: str, *, limit: int = FAILED_RANGES_SHOWN) -> list[dict[str, Any]]:
    """The thread's failed extraction jobs, newest first (at most ``limit``), as ``job_summary`` values: the
    ranges whose messages have no memories from extraction until a re-run (``memory.services.extraction.
    extraction_rerun``) succeeds. Each has ``failure`` (transient: the retry horizon ended while the LLM was
    unreachable; permanent: the LLM refused the request or its output) and ``error`` (the reason)."""
    return [job_summary(job) for job in ExtractionJob.objects.filter(thread_id=thread_id, status="failed")
            .order_by("-id")[:limit]]


def queue_stall(thread: Thread, *, now=None) -> dict[str, Any] | None:
    """Why the thread's extraction queue is not advancing, or None when it is (or has nothing to do).

    Returns ``{"reason", "job_id", "detail", "since"}`` (``since``: ISO time
    the job was created, or claimed for ``worker_lost``); ``reason`` is

    * ``worker_lost``: a job has been running longer than
      ``OAM_EXTRACTION_STALE_SECONDS`` (the sweep requeues it);
    * ``blocked``: no job runs and the next queued one does not start right
      after the watermark, so no claim can take it (the sweep repairs it);
    * ``llm_unavailable``: the next job failed because the LLM was unreachable and waits to retry
      (``memory.extraction.jobs.retry_later``; ``since``: its first such failure);
    * ``not_queued``: the next job's last send to the broker failed
      (``memory.tasks.enqueue_job`` notes it; the sweep re-sends it);
    * ``waiting_for_worker``: the next job has waited longer than
      ``OAM_EXTRACTION_RESEND_SECONDS`` plus one sweep period for a worker
      (no worker runs, or the broker lost it).
    """
    now = now or timezone.now()
    jobs = ExtractionJob.objects.filter(thread_id=thread.pk, trigger=TRIGGER_ADD)
    stale = float(conf.get("OAM_EXTRACTION_STALE_SECONDS"))
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
    if first.failure == "transient" and first.retry_at is not None:
        return {"reason": "llm_unavailable", "job_id": first.pk, "since": first.retry_since.isoformat(),
                "detail": f"the LLM was unreachable ({first.error}); job {first.pk} retries at "
                          f"{first.retry_at.isoformat()}, its messages {first.from_seq}..{first.to_seq} pending"}
    if first.error.startswith(NOT_QUEUED):
        return {"reason": "not_queued", "job_id": first.pk, "since": since, "detail": first.error}
    waited = (now - first.created_at).total_seconds()
    limit = float(conf.get("OAM_EXTRACTION_RESEND_SECONDS")) + float(conf.get("OAM_EXTRACTION_SWEEP_SECONDS"))
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
    (``extract_memories`` and an LLM from the settings or attached here); ``reason`` says why not (None when it
    would: ``memory.extraction.tracker.off_reason``).
    ``pending_messages`` counts live messages after the watermark; ``thread_id`` is public.
    ``stalled`` is ``queue_stall`` (None when the queue advances), ``failed_ranges`` ``failed_ranges``,
    ``last_repair`` ``last_repair`` and ``broker`` the live
    ``memory.extraction.queue.broker_status``. Raises KeyError (``NotFound``) when the
    thread is gone.
    """
    fresh = Thread.objects.filter(pk=thread.pk).first()  # the watermark moves
    if fresh is None:
        raise NotFound("thread_id", thread.public_id)
    thread = fresh
    config = thread_config(thread)
    jobs = ExtractionJob.objects.filter(thread_id=thread.pk)
    last_job = jobs.order_by("-id").first()
    last_seq = Message.objects.filter(thread_id=thread.pk).aggregate(m=Max("seq"))["m"] or 0
    reason = off_reason(config, thread_llm(thread.pk))
    return {
        "thread_id": thread.public_id,
        "enabled": reason is None,
        "reason": reason,
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
        "failed_ranges": failed_ranges(thread.pk),
        "broker": broker_status(),
        "config": config.to_thread_config(),
    }
