from __future__ import annotations

import logging
import time
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.context.summaries import summary_refresh_if_due
from memory.core import conf, progress, telemetry
from memory.core.errors import NotFound
from memory.core.ids import stored_id
from memory.core.types import MemoryRetentionConfig
from memory.extraction.candidates import (
    REJECT_REASONS,
    Candidate,
    Decision,
    JobResult,
    _last_seconds,
    inherited_metadata,
    parse_candidates,
    plan_slices,
)
from memory.extraction.config import MemoryExtractionConfig, MemoryLinkExtractionMode
from memory.extraction.dedup import decide
from memory.extraction.jobs import (
    ExtractionRejected,
    _chain_next,
    _claim,
    _enqueue_on_commit,
    _finish_failed,
    _locked,
    _next_in_line,
    _release,
    job_schedule,
    queue_has_room,
    retry_later,
)
from memory.extraction.settings import (
    ACTIVE,
    LINK_TYPES,
    POLL_SECONDS,
    SIDE_TRIGGERS,
    TRIGGER_ADD,
    TRIGGER_EDIT,
    TRIGGER_RERUN,
    default_retention,
    max_attempts,
)
from memory.extraction.tracker import attach, thread_config, thread_llm, warn_if_off
from memory.links.writes import link_create
from memory.llm.adapters import Llm, LlmError, LlmInvalidOutput, LlmRequestRejected, LlmUnavailable
from memory.llm.prompts import MAX_OUTPUT_TOKENS, SCHEMA_NAME, extraction_prompt, extraction_schema
from memory.models import ExtractionJob, Memory, Message, Thread
from memory.records import history
from memory.services.common import lock_thread
from memory.services.memories import PreparedMemory, memory_insert, memory_prepare

logger = logging.getLogger(__name__)


def extraction_after_add(*, thread: Thread, llm: Llm | None, config: MemoryExtractionConfig,
                         retention: MemoryRetentionConfig | None = None) -> ExtractionJob | None:
    """Run or queue extraction after ``add_messages`` committed its messages; return the job or None.

    Does nothing unless ``config.extract_memories`` and an LLM (without an LLM it says so once per process,
    ``memory.extraction.tracker.warn_if_off``). INLINE runs
    the job (and any earlier pending ones) before returning; extraction
    failures are logged and recorded on the job, never raised. BACKGROUND
    applies the queue-full rule (may raise ``TimeoutError``; the messages stay).
    """
    if not config.extract_memories or llm is None:
        warn_if_off(thread.public_id, config, llm)
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


def extraction_rerun(*, thread: Thread, job_id: int | None = None, by: str) -> list[ExtractionJob]:
    """Queue the thread's failed extraction ranges again (all, or the one of job ``job_id``); return the jobs.

    ``thread`` is a row the caller may write (the API's ``thread_for`` under a write key, the staff view's
    project check): the jobs are looked up in it only, so another tenant's job id is ``NotFound``
    (``job_id``), as is a job that is not failed. Each failed job goes back to queued in place: its attempts
    and retry horizon start again, ``error`` notes ``by`` (who asked: ``"api"``, ``"staff <user>"``) and the
    failure it had. A job whose range the watermark passed (an ``add_messages`` failure counts as finished)
    becomes a ``TRIGGER_RERUN`` job, which, like a re-extraction, never moves the watermark; one before it
    keeps its trigger and its place in the chain. Sent to the worker after commit; emits ``extraction.rerun``
    per job. Issue #34: "an API call and a staff button re-run them".
    """
    with transaction.atomic():
        row = lock_thread(thread.pk)
        failed = ExtractionJob.objects.filter(thread_id=row.pk, status="failed")
        if job_id is not None:
            failed = failed.filter(pk=job_id)
        jobs = list(failed.order_by("from_seq", "id"))  # their updates below are compare-and-sets on status
        if job_id is not None and not jobs:
            raise NotFound("job_id", str(job_id))
        for job in jobs:
            passed = job.to_seq <= row.extracted_through_seq
            trigger = TRIGGER_RERUN if job.trigger == TRIGGER_ADD and passed else job.trigger
            note = f"rerun by {by} after a {job.failure or 'permanent'} failure: {job.error}"
            ExtractionJob.objects.filter(pk=job.pk, status="failed").update(
                status="queued", trigger=trigger, error=note[:2000], attempts=0, fences=0, failure="",
                retry_since=None, retry_at=None, finished_at=None)
            progress.send(row.pk, "rerun", job_id=job.pk, from_seq=job.from_seq, to_seq=job.to_seq, by=by)
            _enqueue_on_commit(job)
    return list(ExtractionJob.objects.filter(pk__in=[job.pk for job in jobs]).order_by("from_seq", "id"))


