"""Bodies of ``threads/api/context.py``: a thread's summary and context card."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import StrictBool, StrictInt

from memory.models import MEMORY_TYPES
from threads.schemas.common import InSchema
from threads.schemas.memories import VALID_AT
from threads.schemas.messages import MessageOut
from threads.schemas.search import SearchResultOut

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


class ContextCardIn(InSchema):
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
    valid_at: str | None = Field(None, description=VALID_AT)
    as_of: str | None = Field(
        None, description="Replay (issue #32): an ISO-8601 instant (no zone: UTC); answers the card this service "
        "served for the thread with the same parameters at the latest time at or before it, exactly as it was "
        "(never re-rendered); 404 naming as_of when none was served then or it was erased since."
    )


class ContextCardOut(Schema):
    """A context card: its rendered text and its parts."""

    content: str
    formatted_content: str
    summary: str
    topics: list[str]
    relevant_results: list[SearchResultOut]
    recent_messages: list[MessageOut]


class ContextCardReplayOut(ContextCardOut):
    """A replayed context card (``as_of``, issue #32): the card as served, and when it was served (the start of the
    unchanged run of identical cards its log row stands for)."""

    served_at: datetime

    @staticmethod
    def resolve_topics(obj) -> list[str]:
        return list(obj.topics or [])

    @staticmethod
    def resolve_relevant_results(obj) -> list:
        return list(obj.relevant_results or [])

    @staticmethod
    def resolve_recent_messages(obj) -> list:
        return list(obj.recent_messages or [])
