"""The JSON API router: threads, messages, memories, images, relations, search, summaries and context cards over HTTP.

Each operation parses the body (``threads.schemas``, one module per resource), makes one call into
``memory`` (``memory.client`` for spec methods, ``memory.services`` where the
client has none), and shapes the answer. Only the keys a client sent are
forwarded (``model_dump(exclude_unset=True)``), so an omitted key is ``NOTSET``
in ``memory`` and the spec's default applies. Domain errors become HTTP
statuses in ``oam_site.api``.

Operations are ``async def``: they run on the server's event loop
and await the client's ``_async`` methods, or ``memory.core.aio.in_worker`` of the
same call where the client has none, so the engine's synchronous work (ORM,
embedder, LLM) runs in the request's own worker thread and the loop never
waits on it: a slow LLM caption or extraction wait holds up no other request.
Nothing here reads the database on the loop: handles and rows are loaded in
the worker, lists are lazy querysets read there (``Pagination``), and answers
are plain values by the time ninja renders them. ``OAM_API_SYNC`` serves the
same operations as sync views (``oam_site.api.api_urls``), for
``bench/api_load.py`` to compare.
"""


import json
from typing import Literal

import pydantic
import pydantic_core
from django.conf import settings
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from ninja import Field, Query, Router, Schema
from ninja.conf import settings as ninja_settings
from ninja.errors import ValidationError as NinjaValidationError
from ninja.pagination import LimitOffsetPagination, paginate
from ninja.responses import Status

from memory.services import erasure, portability, profiles
from memory.services.review import ReviewDecision, memory_approve, memory_edit_approve, memory_reject
from memory.extraction.recovery import extraction_state
from memory.records import listing, provenance, review_rules as review, selectors
from memory.extraction import waiting
from memory.core.aio import in_worker
from memory.client import AgentMemory, Thread
from memory.core.errors import MAX_SQL_COUNT, InvalidArgument, NotFound
from memory.extraction.config import MemoryExtractionConfig
from memory.records.image_rules import ImageInputLimitConfig, decode_image_base64
from memory.core.types import NOTSET, ImageMimeType, ImageRecord, MemoryRecord, Message, SearchScope

from threads.json_body import parse_json_body
from threads.auth import (
    ApiKeyAuth,
    KeyForbidden,
    api_key_create,
    api_key_get,
    api_key_list,
    api_key_revoke,
    api_key_rotate,
    api_key_tenant,
    permits,
)
from threads.schemas.common import ErrorOut, ValidationErrorOut
from threads.schemas.context import ContextCardIn, ContextCardOut, SummaryOut, SummaryQuery
from threads.schemas.erasure import ErasureOut
from threads.schemas.extraction import ExtractionStateOut
from threads.schemas.history import MemoryRestoreOut, MemoryVersionOut
from threads.schemas.images import ImageFormIn, ImageGetQuery, ImageIn, ImageListQuery, ImageOut, ImagePatchIn
from threads.schemas.keys import KeyCreatedOut, KeyIn, KeyOut
from threads.schemas.links import LinkIn, LinkListQuery, LinkPatchIn, LinkTupleQuery, RelationOut
from threads.schemas.memories import MemoryIn, MemoryListQuery, MemoryOut, MemoryPatchIn
from threads.schemas.messages import (
    MessageGetQuery,
    MessageIdsOut,
    MessageListQuery,
    MessageOut,
    MessagePatchIn,
    MessagesIn,
    PagedMessageOut,
)
from threads.schemas.profiles import ProfileIn, ProfileOut, ProfileQuery
from threads.schemas.records import ProjectImageListQuery, ProjectListQuery
from threads.schemas.review import (
    ReviewApproveIn,
    ReviewDecisionOut,
    ReviewItemOut,
    ReviewListQuery,
    ReviewRejectIn,
)
from threads.schemas.search import SearchIn, SearchResultOut
from threads.schemas.threads import ThreadIn, ThreadOut, ThreadPatchIn

router = Router(tags=["threads"])

#: Route permissions. A route without ``auth=`` needs ``write``, the
#: API's default (``oam_site.api``): forgetting it refuses a read key, never the reverse.
READ, WRITE, ADMIN = ApiKeyAuth("read"), ApiKeyAuth("write"), ApiKeyAuth("admin")
#: Header of a message delete that names the memories following their source (``memory.records.provenance``).
DERIVED_HEADER = "OAM-Derived-Memories"

NOT_FOUND = {404: ErrorOut}
INVALID = {422: ValidationErrorOut}


#: Items a list answers when ``limit`` is omitted.
PER_PAGE = ninja_settings.PAGINATION_PER_PAGE


class Pagination(LimitOffsetPagination):
    """ninja's ``limit``/``offset`` pagination: ``limit`` at most ``OAM_API_MAX_PAGE`` (default 1000),
    ``offset`` at most ``memory.core.errors.MAX_SQL_COUNT`` (2**31 - 1).

    A page is bounded work whatever the data holds. ``offset`` becomes SQL
    ``OFFSET``, a 64-bit integer: unbounded, an ``offset`` past 2**63 was a
    500 (SQLite: "datatype mismatch"). Over a cap: 422 naming ``limit`` or
    ``offset`` (``less_than_equal``).
    """

    class Input(Schema):
        limit: int = Field(PER_PAGE, ge=1, le=settings.OAM_API_MAX_PAGE)
        offset: int = Field(0, ge=0, le=MAX_SQL_COUNT)

    async def apaginate_queryset(self, queryset, pagination: Input, request: HttpRequest, **params):
        """The page and the count, read in the request's worker thread (ninja's own reads ``Records`` and
        lists on the event loop): one hop for both."""
        return await in_worker(self._page, queryset, pagination, request, **params)

    def _page(self, queryset, pagination: Input, request: HttpRequest, **params) -> dict:
        page = self.paginate_queryset(queryset, pagination, request, **params)
        page[self.items_attribute] = list(page[self.items_attribute])
        return page


