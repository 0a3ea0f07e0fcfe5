"""The JSON API router: threads, messages, memories and search over HTTP.

Each operation parses the body (``threads.schemas``), makes one call into
``memory`` (``memory.client`` for spec methods, ``memory.services`` where the
client has none), and shapes the answer. Only the keys a client sent are
forwarded (``model_dump(exclude_unset=True)``), so an omitted key is ``NOTSET``
in ``memory`` and the spec's default applies. Domain errors become HTTP
statuses in ``oam_site.api``.
"""

from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory import selectors, services
from memory.client import AgentMemory, Thread
from memory.errors import NotFound
from memory.types import MemoryRecord, Message

from threads.schemas import (
    ErrorOut,
    MemoryIn,
    MemoryListQuery,
    MemoryOut,
    MemoryPatchIn,
    MessageIdsOut,
    MessageListQuery,
    MessageOut,
    MessagePatchIn,
    MessagesIn,
    SearchIn,
    SearchResultOut,
    ThreadIn,
    ThreadOut,
    ThreadPatchIn,
    ValidationErrorOut,
)

router = Router(tags=["threads"])

NOT_FOUND = {404: ErrorOut}
INVALID = {422: ValidationErrorOut}


def _memory() -> AgentMemory:
    """A client with the configured retention (cheap; built per request so settings stay live)."""
    return AgentMemory()


def _thread(thread_id: str) -> Thread:
    """The thread handle, or ``NotFound`` (404) naming ``thread_id``."""
    return _memory().get_thread(thread_id)


def _written_message(thread: Thread, message_id: str) -> Message:
    """Read back a message this request just wrote.

    ``Thread.get_message`` hides expired rows, and an update whose TTL is
    anchored on an old timestamp can expire the message at once; the write
    still happened, so the answer falls back to the stored row.
    """
    try:
        return thread.get_message(message_id)
    except NotFound:
        return selectors.message_stored(thread_id=thread.thread_id, message_id=message_id)


def _written_memory(thread: Thread, memory_id: str) -> MemoryRecord:
    """Read back a memory this request just wrote.

    ``Thread.get_memory`` sees only live memories whose ``thread_id`` is this
    thread's; ``add_memory`` may store another ``thread_id`` (or none), or a TTL
    anchored on an old timestamp that is already over. The write still
    happened, so the answer falls back to the stored row by id.
    """
    try:
        return thread.get_memory(memory_id)
    except NotFound:
        return selectors.memory_stored(memory_id=memory_id)


# --- threads ------------------------------------------------------------------------


@router.post("/threads", response={201: ThreadOut, 409: ErrorOut, **INVALID})
def thread_create(request: HttpRequest, payload: ThreadIn):
    """Create a thread; 409 when ``thread_id`` is taken."""
    return Status(201, _memory().create_thread(**payload.model_dump(exclude_unset=True)))


@router.get("/threads", response=list[ThreadOut])
@paginate
def thread_list(request: HttpRequest, user_id: str | None = None, agent_id: str | None = None):
    """List threads, oldest first, optionally for one user and/or agent.

    Ordered by creation time and id rather than by activity, so that walking
    the pages reaches every thread even while threads receive messages.
    """
    filters = {name: value for name, value in (("user_id", user_id), ("agent_id", agent_id)) if value is not None}
    return selectors.thread_list(**filters).order_by("created_at", "id")


@router.get("/threads/{thread_id}", response={200: ThreadOut, **NOT_FOUND})
def thread_get(request: HttpRequest, thread_id: str):
    """Return one thread."""
    return _thread(thread_id)


@router.patch("/threads/{thread_id}", response={200: ThreadOut, **NOT_FOUND, **INVALID})
def thread_update(request: HttpRequest, thread_id: str, payload: ThreadPatchIn):
    """Replace the thread's metadata (omitted: unchanged; null: cleared)."""
    return services.thread_update(thread_id=thread_id, **payload.model_dump(exclude_unset=True))


@router.delete("/threads/{thread_id}", response={204: None, **NOT_FOUND})
def thread_delete(request: HttpRequest, thread_id: str):
    """Delete the thread with its messages and memories."""
    if not _memory().delete_thread(thread_id):
        raise NotFound("thread_id", thread_id)
    return Status(204, None)


# --- messages -----------------------------------------------------------------------


@router.post(
    "/threads/{thread_id}/messages", response={201: MessageIdsOut, 409: ErrorOut, **NOT_FOUND, **INVALID}
)
def messages_add(request: HttpRequest, thread_id: str, payload: MessagesIn):
    """Append messages atomically: one bad message writes nothing. Returns the ids in input order."""
    data = payload.model_dump(exclude_unset=True)
    return Status(201, {"ids": _thread(thread_id).add_messages(data.pop("messages"), **data)})


