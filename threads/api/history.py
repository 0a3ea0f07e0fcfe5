"""The history of a memory of a thread (``memory.records.history``), and undo: a version restored."""

from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate

from memory.core.aio import in_worker
from threads.api.common import INVALID, NOT_FOUND, READ, Pagination, thread_for, written_memory
from threads.auth import permits
from threads.schemas.history import MemoryRestoreOut, MemoryVersionOut

router = Router(tags=["history"])


@router.get("/threads/{thread_id}/memories/{memory_id}/history", auth=READ,
            response={200: list[MemoryVersionOut], **NOT_FOUND, **INVALID})
@paginate(Pagination)
async def memory_history(request: HttpRequest, thread_id: str, memory_id: str):
    """The history of a memory of this thread, oldest version first (``{"items": [...], "count": N}``, paged by
    ``limit``/``offset``; the newest 1000 versions at most): who changed it, when, before -> after and why
    (``Thread.get_memory_history``). Kept after the memory is deleted, until its user is erased; 404 when the
    thread has none for that id (or the key may not see it). A read key gets 404 for a memory awaiting review
    or rejected in review: its text is for reviewers (write keys; found by a review)."""
    reviewer = permits(request.auth.permission, "write")
    versions = await (await thread_for(request, thread_id)).get_memory_history_async(memory_id, unreviewed=reviewer)
    return [version.to_dict() for version in versions]


@router.post("/threads/{thread_id}/memories/{memory_id}/history/{version}/restore",
             response={200: MemoryRestoreOut, **NOT_FOUND, **INVALID})
async def memory_restore(request: HttpRequest, thread_id: str, memory_id: str, version: int):
    """Undo: restore a version of a memory of this thread as a new version (``Thread.restore_memory_version``);
    content, type, metadata, status and expiry come back and the memory is re-indexed. 404 for a missing
    memory or version."""
    thread = await thread_for(request, thread_id)
    number = await thread.restore_memory_version_async(memory_id, version)
    return {"version": number, "memory": await in_worker(written_memory, thread, memory_id)}
