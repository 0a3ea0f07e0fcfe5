"""Request and response bodies of the JSON API (``XxxIn`` / ``XxxOut``).

Input schemas forbid unknown keys (the spec rejects unexpected keyword
arguments) and use strict ints and bools, so ``"5"`` or ``true`` is not read as
a number. Omitted and explicit ``null`` differ: the API passes only the keys a
client sent (``model_fields_set``) to ``memory.client``, so an omitted key is
``NOTSET`` there and the spec's default applies. Where ``null`` has no meaning
the type is not nullable and the default shown in the docs is what omission means.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from ninja import Field, Schema
from pydantic import ConfigDict, StrictBool, StrictInt

from memory.client import Thread as ThreadHandle
from memory.extraction_config import BackgroundExtractionQueueFullBehavior, MemoryExtractionMode
from memory.links import BUILTIN_RELATIONS
from memory.models import MEMORY_TYPES, RECORD_TYPES
from memory.types import RecordStatus, TimeToLiveAnchor

MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]  # "memory", "fact", "guideline", "preference"
BuiltinRelationType = Literal[tuple(BUILTIN_RELATIONS)]  # type: ignore[valid-type]  # supersedes, contradicts, ...
RecordType = Literal[RECORD_TYPES]  # type: ignore[valid-type]
Metadata = Union[dict[str, Any], None]


class _In(Schema):
    model_config = ConfigDict(extra="forbid")


# --- errors -------------------------------------------------------------------------


class ErrorOut(Schema):
    """A 401/404/409 body: what went wrong and, for domain errors, the field at fault."""

    detail: str
    field: str | None = None


class ValidationErrorItem(Schema):
    """One rule broken by the request; ``loc`` is (source, field ...)."""

    loc: list[Union[str, int]]
    msg: str
    type: str


class ValidationErrorOut(Schema):
    """The 422 body, for schema errors and domain validation errors alike."""

    detail: list[ValidationErrorItem]


# --- threads ------------------------------------------------------------------------


class MemoryExtractionConfigIn(_In):
    """Automatic extraction settings of a thread (spec: MemoryExtractionConfig); omitted keys keep the defaults."""

    extract_memories: StrictBool = Field(None, description="Extraction on (default true; it also needs an LLM).")
    extraction_mode: MemoryExtractionMode = Field(None, description="inline or background (default).")
    memory_extraction_frequency: StrictInt = Field(
        None, description="New messages after which extraction is due; <= 0 (default -1): every add_messages call."
    )
    memory_extraction_window: StrictInt = Field(
        None, description="Messages the LLM sees per call, targets included; <= 0 (default -1): the batch."
    )
    memory_extraction_token_limit: StrictInt = Field(
        None, description="Prompt token cap (default 3000); <= 0 disables it."
    )
    enable_context_summary: StrictBool = Field(None, description="Keep a durable summary (default true).")
    context_summary_update_frequency: StrictInt = Field(
        None, description="Messages after the summary before a refresh; <= 0 (default -1): every check."
    )
    memory_extraction_custom_instructions: str | None = Field(None, description="Appended to the system prompt.")
    memory_extraction_inherit_message_metadata: Union[StrictBool, list[str]] = Field(
        None, description="Metadata memories inherit from their source messages: true (default), false, or keys."
    )
    background_extraction_queue_full_behavior: BackgroundExtractionQueueFullBehavior = Field(
        None, description="skip, wait_then_skip (default) or wait_then_raise."
    )
    background_extraction_queue_put_timeout_seconds: float = Field(
        None, ge=0, description="Seconds to wait for room in a full queue (default 10)."
    )


class ThreadIn(_In):
    """Create a thread. Omitted ids are generated UUIDs; an explicit null user/agent id stores null."""

    thread_id: str | None = Field(None, description="Omit or null for a generated UUID.")
    user_id: str | None = Field(None, description="Omit for a generated UUID; null stores no user.")
    agent_id: str | None = Field(None, description="Omit for a generated UUID; null stores no agent.")
    metadata: Metadata = None
    memory_extraction_config: MemoryExtractionConfigIn | None = Field(
        None, description="Extraction settings stored with the thread; omit for the defaults."
    )


class ThreadPatchIn(_In):
    """Replace a thread's metadata (null clears it; omitted leaves it)."""

    metadata: Metadata = None