@router.get("/threads/{thread_id}/messages", response={200: list[MessageOut], **NOT_FOUND, **INVALID})
def message_list(request: HttpRequest, thread_id: str, params: Query[MessageListQuery]):
    """Live messages in order. No ``start``/``end``: the most recent window; ``start`` alone: a window
    from it; ``end=-1``: all from ``start``."""
    return _thread(thread_id).get_messages(**params.model_dump(exclude_unset=True))


@router.get("/threads/{thread_id}/messages/{message_id}", response={200: MessageOut, **NOT_FOUND})
def message_get(request: HttpRequest, thread_id: str, message_id: str):
    """Return one live message of this thread (404 for another thread's)."""
    return _thread(thread_id).get_message(message_id)


@router.patch(
    "/threads/{thread_id}/messages/{message_id}", response={200: MessageOut, **NOT_FOUND, **INVALID}
)
def message_update(request: HttpRequest, thread_id: str, message_id: str, payload: MessagePatchIn):
    """Update content, metadata or expiry; omitted fields are kept. Returns the stored message."""
    thread = _thread(thread_id)
    thread.update_message(message_id, **payload.model_dump(exclude_unset=True))
    return _written_message(thread, message_id)


@router.delete("/threads/{thread_id}/messages/{message_id}", response={204: None, **NOT_FOUND})
def message_delete(request: HttpRequest, thread_id: str, message_id: str):
    """Delete a message of this exact thread; 404 when absent or another thread's."""
    if not _thread(thread_id).delete_message(message_id):
        raise NotFound("message_id", message_id)
    return Status(204, None)


# --- memories -----------------------------------------------------------------------


@router.post("/threads/{thread_id}/memories", response={201: MemoryOut, 409: ErrorOut, **NOT_FOUND, **INVALID})
def memory_add(request: HttpRequest, thread_id: str, payload: MemoryIn):
    """Store a manual memory and index it; 409 when ``memory_id`` is taken."""
    thread = _thread(thread_id)
    data = payload.model_dump(exclude_unset=True)
    return Status(201, _written_memory(thread, thread.add_memory(data.pop("content"), **data)))


@router.get("/threads/{thread_id}/memories", response={200: list[MemoryOut], **NOT_FOUND})
@paginate
def memory_list(request: HttpRequest, thread_id: str, filters: Query[MemoryListQuery]):
    """This thread's live memories, oldest first, optionally of one type."""
    return _thread(thread_id).list_memories(memory_type=filters.memory_type)


@router.get("/threads/{thread_id}/memories/{memory_id}", response={200: MemoryOut, **NOT_FOUND})
def memory_get(request: HttpRequest, thread_id: str, memory_id: str):
    """Return one live memory owned by this thread."""
    return _thread(thread_id).get_memory(memory_id)


@router.patch("/threads/{thread_id}/memories/{memory_id}", response={200: MemoryOut, **NOT_FOUND, **INVALID})
def memory_update(request: HttpRequest, thread_id: str, memory_id: str, payload: MemoryPatchIn):
    """Update a memory owned by this thread; omitted fields are kept. Returns the stored memory."""
    thread = _thread(thread_id)
    thread.update_memory(memory_id, **payload.model_dump(exclude_unset=True))
    return _written_memory(thread, memory_id)


@router.delete("/threads/{thread_id}/memories/{memory_id}", response={204: None, **NOT_FOUND})
def memory_delete(request: HttpRequest, thread_id: str, memory_id: str):
    """Delete a memory owned by this exact thread; 404 when absent or another thread's."""
    if not _thread(thread_id).delete_memory(memory_id):
        raise NotFound("memory_id", memory_id)
    return Status(204, None)


# --- search -------------------------------------------------------------------------


@router.post("/threads/{thread_id}/search", response={200: list[SearchResultOut], **NOT_FOUND, **INVALID})
def thread_search(request: HttpRequest, thread_id: str, payload: SearchIn):
    """Search from a thread: omitted scope fields inherit the thread's (exact user and agent,
    ``exact_thread_match=false``)."""
    data = payload.model_dump(exclude_unset=True)
    return _thread(thread_id).search(data.pop("query"), **data)


@router.post("/search", response={200: list[SearchResultOut], **INVALID})
def search(request: HttpRequest, payload: SearchIn):
    """Search across threads: an omitted id leaves its dimension open."""
    data = payload.model_dump(exclude_unset=True)
    return _memory().search(data.pop("query"), **data)
