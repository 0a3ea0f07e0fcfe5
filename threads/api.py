"""The JSON API router: threads, messages, memories, relations, search, summaries and context cards over HTTP.

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

from memory import extraction, links, selectors, services
from memory.client import AgentMemory, Thread
from memory.errors import NotFound
from memory.extraction_config import MemoryExtractionConfig
from memory.types import MemoryRecord, Message

from threads.schemas import (
    ContextCardIn,
    ContextCardOut,
    ErrorOut,
    ExtractionStateOut,
    LinkIn,
    LinkListQuery,
    LinkPatchIn,
    LinkTupleQuery,
    MemoryIn,
    MemoryListQuery,
    MemoryOut,
    MemoryPatchIn,
    MessageIdsOut,
    MessageListQuery,
    MessageOut,
    MessagePatchIn,
    MessagesIn,
    RelationOut,
    SearchIn,
    SearchResultOut,
    SummaryOut,
    SummaryQuery,
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
    """Create a thread; 409 when ``thread_id`` is taken. ``memory_extraction_config`` is stored with it."""
    data = payload.model_dump(exclude_unset=True)
    config = data.pop("memory_extraction_config", None)
    if config is not None:
        data["memory_extraction_config"] = MemoryExtractionConfig.from_dict(config)
    return Status(201, _memory().create_thread(**data))


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


# --- relations ----------------------------------------------------------------------


@router.post("/threads/{thread_id}/links", response={201: RelationOut, 409: ErrorOut, **NOT_FOUND, **INVALID})
def link_create(request: HttpRequest, thread_id: str, payload: LinkIn):
    """Relate two memory-like records of this thread (spec: link_records). 422 for a self-link or an
    endpoint that is not this thread's; 409 when the pair is already related (either way) or the id is taken."""
    relation_id = _thread(thread_id).link_records(**payload.model_dump(exclude_unset=True))
    return Status(201, links.link_get(thread=selectors.thread_get(thread_id), relation_id=relation_id))


@router.get("/threads/{thread_id}/links", response={200: list[RelationOut], **NOT_FOUND})
def link_list(request: HttpRequest, thread_id: str, filters: Query[LinkListQuery]):
    """This thread's relations, oldest first; ``record_id`` keeps those touching that record."""
    return links.link_list(thread=selectors.thread_get(thread_id), record_id=filters.record_id)


@router.patch("/threads/{thread_id}/links/{relation_id}", response={200: RelationOut, **NOT_FOUND, **INVALID})
def link_update(request: HttpRequest, thread_id: str, relation_id: str, payload: LinkPatchIn):
    """Update a relation (spec: update_record_link); omitted fields are kept. Returns the stored relation."""
    if not _thread(thread_id).update_record_link(relation_id, **payload.model_dump(exclude_unset=True)):
        raise NotFound("relation_id", relation_id)
    return links.link_get(thread=selectors.thread_get(thread_id), relation_id=relation_id)


@router.delete("/threads/{thread_id}/links/{relation_id}", response={204: None, **NOT_FOUND})
def link_delete(request: HttpRequest, thread_id: str, relation_id: str):
    """Delete a relation of this thread by id; 404 when there is none."""
    if not _thread(thread_id).delete_record_link(relation_id=relation_id):
        raise NotFound("relation_id", relation_id)
    return Status(204, None)


@router.delete("/threads/{thread_id}/links", response={204: None, **NOT_FOUND, **INVALID})
def link_delete_by_endpoints(request: HttpRequest, thread_id: str, endpoints: Query[LinkTupleQuery]):
    """Delete the relation with this complete endpoint tuple (query parameters, stored orientation)."""
    if not _thread(thread_id).delete_record_link(**endpoints.model_dump()):
        raise NotFound("relation_id", f"{endpoints.source_record_id} {endpoints.relation_type} "
                                      f"{endpoints.target_record_id}")
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


# --- summaries and context cards ----------------------------------------------------


@router.get("/threads/{thread_id}/summary", response={200: SummaryOut, **NOT_FOUND, **INVALID})
def thread_summary(request: HttpRequest, thread_id: str, params: Query[SummaryQuery]):
    """Summary of the thread (or of all but its last ``except_last`` messages): the durable LLM summary,
    refreshed when behind, or without an LLM a transcript of the latest messages (at most 4000 characters)."""
    return _thread(thread_id).get_summary(**params.model_dump(exclude_unset=True))


@router.post("/threads/{thread_id}/context-card", response={200: ContextCardOut, **NOT_FOUND, **INVALID})
def thread_context_card(request: HttpRequest, thread_id: str, payload: ContextCardIn):
    """Build a context card: summary, topics, relevant records (the thread's default scope,
    ``exact_thread_match=false``) and recent messages, with its rendered XML-like ``content``."""
    return _thread(thread_id).get_context_card(**payload.model_dump(exclude_unset=True))


# --- extraction ----------------------------------------------------------------------


@router.get("/threads/{thread_id}/extraction", response={200: ExtractionStateOut, **NOT_FOUND})
def thread_extraction(request: HttpRequest, thread_id: str):
    """The thread's extraction state: watermark, last message seq, pending messages and jobs, the last
    job (counts, seconds, error) and the stored config. Live progress: ``/ws/threads/{thread_id}/extraction/``."""
    return extraction.extraction_state(thread_id=thread_id)
