"""Bodies of ``threads/api/extraction.py``: where a thread's extraction stands (jobs, stalls, repairs, broker)."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema
from pydantic import StrictInt

from memory.core.errors import MAX_SQL_COUNT
from threads.schemas.common import InSchema


class ExtractionJobOut(Schema):
    """One extraction pass over messages ``from_seq``..``to_seq`` of a thread."""

    job_id: int
    trigger: str = Field(description="add_messages, update_message for a re-extraction, or rerun for a failed "
                                     "range run again after the watermark passed it.")
    status: str = Field(description="queued, running, done or failed.")
    from_seq: int
    to_seq: int
    attempts: int
    memories_created: int
    memories_linked: int
    seconds: float
    llm_seconds: float
    error: str | None
    created_at: str
    finished_at: str | None
    failure: str | None = Field(None, description=(
        "Why it last failed: transient (the LLM was unreachable, timed out, rate-limited or answered 5xx; "
        "retried until OAM_EXTRACTION_RETRY_HORIZON_SECONDS), permanent (the LLM refused the request or its "
        "output); null when it did not fail."))
    retry_at: str | None = Field(None, description="A queued job waiting to retry after a transient failure: "
                                                   "when it is claimed again.")


class ExtractionStallOut(Schema):
    """A queue that is not advancing (``memory.extraction.recovery.queue_stall``)."""

    reason: str = Field(description="worker_lost, blocked, llm_unavailable, not_queued or waiting_for_worker.")
    job_id: int
    detail: str
    since: str


class ExtractionRepairOut(Schema):
    """A repair of the queue by the sweep (``memory.extraction.recovery.queue_repair``)."""

    job_id: int
    detail: str


class BrokerStatusOut(Schema):
    """Whether the server reaches the Dramatiq broker now (``memory.tasks.broker_status``)."""

    kind: str = Field(description="redis, rabbitmq or in-process.")
    ok: bool | None = Field(description="null: not checked (RabbitMQ).")
    error: str | None


class ExtractionStateOut(Schema):
    """Where a thread's extraction stands: messages up to ``watermark`` have been handed to extraction."""

    thread_id: str
    enabled: bool = Field(description="Extraction on and an LLM configured for this server.")
    reason: str | None = Field(description=(
        "Why extraction does not run (null when it does): extract_memories is false, or no LLM is configured."))
    mode: str
    watermark: int
    last_message_seq: int
    pending_messages: int = Field(description="Live messages after the watermark.")
    queued_jobs: int
    running_jobs: int
    last_job: ExtractionJobOut | None
    stalled: ExtractionStallOut | None = Field(description="Why the queue is not advancing; null when it is.")
    last_repair: ExtractionRepairOut | None = Field(description="The sweep's latest repair of this thread's queue.")
    failed_ranges: list[ExtractionJobOut] = Field(description=(
        "Failed jobs, newest first (at most 50): their messages have no extracted memories until "
        "POST /threads/{thread_id}/extraction/rerun runs them again."))
    broker: BrokerStatusOut
    config: dict[str, Any]
    settled: bool | None = Field(
        None, description="With ?wait: true when no job of the thread was queued or running at the answer, "
                          "false when the wait ran out first; null without ?wait.")


class ExtractionRerunIn(InSchema):
    """Which failed ranges to run again: one job, or all of the thread's failed jobs when ``job_id`` is null or
    omitted (``{}``). An unknown key is a 422 (``{"jobId": 3}`` must not re-run everything), and ``job_id`` is a
    JSON integer (not ``true`` or ``"3"``)."""

    job_id: StrictInt | None = Field(None, ge=1, le=MAX_SQL_COUNT,
                                     description="A failed job of this thread; null or omitted: all.")


class ExtractionRerunOut(Schema):
    """The failed jobs queued again (``memory.services.extraction.extraction_rerun``)."""

    thread_id: str
    jobs: list[ExtractionJobOut]
