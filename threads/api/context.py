"""What an agent pastes into a prompt: a thread's summary and its context card."""

from django.http import HttpRequest, JsonResponse
from ninja import Query, Router

from threads.api.common import INVALID, NOT_FOUND, READ, thread_for
from threads.schemas.context import ContextCardIn, ContextCardOut, ContextCardReplayOut, SummaryOut, SummaryQuery

router = Router(tags=["context"])


@router.get("/threads/{thread_id}/summary", auth=READ, response={200: SummaryOut, **NOT_FOUND, **INVALID})
async def thread_summary(request: HttpRequest, thread_id: str, params: Query[SummaryQuery]):
    """Summary of the thread (or of all but its last ``except_last`` messages): the durable LLM summary,
    refreshed when behind, or without an LLM a transcript of the latest messages (at most 4000 characters)."""
    return await (await thread_for(request, thread_id)).get_summary_async(**params.model_dump(exclude_unset=True))


@router.post("/threads/{thread_id}/context-card", auth=READ, response={200: ContextCardOut, **NOT_FOUND, **INVALID})
async def thread_context_card(request: HttpRequest, thread_id: str, payload: ContextCardIn):
    """Build a context card: summary, topics, relevant records (the thread's default scope,
    ``exact_thread_match=false``) and recent messages, with its rendered XML-like ``content``. With ``as_of``
    (issue #32): the card served for this thread with the same parameters at the latest time at or before it,
    exactly as served, with ``served_at`` added; 404 naming ``as_of`` when none was (never a re-render)."""
    thread = await thread_for(request, thread_id)
    card = await thread.get_context_card_async(**payload.model_dump(exclude_unset=True))
    if payload.as_of is None:
        return card
    # A replay (issue #32) adds when the card was served: the present card's body stays as it was.
    return JsonResponse(ContextCardReplayOut.from_orm(card).model_dump(mode="json"))
