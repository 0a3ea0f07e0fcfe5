"""Bodies of ``threads/api/history.py``: a version of a memory's history, and what a restore wrote."""

from __future__ import annotations

from typing import Any

from ninja import Schema

from threads.schemas.memories import MemoryOut


class MemoryVersionOut(Schema):
    """One version of a memory's history (``memory.records.history.MemoryVersionRecord``).

    ``actor``: ``{"kind", "id"}`` (kinds: client, api_key, staff, admin,
    extraction, ttl, import), or ``{"kind": "relation", "id", "via"}`` for a
    change a relation drove. ``before``/``after``: snapshots of content,
    memory_type, metadata, status, expires_at, timestamp, and ``pending: true``
    while the memory awaited review (null before a create and after a delete
    or a reject); ``changed`` names the fields that differ. ``action``: create,
    update, invalidate, revalidate, restore, delete, approve, reject.
    """

    memory_id: str
    version: int
    action: str
    actor: dict[str, Any]
    reason: str
    relation_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: list[str]
    created_at: str


class MemoryRestoreOut(Schema):
    """What a restore wrote: the memory as stored now and the number of the new version."""

    version: int
    memory: MemoryOut
