"""Records of the whole project, whatever thread holds them (SDK ``OracleAgentMemory``'s client-level methods):
lists of messages, memories and standalone images; a memory updated or deleted by id."""

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory.core.aio import in_worker
from memory.core.errors import NotFound
from memory.records import listing, selectors
from threads.api.common import INVALID, NOT_FOUND, READ, Pagination, client_for, erased_since_header, list_filters
from threads.schemas.images import ImageOut
from threads.schemas.memories import MemoryOut, MemoryPatchIn
from threads.schemas.messages import MessageOut
from threads.schemas.records import ProjectImageListQuery, ProjectListQuery, ProjectMemoryListQuery

router = Router(tags=["records"])


@router.get("/messages", auth=READ, response={200: list[MessageOut], **INVALID})
@paginate(Pagination)
async def project_message_list(request: HttpRequest, params: Query[ProjectListQuery]):
    """Live messages of the key's project (its user's and agent's only, for a restricted key), oldest first,
    filtered by user, agent, thread and metadata (SDK ``list_messages``)."""
    qs = listing.message_queryset(tenant=client_for(request).tenant, limit=None, **list_filters(params))
    return selectors.Records(qs, selectors.message_dto)


@router.get("/memories", auth=READ, response={200: list[MemoryOut], **INVALID})
@paginate(Pagination)
async def project_memory_list(request: HttpRequest, response: HttpResponse, params: Query[ProjectMemoryListQuery]):
    """Live memory-like records of the key's project, oldest first, filtered by their own user, agent and
    thread and by metadata (SDK ``list_memories``), and by ``valid_at`` (issue #32: valid at that instant; 422
    naming it when it is not ISO-8601). ``as_of`` (issue #32, recorded time): as the store held them then
    (``listing.memories_as_of``; ``X-OAM-Erased-Since: true`` when the user or agent asked about was erased
    since)."""
    filters = list_filters(params)
    if filters.get("as_of") is not None:
        found = await in_worker(listing.memories_as_of, tenant=client_for(request).tenant, limit=None, **filters)
        return erased_since_header(request, response, found)
    filters.pop("as_of", None)
    qs = listing.memory_queryset(tenant=client_for(request).tenant, limit=None, **filters)
    return selectors.Records(qs, selectors.memory_dto)


@router.get("/images", auth=READ, response={200: list[ImageOut], **INVALID})
@paginate(Pagination)
async def project_image_list(request: HttpRequest, params: Query[ProjectImageListQuery]):
    """Live standalone images of the key's project, oldest first (SDK ``list_images``); bytes at each
    image's ``content_url``."""
    qs = listing.image_queryset(tenant=client_for(request).tenant, limit=None, **list_filters(params))
    return selectors.Records(qs, selectors.image_dto)


@router.patch("/memories/{memory_id}", response={200: MemoryOut, **NOT_FOUND, **INVALID})
async def project_memory_update(request: HttpRequest, memory_id: str, payload: MemoryPatchIn):
    """Update a memory-like record of the key's project by id, whatever thread owns it (SDK client-level
    ``update_memory``); omitted fields are kept. 404 when there is none."""
    memory = client_for(request)
    await in_worker(memory.update_memory, memory_id, **payload.model_dump(exclude_unset=True))
    return await in_worker(selectors.memory_stored, project=memory.project, memory_id=memory_id)


@router.delete("/memories/{memory_id}", response={204: None, **NOT_FOUND, **INVALID})
async def memory_delete_any(request: HttpRequest, memory_id: str):
    """Delete a memory-like record by id, whatever thread owns it or none (SDK: ``delete_memory``); 404 when there
    is none. The way to remove a memory stored with another ``thread_id`` or none."""
    if not await client_for(request).delete_memory_async(memory_id):
        raise NotFound("memory_id", memory_id)
    return Status(204, None)