def _memory(request: HttpRequest) -> AgentMemory:
    """A client acting for the request's key: its project, fixed user and agent (``threads.auth.api_key_tenant``),
    with the configured retention (cheap; built per request so settings stay live)."""
    return AgentMemory(tenant=api_key_tenant(request.auth))


async def _thread(request: HttpRequest, thread_id: str) -> Thread:
    """The thread handle in the request's project, or ``NotFound`` (404) naming ``thread_id``."""
    return await _memory(request).get_thread_async(thread_id)


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
        return selectors.memory_stored(project=thread.project, memory_id=memory_id)


# --- threads ------------------------------------------------------------------------


@router.post("/threads", response={201: ThreadOut, 409: ErrorOut, **INVALID})
async def thread_create(request: HttpRequest, payload: ThreadIn):
    """Create a thread; 409 when ``thread_id`` is taken. ``memory_extraction_config`` and
    ``image_input_limit_config`` (each laid over the server's defaults field by field) are stored with it."""
    data = payload.model_dump(exclude_unset=True)
    config = data.pop("memory_extraction_config", None)
    if config is not None:
        data["memory_extraction_config"] = MemoryExtractionConfig.from_dict(config)
    limits = data.pop("image_input_limit_config", None)
    if limits is not None:
        data["image_input_limit_config"] = ImageInputLimitConfig.from_dict(limits)
    return Status(201, await _memory(request).create_thread_async(**data))


@router.get("/threads", auth=READ, response={200: list[ThreadOut], **INVALID})
@paginate(Pagination)
async def thread_list(request: HttpRequest, user_id: str | None = None, agent_id: str | None = None):
    """List threads, oldest first, optionally for one user and/or agent.

    Ordered by creation time and id rather than by activity, so that walking
    the pages reaches every thread even while threads receive messages.
    """
    filters = {name: value for name, value in (("user_id", user_id), ("agent_id", agent_id)) if value is not None}
    return selectors.thread_list(tenant=_memory(request).tenant, **filters).order_by("created_at", "id")


@router.get("/threads/{thread_id}", auth=READ, response={200: ThreadOut, **NOT_FOUND})
async def thread_get(request: HttpRequest, thread_id: str):
    """Return one thread."""
    return await _thread(request, thread_id)


@router.patch("/threads/{thread_id}", response={200: ThreadOut, **NOT_FOUND, **INVALID})
async def thread_update(request: HttpRequest, thread_id: str, payload: ThreadPatchIn):
    """Replace the thread's metadata (omitted: unchanged; null: cleared) and store extraction settings and
    image limits, each laid over the stored ones field by field (SDK ``update_thread``)."""
    data = payload.model_dump(exclude_unset=True)
    if data.get("memory_extraction_config") is not None:
        data["memory_extraction_config"] = MemoryExtractionConfig.from_dict(data["memory_extraction_config"])
    if data.get("image_input_limit_config") is not None:
        data["image_input_limit_config"] = ImageInputLimitConfig.from_dict(data["image_input_limit_config"])
    return await _memory(request).update_thread_async(thread_id, **data)


@router.delete("/threads/{thread_id}", response={204: None, **NOT_FOUND, **INVALID})
async def thread_delete(request: HttpRequest, thread_id: str):
    """Delete the thread with its messages and memories."""
    if not await _memory(request).delete_thread_async(thread_id):
        raise NotFound("thread_id", thread_id)
    return Status(204, None)


# --- messages -----------------------------------------------------------------------


@router.post(
    "/threads/{thread_id}/messages", response={201: MessageIdsOut, 409: ErrorOut, **NOT_FOUND, **INVALID}
)
async def messages_add(request: HttpRequest, thread_id: str, payload: MessagesIn):
    """Append messages atomically: one bad message writes nothing. Returns the ids in input order."""
    data = payload.model_dump(exclude_unset=True)
    thread = await _thread(request, thread_id)
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
    thread = await _thread(request, thread_id)
    return await in_worker(selectors.message_page, thread=thread.row, max_items=settings.OAM_API_MAX_PAGE,
                           window=min(settings.OAM_MESSAGE_WINDOW, settings.OAM_API_MAX_PAGE), **args)


@router.get("/threads/{thread_id}/messages/{message_id}", auth=READ, response={200: MessageOut, **NOT_FOUND, **INVALID})
async def message_get(request: HttpRequest, thread_id: str, message_id: str, params: Query[MessageGetQuery]):
    """Return one live message of this thread (404 for another thread's). Image parts carry base64 ``data``
    only for the ids in ``included_image_ids``."""
    thread = await _thread(request, thread_id)
    return await thread.get_message_async(message_id, included_image_ids=params.included_image_ids)


@router.patch(
    "/threads/{thread_id}/messages/{message_id}", response={200: MessageOut, **NOT_FOUND, **INVALID}
)
async def message_update(request: HttpRequest, thread_id: str, message_id: str, payload: MessagePatchIn):
    """Update content, metadata or expiry; omitted fields are kept. Returns the stored message."""
    thread = await _thread(request, thread_id)
    await thread.update_message_async(message_id, **payload.model_dump(exclude_unset=True))
    return await in_worker(_written_message, thread, message_id)


@router.delete("/threads/{thread_id}/messages/{message_id}", response={204: None, **NOT_FOUND, **INVALID})
async def message_delete(request: HttpRequest, thread_id: str, message_id: str, response: HttpResponse):
    """Delete a message of this exact thread; 404 when absent or another thread's. The memories derived only
    from it are invalidated or deleted (``OAM_DERIVED_MEMORY_POLICY``, ``memory.records.provenance``); when any was,
    the ``OAM-Derived-Memories`` header answers the receipt as JSON (``messages``, ``invalidated``, ``deleted``)."""
    with provenance.collecting() as derived:
        if not await (await _thread(request, thread_id)).delete_message_async(message_id):
            raise NotFound("message_id", message_id)
    if not derived.empty:
        response[DERIVED_HEADER] = json.dumps(derived.to_dict(), ensure_ascii=True)
    return Status(204, None)


