"""Bodies of ``threads/api/links.py``: a relation between two memory-like records, its update and filters."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from threads.schemas.common import InSchema, MemoryType, Metadata


class LinkIn(InSchema):
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


class LinkPatchIn(InSchema):
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