def run_inline(*, job_id: int, llm: Llm, retention: MemoryRetentionConfig | None = None,
               timeout: float | None = None) -> str:
    """Run a job in the calling thread, first any earlier jobs of its thread; return its final status.

    An ``add_messages`` job waits for the jobs before it (running them here
    when they are queued, polling when another worker holds one) for up to
    ``timeout`` seconds (``OAM_EXTRACTION_INLINE_WAIT``, 300); after that it is
    left queued for a worker and "queued" is returned. "queued" too when the LLM
    is unreachable: the job waits for its retry in the worker (``job_run``).
    """
    timeout = float(conf.get("OAM_EXTRACTION_INLINE_WAIT")) if timeout is None else timeout
    deadline = time.monotonic() + timeout
    while True:
        job = ExtractionJob.objects.filter(pk=job_id).first()
        if job is None or job.status not in ACTIVE:
            return job.status if job else "gone"
        runnable = job if job.trigger in SIDE_TRIGGERS and job.status == "queued" else _next_in_line(job.thread_id)
        if runnable is not None and runnable.retry_at is not None and runnable.retry_at > timezone.now():
            return job.status  # backing off after an unreachable LLM: its delayed send to the worker retries it
        if runnable is not None:
            if job_run(job_id=runnable.pk, llm=llm, retention=retention, background=False) == "retrying":
                return "queued"
            continue
        if time.monotonic() >= deadline:
            logger.warning("inline extraction job %s left queued: earlier work of its thread is still running", job_id)
            return job.status
        time.sleep(POLL_SECONDS * 2)


def job_run(*, job_id: int, llm: Llm | None = None, retention: MemoryRetentionConfig | None = None,
            background: bool = True) -> str:
    """Run one extraction job; return "done", "failed", "retrying" or "skipped" (not claimed, or its claim was lost).

    ``llm`` defaults to ``thread_llm`` (attached in this process, else the
    settings'). An unreachable LLM (``LlmUnavailable``: connection refused, timeout, 429, 5xx), inline or in the
    background, puts the job back in the queue with a backoff (``memory.extraction.jobs.retry_later``) and
    returns "retrying": its range stays pending until it succeeds, or fails (``failure="transient"``) when
    ``OAM_EXTRACTION_RETRY_HORIZON_SECONDS`` have passed since its first such failure. ``background``: a Dramatiq
    delivery, where another error (database busy) releases the job and is re-raised for Dramatiq's retry until
    ``max_attempts()`` claims (claims a delete fenced do not count); inline, such an error fails the job at once.
    Permanent errors (no LLM, request rejected, every call invalid) fail it (``failure="permanent"``) without
    raising. Raw messages are never touched.

    Traced as one ``upsert_memory`` span (``memory.core.telemetry``: the GenAI memory conventions' operation
    for "a public API that may create, update, or consolidate memory records without the caller choosing
    which": the job decides per candidate, new, update, contradiction or duplicate): ``oam.extraction.job.id``,
    ``.background``, ``.outcome`` (the result), and ``_traced_job``'s and ``_traced_result``'s attributes; a failed
    job's span has ``error.type`` (the exception's class name) and the ERROR status.
    """
    with telemetry.memory_span(telemetry.UPSERT_MEMORY, attributes={"oam.extraction.job.id": job_id,
                                                                    "oam.extraction.background": background}) as span:
        outcome = _job_run(job_id, llm, retention, background, span)
        telemetry.set_attributes(span, {"oam.extraction.outcome": outcome})
        return outcome


