"""A thread's messages: append a batch, list (pages or ``get_messages`` windows), read, update, delete.

A delete answers the memories that followed their source (``OAM-Derived-Memories``, ``DERIVED_HEADER``).
"""

import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router
from ninja.responses import Status

from memory.client import Thread
from memory.core.aio import in_worker
from memory.core.errors import MAX_SQL_COUNT, InvalidArgument, NotFound
from memory.core.types import Message
from memory.records import provenance, selectors
from threads.api.common import INVALID, NOT_FOUND, PER_PAGE, READ, thread_for
from threads.schemas.common import ErrorOut
from threads.schemas.messages import (
    MessageGetQuery,
    MessageIdsOut,
    MessageListQuery,
    MessageOut,
    MessagePatchIn,
    MessagesIn,
    PagedMessageOut,
)

router = Router(tags=["messages"])


#: Header of a message delete that names the memories following their source (``memory.records.provenance``).
DERIVED_HEADER = "OAM-Derived-Memories"


def _written_message(thread: Thread, message_id: str) -> Message:
    """Read back a message this request just wrote.

    ``Thread.get_message`` hides expired rows, and an update whose TTL is
    anchored on an old timestamp can expire the message at once; the write
    still happened, so the answer falls back to the stored row.
    """
    try:
        return thread.get_message(message_id)
    except NotFound:
        return selectors.message_stored(thread=thread.row, message_id=message_id)


@router.post(
    "/threads/{thread_id}/messages", response={201: MessageIdsOut, 409: ErrorOut, **NOT_FOUND, **INVALID}
)
async def messages_add(request: HttpRequest, thread_id: str, payload: MessagesIn):
    """Append messages atomically: one bad message writes nothing. Returns the ids in input order."""
    data = payload.model_dump(exclude_unset=True)
    thread = await thread_for(request, thread_id)
    return Status(201, {"ids": await thread.add_messages_async(data.pop("messages"), **data)})


@router.get("/threads/{thread_id}/messages", auth=READ, response={200: PagedMessageOut, **NOT_FOUND, **INVALID})
async def message_list(request: HttpRequest, thread_id: str, params: Query[MessageListQuery]):
    """Live messages in order, as ``{"items": [...], "count": N}`` (``count``: all live messages).

    ``limit``/``offset`` page them like every list here (``offset`` alone: 100 from it). Or the
    spec's ``start``/``end`` (get_messages): ``start`` alone is a window from it, ``end=-1`` all from
    ``start``. Neither pair: the most recent window. The two pairs do not mix (422). A window of more
    than ``OAM_API_MAX_PAGE`` messages is a 422 naming ``end``: page with ``limit``/``offset``.
    """
    args = params.model_dump(exclude_unset=True)
    paging = {name: args.pop(name) for name in ("limit", "offset") if name in args}
    if paging:
        for name in ("start", "end"):
            if name in args:
                raise InvalidArgument(name, "give start/end or limit/offset, not both")
        offset = paging.get("offset", 0)
        args["start"], args["end"] = offset, min(offset + paging.get("limit", PER_PAGE), MAX_SQL_COUNT)
    thread = await thread_for(request, thread_id)
    return await in_worker(selectors.message_page, thread=thread.row, max_items=settings.OAM_API_MAX_PAGE,
                           window=min(settings.OAM_MESSAGE_WINDOW, settings.OAM_API_MAX_PAGE), **args)


@router.get("/threads/{thread_id}/messages/{message_id}", auth=READ, response={200: MessageOut, **NOT_FOUND, **INVALID})
async def message_get(request: HttpRequest, thread_id: str, message_id: str, params: Query[MessageGetQuery]):
    """Return one live message of this thread (404 for another thread's). Image parts carry base64 ``data``
    only for the ids in ``included_image_ids``."""
    thread = await thread_for(request, thread_id)
    return await thread.get_message_async(message_id, included_image_ids=params.included_image_ids)


@router.patch(
    "/threads/{thread_id}/messages/{message_id}", response={200: MessageOut, **NOT_FOUND, **INVALID}
)
async def message_update(request: HttpRequest, thread_id: str, message_id: str, payload: MessagePatchIn):
    """Update content, metadata or expiry; omitted fields are kept. Returns the stored message."""
    thread = await thread_for(request, thread_id)
    await thread.update_message_async(message_id, **payload.model_dump(exclude_unset=True))
    return await in_worker(_written_message, thread, message_id)


@router.delete("/threads/{thread_id}/messages/{message_id}", response={204: None, **NOT_FOUND, **INVALID})
async def message_delete(request: HttpRequest, thread_id: str, message_id: str, response: HttpResponse):
    """Delete a message of this exact thread; 404 when absent or another thread's. The memories derived only
    from it are invalidated or deleted (``OAM_DERIVED_MEMORY_POLICY``, ``memory.records.provenance``); when any was,
    the ``OAM-Derived-Memories`` header answers the receipt as JSON (``messages``, ``invalidated``, ``deleted``)."""
    with provenance.collecting() as derived:
        if not await (await thread_for(request, thread_id)).delete_message_async(message_id):
            raise NotFound("message_id", message_id)
    if not derived.empty:
        response[DERIVED_HEADER] = json.dumps(derived.to_dict(), ensure_ascii=True)
    return Status(204, None)
