"""Request and response bodies of the JSON API (``XxxIn`` / ``XxxOut``).

Input schemas forbid unknown keys (the spec rejects unexpected keyword
arguments) and use strict ints and bools, so ``"5"`` or ``true`` is not read as
a number. Omitted and explicit ``null`` differ: the API passes only the keys a
client sent (``model_fields_set``) to ``memory.client``, so an omitted key is
``NOTSET`` there and the spec's default applies. Where ``null`` has no meaning
the type is not nullable and the default shown in the docs is what omission means.
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal, Union

from django.conf import settings
from ninja import Field, Schema
from pydantic import AwareDatetime, ConfigDict, StrictBool, StrictInt

from memory.client import Thread as ThreadHandle
from memory.core.errors import MAX_SQL_COUNT
from memory.extraction.config import (
    BackgroundExtractionQueueFullBehavior,
    MemoryExtractionImageContext,
    MemoryExtractionMode,
    MemoryLinkExtractionMode,
)
from memory.records.image_rules import IMAGE_LIMIT_MAXIMA
from memory.llm.prompts import BUILTIN_RELATIONS
from memory.models import MEMORY_TYPES, RECORD_TYPES
from memory.core.types import ImageMimeType, RecordStatus, TimeToLiveAnchor

MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]  # "memory", "fact", "guideline", "preference"
BuiltinRelationType = Literal[tuple(BUILTIN_RELATIONS)]  # type: ignore[valid-type]  # supersedes, contradicts, ...
RecordType = Literal[RECORD_TYPES]  # type: ignore[valid-type]
Metadata = Union[dict[str, Any], None]


class _In(Schema):
    model_config = ConfigDict(extra="forbid")


# --- errors -------------------------------------------------------------------------


class ErrorOut(Schema):
    """A 401/404/409 body: what went wrong and, for domain errors, the field at fault."""

    detail: str
    field: str | None = None


class ValidationErrorItem(Schema):
    """One rule broken by the request; ``loc`` is (source, field ...)."""

    loc: list[Union[str, int]]
    msg: str
    type: str


class ValidationErrorOut(Schema):
    """The 422 body, for schema errors and domain validation errors alike."""

    detail: list[ValidationErrorItem]


# --- threads ------------------------------------------------------------------------


class MemoryExtractionConfigIn(_In):
    """Automatic extraction settings of a thread (SDK: MemoryExtractionConfig); omitted keys keep the client's,
    else the SDK defaults. Enum values are case-insensitive (the SDK's upper-case names too)."""

    memory_extraction_window: StrictInt = Field(
        None, description="Messages the LLM sees per call, targets included; <= 0 (default -1): the batch."
    )
    context_summary_update_frequency: StrictInt = Field(
        None, description="Messages after the summary before a refresh; <= 0 (default -1): every check."
    )
    memory_extraction_frequency: StrictInt = Field(
        None, description="New messages after which extraction is due; <= 0 (default -1): every add_messages call."
    )
    memory_extraction_token_limit: StrictInt = Field(
        None, description="Prompt token cap (default 100000); <= 0 disables it."
    )
    extract_memories: StrictBool = Field(None, description="Extraction on (default true; it also needs an LLM).")
    enable_context_summary: StrictBool = Field(None, description="Keep a durable summary (default true).")
    memory_extraction_custom_instructions: str | None = Field(None, description="Appended to the system prompt.")
    memory_link_extraction_custom_instructions: str | None = Field(
        None, description="Appended to the linking prompt (kept for SDK configs).")
    memory_extraction_image_context: MemoryExtractionImageContext = Field(
        None, description="disabled (default), image, caption or memory (extraction reads text parts here).")
    memory_extraction_inherit_message_metadata: Union[StrictBool, list[str]] = Field(
        None, description="Metadata memories inherit from their source messages: true (default), false, or keys."
    )
    extraction_mode: MemoryExtractionMode = Field(None, description="inline or background (default).")
    memory_link_extraction_mode: MemoryLinkExtractionMode = Field(
        None, description="disabled, during_extraction or post_extraction (default): relations from extraction.")
    memory_link_extraction_token_limit: StrictInt = Field(None, description="Linking prompt cap (default 100000).")
    background_extraction_queue_full_behavior: BackgroundExtractionQueueFullBehavior = Field(
        None, description="drop (default), wait_then_drop or wait_then_raise."
    )
    background_extraction_queue_put_timeout_seconds: float = Field(
        None, ge=0, description="Seconds to wait for room in a full queue (default 300)."
    )
    review_memory_types: list[MemoryType] = Field(
        None, description="Not the SDK's: extracted memories of these types wait for review (default "
                          "[\"guideline\", \"preference\"]; [] for none): stored, but not searched, listed or put "
                          "in context cards until approved (GET /api/review/memories).")
    review_added_memories: StrictBool = Field(
        None, description="Not the SDK's: add_memory of those types waits for review too (default false).")


class ImageInputLimitConfigIn(_In):
    """Image limits of a thread (SDK: ImageInputLimitConfig); omitted keys keep the client's, else the SDK
    defaults (10 MiB, 100 images, 100 MiB; 50,000,000 pixels)."""

    max_raw_image_bytes: StrictInt = Field(None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_raw_image_bytes"])
    max_images_per_llm_request: StrictInt = Field(None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_images_per_llm_request"])
    max_total_raw_image_bytes_per_llm_request: StrictInt = Field(
        None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_total_raw_image_bytes_per_llm_request"])
    max_image_pixels: StrictInt = Field(None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_image_pixels"])


class ThreadIn(_In):
    """Create a thread. Omitted ids are generated UUIDs; an explicit null user/agent id stores null."""

    thread_id: str | None = Field(None, description="Omit or null for a generated UUID.")
    user_id: str | None = Field(None, description="Omit for a generated UUID; null stores no user.")
    agent_id: str | None = Field(None, description="Omit for a generated UUID; null stores no agent.")
    metadata: Metadata = None
    memory_extraction_config: MemoryExtractionConfigIn | None = Field(
        None, description="Extraction settings stored with the thread; omit for the defaults."
    )
    image_input_limit_config: ImageInputLimitConfigIn | None = Field(
        None, description="Image limits stored with the thread; omit for the defaults."
    )


class ThreadPatchIn(_In):
    """Replace a thread's metadata (null clears it; omitted leaves it) and store settings (SDK update_thread):
    each config laid over the thread's stored one field by field."""

    metadata: Metadata = None
    memory_extraction_config: MemoryExtractionConfigIn | None = Field(
        None, description="Extraction settings laid over the stored ones; omit to keep them."
    )
    image_input_limit_config: ImageInputLimitConfigIn | None = Field(
        None, description="Image limits laid over the stored ones; omit to keep them."
    )


class ThreadOut(Schema):
    """A thread's identity and metadata."""

    thread_id: str
    user_id: str | None
    agent_id: str | None
    metadata: dict[str, Any]

    @staticmethod
    def resolve_thread_id(obj) -> str:
        """Read the id from a ``memory.client.Thread`` handle or a stored thread row."""
        return obj.thread_id if isinstance(obj, ThreadHandle) else obj.public_id

    @staticmethod
    def resolve_metadata(obj) -> dict[str, Any]:
        """Stored metadata, ``{}`` when none."""
        return dict(obj.metadata or {})


# --- messages -----------------------------------------------------------------------


class TextPartIn(_In):
    """A text content part."""

    type: Literal["text"] = "text"
    text: str
    id: str | None = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = None


class ImagePartIn(_In):
    """An image content part: ``{"type": "image", "data": "<base64>", "mime_type"?, "description"?, "id"?}``.

    It is stored as an image record attached to the message (its id is the
    part's id): searchable by its description, listed by ``GET .../images``,
    its bytes at ``GET .../images/{id}/content``. Refused with 422 naming the
    part: not PNG/JPEG/WEBP, animated, corrupt or truncated, over the size or
    pixel limits, or a ``mime_type`` the bytes contradict.
    """

    type: Literal["image"]
    data: str | None = Field(
        None, description="The image bytes, base64 (a data:image/...;base64, URI is accepted; its type must match the "
        "bytes and mime_type). Required for a new "
        "image; omit it in PATCH to keep the image of that id already attached to the message."
    )
    mime_type: ImageMimeType | None = Field(None, description="Omit to detect it from the bytes; given, it must match.")
    description: str | None = Field(
        None, description="Searchable text; omit or null for a caption by the thread's LLM (without one: none)."
    )
    id: str | None = Field(None, description="Image id; omit for a generated UUID.")
    timestamp: str | None = None


MessageContentIn = Union[str, list[Union[TextPartIn, ImagePartIn]]]
TtlDays = Union[StrictInt, None]


class MessageIn(_In):
    """One message to append: role and content, optionally id, timestamp and metadata."""

    role: str
    content: MessageContentIn
    id: str | None = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = Field(None, description="Event time; ISO-8601 when TTL is anchored on it.")
    metadata: Metadata = None


class MessagesIn(_In):
    """A batch of messages, written atomically. ``metadata``/``ttl_*`` take one value or one per message."""

    messages: list[MessageIn]
    metadata: Union[Metadata, list[Metadata]] = Field(
        None, description="Laid over each message's own metadata; a list gives one per message."
    )
    ttl_days: Union[TtlDays, list[TtlDays]] = Field(
        None, description="Omit for the default TTL; null for the maximum (or no expiry); a list gives one per message."
    )
    ttl_anchor: Union[TimeToLiveAnchor, list[TimeToLiveAnchor]] = Field(
        TimeToLiveAnchor.CREATED_AT, description="What the TTL counts from; a list gives one per message."
    )


class MessageIdsOut(Schema):
    """Ids of the appended messages, in input order."""

    ids: list[str]


class MessagePatchIn(_In):
    """Update a message. Omitted fields keep their stored values; role and timestamp never change."""

    content: MessageContentIn = Field(
        None, description="Replacement content (string, or text and image parts). Attached images the new parts "
        "leave out are deleted; an image part with only its id keeps that attached image."
    )
    metadata: Metadata = Field(None, description="Replaces the stored metadata (no deep merge); null clears it.")
    ttl_days: TtlDays = Field(None, description="Expiry refresh; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = Field(
        TimeToLiveAnchor.CREATED_AT, description="Anchor of an expiry refresh (given alone: default TTL)."
    )


class MessageListQuery(Schema):
    """``limit``/``offset``, or ``start``/``end`` of ``get_messages`` (not both): neither gives the most recent
    window; ``end=-1`` means all from ``start``."""

    limit: int = Field(None, ge=1, le=settings.OAM_API_MAX_PAGE, description="At most this many (default 100, "
                       "at most OAM_API_MAX_PAGE, 1000); not with start/end.")
    offset: int = Field(None, ge=0, le=MAX_SQL_COUNT, description="Live messages skipped, oldest first (default "
                        "0); not with start/end.")
    start: int | None = Field(None, ge=0, description="0-based index of the first live message.")
    end: int | None = Field(None, ge=-1, description="Exclusive end index; -1 for all from start.")
    include_image_bytes: bool = Field(None, description="Return image parts with their bytes (base64 data).")


class MessageGetQuery(Schema):
    """``get_message`` options."""

    included_image_ids: list[str] | None = Field(
        None, description="Attached image ids whose bytes to return (repeat the parameter); others are ignored."
    )


class TextPartOut(Schema):
    """A stored text part."""

    type: Literal["text"] = "text"
    id: str
    text: str
    timestamp: str | None = None


def _base64(data: bytes | None) -> str | None:
    return base64.b64encode(data).decode("ascii") if data is not None else None


class ImagePartOut(Schema):
    """A stored image part: the attached image's id, type and description; ``data`` only when asked for."""

    type: Literal["image"] = "image"
    id: str
    mime_type: ImageMimeType
    description: str | None = None
    timestamp: str | None = None
    data: str | None = Field(None, description="Base64 bytes when requested (include_image_bytes / "
                                               "included_image_ids), else null.")

    @staticmethod
    def resolve_data(obj) -> str | None:
        return _base64(obj.bytes) if not isinstance(obj, dict) else obj.get("data")


class MessageOut(Schema):
    """A stored message. ``timestamp`` falls back to the creation time."""

    record_type: Literal["message"] = "message"
    id: str
    thread_id: str | None
    role: str
    content: Union[str, list[Union[TextPartOut, ImagePartOut]]]
    timestamp: str | None
    metadata: dict[str, Any] | None
    status: str
    created_at: str | None
    expires_at: str | None


class PagedMessageOut(Schema):
    """Some live messages of a thread, oldest first, and how many it has (every list answers this shape)."""

    items: list[MessageOut]
    count: int = Field(description="All live messages of the thread.")


# --- memories -----------------------------------------------------------------------


class MemoryIn(_In):
    """Store a manual memory. Omitted scope ids inherit the thread's."""

    content: str
    memory_type: MemoryType = "memory"
    memory_id: str = Field(None, description="Omit for a generated UUID.")
    user_id: str | None = Field(None, description="Omit to inherit the thread's user id.")
    agent_id: str | None = Field(None, description="Omit to inherit the thread's agent id.")
    thread_id: str | None = Field(
        None, description="Omit to use this thread; another value makes the memory not this thread's."
    )
    metadata: Metadata = None
    timestamp: str | None = Field(None, description="Event time; ISO-8601 when TTL is anchored on it.")
    ttl_days: TtlDays = Field(None, description="Omit for the default TTL; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = TimeToLiveAnchor.CREATED_AT
    status: RecordStatus = RecordStatus.VALID
    autonomous_linking: StrictBool = Field(
        None, description="Let the thread's LLM relate the new memory to its nearest memories; omit: on when "
        "there is an LLM."
    )
    memory_id_to_link: str = Field(
        None, description="With link_type: also store a relation from the new memory to this memory of the "
        "thread (one transaction); omitted scope ids then inherit from it."
    )
    link_type: BuiltinRelationType = Field(None, description="With memory_id_to_link: the relation's type.")
    link_id: str = Field(None, description="Id of the explicit relation; omit for a generated UUID.")
    link_timestamp: str | None = Field(None, description="Timestamp stored on the explicit relation.")
    link_metadata: Metadata = Field(None, description="Metadata stored on the explicit relation.")


class MemoryPatchIn(_In):
    """Update a memory owned by this thread. Omitted fields keep their stored values."""

    content: str = Field(None, description="Replacement content.")
    metadata: Metadata = Field(None, description="Replaces the stored metadata (no deep merge); null clears it.")
    timestamp: str | None = Field(None, description="Replacement event time; null clears it.")
    ttl_days: TtlDays = Field(None, description="Expiry refresh; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = Field(
        TimeToLiveAnchor.CREATED_AT, description="Anchor of an expiry refresh (given alone: default TTL)."
    )
    status: RecordStatus = Field(None, description="Replacement status.")


class MemoryListQuery(Schema):
    """Filter of the memory listing."""

    memory_type: MemoryType | None = None


class MemoryOut(Schema):
    """A stored memory-like record. ``timestamp`` falls back to the creation time."""

    record_type: MemoryType
    id: str
    memory_type: MemoryType
    content: str
    user_id: str | None
    agent_id: str | None
    thread_id: str | None
    timestamp: str | None
    metadata: dict[str, Any]
    status: str
    created_at: str | None
    expires_at: str | None
    source_message_ids: list[str]


# --- images -------------------------------------------------------------------------


class ImageFormIn(_In):
    """The fields of an image upload besides its bytes (multipart form fields; ``metadata`` as JSON text)."""

    description: str | None = Field(
        None, description="Searchable text; omit or null for a caption by the thread's LLM (without one: none)."
    )
    mime_type: ImageMimeType | None = Field(None, description="Omit to detect it from the bytes; given, it must match.")
    image_id: str = Field(None, description="Omit for a generated UUID.")
    user_id: str | None = Field(None, description="Scope assertion: omit, or give the thread's user id.")
    agent_id: str | None = Field(None, description="Scope assertion: omit, or give the thread's agent id.")
    thread_id: str | None = Field(None, description="Scope assertion: omit, or give this thread's id.")
    metadata: Metadata = None
    timestamp: str | None = Field(None, description="Event time; ISO-8601 when TTL is anchored on it.")
    ttl_days: TtlDays = Field(None, description="Omit for the default TTL; null for the maximum (or no expiry).")
    ttl_anchor: TimeToLiveAnchor = TimeToLiveAnchor.CREATED_AT


class ImageIn(ImageFormIn):
    """Store an image (spec: add_image) as JSON with base64 bytes in ``data``.

    The same endpoint takes ``multipart/form-data``: the file in the field
    ``image`` and the other fields as form fields (``ImageFormIn``). Refused
    with 422 naming the field: not PNG/JPEG/WEBP, animated, corrupt or
    truncated, over the size or pixel limits, a ``mime_type`` the bytes
    contradict, or a scope id that is not the thread's.
    """

    data: str = Field(description="The image bytes, base64 (a data:image/...;base64, URI is accepted; its type "
                      "must match the bytes and mime_type).")


class ImagePatchIn(_In):
    """Update an image (spec: update_image). Omitted fields keep their stored values."""

    data: str = Field(None, description="New bytes, base64; mime_type is then required (a data:image/...;base64, "
                      "URI declares it).")
    mime_type: ImageMimeType = Field(None, description="Type of the new bytes (required with data, refused without).")
    description: str | None = Field(
        None, description="Replacement text; null asks the thread's LLM for a new caption (without one: none)."
    )
    metadata: Metadata = Field(None, description="Replaces the stored metadata (no deep merge); null clears it.")
    timestamp: str | None = Field(None, description="Replacement event time; null clears it.")
    ttl_days: TtlDays = Field(
        None, description="Expiry refresh; null for the maximum (or no expiry). Refused for an image attached to a "
        "message (its expiry is the message's)."
    )
    ttl_anchor: TimeToLiveAnchor = Field(
        TimeToLiveAnchor.CREATED_AT, description="Anchor of an expiry refresh (given alone: default TTL)."
    )


class ImageListQuery(Schema):
    """``list_images`` arguments as query parameters."""

    image_id: str = Field(None, description="Only this image.")
    metadata_filter: str = Field(None, description="A metadata filter as JSON text (the search grammar).")
    include_bytes: bool = Field(None, description="Return base64 data too; needs image_id.")


class ImageGetQuery(Schema):
    """Options of reading one image."""

    include_bytes: bool = Field(False, description="Return base64 data too.")


class ImageOut(Schema):
    """A stored image. ``timestamp`` falls back to the creation time; ``message_id`` names the message it is a
    part of (null: a standalone image). ``data`` (base64) only when asked for; the raw bytes are at ``content_url``."""

    record_type: Literal["image"] = "image"
    id: str
    thread_id: str | None
    user_id: str | None
    agent_id: str | None
    message_id: str | None
    mime_type: ImageMimeType
    description: str | None
    metadata: dict[str, Any]
    timestamp: str | None
    created_at: str | None
    expires_at: str | None
    width: int = Field(description="Pixels.")
    height: int = Field(description="Pixels.")
    size_bytes: int
    content_url: str = Field(description="Where GET returns the bytes with their Content-Type.")
    data: str | None = None

    @staticmethod
    def resolve_content_url(obj) -> str:
        """The route with each id percent-encoded as one path segment.

        ``reverse`` itself refuses ids holding "/" (``NoReverseMatch``: a 500
        for every listing that held such an image); this gives the same URL
        as ``reverse`` for other ids.
        """
        from urllib.parse import quote

        from django.urls import reverse

        safe = "!$&'()*+,;=~:@"  # reverse()'s safe characters, less "/"
        head, _, rest = reverse("api:image_content", kwargs={"thread_id": "0T0", "image_id": "0I0"}).partition("/0T0/")
        middle, _, tail = rest.partition("/0I0/")
        return f"{head}/{quote(obj.thread_id, safe=safe)}/{middle}/{quote(obj.id, safe=safe)}/{tail}"

    @staticmethod
    def resolve_data(obj) -> str | None:
        return _base64(obj.bytes)


# --- search -------------------------------------------------------------------------


class SearchScopeIn(_In):
    """A prebuilt search scope (SDK: SearchScope): the same fields and rules as the explicit ones."""

    user_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    agent_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    thread_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    exact_user_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_agent_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_thread_match: StrictBool = Field(None, description="Omit to keep the default.")


class SearchIn(_In):
    """Search arguments (spec: search). Omitted scope fields keep the caller's defaults (SDK 26.8.0).

    On a thread: exact user and agent, this thread's id, ``exact_thread_match=false``.
    On ``/api/search``: ``user_id`` is required (null: records with no user) and matched exactly; an
    omitted agent or thread is open; a given agent is exact unless ``exact_agent_match=false``, a given
    thread only with ``exact_thread_match=true``.
    """

    query: str
    user_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    agent_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    thread_id: str | None = Field(None, description="Omit to keep the default; null matches stored nulls when exact.")
    exact_user_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_agent_match: StrictBool = Field(None, description="Omit to keep the default.")
    exact_thread_match: StrictBool = Field(None, description="Omit to keep the default.")
    max_results: StrictInt = Field(None, ge=1, description="1 to 1000; omit for the default (10).")
    token_budget: StrictInt | None = Field(
        None, description="Hard token limit; omit for the default; <= 0 or null disables."
    )
    soft_token_budget: StrictInt | None = Field(
        None, description="Soft token target; omit for the default; <= 0 or null disables."
    )
    record_types: list[RecordType] | None = Field(None, description="Omit or null for every type.")
    metadata_filter: dict[str, Any] | None = None
    include_invalid_results: StrictBool = True
    num_hops: StrictInt = Field(
        None, ge=0, le=5, description="Relation edges followed from each direct memory result (0-5); omit for 0."
    )
    max_linked_results: StrictInt = Field(
        None, ge=0, description="Linked memories attached to each direct result; omit for 100, 0 for none."
    )
    scope: SearchScopeIn | None = Field(
        None, description="A prebuilt scope (SDK SearchScope); give it or the explicit scope fields, not both."
    )


class LinkedRecordOut(Schema):
    """A memory reached from a direct result through relations; ``relation_type`` is the label as traversed."""

    record_type: str
    record_id: str
    relation_type: str
    relation_id: str
    hops: int = Field(description="Edges from the direct result (1: directly related).")
    from_record_id: str = Field(description="The record the last edge starts from.")
    record: MemoryOut


class SearchResultOut(Schema):
    """One hit, best first: the record, its cosine distance and its ranking score
    (the fused RRF score in HYBRID and KEYWORD modes, 1 - distance in VECTOR mode).

    ``linked``: memories reached through relations when ``num_hops`` was given (memory results only).
    """

    record_type: str
    record_id: str
    distance: float
    score: float
    content: str
    formatted_content: str
    record: Union[MessageOut, MemoryOut, ImageOut]
    linked: list[LinkedRecordOut] = []


# --- relations ----------------------------------------------------------------------


class LinkIn(_In):
    """Create a directed relation between two memory-like records of the thread (spec: link_records)."""

    source_record_id: str
    source_record_type: MemoryType
    target_record_id: str
    target_record_type: MemoryType
    relation_type: str = Field(description="Source-to-target label: a built-in type or a custom one.")
    opposite_relation_type: str = Field(
        None, description="Target-to-source label; omit for the built-in's fixed reverse, or the same label."
    )
    relation_id: str = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = None
    metadata: Metadata = None


class LinkPatchIn(_In):
    """Update a relation (spec: update_record_link). Omitted fields keep their stored values."""

    relation_type: str = Field(None, description="A built-in type also sets its fixed reverse label.")
    opposite_relation_type: str = Field(None, description="Replacement reverse label.")
    timestamp: str | None = Field(None, description="Replacement timestamp; null clears it.")
    metadata: Metadata = Field(None, description="Replaces the stored metadata; null clears it.")


class LinkTupleQuery(Schema):
    """A relation's complete endpoint tuple, in its stored source-to-target orientation."""

    source_record_id: str
    source_record_type: str
    target_record_id: str
    target_record_type: str
    relation_type: str


class LinkListQuery(Schema):
    """Filter of the relation listing."""

    record_id: str | None = Field(None, description="Only relations touching this record.")


class RelationOut(Schema):
    """A stored relation: source -> target reads ``relation_type``, target -> source ``opposite_relation_type``."""

    relation_id: str
    thread_id: str
    source_record_id: str
    source_record_type: str
    target_record_id: str
    target_record_type: str
    relation_type: str
    opposite_relation_type: str
    timestamp: str | None
    metadata: dict[str, Any]
    created_at: str | None


# --- summaries and context cards ----------------------------------------------------

CardRecordType = Literal[("message", *MEMORY_TYPES)]  # type: ignore[valid-type]


class SummaryQuery(Schema):
    """``get_summary`` arguments as query parameters."""

    except_last: int = Field(None, ge=0, description="Most recent messages left out; omit for 0.")
    token_budget: int = Field(
        None, description="Soft token budget; omit for the bounded default (1000); <= 0 disables (the transcript "
        "fallback stays capped at 4000 characters)."
    )


class SummaryOut(Schema):
    """A thread summary: the durable LLM summary, or a transcript of the latest messages without an LLM."""

    content: str
    formatted_content: str


class ContextCardIn(_In):
    """``get_context_card`` arguments (spec). Omitted keys take the spec's defaults."""

    fallback_message_count: StrictInt = Field(None, ge=0, description="Omit for 5.")
    max_relevant_results: StrictInt = Field(
        None, ge=0, description="Omit for 5; raised to the sum of min_relevant_results_by_type."
    )
    token_budget: StrictInt | None = Field(
        None, description="Hard token limit on the formatted relevant results; omit for the default; "
        "<= 0 or null disables."
    )
    soft_token_budget: StrictInt | None = Field(
        None, description="Soft token target on the formatted relevant results; omit for the default; "
        "<= 0 or null disables."
    )
    max_recent_messages: StrictInt = Field(None, ge=0, description="Omit for 0.")
    except_last_messages: StrictInt = Field(
        None, ge=0, description="Trailing messages left out of summary and search; when nonzero, max_recent_messages "
        "must be 0 or equal."
    )
    min_relevant_results_by_type: dict[CardRecordType, Annotated[StrictInt, Field(ge=0)]] | None = Field(
        None, description="Per-type minimums searched first; 'message' searches this thread only."
    )
    metadata_filter: dict[str, Any] | None = None
    include_invalid_results: StrictBool = True


class ContextCardOut(Schema):
    """A context card: its rendered text and its parts."""

    content: str
    formatted_content: str
    summary: str
    topics: list[str]
    relevant_results: list[SearchResultOut]
    recent_messages: list[MessageOut]

    @staticmethod
    def resolve_topics(obj) -> list[str]:
        return list(obj.topics or [])

    @staticmethod
    def resolve_relevant_results(obj) -> list:
        return list(obj.relevant_results or [])

    @staticmethod
    def resolve_recent_messages(obj) -> list:
        return list(obj.recent_messages or [])


# --- extraction ---------------------------------------------------------------------


class ExtractionJobOut(Schema):
    """One extraction pass over messages ``from_seq``..``to_seq`` of a thread."""

    job_id: int
    trigger: str = Field(description="add_messages, or update_message for a re-extraction.")
    status: str = Field(description="queued, running, done or failed.")
    from_seq: int
    to_seq: int
    attempts: int
    memories_created: int
    memories_linked: int
    seconds: float
    llm_seconds: float
    error: str | None
    created_at: str
    finished_at: str | None


class ExtractionStallOut(Schema):
    """A queue that is not advancing (``memory.extraction.recovery.queue_stall``)."""

    reason: str = Field(description="worker_lost, blocked, not_queued or waiting_for_worker.")
    job_id: int
    detail: str
    since: str


class ExtractionRepairOut(Schema):
    """A repair of the queue by the sweep (``memory.extraction.recovery.queue_repair``)."""

    job_id: int
    detail: str


class BrokerStatusOut(Schema):
    """Whether the server reaches the Dramatiq broker now (``memory.tasks.broker_status``)."""

    kind: str = Field(description="redis, rabbitmq or in-process.")
    ok: bool | None = Field(description="null: not checked (RabbitMQ).")
    error: str | None


class ExtractionStateOut(Schema):
    """Where a thread's extraction stands: messages up to ``watermark`` have been handed to extraction."""

    thread_id: str
    enabled: bool = Field(description="Extraction on and an LLM configured for this server.")
    mode: str
    watermark: int
    last_message_seq: int
    pending_messages: int = Field(description="Live messages after the watermark.")
    queued_jobs: int
    running_jobs: int
    last_job: ExtractionJobOut | None
    stalled: ExtractionStallOut | None = Field(description="Why the queue is not advancing; null when it is.")
    last_repair: ExtractionRepairOut | None = Field(description="The sweep's latest repair of this thread's queue.")
    broker: BrokerStatusOut
    config: dict[str, Any]
    settled: bool | None = Field(
        None, description="With ?wait: true when no job of the thread was queued or running at the answer, "
                          "false when the wait ran out first; null without ?wait.")


# --- API keys -----------------------------------------------------------------------


class KeyIn(_In):
    """A new API key of the calling key's project."""

    name: str = Field(min_length=1, max_length=100, description="A label, e.g. the application using it.")
    permission: Literal["read", "write", "admin"] = Field(
        "write", description="read: reads and searches; write: also writes and deletes; admin: also manages keys "
                             "and erases users and agents.")
    user_id: str | None = Field(None, description="Act for this end user only (omit or null: any user).")
    agent_id: str | None = Field(None, description="Act for this agent only (omit or null: any agent).")
    expires_at: AwareDatetime | None = Field(None, description="Refused from this instant on (ISO 8601 with a "
                                                                "zone); omit or null: never.")


class KeyOut(Schema):
    """An API key as stored: never the key itself."""

    key_id: int = Field(description="Names the key in /api/keys/{key_id}.")
    name: str
    prefix: str = Field(description="The key's first characters, to recognise it.")
    project: str = Field(description="The project's slug.")
    permission: str
    user_id: str | None
    agent_id: str | None
    expires_at: str | None
    active: bool = Field(description="False once revoked.")
    created_at: str
    created_by: str
    last_used_at: str | None
    rotated_at: str | None
    revoked_at: str | None

    @staticmethod
    def resolve_key_id(obj) -> int:
        return obj.pk

    @staticmethod
    def resolve_project(obj) -> str:
        return obj.project.slug

    @staticmethod
    def resolve_active(obj) -> bool:
        return obj.is_active

    @staticmethod
    def _iso(value) -> str | None:
        return value.isoformat() if value is not None else None

    @staticmethod
    def resolve_expires_at(obj) -> str | None:
        return KeyOut._iso(obj.expires_at)

    @staticmethod
    def resolve_created_at(obj) -> str:
        return obj.created_at.isoformat()

    @staticmethod
    def resolve_last_used_at(obj) -> str | None:
        return KeyOut._iso(obj.last_used_at)

    @staticmethod
    def resolve_rotated_at(obj) -> str | None:
        return KeyOut._iso(obj.rotated_at)

    @staticmethod
    def resolve_revoked_at(obj) -> str | None:
        return KeyOut._iso(obj.revoked_at)


class KeyCreatedOut(KeyOut):
    """A key just created or rotated, with the raw key: shown this once, never stored."""

    key: str = Field(description="Send as `Authorization: Bearer <key>`. It cannot be shown again.")


# --- erasure --------------------------------------------------------------------------


class ErasureOut(Schema):
    """A receipt of an erasure (``memory.services.erasure``): what was deleted about one user or agent, and when.

    The stored receipt names the subject only by a keyed digest; ``subject_id``
    is echoed in the answer to the erasure itself and empty when a receipt is read back.
    """

    receipt_id: str
    project: str
    subject: str = Field(description="user or agent")
    subject_id: str
    cascade: bool
    found: bool = Field(description="Whether the project held anything about the subject.")
    counts: dict[str, int] = Field(description="Rows deleted per kind: threads, messages, memories, images, "
                                               "relations, chunks, summaries, extraction_jobs, admin_log_entries "
                                               "(the admin's history of them), api_keys (keys fixed to the "
                                               "erased user or agent), memory_versions (history entries).")
    storage: dict[str, Any] = Field(description="What was done to the storage afterwards (scrubbed: true, WAL "
                                                "truncated, Oracle Text optimized ...); scrubbed: false with a "
                                                "reason when nothing was deleted (no scrub ran).")
    requested_by: str
    requested_at: str
    completed_at: str | None

    @staticmethod
    def resolve_requested_at(obj) -> str:
        return obj.requested_at.isoformat()

    @staticmethod
    def resolve_completed_at(obj) -> str | None:
        return obj.completed_at.isoformat() if obj.completed_at else None


# --- memory history (memory.records.history) ----------------------------------------------------


class MemoryVersionOut(Schema):
    """One version of a memory's history (``memory.records.history.MemoryVersionRecord``).

    ``actor``: ``{"kind", "id"}`` (kinds: client, api_key, staff, admin,
    extraction, ttl, import), or ``{"kind": "relation", "id", "via"}`` for a
    change a relation drove. ``before``/``after``: snapshots of content,
    memory_type, metadata, status, expires_at, timestamp, and ``pending: true``
    while the memory awaited review (null before a create and after a delete
    or a reject); ``changed`` names the fields that differ. ``action``: create,
    update, invalidate, revalidate, restore, delete, approve, reject.
    """

    memory_id: str
    version: int
    action: str
    actor: dict[str, Any]
    reason: str
    relation_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: list[str]
    created_at: str


class MemoryRestoreOut(Schema):
    """What a restore wrote: the memory as stored now and the number of the new version."""

    version: int
    memory: MemoryOut
# --- client-level lists and profiles (SDK OracleAgentMemory) -------------------------------------


class ProjectListQuery(Schema):
    """Filters of a project-wide list (SDK ``list_messages``/``list_memories``/``list_images``): each scope
    field omitted is no filter, given matches exactly; ``metadata_filter`` is JSON text (the search grammar)."""

    user_id: str = Field(None, description="Only records of this user.")
    agent_id: str = Field(None, description="Only records of this agent.")
    thread_id: str = Field(None, description="Only records of this thread.")
    metadata_filter: str = Field(None, description="A metadata filter as JSON text (the search grammar).")


class ProjectImageListQuery(ProjectListQuery):
    """``ProjectListQuery`` with an image id (standalone images only, as the SDK's client-level list)."""

    image_id: str = Field(None, description="Only this image.")


class ProfileIn(_In):
    """A user's or agent's profile (SDK ``add_user``/``add_agent``); replaces a stored one."""

    information: str = Field(description="Free-form information about the user or agent.")
    metadata: Metadata = None


class ProfileQuery(Schema):
    """Filter of the profile listing."""

    metadata_filter: str = Field(None, description="A metadata filter as JSON text (the search grammar).")


class ProfileOut(Schema):
    """A profile (SDK ``UserProfileRecord``/``AgentProfileRecord``): ``id`` is the user or agent id."""

    record_type: Literal["user_profile", "agent_profile"]
    id: str
    content: str | None
    metadata: dict[str, Any] | None
    timestamp: str | None


# --- the review queue (memory.records.review_rules) ---------------------------------------------------------------


class ReviewListQuery(Schema):
    """Filters of the review queue: one thread (its public id), one memory type."""

    thread_id: str = Field(None, description="Only memories of this thread.")
    memory_type: MemoryType = Field(None, description="Only memories of this type.")


class ReviewFlagOut(Schema):
    """One finding of the injection scan (``memory.records.review_rules.scan``): ``kind`` is one of override, secrecy,
    prompt_markup, url, tool_call, secret, hidden_text; ``evidence`` the text that raised it (80 characters)."""

    kind: str
    label: str
    evidence: str


class ReviewSimilarOut(Schema):
    """A stored memory close to the pending one (same project, user and agent; any thread): a duplicate or
    contradiction candidate. ``distance``: cosine distance (0: same direction); ``pending``: it waits too."""

    memory: MemoryOut
    distance: float
    pending: bool


class ReviewRelationOut(Schema):
    """The relation extraction decided for the memory, made when it is approved (``relation_type`` from it
    to ``memory_id``, whose ``content`` is null when that memory is gone)."""

    relation_type: str
    memory_id: str
    content: str | None


class ReviewItemOut(Schema):
    """A memory awaiting review: the record, the injection scan's flags, the most similar stored memories,
    the relation its approval makes, and how long it has waited (seconds)."""

    memory: MemoryOut
    flags: list[ReviewFlagOut]
    similar: list[ReviewSimilarOut]
    relation_on_approval: ReviewRelationOut | None
    waiting_seconds: float


class ReviewApproveIn(_In):
    """Approve a memory awaiting review, as it is, or edited first (``content`` and/or ``memory_type``: the
    edited memory is re-embedded). ``reason`` is kept in the history entry."""

    content: str = Field(None, description="Edited content (omit to approve it as it is).")
    memory_type: MemoryType = Field(None, description="Edited type (omit to keep it).")
    reason: str | None = Field(None, max_length=400, description="The reviewer's note (history entry's reason).")


class ReviewRejectIn(_In):
    """Reject (delete) a memory awaiting review; ``reason`` is kept in the history entry."""

    reason: str | None = Field(None, max_length=400, description="Why (the history entry's reason).")


class ReviewDecisionOut(Schema):
    """What a decision did: the memory (public id), ``action`` (approve or reject), the history version it
    wrote, the relation approval made (null: none), and the memory as stored now (null after a rejection)."""

    memory_id: str
    action: Literal["approve", "reject"]
    version: int
    relation_id: str | None
    memory: MemoryOut | None
