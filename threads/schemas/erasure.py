"""Bodies of ``threads/api/erasure.py``: the receipt of an erasure."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema


class ErasureOut(Schema):
    """A receipt of an erasure (``memory.services.erasure``): what was deleted about one user or agent, and when.

    The stored receipt names the subject only by a keyed digest; ``subject_id``
    is echoed in the answer to the erasure itself and empty when a receipt is read back.
    """

    receipt_id: str
    project: str
    subject: str = Field(description="user or agent")
    subject_id: str
    cascade: bool
    found: bool = Field(description="Whether the project held anything about the subject.")
    counts: dict[str, int] = Field(description="Rows deleted per kind: threads, messages, memories, images, "
                                               "relations, chunks, summaries, extraction_jobs, admin_log_entries "
                                               "(the admin's history of them), api_keys (keys fixed to the "
                                               "erased user or agent), memory_versions (history entries).")
    storage: dict[str, Any] = Field(description="What was done to the storage afterwards (scrubbed: true, WAL "
                                                "truncated, Oracle Text optimized ...); scrubbed: false with a "
                                                "reason when nothing was deleted (no scrub ran).")
    requested_by: str
    requested_at: str
    completed_at: str | None

    @staticmethod
    def resolve_requested_at(obj) -> str:
        return obj.requested_at.isoformat()

    @staticmethod
    def resolve_completed_at(obj) -> str | None:
        return obj.completed_at.isoformat() if obj.completed_at else None
