"""Bodies of ``threads/api/images.py``: an image upload (JSON or form fields), its update, list and read options,
and a stored image."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import quote

from django.urls import reverse
from ninja import Field, Schema

from memory.core.types import ImageMimeType, TimeToLiveAnchor
from threads.schemas.common import InSchema, Metadata, TtlDays, base64_text


class ImageFormIn(InSchema):
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


class ImagePatchIn(InSchema):
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
        safe = "!$&'()*+,;=~:@"  # reverse()'s safe characters, less "/"
        head, _, rest = reverse("api:image_content", kwargs={"thread_id": "0T0", "image_id": "0I0"}).partition("/0T0/")
        middle, _, tail = rest.partition("/0I0/")
        return f"{head}/{quote(obj.thread_id, safe=safe)}/{middle}/{quote(obj.id, safe=safe)}/{tail}"

    @staticmethod
    def resolve_data(obj) -> str | None:
        return base64_text(obj.bytes)