# --- memories -----------------------------------------------------------------------


@router.post("/threads/{thread_id}/memories", response={201: MemoryOut, 409: ErrorOut, **NOT_FOUND, **INVALID})
async def memory_add(request: HttpRequest, thread_id: str, payload: MemoryIn):
    """Store a manual memory and index it; 409 when ``memory_id`` is taken."""
    thread = await _thread(request, thread_id)
    data = payload.model_dump(exclude_unset=True)
    memory_id = await thread.add_memory_async(data.pop("content"), **data)
    return Status(201, await in_worker(_written_memory, thread, memory_id))


@router.get("/threads/{thread_id}/memories", auth=READ, response={200: list[MemoryOut], **NOT_FOUND, **INVALID})
@paginate(Pagination)
async def memory_list(request: HttpRequest, thread_id: str, filters: Query[MemoryListQuery]):
    """This thread's live memories, oldest first, optionally of one type."""
    return (await _thread(request, thread_id)).memory_records(memory_type=filters.memory_type)


@router.get("/threads/{thread_id}/memories/{memory_id}", auth=READ, response={200: MemoryOut, **NOT_FOUND})
async def memory_get(request: HttpRequest, thread_id: str, memory_id: str):
    """Return one live memory owned by this thread."""
    return await (await _thread(request, thread_id)).get_memory_async(memory_id)


@router.patch("/threads/{thread_id}/memories/{memory_id}", response={200: MemoryOut, **NOT_FOUND, **INVALID})
async def memory_update(request: HttpRequest, thread_id: str, memory_id: str, payload: MemoryPatchIn):
    """Update a memory owned by this thread; omitted fields are kept. Returns the stored memory."""
    thread = await _thread(request, thread_id)
    await thread.update_memory_async(memory_id, **payload.model_dump(exclude_unset=True))
    return await in_worker(_written_memory, thread, memory_id)


@router.delete("/threads/{thread_id}/memories/{memory_id}", response={204: None, **NOT_FOUND, **INVALID})
async def memory_delete(request: HttpRequest, thread_id: str, memory_id: str):
    """Delete a memory owned by this exact thread; 404 when absent or another thread's."""
    if not await (await _thread(request, thread_id)).delete_memory_async(memory_id):
        raise NotFound("memory_id", memory_id)
    return Status(204, None)


# --- images -------------------------------------------------------------------------

_IMAGE_FORMATS = ", ".join(m.value for m in ImageMimeType)


def _inline_schema(model) -> dict:
    """``model``'s JSON schema with its ``$defs`` (enums) inlined: operations documented through
    ``openapi_extra`` do not get their models registered in ``components``."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(node):
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return resolve(defs[ref.removeprefix("#/$defs/")])
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    return resolve(schema)


_UPLOAD_BODY = {
    "required": True,
    "content": {
        "application/json": {"schema": _inline_schema(ImageIn)},
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "image": {"type": "string", "format": "binary", "description": f"The file ({_IMAGE_FORMATS})."},
                    **{name: {"type": "string", "description": (field.description or "")
                              + (" (JSON text)" if name == "metadata" else "")}
                       for name, field in ImageFormIn.model_fields.items()},
                },
            }
        },
    },
}


def _schema_errors(exc: pydantic.ValidationError) -> NinjaValidationError:
    """A pydantic error on a hand-parsed body as ninja's 422 (``{"detail": [{"loc": ["body", ...], ...}]}``)."""
    return NinjaValidationError(
        [{"loc": ["body", *err["loc"]], "msg": err["msg"], "type": err["type"]} for err in exc.errors()]
    )


def _json_text(text: str, field: str, what: str):
    """The JSON value of a form field or query parameter; ``InvalidArgument`` naming ``field`` when it is not JSON.

    Read with pydantic's parser, like request bodies (``oam_site.api.JsonParser``): nesting
    deeper than its limit is an error there, where ``json.loads`` raised ``RecursionError`` (a 500).
    """
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        raise InvalidArgument(field, f"must be JSON text ({what})") from None


def _form_fields(request: HttpRequest) -> dict:
    """The form fields of a multipart upload, one value each; ``metadata`` parsed from JSON, ``ttl_days`` an int."""
    values = {}
    for name in request.POST:
        items = request.POST.getlist(name)
        if len(items) != 1:
            raise InvalidArgument(name, "must be given once")
        values[name] = items[0]
    if "metadata" in values:
        values["metadata"] = _json_text(values["metadata"], "metadata", "an object or null")
    if "ttl_days" in values:
        text = values["ttl_days"].strip()
        try:
            values["ttl_days"] = None if text in ("", "null") else int(text)
        except ValueError:
            raise InvalidArgument("ttl_days", "must be an integer or null") from None
    return values


#: Room for the form fields (description, metadata...) of a multipart upload besides the image itself.
MULTIPART_FIELDS_BYTES = 1024 * 1024


