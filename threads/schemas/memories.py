"""Bodies of ``threads/api/memories.py``: a memory in and out, its update and list filter (``MemoryOut`` is also
every other resource's memory)."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Field, Schema
from pydantic import StrictBool

from memory.core.types import RecordStatus, TimeToLiveAnchor
from memory.llm.prompts import BUILTIN_RELATIONS
from threads.schemas.common import InSchema, MemoryType, Metadata, TtlDays

#: Descriptions of the valid-time fields (issue #32, ``memory.core.valid_time``).
VALID_FROM = ("Valid time: when the fact starts to hold in the world, an ISO-8601 date or date-time (no zone: UTC); "
              "null: open (always held).")
VALID_TO = ("Valid time: when the fact stops holding (excluded: the window is [valid_from, valid_to)), ISO-8601; "
            "null: open. Not before valid_from.")
VALID_AT = ("Only memories whose validity window contains this instant (ISO-8601 date or date-time; no zone: UTC); "
            "a memory without a window always passes; messages and images are not filtered.")

AS_OF = ("Recorded time (issue #32): answer as the store stood at this instant (ISO-8601 date or date-time; no "
         "zone: UTC; not in the future): memories created later absent, edited later as they were, deleted later "
         "present. The header X-OAM-Erased-Since: true says the user or agent asked about was erased since.")

BuiltinRelationType = Literal[tuple(BUILTIN_RELATIONS)]  # type: ignore[valid-type]  # supersedes, contradicts, ...


class MemoryIn(InSchema):
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
    valid_from: str | None = Field(None, description=VALID_FROM)
    valid_to: str | None = Field(None, description=VALID_TO)
    derived_from: list[str] | None = Field(
        None, max_length=100, description="Ids of memories of this project the new memory was inferred from (at "
        "most 100, any thread, each one this key may read: 404 otherwise; null or omitted: none). When one is "
        "later superseded, invalidated, edited or deleted, the new memory is flagged (needs_review)."
    )


class MemoryPatchIn(InSchema):
    """Update a memory owned by this thread. Omitted fields keep their stored values."""

    content: str = Field(None, description="Replacement content.")
    metadata: Metadata = Field(None, description="Replaces the stored metadata (no deep merge); null clears it.")
    timestamp: str | None = Field(None, description="Replacement event time; null clears it.")
    ttl_days: TtlDays = Field(None, description="Expiry refresh; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = Field(
        TimeToLiveAnchor.CREATED_AT, description="Anchor of an expiry refresh (given alone: default TTL)."
    )
    status: RecordStatus = Field(None, description="Replacement status.")
    valid_from: str | None = Field(None, description=VALID_FROM + " Omit to keep it.")
    valid_to: str | None = Field(None, description=VALID_TO + " Omit to keep it.")


class MemoryListQuery(Schema):
    """Filter of the memory listing."""

    memory_type: MemoryType | None = None
    valid_at: str = Field(None, description=VALID_AT)
    as_of: str = Field(None, description=AS_OF)


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
    valid_from: str | None = Field(None, description="Valid time: when the fact starts to hold (ISO-8601); null: open.")
    valid_to: str | None = Field(None, description="Valid time: when it stops holding (excluded); null: open.")
    needs_review: bool = Field(False, description="A memory it was derived from changed since (issue #32).")
    review_cause: dict[str, Any] | None = Field(
        None, description="The change that flagged it: memory_id (the changed source), action (supersede, "
        "invalidate, update, delete), version (the source's history version), relation_id, at, and via (the "
        "memory it is directly derived from) when reached through another; null when not flagged."
    )
