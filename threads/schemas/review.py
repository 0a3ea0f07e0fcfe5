"""Bodies of ``threads/api/review.py``: the review queue's filters and items, and a reviewer's decision."""

from __future__ import annotations

from typing import Literal

from ninja import Field, Schema

from threads.schemas.common import InSchema, MemoryType
from threads.schemas.memories import MemoryOut


class ReviewListQuery(Schema):
    """Filters of the review queue: one thread (its public id), one memory type."""

    thread_id: str = Field(None, description="Only memories of this thread.")
    memory_type: MemoryType = Field(None, description="Only memories of this type.")


class ReviewFlagOut(Schema):
    """One finding of the injection scan (``memory.records.review_rules.scan``): ``kind`` is one of override, secrecy,
    prompt_markup, url, tool_call, secret, hidden_text; ``evidence`` the text that raised it (80 characters)."""

    kind: str
    label: str
    evidence: str


class ReviewSimilarOut(Schema):
    """A stored memory close to the pending one (same project, user and agent; any thread): a duplicate or
    contradiction candidate. ``distance``: cosine distance (0: same direction); ``pending``: it waits too."""

    memory: MemoryOut
    distance: float
    pending: bool


class ReviewRelationOut(Schema):
    """The relation extraction decided for the memory, made when it is approved (``relation_type`` from it
    to ``memory_id``, whose ``content`` is null when that memory is gone)."""

    relation_type: str
    memory_id: str
    content: str | None


class ReviewItemOut(Schema):
    """A memory awaiting review: the record, the injection scan's flags, the most similar stored memories,
    the relation its approval makes, and how long it has waited (seconds)."""

    memory: MemoryOut
    flags: list[ReviewFlagOut]
    similar: list[ReviewSimilarOut]
    relation_on_approval: ReviewRelationOut | None
    waiting_seconds: float


class ReviewApproveIn(InSchema):
    """Approve a memory awaiting review, as it is, or edited first (``content`` and/or ``memory_type``: the
    edited memory is re-embedded). ``reason`` is kept in the history entry."""

    content: str = Field(None, description="Edited content (omit to approve it as it is).")
    memory_type: MemoryType = Field(None, description="Edited type (omit to keep it).")
    reason: str | None = Field(None, max_length=400, description="The reviewer's note (history entry's reason).")


class ReviewRejectIn(InSchema):
    """Reject (delete) a memory awaiting review; ``reason`` is kept in the history entry."""

    reason: str | None = Field(None, max_length=400, description="Why (the history entry's reason).")


class DependantClearIn(InSchema):
    """Clear the review flag of a memory flagged because a memory it was derived from changed (issue #32);
    ``reason`` is kept in the history entry."""

    reason: str | None = Field(None, max_length=400, description="The reviewer's note (history entry's reason).")


class ReviewDecisionOut(Schema):
    """What a decision did: the memory (public id), ``action`` (approve, reject, or clear: a dependant's flag),
    the history version it wrote, the relation approval made (null: none), and the memory as stored now (null
    after a rejection)."""

    memory_id: str
    action: Literal["approve", "reject", "clear"]
    version: int
    relation_id: str | None
    memory: MemoryOut | None
