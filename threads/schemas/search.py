"""Bodies of ``threads/api/search.py``: search arguments and their scope, a hit and the memories linked to it."""

from __future__ import annotations

from typing import Any, Literal, Union

from ninja import Field, Schema
from pydantic import StrictBool, StrictInt

from memory.models import RECORD_TYPES
from threads.schemas.common import InSchema
from threads.schemas.images import ImageOut
from threads.schemas.memories import AS_OF, VALID_AT, MemoryOut
from threads.schemas.messages import MessageOut

RecordType = Literal[RECORD_TYPES]  # type: ignore[valid-type]


class SearchScopeIn(InSchema):
    """A prebuilt search scope (SDK: SearchScope): the same fields and rules as the explicit ones."""

    user_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    agent_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    thread_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    exact_user_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_agent_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_thread_match: StrictBool = Field(None, description="Omit to keep the default.")


class SearchIn(InSchema):
    """Search arguments (spec: search). Omitted scope fields keep the caller's defaults (SDK 26.8.0).

    On a thread: exact user and agent, this thread's id, ``exact_thread_match=false``.
    On ``/api/search``: ``user_id`` is required (null: records with no user) and matched exactly; an
    omitted agent or thread is open; a given agent is exact unless ``exact_agent_match=false``, a given
    thread only with ``exact_thread_match=true``.
    """

    query: str
    user_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    agent_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    thread_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    exact_user_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_agent_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_thread_match: StrictBool = Field(None, description="Omit to keep the default.")
    max_results: StrictInt = Field(None, ge=1, description="1 to 1000; omit for the default (10).")
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
    scope: SearchScopeIn | None = Field(
        None, description="A prebuilt scope (SDK SearchScope); give it or the explicit scope fields, not both."
    )
    valid_at: str | None = Field(None, description=VALID_AT)
    as_of: str | None = Field(None, description=AS_OF + " Ranked by vector; not with metadata_filter or num_hops.")


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
    record: Union[MessageOut, MemoryOut, ImageOut]
    linked: list[LinkedRecordOut] = []
