"""Bodies of ``threads/api/messages.py``: messages in and out, their text and image parts, list and read options."""

from __future__ import annotations

from typing import Any, Literal, Union

from django.conf import settings
from ninja import Field, Schema

from memory.core.errors import MAX_SQL_COUNT
from memory.core.types import ImageMimeType, TimeToLiveAnchor
from threads.schemas.common import InSchema, Metadata, TtlDays, base64_text


class TextPartIn(InSchema):
    """A text content part."""

    type: Literal["text"] = "text"
    text: str
    id: str | None = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = None


class ImagePartIn(InSchema):
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


class MessageIn(InSchema):
    """One message to append: role and content, optionally id, timestamp and metadata."""

    role: str
    content: MessageContentIn
    id: str | None = Field(None, description="Omit for a generated UUID.")
    timestamp: str | None = Field(None, description="Event time; ISO-8601 when TTL is anchored on it.")
    metadata: Metadata = None


class MessagesIn(InSchema):
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


class MessagePatchIn(InSchema):
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
        return base64_text(obj.bytes) if not isinstance(obj, dict) else obj.get("data")


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
