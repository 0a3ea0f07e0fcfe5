"""Threads: create, list, read, update (metadata, extraction settings, image limits) and delete."""

from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory.core.errors import NotFound
from memory.extraction.config import MemoryExtractionConfig
from memory.records import selectors
from memory.records.image_rules import ImageInputLimitConfig
from threads.api.common import INVALID, NOT_FOUND, READ, Pagination, client_for, refuse_reserved_id, thread_for
from threads.schemas.common import ErrorOut
from threads.schemas.threads import ThreadIn, ThreadOut, ThreadPatchIn

router = Router(tags=["threads"])


@router.post("/threads", response={201: ThreadOut, 409: ErrorOut, **INVALID})
async def thread_create(request: HttpRequest, payload: ThreadIn):
    """Create a thread; 409 when ``thread_id`` is taken. ``memory_extraction_config`` and
    ``image_input_limit_config`` (each laid over the server's defaults field by field) are stored with it."""
    data = payload.model_dump(exclude_unset=True)
    refuse_reserved_id(data.get("thread_id"), "thread_id")
    config = data.pop("memory_extraction_config", None)
    if config is not None:
        data["memory_extraction_config"] = MemoryExtractionConfig.from_dict(config)
    limits = data.pop("image_input_limit_config", None)
    if limits is not None:
        data["image_input_limit_config"] = ImageInputLimitConfig.from_dict(limits)
    return Status(201, await client_for(request).create_thread_async(**data))


@router.get("/threads", auth=READ, response={200: list[ThreadOut], **INVALID})
@paginate(Pagination)
async def thread_list(request: HttpRequest, user_id: str | None = None, agent_id: str | None = None):
    """List threads, oldest first, optionally for one user and/or agent.

    Ordered by creation time and id rather than by activity, so that walking
    the pages reaches every thread even while threads receive messages.
    """
    filters = {name: value for name, value in (("user_id", user_id), ("agent_id", agent_id)) if value is not None}
    return selectors.thread_list(tenant=client_for(request).tenant, **filters).order_by("created_at", "id")


@router.get("/threads/{thread_id}", auth=READ, response={200: ThreadOut, **NOT_FOUND})
async def thread_get(request: HttpRequest, thread_id: str):
    """Return one thread."""
    return await thread_for(request, thread_id)


@router.patch("/threads/{thread_id}", response={200: ThreadOut, **NOT_FOUND, **INVALID})
async def thread_update(request: HttpRequest, thread_id: str, payload: ThreadPatchIn):
    """Replace the thread's metadata (omitted: unchanged; null: cleared) and store extraction settings and
    image limits, each laid over the stored ones field by field (SDK ``update_thread``)."""
    data = payload.model_dump(exclude_unset=True)
    if data.get("memory_extraction_config") is not None:
        data["memory_extraction_config"] = MemoryExtractionConfig.from_dict(data["memory_extraction_config"])
    if data.get("image_input_limit_config") is not None:
        data["image_input_limit_config"] = ImageInputLimitConfig.from_dict(data["image_input_limit_config"])
    return await client_for(request).update_thread_async(thread_id, **data)


@router.delete("/threads/{thread_id}", response={204: None, **NOT_FOUND, **INVALID})
async def thread_delete(request: HttpRequest, thread_id: str):
    """Delete the thread with its messages and memories."""
    if not await client_for(request).delete_thread_async(thread_id):
        raise NotFound("thread_id", thread_id)
    return Status(204, None)