class ThreadOut(Schema):
    """A thread's identity and metadata."""

    thread_id: str
    user_id: str | None
    agent_id: str | None
    metadata: dict[str, Any]

    @staticmethod
    def resolve_thread_id(obj) -> str:
        """Read the id from a ``memory.client.Thread`` handle or a stored thread row."""
        return obj.thread_id if isinstance(obj, ThreadHandle) else obj.pk

    @staticmethod
    def resolve_metadata(obj) -> dict[str, Any]:
        """Stored metadata, ``{}`` when none."""
        return dict(obj.metadata or {})


# --- messages -----------------------------------------------------------------------


class TextPartIn(_In):
    """A text content part. Image parts are not supported yet."""

    type: Literal["text"] = "text"
    text: str
    id: str | None = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = None


MessageContentIn = Union[str, list[TextPartIn]]
TtlDays = Union[StrictInt, None]


class MessageIn(_In):
    """One message to append: role and content, optionally id, timestamp and metadata."""

    role: str
    content: MessageContentIn
    id: str | None = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = Field(None, description="Event time; ISO-8601 when TTL is anchored on it.")
    metadata: Metadata = None


class MessagesIn(_In):
    """A batch of messages, written atomically. ``metadata``/``ttl_*`` take one value or one per message."""

    messages: list[MessageIn]
    metadata: Union[Metadata, list[Metadata]] = Field(
        None, description="Laid over each message's own metadata; a list gives one per message."
    )
    ttl_days: Union[TtlDays, list[TtlDays]] = Field(
        None, description="Omit for the default TTL; null for the maximum (or no expiry); a list gives one per message."
    )
    ttl_anchor: Union[TimeToLiveAnchor, list[TimeToLiveAnchor]] = Field(
        TimeToLiveAnchor.CREATED_AT, description="What the TTL counts from; a list gives one per message."
    )


class MessageIdsOut(Schema):
    """Ids of the appended messages, in input order."""

    ids: list[str]


class MessagePatchIn(_In):
    """Update a message. Omitted fields keep their stored values; role and timestamp never change."""

    content: MessageContentIn = Field(None, description="Replacement content (string or text parts).")
    metadata: Metadata = Field(None, description="Replaces the stored metadata (no deep merge); null clears it.")
    ttl_days: TtlDays = Field(None, description="Expiry refresh; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = Field(
        TimeToLiveAnchor.CREATED_AT, description="Anchor of an expiry refresh (given alone: default TTL)."
    )


class MessageListQuery(Schema):
    """``start``/``end`` of ``get_messages``: both omitted give the most recent window; ``end=-1`` means all."""

    start: int | None = Field(None, ge=0, description="0-based index of the first live message.")
    end: int | None = Field(None, ge=-1, description="Exclusive end index; -1 for all from start.")


class TextPartOut(Schema):
    """A stored text part."""

    type: Literal["text"] = "text"
    id: str
    text: str
    timestamp: str | None = None


class MessageOut(Schema):
    """A stored message. ``timestamp`` falls back to the creation time."""

    record_type: Literal["message"] = "message"
    id: str
    thread_id: str | None
    role: str
    content: Union[str, list[TextPartOut]]
    timestamp: str | None
    metadata: dict[str, Any] | None
    status: str
    created_at: str | None
    expires_at: str | None


# --- memories -----------------------------------------------------------------------