def _image_upload(request: HttpRequest, thread: Thread) -> tuple[bytes, dict, str]:
    """(bytes, add_image arguments, name of the bytes field) from a multipart or JSON upload.

    The size limit is applied before the form is parsed (multipart: by
    ``Content-Length``) or the base64 decoded, so an oversize upload is refused
    without holding it twice.
    """
    limit = thread.image_input_limit_config.max_raw_image_bytes
    too_big = f"the limit is {limit} bytes (ImageInputLimitConfig.max_raw_image_bytes)"
    if request.content_type == "multipart/form-data":
        length = int(request.META.get("CONTENT_LENGTH") or 0)
        if length > limit + MULTIPART_FIELDS_BYTES:  # refused before Django parses the form
            raise InvalidArgument("image", f"the upload is {length} bytes; {too_big}, "
                                           f"plus {MULTIPART_FIELDS_BYTES} bytes of form fields")
        upload = request.FILES.get("image")
        if upload is None or len(request.FILES.getlist("image")) != 1 or set(request.FILES) != {"image"}:
            raise InvalidArgument("image", "send exactly one file, in the form field 'image'")
        if upload.size > limit:
            raise InvalidArgument("image", f"is {upload.size} bytes; {too_big}")
        try:
            fields = ImageFormIn.model_validate(_form_fields(request))
        except pydantic.ValidationError as exc:
            raise _schema_errors(exc) from None
        return upload.read(), fields.model_dump(exclude_unset=True), "image"
    try:
        payload = ImageIn.model_validate(parse_json_body(request.body or b"{}"))
    except pydantic.ValidationError as exc:
        raise _schema_errors(exc) from None
    fields = payload.model_dump(exclude_unset=True)
    text = fields.pop("data")
    if len(text) // 4 * 3 > limit + 3:
        raise InvalidArgument("data", f"holds about {len(text) // 4 * 3} bytes; {too_big}")
    data, declared = decode_image_base64(text, "data", fields.get("mime_type"))
    if declared is not None:  # a data URI's media type is a declared mime_type
        fields["mime_type"] = declared
    return data, fields, "data"


def _written_image(thread: Thread, image_id: str) -> ImageRecord:
    """Read back an image this request just wrote (its TTL may already be over: then the stored row)."""
    try:
        return thread.get_image(image_id)
    except NotFound:
        return selectors.image_stored(thread=thread.row, image_id=image_id)


def _renamed(exc: InvalidArgument, field: str) -> InvalidArgument:
    """The service names the bytes ``image``; over HTTP they are ``data`` in JSON."""
    return InvalidArgument(field, exc.message) if exc.field == "image" and field != "image" else exc


@router.post(
    "/threads/{thread_id}/images", response={201: ImageOut, 409: ErrorOut, **NOT_FOUND, **INVALID},
    openapi_extra={"requestBody": _UPLOAD_BODY},
)
async def image_add(request: HttpRequest, thread_id: str):
    """Store an image (spec: add_image): JSON ``ImageIn`` with base64 ``data``, or ``multipart/form-data``
    with the file as ``image``. Without a description the thread's LLM captions it (no LLM: none). 422 for
    an unsupported, animated, corrupt, truncated or oversize image, or a mime_type the bytes contradict.

    The upload is parsed (multipart: spooled to disk past 2.5 MB; base64: decoded) in the worker thread, and
    the caption is awaited there too: the event loop serves other requests meanwhile."""
    thread = await _thread(request, thread_id)
    data, fields, field = await in_worker(_image_upload, request, thread)
    try:
        image_id = await thread.add_image_async(data, **fields)
    except InvalidArgument as exc:
        raise _renamed(exc, field) from None
    return Status(201, await in_worker(_written_image, thread, image_id))


@router.get("/threads/{thread_id}/images", auth=READ, response={200: list[ImageOut], **NOT_FOUND, **INVALID})
@paginate(Pagination)
async def image_list(request: HttpRequest, thread_id: str, params: Query[ImageListQuery]):
    """This thread's images in store order (spec: list_images), paged by ``limit`` (default 100) and
    ``offset``, optionally one id or a metadata filter (JSON text). ``include_bytes`` (with ``image_id``)
    adds base64 ``data``."""
    args = params.model_dump(exclude_unset=True)
    if "metadata_filter" in args:
        args["metadata_filter"] = _json_text(args["metadata_filter"], "metadata_filter", "an object")
    return selectors.image_records(thread=(await _thread(request, thread_id)).row, **args)


@router.get("/threads/{thread_id}/images/{image_id}", auth=READ, response={200: ImageOut, **NOT_FOUND, **INVALID})
async def image_get(request: HttpRequest, thread_id: str, image_id: str, params: Query[ImageGetQuery]):
    """One live image of this thread; ``include_bytes=true`` adds base64 ``data``."""
    return await (await _thread(request, thread_id)).get_image_async(image_id, include_bytes=params.include_bytes)


@router.get(
    "/threads/{thread_id}/images/{image_id}/content", auth=READ, response={**NOT_FOUND}, url_name="image_content",
    openapi_extra={"responses": {200: {
        "description": "The image bytes, with their MIME type as Content-Type.",
        "content": {m.value: {"schema": {"type": "string", "format": "binary"}} for m in ImageMimeType},
    }}},
)
async def image_content(request: HttpRequest, thread_id: str, image_id: str):
    """The image's bytes with its ``Content-Type`` (image/png, image/jpeg or image/webp)."""
    image = await (await _thread(request, thread_id)).get_image_async(image_id, include_bytes=True)
    response = HttpResponse(image.bytes, content_type=image.mime_type.value)
    response["Content-Length"] = str(len(image.bytes))
    response["X-Content-Type-Options"] = "nosniff"  # never let a browser guess another type
    return response


@router.patch("/threads/{thread_id}/images/{image_id}", response={200: ImageOut, **NOT_FOUND, **INVALID})
async def image_update(request: HttpRequest, thread_id: str, image_id: str, payload: ImagePatchIn):
    """Update an image (spec: update_image); omitted fields are kept. New ``data`` needs ``mime_type``;
    ``description: null`` asks the thread's LLM for a new caption; TTL changes on an image attached to a
    message are refused (422: update the message)."""
    thread = await _thread(request, thread_id)
    args = payload.model_dump(exclude_unset=True)
    if "data" in args:
        args["image"], declared = await in_worker(decode_image_base64, args.pop("data"), "data",
                                                  args.get("mime_type"))
        if declared is not None:  # a data URI's media type declares mime_type
            args["mime_type"] = declared
    try:
        await thread.update_image_async(image_id, **args)
    except InvalidArgument as exc:
        raise _renamed(exc, "data") from None
    return await in_worker(_written_image, thread, image_id)