def _traced_job(span, job: ExtractionJob, thread: Thread, attempt: int) -> None:
    """A claimed job on its span: ``oam.extraction.trigger``, ``.attempt``, ``.from_seq``, ``.to_seq``, and its thread
    (``gen_ai.memory.store.id``: the project's slug, ``gen_ai.conversation.id``, ``gen_ai.agent.id``; ``user.id``
    with content capture)."""
    if not span.is_recording():
        return
    telemetry.set_attributes(span, {
        telemetry.STORE_ID: thread.project.slug, telemetry.CONVERSATION_ID: thread.public_id,
        telemetry.AGENT_ID: thread.agent_id, "oam.extraction.trigger": job.trigger,
        "oam.extraction.attempt": attempt, "oam.extraction.from_seq": job.from_seq,
        "oam.extraction.to_seq": job.to_seq,
    })
    telemetry.set_user(span, thread.user_id)


def _traced_result(span, result: JobResult, planned: list[tuple[Decision, PreparedMemory | None]] | None = None,
                   error: Exception | None = None) -> None:
    """What a job did, on its span: ``gen_ai.memory.record.count`` (memories stored),
    ``oam.extraction.memories_linked``, ``.duplicates_skipped``, ``.rejected_candidates``, ``.messages_extracted``,
    ``.llm_calls``, ``.failed_calls``, ``.llm_seconds`` (seconds); with ``planned`` (what it committed) and content
    capture the stored memories as ``gen_ai.memory.records`` (id, content, type, decision); with ``error`` (a job
    failed without raising), ``error.type`` (its class name) and the ERROR status, no message."""
    if not span.is_recording():
        return
    telemetry.set_attributes(span, {
        telemetry.RECORD_COUNT: result.memories_created, "oam.extraction.memories_linked": result.memories_linked,
        "oam.extraction.duplicates_skipped": result.duplicates_skipped,
        "oam.extraction.rejected_candidates": result.rejected_candidates,
        "oam.extraction.messages_extracted": result.messages_extracted, "oam.extraction.llm_calls": result.llm_calls,
        "oam.extraction.failed_calls": result.failed_calls, "oam.extraction.llm_seconds": result.llm_seconds,
    })
    if planned is not None and telemetry.capture_content():
        telemetry.set_content(span, records=[
            {"id": prepared.row.public_id, "content": prepared.row.content,
             "metadata": {"memory_type": prepared.row.memory_type, "decision": decision.action}}
            for decision, prepared in planned if prepared is not None])
    if error is not None:
        telemetry.failed(span, type(error).__qualname__)


def _job_run(job_id: int, llm: Llm | None, retention: MemoryRetentionConfig | None, background: bool, span) -> str:
    """``job_run``'s work, noting on ``span`` what the job is and did (``_traced_job``, ``_traced_result``)."""
    claimed = _claim(job_id)
    if claimed is None:
        return "skipped"
    job, thread, attempt = claimed
    _traced_job(span, job, thread, attempt)
    started = time.perf_counter()
    result = JobResult()
    llm = llm or thread_llm(thread.pk)
    config = thread_config(thread)
    try:
        if llm is None:
            raise ExtractionRejected("no LLM configured (set OAM_LLM_BASE_URL or give the thread an llm)")
        candidates = _extract_candidates(thread, job, config, llm, result)
        decisions = decide(candidates, thread=thread, llm=llm, result=result,
                           review_types=config.review_types(extracted=True))
        planned = _prepare(thread, job, decisions, retention or default_retention(), config)
        with history.acting("extraction", job.pk, f"extraction job {job.pk}"):  # the versions it writes
            committed = _commit(job.pk, attempt, planned, result, started=started, chain=background)
    except (ExtractionRejected, LlmRequestRejected, LlmInvalidOutput) as exc:
        return _failed(span, job.pk, attempt, f"{type(exc).__name__}: {exc}", exc, result, started=started,
                       chain=background)
    except LlmUnavailable as exc:  # unreachable, timed out, rate-limited, 5xx: wait for it, up to the horizon
        reason = f"{type(exc).__name__}: {exc}"
        _traced_result(span, result)
        delay = retry_later(job.pk, attempt, reason)
        if delay == 0.0:
            return "skipped"  # its claim was taken back meanwhile
        if delay is not None:
            logger.warning("extraction job %s: LLM unavailable (%s); retrying in %.0f s", job.pk, reason, delay)
            return "retrying"
        return _failed(span, job.pk, attempt, f"retry horizon ended: {reason}", exc, result, started=started,
                       chain=background, failure="transient")
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"
        _traced_result(span, result)
        if background and attempt - job.fences < max_attempts():
            _release(job.pk, attempt, reason)
            raise
        logger.warning("extraction job %s failed: %s", job.pk, reason, exc_info=not isinstance(exc, LlmError))
        return _failed(span, job.pk, attempt, reason, exc, result, started=started, chain=background)
    _traced_result(span, result, planned if committed else None)
    if committed and job.trigger == TRIGGER_ADD:
        _refresh_summary(thread.pk, llm)
    return "done" if committed else "skipped"


