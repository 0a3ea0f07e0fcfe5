"""A thread's memories: store a manual memory, list, read, update, delete."""

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory.core.aio import in_worker
from memory.core.errors import NotFound
from threads.api.common import (
    INVALID,
    NOT_FOUND,
    READ,
    Pagination,
    erased_since_header,
    refuse_reserved_id,
    thread_for,
    written_memory,
)
from threads.schemas.common import ErrorOut
from threads.schemas.memories import MemoryIn, MemoryListQuery, MemoryOut, MemoryPatchIn

router = Router(tags=["memories"])


@router.post("/threads/{thread_id}/memories", response={201: MemoryOut, 409: ErrorOut, **NOT_FOUND, **INVALID})
async def memory_add(request: HttpRequest, thread_id: str, payload: MemoryIn):
    """Store a manual memory and index it; 409 when ``memory_id`` is taken."""
    thread = await thread_for(request, thread_id)
    data = payload.model_dump(exclude_unset=True)
    refuse_reserved_id(data.get("memory_id"), "memory_id")
    memory_id = await thread.add_memory_async(data.pop("content"), **data)
    return Status(201, await in_worker(written_memory, thread, memory_id))


@router.get("/threads/{thread_id}/memories", auth=READ, response={200: list[MemoryOut], **NOT_FOUND, **INVALID})
@paginate(Pagination)
async def memory_list(request: HttpRequest, response: HttpResponse, thread_id: str, filters: Query[MemoryListQuery]):
    """This thread's live memories, oldest first, optionally of one type and valid at ``valid_at`` (issue #32); with
    ``as_of`` (issue #32, recorded time) as the store held them then (422 naming it for a bad or future instant;
    ``X-OAM-Erased-Since: true`` when the thread's user or agent was erased since)."""
    thread = await thread_for(request, thread_id)
    records = await in_worker(thread.memory_records, **filters.model_dump(exclude_unset=True))
    return erased_since_header(request, response, records)


@router.get("/threads/{thread_id}/memories/{memory_id}", auth=READ, response={200: MemoryOut, **NOT_FOUND})
async def memory_get(request: HttpRequest, thread_id: str, memory_id: str, as_of: str = None):
    """Return one live memory owned by this thread; with ``as_of`` (issue #32, recorded time) as it was then: 404
    when it did not exist yet or had been deleted by then, 422 naming ``as_of`` for a bad or future instant."""
    arguments = {} if as_of is None else {"as_of": as_of}
    return await (await thread_for(request, thread_id)).get_memory_async(memory_id, **arguments)


@router.patch("/threads/{thread_id}/memories/{memory_id}", response={200: MemoryOut, **NOT_FOUND, **INVALID})
async def memory_update(request: HttpRequest, thread_id: str, memory_id: str, payload: MemoryPatchIn):
    """Update a memory owned by this thread; omitted fields are kept. Returns the stored memory."""
    thread = await thread_for(request, thread_id)
    await thread.update_memory_async(memory_id, **payload.model_dump(exclude_unset=True))
    return await in_worker(written_memory, thread, memory_id)


@router.delete("/threads/{thread_id}/memories/{memory_id}", response={204: None, **NOT_FOUND, **INVALID})
async def memory_delete(request: HttpRequest, thread_id: str, memory_id: str):
    """Delete a memory owned by this exact thread; 404 when absent or another thread's."""
    if not await (await thread_for(request, thread_id)).delete_memory_async(memory_id):
        raise NotFound("memory_id", memory_id)
    return Status(204, None)