@router.delete("/threads/{thread_id}/images/{image_id}", response={204: None, **NOT_FOUND, **INVALID})
async def image_delete(request: HttpRequest, thread_id: str, image_id: str):
    """Delete a standalone image; 404 when absent or another thread's, 422 when it is part of a message."""
    if not await (await _thread(request, thread_id)).delete_image_async(image_id):
        raise NotFound("image_id", image_id)
    return Status(204, None)


# --- relations ----------------------------------------------------------------------


@router.post("/threads/{thread_id}/links", response={201: RelationOut, 409: ErrorOut, **NOT_FOUND, **INVALID})
async def link_create(request: HttpRequest, thread_id: str, payload: LinkIn):
    """Relate two memory-like records of this thread (spec: link_records). 422 for a self-link or an
    endpoint that is not this thread's; 409 when the pair is already related (either way) or the id is taken."""
    thread = await _thread(request, thread_id)
    relation_id = await thread.link_records_async(**payload.model_dump(exclude_unset=True))
    return Status(201, await thread.get_record_link_async(relation_id))


@router.get("/threads/{thread_id}/links", auth=READ, response={200: list[RelationOut], **NOT_FOUND, **INVALID})
@paginate(Pagination)
async def link_list(request: HttpRequest, thread_id: str, filters: Query[LinkListQuery]):
    """This thread's relations, oldest first; ``record_id`` keeps those touching that record. A user-restricted
    key does not see relations to another user's or agent's record in the thread (``memory.links.writes.visible``)."""
    thread = await _thread(request, thread_id)
    return await in_worker(thread.record_links, record_id=filters.record_id)


@router.patch("/threads/{thread_id}/links/{relation_id}", response={200: RelationOut, **NOT_FOUND, **INVALID})
async def link_update(request: HttpRequest, thread_id: str, relation_id: str, payload: LinkPatchIn):
    """Update a relation (spec: update_record_link); omitted fields are kept. Returns the stored relation."""
    thread = await _thread(request, thread_id)
    if not await thread.update_record_link_async(relation_id, **payload.model_dump(exclude_unset=True)):
        raise NotFound("relation_id", relation_id)
    return await thread.get_record_link_async(relation_id)


@router.delete("/threads/{thread_id}/links/{relation_id}", response={204: None, **NOT_FOUND, **INVALID})
async def link_delete(request: HttpRequest, thread_id: str, relation_id: str):
    """Delete a relation of this thread by id; 404 when there is none."""
    if not await (await _thread(request, thread_id)).delete_record_link_async(relation_id=relation_id):
        raise NotFound("relation_id", relation_id)
    return Status(204, None)


@router.delete("/threads/{thread_id}/links", response={204: None, **NOT_FOUND, **INVALID})
async def link_delete_by_endpoints(request: HttpRequest, thread_id: str, endpoints: Query[LinkTupleQuery]):
    """Delete the relation with this complete endpoint tuple (query parameters, stored orientation)."""
    if not await (await _thread(request, thread_id)).delete_record_link_async(**endpoints.model_dump()):
        raise NotFound("relation_id", f"{endpoints.source_record_id} {endpoints.relation_type} "
                                      f"{endpoints.target_record_id}")
    return Status(204, None)


# --- search -------------------------------------------------------------------------


@router.post("/threads/{thread_id}/search", auth=READ, response={200: list[SearchResultOut], **NOT_FOUND, **INVALID})
async def thread_search(request: HttpRequest, thread_id: str, payload: SearchIn):
    """Search from a thread: omitted scope fields inherit the thread's (exact user and agent,
    ``exact_thread_match=false``)."""
    data = _search_arguments(payload)
    return await (await _thread(request, thread_id)).search_async(data.pop("query"), **data)


@router.post("/search", auth=READ, response={200: list[SearchResultOut], **INVALID})
async def search(request: HttpRequest, payload: SearchIn):
    """Search one user's records across threads (SDK ``OracleAgentMemory.search``): ``user_id`` is required and
    exact (422 otherwise); an omitted agent or thread is open."""
    data = _search_arguments(payload)
    return await _memory(request).search_async(data.pop("query"), **data)


def _search_arguments(payload: SearchIn) -> dict:
    """The search's arguments as given; ``scope`` becomes a ``SearchScope`` of the fields it sets (422 when it
    comes with explicit scope fields: ``memory.search.request.resolve_scope``)."""
    data = payload.model_dump(exclude_unset=True)
    if data.get("scope") is not None:
        data["scope"] = SearchScope(**data["scope"])
    return data


# --- summaries and context cards ----------------------------------------------------


@router.get("/threads/{thread_id}/summary", auth=READ, response={200: SummaryOut, **NOT_FOUND, **INVALID})
async def thread_summary(request: HttpRequest, thread_id: str, params: Query[SummaryQuery]):
    """Summary of the thread (or of all but its last ``except_last`` messages): the durable LLM summary,
    refreshed when behind, or without an LLM a transcript of the latest messages (at most 4000 characters)."""
    return await (await _thread(request, thread_id)).get_summary_async(**params.model_dump(exclude_unset=True))


@router.post("/threads/{thread_id}/context-card", auth=READ, response={200: ContextCardOut, **NOT_FOUND, **INVALID})
async def thread_context_card(request: HttpRequest, thread_id: str, payload: ContextCardIn):
    """Build a context card: summary, topics, relevant records (the thread's default scope,
    ``exact_thread_match=false``) and recent messages, with its rendered XML-like ``content``."""
    thread = await _thread(request, thread_id)
    return await thread.get_context_card_async(**payload.model_dump(exclude_unset=True))


