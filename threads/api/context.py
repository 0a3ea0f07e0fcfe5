"""What an agent pastes into a prompt: a thread's summary and its context card."""

from django.http import HttpRequest
from ninja import Query, Router

from threads.api.common import INVALID, NOT_FOUND, READ, thread_for
from threads.schemas.context import ContextCardIn, ContextCardOut, SummaryOut, SummaryQuery

router = Router(tags=["context"])


@router.get("/threads/{thread_id}/summary", auth=READ, response={200: SummaryOut, **NOT_FOUND, **INVALID})
async def thread_summary(request: HttpRequest, thread_id: str, params: Query[SummaryQuery]):
    """Summary of the thread (or of all but its last ``except_last`` messages): the durable LLM summary,
    refreshed when behind, or without an LLM a transcript of the latest messages (at most 4000 characters)."""
    return await (await thread_for(request, thread_id)).get_summary_async(**params.model_dump(exclude_unset=True))


@router.post("/threads/{thread_id}/context-card", auth=READ, response={200: ContextCardOut, **NOT_FOUND, **INVALID})
async def thread_context_card(request: HttpRequest, thread_id: str, payload: ContextCardIn):
    """Build a context card: summary, topics, relevant records (the thread's default scope,
    ``exact_thread_match=false``) and recent messages, with its rendered XML-like ``content``."""
    thread = await thread_for(request, thread_id)
    return await thread.get_context_card_async(**payload.model_dump(exclude_unset=True))
