"""The review queue (``memory.records.review_rules``): memories awaiting review listed, approved (as they are or
edited) or rejected; and memories flagged because one they were derived from changed (issue #32,
``memory.links.dependants``), listed and cleared."""

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema
from ninja.pagination import paginate

from memory.client import AgentMemory
from memory.core.aio import in_worker
from memory.core.errors import MAX_SQL_COUNT
from memory.records import derivations, review_rules, selectors
from memory.services.review import (
    ReviewDecision,
    dependant_clear,
    memory_approve,
    memory_edit_approve,
    memory_reject,
)
from threads.api.common import INVALID, NOT_FOUND, Pagination, client_for
from threads.schemas.common import ErrorOut
from threads.schemas.memories import MemoryOut
from threads.schemas.review import (
    DependantClearIn,
    ReviewApproveIn,
    ReviewDecisionOut,
    ReviewItemOut,
    ReviewListQuery,
    ReviewRejectIn,
)

router = Router(tags=["review"])


class ReviewPagination(Pagination):
    """``Pagination`` with at most ``memory.records.review_rules.MAX_PAGE`` (50) items a page (default 20): each
    item costs one ranked vector query (its similar memories). Over it: 422 naming ``limit``."""

    class Input(Schema):
        limit: int = Field(20, ge=1, le=review_rules.MAX_PAGE)
        offset: int = Field(0, ge=0, le=MAX_SQL_COUNT)


def _decision(memory: AgentMemory, decision: ReviewDecision) -> dict:
    """A ``ReviewDecisionOut`` body (read in the worker: the approved memory as stored)."""
    stored = (selectors.memory_stored(project=memory.project, memory_id=decision.memory_id)
              if decision.action != "reject" else None)
    return {"memory_id": decision.memory_id, "action": decision.action, "version": decision.version,
            "relation_id": decision.relation_id, "memory": stored}


@router.get("/review/memories", response={200: list[ReviewItemOut], **INVALID})
@paginate(ReviewPagination)
async def review_list(request: HttpRequest, params: Query[ReviewListQuery]):
    """The memories of the key's project awaiting review (its user's and agent's only, for a restricted key),
    the longest waiting first (``{"items": [...], "count": N}``, ``limit`` at most 50), each with the
    injection scan's flags, the stored memories most similar to it and the relation its approval makes
    (``memory.records.review_rules``). A write key: pending memories may carry what an attacker planted."""
    tenant = client_for(request).tenant
    return review_rules.review_records(project=tenant.project, restrict=tenant.row_filter(),
                                       **params.model_dump(exclude_unset=True, exclude_none=True))


@router.post("/review/memories/{memory_id}/approve", response={200: ReviewDecisionOut, 409: ErrorOut, **NOT_FOUND,
                                                                **INVALID})
async def review_approve(request: HttpRequest, memory_id: str, payload: ReviewApproveIn):
    """Approve a memory awaiting review (``services.memory_approve``), or with ``content``/``memory_type``
    edit it first (``services.memory_edit_approve``, re-embedded): one ``approve`` history entry naming this
    key, ``reason`` as its reason; from now on searches and context cards return it, and the relation
    extraction decided for it is made. 404 when there is none (or the key may not see it), 409 when it does
    not await review."""
    memory = client_for(request)
    data = payload.model_dump(exclude_unset=True)
    scope = {"project": memory.project, "memory_id": memory_id, "allows": memory.tenant.allows}
    if "content" in data or "memory_type" in data:
        decide = memory_edit_approve
    else:
        decide = memory_approve
    decision = await in_worker(decide, **scope, **data)
    return await in_worker(_decision, memory, decision)


@router.post("/review/memories/{memory_id}/reject", response={200: ReviewDecisionOut, 409: ErrorOut, **NOT_FOUND,
                                                               **INVALID})
async def review_reject(request: HttpRequest, memory_id: str, payload: ReviewRejectIn):
    """Reject a memory awaiting review (``services.memory_reject``): it is deleted, with one ``reject`` history
    entry naming this key (``reason`` as its reason) that stays until its user is erased. 404 when there is
    none (or the key may not see it), 409 when it does not await review."""
    memory = client_for(request)
    decision = await in_worker(memory_reject, project=memory.project, memory_id=memory_id,
                               allows=memory.tenant.allows, **payload.model_dump(exclude_unset=True))
    return await in_worker(_decision, memory, decision)


@router.get("/review/dependants", response={200: list[MemoryOut], **INVALID})
@paginate(Pagination)
async def review_dependant_list(request: HttpRequest, params: Query[ReviewListQuery]):
    """The memories of the key's project flagged because a memory they were derived from was superseded,
    invalidated, edited or deleted (issue #32; its user's and agent's only, for a restricted key), the most
    recently flagged first, each with its ``review_cause`` (``memory.records.derivations.flagged_queryset``). A
    write key, as the review queue."""
    tenant = client_for(request).tenant
    qs = derivations.flagged_queryset(project=tenant.project, restrict=tenant.row_filter(),
                                      **params.model_dump(exclude_unset=True, exclude_none=True))
    return selectors.Records(qs, selectors.memory_dto)


@router.post("/review/dependants/{memory_id}/clear", response={200: ReviewDecisionOut, 409: ErrorOut, **NOT_FOUND,
                                                                **INVALID})
async def review_dependant_clear(request: HttpRequest, memory_id: str, payload: DependantClearIn):
    """Clear a flagged memory's review flag (``services.dependant_clear``): ``needs_review`` false, one ``unflag``
    history entry naming this key (``reason`` as its reason). 404 when there is none (or the key may not see
    it), 409 when it is not flagged."""
    memory = client_for(request)
    decision = await in_worker(dependant_clear, project=memory.project, memory_id=memory_id,
                               allows=memory.tenant.allows, **payload.model_dump(exclude_unset=True))
    return await in_worker(_decision, memory, decision)