# --- extraction ----------------------------------------------------------------------


@router.get("/threads/{thread_id}/extraction", auth=READ, response={200: ExtractionStateOut, **NOT_FOUND, **INVALID})
async def thread_extraction(request: HttpRequest, thread_id: str,
                            wait: float = Query(None, ge=0, le=waiting.MAX_EXTRACTION_WAIT_SECONDS, description=(
                                "Seconds (0-60) to wait, first, until none of the thread's extraction jobs is "
                                "queued or running (SDK wait_for_memory_extraction); the answer's settled says "
                                "whether it came to that."))):
    """The thread's extraction state: watermark, last message seq, pending messages and jobs, the last
    job (counts, seconds, error) and the stored config. Live progress: ``/ws/threads/{thread_id}/extraction/``.
    With ``wait``, a long poll: answers as soon as the thread's queued and running jobs are done (failed
    ones count as done), or when ``wait`` seconds have passed (``settled`` false)."""
    thread = await _thread(request, thread_id)
    settled = None if wait is None else await waiting.wait_until_settled(thread.row.pk, wait)
    state = await in_worker(extraction_state, thread=thread.row)
    return {**state, "settled": settled}


# --- client-level lists, memory updates and profiles (SDK OracleAgentMemory) --------------------


def _list_filters(params) -> dict:
    args = params.model_dump(exclude_unset=True)
    if "metadata_filter" in args:
        args["metadata_filter"] = _json_text(args["metadata_filter"], "metadata_filter", "an object")
    return args


@router.get("/messages", auth=READ, response={200: list[MessageOut], **INVALID})
@paginate(Pagination)
async def project_message_list(request: HttpRequest, params: Query[ProjectListQuery]):
    """Live messages of the key's project (its user's and agent's only, for a restricted key), oldest first,
    filtered by user, agent, thread and metadata (SDK ``list_messages``)."""
    qs = listing.message_queryset(tenant=_memory(request).tenant, limit=None, **_list_filters(params))
    return selectors.Records(qs, selectors.message_dto)


@router.get("/memories", auth=READ, response={200: list[MemoryOut], **INVALID})
@paginate(Pagination)
async def project_memory_list(request: HttpRequest, params: Query[ProjectListQuery]):
    """Live memory-like records of the key's project, oldest first, filtered by their own user, agent and
    thread and by metadata (SDK ``list_memories``)."""
    qs = listing.memory_queryset(tenant=_memory(request).tenant, limit=None, **_list_filters(params))
    return selectors.Records(qs, selectors.memory_dto)


@router.get("/images", auth=READ, response={200: list[ImageOut], **INVALID})
@paginate(Pagination)
async def project_image_list(request: HttpRequest, params: Query[ProjectImageListQuery]):
    """Live standalone images of the key's project, oldest first (SDK ``list_images``); bytes at each
    image's ``content_url``."""
    qs = listing.image_queryset(tenant=_memory(request).tenant, limit=None, **_list_filters(params))
    return selectors.Records(qs, selectors.image_dto)


@router.patch("/memories/{memory_id}", response={200: MemoryOut, **NOT_FOUND, **INVALID})
async def project_memory_update(request: HttpRequest, memory_id: str, payload: MemoryPatchIn):
    """Update a memory-like record of the key's project by id, whatever thread owns it (SDK client-level
    ``update_memory``); omitted fields are kept. 404 when there is none."""
    memory = _memory(request)
    await in_worker(memory.update_memory, memory_id, **payload.model_dump(exclude_unset=True))
    return await in_worker(selectors.memory_stored, project=memory.project, memory_id=memory_id)


ProfileKind = Literal["users", "agents"]


@router.put("/profiles/{kind}/{subject_id}", response={200: ProfileOut, **INVALID})
async def profile_put(request: HttpRequest, kind: ProfileKind, subject_id: str, payload: ProfileIn):
    """Store or replace the profile of a user (``kind`` ``users``) or agent (``agents``) (SDK ``add_user`` /
    ``add_agent``). A restricted key writes only its own user's or agent's (403 otherwise)."""
    memory = _memory(request)
    data = payload.model_dump(exclude_unset=True)
    single = kind[:-1]
    await in_worker(profiles.profile_add, tenant=memory.tenant, kind=single, subject_id=subject_id,
                    information=data["information"], metadata=data.get("metadata", NOTSET))
    return await in_worker(profiles.profile_get, tenant=memory.tenant, kind=single, subject_id=subject_id)


@router.get("/profiles/{kind}", auth=READ, response={200: list[ProfileOut], **INVALID})
@paginate(Pagination)
async def profile_list(request: HttpRequest, kind: ProfileKind, params: Query[ProfileQuery]):
    """User or agent profiles of the key's project, oldest first (SDK ``list_users``/``list_agents``)."""
    args = _list_filters(params)
    qs = profiles.profile_queryset(tenant=_memory(request).tenant, kind=kind[:-1], limit=None, **args)
    return selectors.Records(qs, profiles.profile_record)


@router.delete("/profiles/{kind}/{subject_id}", response={204: None, **NOT_FOUND, **INVALID})
async def profile_delete(request: HttpRequest, kind: ProfileKind, subject_id: str):
    """Delete one profile, and nothing else (SDK ``delete_user(..., cascade=False)``; erasing everything
    about a user is ``DELETE /api/users/{user_id}``). 404 when there is none."""
    memory = _memory(request)
    if not await in_worker(profiles.profile_delete, tenant=memory.tenant, kind=kind[:-1], subject_id=subject_id):
        raise NotFound(f"{kind[:-1]}_id", subject_id)
    return Status(204, None)


# --- API keys (admin) ------------------------------------------------------------------


