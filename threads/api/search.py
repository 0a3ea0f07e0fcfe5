"""Search: from a thread (its scope by default) or across one user's threads."""

from django.http import HttpRequest
from ninja import Router

from memory.core.types import SearchScope
from threads.api.common import INVALID, NOT_FOUND, READ, client_for, thread_for
from threads.schemas.search import SearchIn, SearchResultOut

router = Router(tags=["search"])


@router.post("/threads/{thread_id}/search", auth=READ, response={200: list[SearchResultOut], **NOT_FOUND, **INVALID})
async def thread_search(request: HttpRequest, thread_id: str, payload: SearchIn):
    """Search from a thread: omitted scope fields inherit the thread's (exact user and agent,
    ``exact_thread_match=false``)."""
    data = _search_arguments(payload)
    return await (await thread_for(request, thread_id)).search_async(data.pop("query"), **data)


@router.post("/search", auth=READ, response={200: list[SearchResultOut], **INVALID})
async def search(request: HttpRequest, payload: SearchIn):
    """Search one user's records across threads (SDK ``OracleAgentMemory.search``): ``user_id`` is required and
    exact (422 otherwise); an omitted agent or thread is open."""
    data = _search_arguments(payload)
    return await client_for(request).search_async(data.pop("query"), **data)


def _search_arguments(payload: SearchIn) -> dict:
    """The search's arguments as given; ``scope`` becomes a ``SearchScope`` of the fields it sets (422 when it
    comes with explicit scope fields: ``memory.search.request.resolve_scope``)."""
    data = payload.model_dump(exclude_unset=True)
    if data.get("scope") is not None:
        data["scope"] = SearchScope(**data["scope"])
    return data