class MemoryIn(_In):
    """Store a manual memory. Omitted scope ids inherit the thread's."""

    content: str
    memory_type: MemoryType = "memory"
    memory_id: str = Field(None, description="Omit for a generated UUID.")
    user_id: str | None = Field(None, description="Omit to inherit the thread's user id.")
    agent_id: str | None = Field(None, description="Omit to inherit the thread's agent id.")
    thread_id: str | None = Field(
        None, description="Omit to use this thread; another value makes the memory not this thread's."
    )
    metadata: Metadata = None
    timestamp: str | None = Field(None, description="Event time; ISO-8601 when TTL is anchored on it.")
    ttl_days: TtlDays = Field(None, description="Omit for the default TTL; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = TimeToLiveAnchor.CREATED_AT
    status: RecordStatus = RecordStatus.VALID
    autonomous_linking: StrictBool = Field(
        None, description="Let the thread's LLM relate the new memory to its nearest memories; omit: on when "
        "there is an LLM."
    )
    memory_id_to_link: str = Field(
        None, description="With link_type: also store a relation from the new memory to this memory of the "
        "thread (one transaction); omitted scope ids then inherit from it."
    )
    link_type: BuiltinRelationType = Field(None, description="With memory_id_to_link: the relation's type.")
    link_id: str = Field(None, description="Id of the explicit relation; omit for a generated UUID.")
    link_timestamp: str | None = Field(None, description="Timestamp stored on the explicit relation.")
    link_metadata: Metadata = Field(None, description="Metadata stored on the explicit relation.")


class MemoryPatchIn(_In):
    """Update a memory owned by this thread. Omitted fields keep their stored values."""

    content: str = Field(None, description="Replacement content.")
    metadata: Metadata = Field(None, description="Replaces the stored metadata (no deep merge); null clears it.")
    timestamp: str | None = Field(None, description="Replacement event time; null clears it.")
    ttl_days: TtlDays = Field(None, description="Expiry refresh; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = Field(
        TimeToLiveAnchor.CREATED_AT, description="Anchor of an expiry refresh (given alone: default TTL)."
    )
    status: RecordStatus = Field(None, description="Replacement status.")


class MemoryListQuery(Schema):
    """Filter of the memory listing."""

    memory_type: MemoryType | None = None


class MemoryOut(Schema):
    """A stored memory-like record. ``timestamp`` falls back to the creation time."""

    record_type: MemoryType
    id: str
    memory_type: MemoryType
    content: str
    user_id: str | None
    agent_id: str | None
    thread_id: str | None
    timestamp: str | None
    metadata: dict[str, Any]
    status: str
    created_at: str | None
    expires_at: str | None
    source_message_ids: list[str]


# --- search -------------------------------------------------------------------------


class SearchIn(_In):
    """Search arguments (spec: search). Omitted scope fields keep the caller's defaults.

    On a thread: exact user and agent, this thread's id, ``exact_thread_match=false``.
    On ``/api/search``: an omitted id leaves its dimension open.
    """

    query: str
    user_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    agent_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    thread_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    exact_user_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_agent_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_thread_match: StrictBool = Field(None, description="Omit to keep the default.")
    max_results: StrictInt = Field(None, ge=1, description="At least 1; omit for the default (10).")
    token_budget: StrictInt | None = Field(
        None, description="Hard token limit; omit for the default; <= 0 or null disables."
    )
    soft_token_budget: StrictInt | None = Field(
        None, description="Soft token target; omit for the default; <= 0 or null disables."
    )
    record_types: list[RecordType] | None = Field(None, description="Omit or null for every type.")
    metadata_filter: dict[str, Any] | None = None
    include_invalid_results: StrictBool = True
    num_hops: StrictInt = Field(
        None, ge=0, le=5, description="Relation edges followed from each direct memory result (0-5); omit for 0."
    )
    max_linked_results: StrictInt = Field(
        None, ge=0, description="Linked memories attached to each direct result; omit for 100, 0 for none."
    )


class LinkedRecordOut(Schema):
    """A memory reached from a direct result through relations; ``relation_type`` is the label as traversed."""

    record_type: str
    record_id: str
    relation_type: str
    relation_id: str
    hops: int = Field(description="Edges from the direct result (1: directly related).")
    from_record_id: str = Field(description="The record the last edge starts from.")
    record: MemoryOut


class SearchResultOut(Schema):
    """One hit, best first: the record, its cosine distance and its ranking score
    (the fused RRF score in HYBRID and KEYWORD modes, 1 - distance in VECTOR mode).

    ``linked``: memories reached through relations when ``num_hops`` was given (memory results only).
    """

    record_type: str
    record_id: str
    distance: float
    score: float
    content: str
    formatted_content: str
    record: Union[MessageOut, MemoryOut]
    linked: list[LinkedRecordOut] = []


# --- relations ----------------------------------------------------------------------


class LinkIn(_In):
    """Create a directed relation between two memory-like records of the thread (spec: link_records)."""

    source_record_id: str
    source_record_type: MemoryType
    target_record_id: str
    target_record_type: MemoryType
    relation_type: str = Field(description="Source-to-target label: a built-in type or a custom one.")
    opposite_relation_type: str = Field(
        None, description="Target-to-source label; omit for the built-in's fixed reverse, or the same label."
    )
    relation_id: str = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = None
    metadata: Metadata = None


class LinkPatchIn(_In):
    """Update a relation (spec: update_record_link). Omitted fields keep their stored values."""

    relation_type: str = Field(None, description="A built-in type also sets its fixed reverse label.")
    opposite_relation_type: str = Field(None, description="Replacement reverse label.")
    timestamp: str | None = Field(None, description="Replacement timestamp; null clears it.")
    metadata: Metadata = Field(None, description="Replaces the stored metadata; null clears it.")


class LinkTupleQuery(Schema):
    """A relation's complete endpoint tuple, in its stored source-to-target orientation."""

    source_record_id: str
    source_record_type: str
    target_record_id: str
    target_record_type: str
    relation_type: str


class LinkListQuery(Schema):
    """Filter of the relation listing."""

    record_id: str | None = Field(None, description="Only relations touching this record.")


class RelationOut(Schema):
    """A stored relation: source -> target reads ``relation_type``, target -> source ``opposite_relation_type``."""

    relation_id: str
    thread_id: str
    source_record_id: str
    source_record_type: str
    target_record_id: str
    target_record_type: str
    relation_type: str
    opposite_relation_type: str
    timestamp: str | None
    metadata: dict[str, Any]
    created_at: str | None


# --- summaries and context cards ----------------------------------------------------

CardRecordType = Literal[("message", *MEMORY_TYPES)]  # type: ignore[valid-type]


class SummaryQuery(Schema):
    """``get_summary`` arguments as query parameters."""

    except_last: int = Field(None, ge=0, description="Most recent messages left out; omit for 0.")
    token_budget: int = Field(
        None, description="Soft token budget; omit for the bounded default (1000); <= 0 disables (the transcript "
        "fallback stays capped at 4000 characters)."
    )


class SummaryOut(Schema):
    """A thread summary: the durable LLM summary, or a transcript of the latest messages without an LLM."""

    content: str
    formatted_content: str


class ContextCardIn(_In):
    """``get_context_card`` arguments (spec). Omitted keys take the spec's defaults."""

    fallback_message_count: StrictInt = Field(None, ge=0, description="Omit for 5.")
    max_relevant_results: StrictInt = Field(
        None, ge=0, description="Omit for 5; raised to the sum of min_relevant_results_by_type."
    )
    token_budget: StrictInt | None = Field(
        None, description="Hard token limit on the formatted relevant results; omit for the default; "
        "<= 0 or null disables."
    )
    soft_token_budget: StrictInt | None = Field(
        None, description="Soft token target on the formatted relevant results; omit for the default; "
        "<= 0 or null disables."
    )
    max_recent_messages: StrictInt = Field(None, ge=0, description="Omit for 0.")
    except_last_messages: StrictInt = Field(
        None, ge=0, description="Trailing messages left out of summary and search; when nonzero, max_recent_messages "
        "must be 0 or equal."
    )
    min_relevant_results_by_type: dict[CardRecordType, Annotated[StrictInt, Field(ge=0)]] | None = Field(
        None, description="Per-type minimums searched first; 'message' searches this thread only."
    )
    metadata_filter: dict[str, Any] | None = None
    include_invalid_results: StrictBool = True


class ContextCardOut(Schema):
    """A context card: its rendered text and its parts."""

    content: str
    formatted_content: str
    summary: str
    topics: list[str]
    relevant_results: list[SearchResultOut]
    recent_messages: list[MessageOut]

    @staticmethod
    def resolve_topics(obj) -> list[str]:
        return list(obj.topics or [])

    @staticmethod
    def resolve_relevant_results(obj) -> list:
        return list(obj.relevant_results or [])

    @staticmethod
    def resolve_recent_messages(obj) -> list:
        return list(obj.recent_messages or [])


# --- extraction ---------------------------------------------------------------------


class ExtractionJobOut(Schema):
    """One extraction pass over messages ``from_seq``..``to_seq`` of a thread."""

    job_id: int
    trigger: str = Field(description="add_messages, or update_message for a re-extraction.")
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


class ExtractionStateOut(Schema):
    """Where a thread's extraction stands: messages up to ``watermark`` have been handed to extraction."""

    thread_id: str
    enabled: bool = Field(description="Extraction on and an LLM configured for this server.")
    mode: str
    watermark: int
    last_message_seq: int
    pending_messages: int = Field(description="Live messages after the watermark.")
    queued_jobs: int
    running_jobs: int
    last_job: ExtractionJobOut | None
    config: dict[str, Any]