def _project_admin(request: HttpRequest):
    """The calling key, when it may manage its project (keys, erasure receipts): ``admin`` (the route's auth)
    and no fixed user or agent (such a key acts for one user; this would reach the others)."""
    manager = request.auth
    if manager.user_id is not None or manager.agent_id is not None:
        raise KeyForbidden("a key restricted to a user or an agent cannot manage keys or read erasure receipts")
    return manager


def _with_raw(row, raw: str):
    row.key = raw  # KeyCreatedOut shows it this once
    return row


@router.get("/keys", auth=ADMIN, response={200: list[KeyOut]}, tags=["keys"])
@paginate(Pagination)
async def key_list(request: HttpRequest):
    """The project's API keys, newest first, revoked ones included (never the keys themselves), as
    ``{"items": [...], "count": N}`` paged by ``limit``/``offset`` like every list."""
    return await in_worker(api_key_list, project=_project_admin(request).project)


@router.post("/keys", auth=ADMIN, response={201: KeyCreatedOut, **INVALID}, tags=["keys"])
async def key_create(request: HttpRequest, payload: KeyIn):
    """Create a key in the project; the answer holds the key itself, shown this once."""
    manager = _project_admin(request)
    row, raw = await in_worker(api_key_create, project=manager.project, created_by=f"api-key:{manager.pk}",
                               **payload.model_dump(exclude_unset=True))
    return Status(201, _with_raw(row, raw))


@router.post("/keys/{key_id}/rotate", auth=ADMIN, response={200: KeyCreatedOut, **NOT_FOUND, **INVALID},
             tags=["keys"])
async def key_rotate(request: HttpRequest, key_id: int):
    """Give a key a new secret (the old one stops working at once); the answer holds it, shown this once."""
    project = _project_admin(request).project
    key = await in_worker(api_key_get, project=project, key_id=key_id)
    row, raw = await in_worker(api_key_rotate, key=key)
    row.project = project  # KeyOut names it; not read again on the event loop
    return _with_raw(row, raw)


@router.delete("/keys/{key_id}", auth=ADMIN, response={204: None, **NOT_FOUND}, tags=["keys"])
async def key_revoke(request: HttpRequest, key_id: int):
    """Revoke a key of the project for good; revoking twice is harmless."""
    key = await in_worker(api_key_get, project=_project_admin(request).project, key_id=key_id)
    await in_worker(api_key_revoke, key=key)
    return Status(204, None)


# --- erasure ---------------------------------------------------------------------------


@router.delete("/memories/{memory_id}", response={204: None, **NOT_FOUND, **INVALID})
async def memory_delete_any(request: HttpRequest, memory_id: str):
    """Delete a memory-like record by id, whatever thread owns it or none (SDK: ``delete_memory``); 404 when there
    is none. The way to remove a memory stored with another ``thread_id`` or none."""
    if not await _memory(request).delete_memory_async(memory_id):
        raise NotFound("memory_id", memory_id)
    return Status(204, None)


@router.delete("/users/{user_id}", auth=ADMIN, response={200: ErasureOut, **INVALID}, tags=["erasure"])
async def user_erase(request: HttpRequest, user_id: str, cascade: bool = True):
    """Erase everything the project holds about one end user (GDPR Art. 17; SDK ``delete_user``): their
    threads with all they hold and every record scoped to them; answers the stored receipt. 503 (nothing
    erased) when earlier background extraction of their threads does not finish within 300 s."""
    return await _memory(request).erase_user_async(user_id, cascade, requested_by=f"api-key:{request.auth.pk}")


@router.delete("/agents/{agent_id}", auth=ADMIN, response={200: ErasureOut, **INVALID}, tags=["erasure"])
async def agent_erase(request: HttpRequest, agent_id: str, cascade: bool = True):
    """Erase everything the project holds about one agent (SDK ``delete_agent``); answers the stored receipt."""
    return await _memory(request).erase_agent_async(agent_id, cascade, requested_by=f"api-key:{request.auth.pk}")


@router.get("/erasures", auth=ADMIN, response={200: list[ErasureOut]}, tags=["erasure"])
@paginate(Pagination)
async def erasure_list(request: HttpRequest):
    """The project's erasure receipts, newest first (subjects named by digest only: ``subject_id`` is empty)."""
    return await in_worker(erasure.receipt_list, project=_project_admin(request).project)


@router.get("/erasures/{receipt_id}", auth=ADMIN, response={200: ErasureOut, **NOT_FOUND, **INVALID},
            tags=["erasure"])
async def erasure_get(request: HttpRequest, receipt_id: str):
    """One erasure receipt of the project."""
    return await in_worker(erasure.receipt_get, project=_project_admin(request).project, receipt_id=receipt_id)


# --- memory history (memory.records.history) --------------------------------------------------------


@router.get("/threads/{thread_id}/memories/{memory_id}/history", auth=READ,
            response={200: list[MemoryVersionOut], **NOT_FOUND, **INVALID}, tags=["history"])
@paginate(Pagination)
async def memory_history(request: HttpRequest, thread_id: str, memory_id: str):
    """The history of a memory of this thread, oldest version first (``{"items": [...], "count": N}``, paged by
    ``limit``/``offset``; the newest 1000 versions at most): who changed it, when, before -> after and why
    (``Thread.get_memory_history``). Kept after the memory is deleted, until its user is erased; 404 when the
    thread has none for that id (or the key may not see it). A read key gets 404 for a memory awaiting review
    or rejected in review: its text is for reviewers (write keys; found by a reviewer of #17)."""
    reviewer = permits(request.auth.permission, "write")
    versions = await (await _thread(request, thread_id)).get_memory_history_async(memory_id, unreviewed=reviewer)
    return [version.to_dict() for version in versions]


@router.post("/threads/{thread_id}/memories/{memory_id}/history/{version}/restore",
             response={200: MemoryRestoreOut, **NOT_FOUND, **INVALID}, tags=["history"])
