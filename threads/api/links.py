"""A thread's relations between memory-like records: create, list, update, delete by id or by endpoints."""

from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory.core.aio import in_worker
from memory.core.errors import NotFound
from threads.api.common import INVALID, NOT_FOUND, READ, Pagination, thread_for
from threads.schemas.common import ErrorOut
from threads.schemas.links import LinkIn, LinkListQuery, LinkPatchIn, LinkTupleQuery, RelationOut

router = Router(tags=["links"])


@router.post("/threads/{thread_id}/links", response={201: RelationOut, 409: ErrorOut, **NOT_FOUND, **INVALID})
async def link_create(request: HttpRequest, thread_id: str, payload: LinkIn):
    """Relate two memory-like records of this thread (spec: link_records). 422 for a self-link or an
    endpoint that is not this thread's; 409 when the pair is already related (either way) or the id is taken."""
    thread = await thread_for(request, thread_id)
    relation_id = await thread.link_records_async(**payload.model_dump(exclude_unset=True))
    return Status(201, await thread.get_record_link_async(relation_id))


@router.get("/threads/{thread_id}/links", auth=READ, response={200: list[RelationOut], **NOT_FOUND, **INVALID})
@paginate(Pagination)
async def link_list(request: HttpRequest, thread_id: str, filters: Query[LinkListQuery]):
    """This thread's relations, oldest first; ``record_id`` keeps those touching that record. A user-restricted
    key does not see relations to another user's or agent's record in the thread (``memory.links.writes.visible``)."""
    thread = await thread_for(request, thread_id)
    return await in_worker(thread.record_links, record_id=filters.record_id)


@router.patch("/threads/{thread_id}/links/{relation_id}", response={200: RelationOut, **NOT_FOUND, **INVALID})
async def link_update(request: HttpRequest, thread_id: str, relation_id: str, payload: LinkPatchIn):
    """Update a relation (spec: update_record_link); omitted fields are kept. Returns the stored relation."""
    thread = await thread_for(request, thread_id)
    if not await thread.update_record_link_async(relation_id, **payload.model_dump(exclude_unset=True)):
        raise NotFound("relation_id", relation_id)
    return await thread.get_record_link_async(relation_id)


@router.delete("/threads/{thread_id}/links/{relation_id}", response={204: None, **NOT_FOUND, **INVALID})
async def link_delete(request: HttpRequest, thread_id: str, relation_id: str):
    """Delete a relation of this thread by id; 404 when there is none."""
    if not await (await thread_for(request, thread_id)).delete_record_link_async(relation_id=relation_id):
        raise NotFound("relation_id", relation_id)
    return Status(204, None)


@router.delete("/threads/{thread_id}/links", response={204: None, **NOT_FOUND, **INVALID})
async def link_delete_by_endpoints(request: HttpRequest, thread_id: str, endpoints: Query[LinkTupleQuery]):
    """Delete the relation with this complete endpoint tuple (query parameters, stored orientation)."""
    if not await (await thread_for(request, thread_id)).delete_record_link_async(**endpoints.model_dump()):
        raise NotFound("relation_id", f"{endpoints.source_record_id} {endpoints.relation_type} "
                                      f"{endpoints.target_record_id}")
    return Status(204, None)
