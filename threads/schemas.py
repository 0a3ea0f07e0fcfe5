"""Request and response bodies of the JSON API (``XxxIn`` / ``XxxOut``).

Input schemas forbid unknown keys (the spec rejects unexpected keyword
arguments) and use strict ints and bools, so ``"5"`` or ``true`` is not read as
a number. Omitted and explicit ``null`` differ: the API passes only the keys a
client sent (``model_fields_set``) to ``memory.client``, so an omitted key is
``NOTSET`` there and the spec's default applies. Where ``null`` has no meaning
the type is not nullable and the default shown in the docs is what omission means.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from ninja import Field, Schema
from pydantic import ConfigDict, StrictBool, StrictInt

from memory.client import Thread as ThreadHandle
from memory.models import MEMORY_TYPES, RECORD_TYPES
from memory.types import RecordStatus, TimeToLiveAnchor

MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]  # "memory", "fact", "guideline", "preference"
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


class ThreadIn(_In):
    """Create a thread. Omitted ids are generated UUIDs; an explicit null user/agent id stores null."""

    thread_id: str | None = Field(None, description="Omit or null for a generated UUID.")
    user_id: str | None = Field(None, description="Omit for a generated UUID; null stores no user.")
    agent_id: str | None = Field(None, description="Omit for a generated UUID; null stores no agent.")
    metadata: Metadata = None


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


class SearchResultOut(Schema):
    """One hit, best first: the record, its cosine distance and score (1 - distance)."""

    record_type: str
    record_id: str
    distance: float
    score: float
    content: str
    formatted_content: str
    record: Union[MessageOut, MemoryOut]