def _failed(span, job_id: int, attempt: int, reason: str, exc: Exception, result: JobResult, *, started: float,
            chain: bool, failure: str = "permanent") -> str:
    """Fail the job (``_finish_failed``, ``failure`` as there), note ``exc`` on its span; "failed"."""
    _finish_failed(job_id, attempt, reason, started=started, llm_seconds=result.llm_seconds, chain=chain,
                   failure=failure)
    _traced_result(span, result, error=exc)
    return "failed"


def _refresh_summary(thread_id: str, llm: Llm) -> None:
    """Hook: refresh the durable summary after a due extraction
    (``memory.context.summaries.summary_refresh_if_due``).

    The spec: "When memory extraction is enabled, the check is after each due
    extraction". A failure is logged: the memories are committed already.
    """
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
        result.messages_extracted += len(piece.targets)
        try:
            prompt = extraction_prompt(
                summary=piece.summary, context=[m.line() for m in piece.context],
                targets=[m.line() for m in piece.targets],
                custom_instructions=config.memory_extraction_custom_instructions,
                known=[k.line() for k in piece.known])
            reply = llm.complete_json(prompt, extraction_schema(refs, [k.ref for k in piece.known]),
                                      schema_name=SCHEMA_NAME, max_tokens=MAX_OUTPUT_TOKENS)
        except LlmInvalidOutput as exc:
            last_error = exc
            result.failed_calls += 1
            result.errors.append(f"call {step}/{len(slices)}: {exc}")
            found = []
        else:
            found, rejected = parse_candidates(reply, piece, result.rejected)
            result.rejected_candidates += rejected
        finally:
            result.llm_calls += 1
            result.llm_seconds += _last_seconds(llm)
        candidates += found
        progress.send(thread.pk, "progress", job_id=job.pk, step=step, steps=len(slices), candidates=len(found))
    if slices and result.failed_calls == len(slices) and last_error is not None:
        raise last_error
    return candidates




