"""Search: from a thread (its scope by default) or across one user's threads."""

from django.http import HttpRequest, HttpResponse
from ninja import Router

from memory.core.types import SearchScope
from threads.api.common import INVALID, NOT_FOUND, READ, client_for, erased_since_header, thread_for
from threads.schemas.search import SearchIn, SearchResultOut

router = Router(tags=["search"])


@router.post("/threads/{thread_id}/search", auth=READ, response={200: list[SearchResultOut], **NOT_FOUND, **INVALID})
async def thread_search(request: HttpRequest, response: HttpResponse, thread_id: str, payload: SearchIn):
    """Search from a thread: omitted scope fields inherit the thread's (exact user and agent,
    ``exact_thread_match=false``). ``as_of`` (issue #32, recorded time): ranks what the store held then
    (``memory.search.as_of``; ``X-OAM-Erased-Since: true`` when the scope's user or agent was erased since)."""
    data = _search_arguments(payload)
    found = await (await thread_for(request, thread_id)).search_async(data.pop("query"), **data)
    return erased_since_header(request, response, found)


@router.post("/search", auth=READ, response={200: list[SearchResultOut], **INVALID})
async def search(request: HttpRequest, response: HttpResponse, payload: SearchIn):
    """Search one user's records across threads (SDK ``OracleAgentMemory.search``): ``user_id`` is required and
    exact (422 otherwise); an omitted agent or thread is open. ``as_of`` as for a thread's search."""
    data = _search_arguments(payload)
    return erased_since_header(request, response, await client_for(request).search_async(data.pop("query"), **data))


def _search_arguments(payload: SearchIn) -> dict:
    """The search's arguments as given; ``scope`` becomes a ``SearchScope`` of the fields it sets (422 when it
    comes with explicit scope fields: ``memory.search.request.resolve_scope``)."""
    data = payload.model_dump(exclude_unset=True)
    if data.get("scope") is not None:
        data["scope"] = SearchScope(**data["scope"])
    return data
