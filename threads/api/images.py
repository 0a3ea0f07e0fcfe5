"""A thread's images: upload (JSON with base64 ``data``, or ``multipart/form-data``), list, read, bytes, update,
delete.

The upload's body is parsed here rather than by ninja (two content types, one operation): ``_image_upload``
refuses an oversize upload before reading it, and its schema errors answer as ninja's 422 (``_schema_errors``).
"""

import pydantic
from django.http import HttpRequest, HttpResponse
from ninja import Query, Router
from ninja.errors import ValidationError as NinjaValidationError
from ninja.pagination import paginate
from ninja.responses import Status

from memory.client import Thread
from memory.core.aio import in_worker
from memory.core.errors import InvalidArgument, NotFound
from memory.core.types import ImageMimeType, ImageRecord
from memory.records import selectors
from memory.records.image_rules import decode_image_base64
from threads.api.common import INVALID, NOT_FOUND, READ, Pagination, json_text, thread_for
from threads.json_body import parse_json_body
from threads.schemas.common import ErrorOut
from threads.schemas.images import ImageFormIn, ImageGetQuery, ImageIn, ImageListQuery, ImageOut, ImagePatchIn

router = Router(tags=["images"])


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


def _form_fields(request: HttpRequest) -> dict:
    """The form fields of a multipart upload, one value each; ``metadata`` parsed from JSON, ``ttl_days`` an int."""
    values = {}
    for name in request.POST:
        items = request.POST.getlist(name)
        if len(items) != 1:
            raise InvalidArgument(name, "must be given once")
        values[name] = items[0]
    if "metadata" in values:
        values["metadata"] = json_text(values["metadata"], "metadata", "an object or null")
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
    thread = await thread_for(request, thread_id)
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
        args["metadata_filter"] = json_text(args["metadata_filter"], "metadata_filter", "an object")
    return selectors.image_records(thread=(await thread_for(request, thread_id)).row, **args)


@router.get("/threads/{thread_id}/images/{image_id}", auth=READ, response={200: ImageOut, **NOT_FOUND, **INVALID})
async def image_get(request: HttpRequest, thread_id: str, image_id: str, params: Query[ImageGetQuery]):
    """One live image of this thread; ``include_bytes=true`` adds base64 ``data``."""
    return await (await thread_for(request, thread_id)).get_image_async(image_id, include_bytes=params.include_bytes)


@router.get(
    "/threads/{thread_id}/images/{image_id}/content", auth=READ, response={**NOT_FOUND}, url_name="image_content",
    openapi_extra={"responses": {200: {
        "description": "The image bytes, with their MIME type as Content-Type.",
        "content": {m.value: {"schema": {"type": "string", "format": "binary"}} for m in ImageMimeType},
    }}},
)
async def image_content(request: HttpRequest, thread_id: str, image_id: str):
    """The image's bytes with its ``Content-Type`` (image/png, image/jpeg or image/webp)."""
    image = await (await thread_for(request, thread_id)).get_image_async(image_id, include_bytes=True)
    response = HttpResponse(image.bytes, content_type=image.mime_type.value)
    response["Content-Length"] = str(len(image.bytes))
    response["X-Content-Type-Options"] = "nosniff"  # never let a browser guess another type
    return response


@router.patch("/threads/{thread_id}/images/{image_id}", response={200: ImageOut, **NOT_FOUND, **INVALID})
async def image_update(request: HttpRequest, thread_id: str, image_id: str, payload: ImagePatchIn):
    """Update an image (spec: update_image); omitted fields are kept. New ``data`` needs ``mime_type``;
    ``description: null`` asks the thread's LLM for a new caption; TTL changes on an image attached to a
    message are refused (422: update the message)."""
    thread = await thread_for(request, thread_id)
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
    if not await (await thread_for(request, thread_id)).delete_image_async(image_id):
        raise NotFound("image_id", image_id)
    return Status(204, None)