def _commit(job_id: int, attempt: int, planned: list[tuple[Decision, PreparedMemory | None]],
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
        quality = _quality_counts(result)
        for name, value in quality.items():
            setattr(job, name, value)
        job.save(update_fields=["status", "finished_at", "memories_created", "memories_linked", "seconds",
                                "llm_seconds", "error", *quality])
        progress.send(
            thread.pk, "finished", job_id=job.pk, memories_created=result.memories_created,
            memories_linked=result.memories_linked, duplicates_skipped=result.duplicates_skipped,
            rejected_candidates=result.rejected_candidates, llm_calls=result.llm_calls,
            failed_calls=result.failed_calls, seconds=job.seconds,
            llm_seconds=job.llm_seconds,
            watermark=job.to_seq if job.trigger == TRIGGER_ADD else thread.extracted_through_seq,
        )
        if chain:
            _chain_next(thread.pk)
    return True


def _quality_counts(result: JobResult) -> dict[str, int]:
    """The ``ExtractionJob`` columns the quality dashboard reads (``memory.reports.quality``), from a job's result."""
    return {"messages_extracted": result.messages_extracted, "duplicates_skipped": result.duplicates_skipped,
            **{f"rejected_{reason}": result.rejected.get(reason, 0) for reason in REJECT_REASONS}}


def _prepare(thread: Thread, job: ExtractionJob, decisions: list[Decision], retention: MemoryRetentionConfig,
             config: MemoryExtractionConfig) -> list[tuple[Decision, PreparedMemory | None]]:
    """Outside any transaction: validate and embed the memory each decision stores (None: a duplicate, skipped).

    Metadata: what the sources agree on (``inherited_metadata``) plus the
    decision in ``metadata["extraction"]``. A memory of a type the review
    policy names (``config.review_types(extracted=True)``, ``memory.records.review_rules``)
    is stored pending; the relation its decision calls for is then noted as
    ``relation_on_approval`` and made when a reviewer approves it
    (``memory.services.review``), not now.
    """
    planned: list[tuple[Decision, PreparedMemory | None]] = []
    review_types = config.review_types(extracted=True)
    linking = _linking_on(thread)
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
        if (candidate.memory_type in review_types and linking and decision.action in LINK_TYPES
                and decision.related_memory_id):
            note["relation_on_approval"] = LINK_TYPES[decision.action]
        prepared = memory_prepare(
            thread=thread, content=candidate.content, memory_type=candidate.memory_type,
            metadata={**inherited, "extraction": note}, timestamp=candidate.sources[-1].timestamp,
            source_message_ids=[m.id for m in candidate.sources], retention=retention, review_types=review_types,
            valid_from=candidate.valid_from, valid_to=candidate.valid_to,  # the window it states (issue #32)
        )
        # The known memories it was inferred from (issue #32), chosen by the job itself (candidates.known_memories):
        # stored as derived_from edges with it; one deleted since is left out (dependants.derivations_insert).
        prepared.sources = list(candidate.derived_from)
        planned.append((decision, prepared))
    return planned


def _store(thread: Thread, job: ExtractionJob, decision: Decision, prepared: PreparedMemory,
           result: JobResult) -> None:
    """Inside the job's commit: insert one prepared memory, then (for updates/contradictions) its relation,
    unless the memory awaits review (``memory.records.review_rules``)."""
    candidate = decision.candidate
    why = f"extraction job {job.pk}: {decision.action}" + (
        f" of {decision.related_memory_id}" if decision.related_memory_id else "")
    with history.because(why):
        memory_id = memory_insert(prepared)
    result.memories_created += 1
    progress.send(thread.pk, "memory_created", job_id=job.pk, memory_id=memory_id,
                  memory_type=candidate.memory_type, decision=decision.action,
                  related_memory_id=decision.related_memory_id,
                  source_message_ids=[m.id for m in candidate.sources], pending=prepared.row.pending)
    if prepared.row.pending:
        return  # no relation before a reviewer approves it (memory.services.review makes it then)
    if decision.action in LINK_TYPES and decision.related_memory_id and _linking_on(thread):
        with history.because(why):
            relation_id = _link(thread, memory_id, decision)
        result.memories_linked += 1
        progress.send(thread.pk, "memory_linked", job_id=job.pk, memory_id=memory_id,
                      related_memory_id=decision.related_memory_id, relation=decision.action,
                      relation_type=LINK_TYPES[decision.action], relation_id=relation_id)


def _linking_on(thread: Thread) -> bool:
    """Whether the thread's ``memory_link_extraction_mode`` lets extraction store relations (not DISABLED)."""
    mode = MemoryExtractionConfig.from_thread_config(thread.config).memory_link_extraction_mode
    return mode is not MemoryLinkExtractionMode.DISABLED


def _link(thread: Thread, memory_id: str, decision: Decision) -> str | None:
    """Relate the new memory to the one it updates or contradicts (``memory.links``); None when not possible.

    Relations join records of one thread, so a related memory of another
    thread of the same user keeps the decision in metadata only.
    """
    related = (Memory.objects.filter(pk=stored_id(thread.project_id, decision.related_memory_id))
               .values_list("thread_id", "memory_type").first())
    if related is None or related[0] != thread.pk:
        return None
    try:
        with transaction.atomic():
            return link_create(
                thread=thread, source_record_id=memory_id, source_record_type=decision.candidate.memory_type,
                target_record_id=decision.related_memory_id, target_record_type=related[1],
                relation_type=LINK_TYPES[decision.action],
                metadata={"origin": "extraction", "distance": decision.distance},
            )
    except ValueError as exc:  # e.g. the pair is related already
        logger.info("no relation from %s to %s: %s", memory_id, decision.related_memory_id, exc)
        return None