async def memory_restore(request: HttpRequest, thread_id: str, memory_id: str, version: int):
    """Undo: restore a version of a memory of this thread as a new version (``Thread.restore_memory_version``);
    content, type, metadata, status and expiry come back and the memory is re-indexed. 404 for a missing
    memory or version."""
    thread = await _thread(request, thread_id)
    number = await thread.restore_memory_version_async(memory_id, version)
    return {"version": number, "memory": await in_worker(_written_memory, thread, memory_id)}


# --- export (memory.services.portability) ------------------------------------------------------------------


#: Lines of an export serialised per trip to the worker thread: the response streams, so a request
#: holds about this many lines in memory (an image line at most its image's base64), whatever the user holds.
EXPORT_LINES_PER_CHUNK = 200


def _export_chunk(lines) -> bytes:
    """The next ``EXPORT_LINES_PER_CHUNK`` lines of ``lines`` as JSON Lines bytes (empty when it is done)."""
    out = []
    for line in lines:
        out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        if len(out) >= EXPORT_LINES_PER_CHUNK:
            break
    return "".join(out).encode()


def _export_start(project, user_id: str):
    """The export's generator and its first chunk (the header: the user id is checked here, a 422 before any
    byte is sent)."""
    lines = portability.export_lines(project=project, user_id=user_id)
    return lines, _export_chunk(lines)


@router.get("/users/{user_id}/export", auth=ADMIN, response={200: None, **INVALID}, tags=["export"])
async def user_export(request: HttpRequest, user_id: str):
    """One user's memory as JSON Lines (``application/x-ndjson``; the format of ``manage.py export_memory``,
    ``memory.services.portability``): threads, messages, images base64, memories, relations, summaries and memory
    history, never vectors. An admin key with no fixed user or agent (403 otherwise); a user with nothing
    stored gets the header line only. ``manage.py import_memory`` loads it. The answer streams
    (``EXPORT_LINES_PER_CHUNK`` lines per chunk): memory per request is bounded, not the user's whole data."""
    project = _project_admin(request).project
    lines, first = await in_worker(_export_start, project, user_id)

    async def chunks():
        chunk = first
        while chunk:
            yield chunk
            chunk = await in_worker(_export_chunk, lines)  # the request's thread: its cursor stays open there

    return StreamingHttpResponse(chunks(), content_type="application/x-ndjson; charset=utf-8",
                                 headers={"Content-Disposition": 'attachment; filename="memory-export.jsonl"'})


# --- the review queue (memory.records.review_rules) ---------------------------------------------------------------


class ReviewPagination(Pagination):
    """``Pagination`` with at most ``memory.records.review_rules.MAX_PAGE`` (50) items a page (default 20): each item costs
    one ranked vector query (its similar memories). Over it: 422 naming ``limit``."""

    class Input(Schema):
        limit: int = Field(20, ge=1, le=review.MAX_PAGE)
        offset: int = Field(0, ge=0, le=MAX_SQL_COUNT)


def _decision(memory: AgentMemory, decision: ReviewDecision) -> dict:
    """A ``ReviewDecisionOut`` body (read in the worker: the approved memory as stored)."""
    stored = (selectors.memory_stored(project=memory.project, memory_id=decision.memory_id)
              if decision.action == "approve" else None)
    return {"memory_id": decision.memory_id, "action": decision.action, "version": decision.version,
            "relation_id": decision.relation_id, "memory": stored}


@router.get("/review/memories", response={200: list[ReviewItemOut], **INVALID}, tags=["review"])
@paginate(ReviewPagination)
async def review_list(request: HttpRequest, params: Query[ReviewListQuery]):
    """The memories of the key's project awaiting review (its user's and agent's only, for a restricted key),
    the longest waiting first (``{"items": [...], "count": N}``, ``limit`` at most 50), each with the
    injection scan's flags, the stored memories most similar to it and the relation its approval makes
    (``memory.records.review_rules``). A write key: pending memories may carry what an attacker planted."""
    tenant = _memory(request).tenant
    return review.review_records(project=tenant.project, restrict=tenant.row_filter(),
                                 **params.model_dump(exclude_unset=True, exclude_none=True))


@router.post("/review/memories/{memory_id}/approve", response={200: ReviewDecisionOut, 409: ErrorOut, **NOT_FOUND,
                                                                **INVALID}, tags=["review"])
async def review_approve(request: HttpRequest, memory_id: str, payload: ReviewApproveIn):
    """Approve a memory awaiting review (``services.memory_approve``), or with ``content``/``memory_type``
    edit it first (``services.memory_edit_approve``, re-embedded): one ``approve`` history entry naming this
    key, ``reason`` as its reason; from now on searches and context cards return it, and the relation
    extraction decided for it is made. 404 when there is none (or the key may not see it), 409 when it does
    not await review."""
    memory = _memory(request)
    data = payload.model_dump(exclude_unset=True)
    scope = {"project": memory.project, "memory_id": memory_id, "allows": memory.tenant.allows}
    if "content" in data or "memory_type" in data:
        decide = memory_edit_approve
    else:
        decide = memory_approve
    decision = await in_worker(decide, **scope, **data)
    return await in_worker(_decision, memory, decision)


@router.post("/review/memories/{memory_id}/reject", response={200: ReviewDecisionOut, 409: ErrorOut, **NOT_FOUND,
                                                               **INVALID}, tags=["review"])
async def review_reject(request: HttpRequest, memory_id: str, payload: ReviewRejectIn):
    """Reject a memory awaiting review (``services.memory_reject``): it is deleted, with one ``reject`` history
    entry naming this key (``reason`` as its reason) that stays until its user is erased. 404 when there is
    none (or the key may not see it), 409 when it does not await review."""
    memory = _memory(request)
    decision = await in_worker(memory_reject, project=memory.project, memory_id=memory_id,
                               allows=memory.tenant.allows, **payload.model_dump(exclude_unset=True))
    return await in_worker(_decision, memory, decision)
