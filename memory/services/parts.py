"""Parsing of message input: a message, its content parts and its image parts (validated, not written)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from memory.core import ttl as ttl_rules
from memory.core.errors import MAX_CONTENT_CHARS, InvalidArgument, InvalidType, check_size, check_text
from memory.core.types import ImageContent, TextContent
from memory.core.types import Message as MessageDTO
from memory.records.image_rules import (
    ImageBudget,
    ImageInputLimitConfig,
    ValidImage,
    check_description,
    check_mime_type,
    decode_image_base64,
    validate_image,
)
from memory.records.validators import check_id, check_metadata, check_role


@dataclass
class ImagePart:
    """An image part of a message being written.

    ``part`` is the dict stored in ``Message.parts`` (``type``, ``id``,
    ``mime_type``, ``description``, ``timestamp``); ``image`` the validated
    new bytes, or None for a reference to an image already attached to the
    message (``update_message`` only); ``generate`` asks the LLM for the
    description (omitted or None with new bytes); ``field`` names the part in errors.
    """

    part: dict[str, Any]
    image: ValidImage | None
    generate: bool
    field: str


@dataclass
class NewMessage:
    id: str | None
    role: str
    content: str
    parts: list[dict[str, Any]] | None
    timestamp: str | None
    metadata: dict[str, Any]
    images: list[ImagePart] = dc_field(default_factory=list)


_MESSAGE_KEYS = {"role", "content", "id", "timestamp", "metadata"}
_IMAGE_PART_KEYS = {"type", "id", "bytes", "data", "mime_type", "description", "timestamp"}


def parse_image_part(part: Any, where: str, limits: ImageInputLimitConfig,
                     budget: ImageBudget | None = None) -> ImagePart:
    """Validate one image part: an ``ImageContent`` or ``{"type": "image", ...}`` (``_parse_parts``), charged
    to the call's ``budget`` (``memory.records.image_rules.ImageBudget``)."""
    if isinstance(part, ImageContent):
        raw = {"id": part.id, "bytes": part.bytes, "mime_type": part.mime_type, "description": part.description,
               "timestamp": part.timestamp}
    else:
        unknown = set(part) - _IMAGE_PART_KEYS
        if unknown:
            raise InvalidArgument(where, f"unknown key(s) {sorted(unknown)} in an image part; "
                                         f"allowed: {sorted(_IMAGE_PART_KEYS)}")
        raw = dict(part)
    if raw.get("bytes") is not None and raw.get("data") is not None:
        raise InvalidArgument(where, "give the image as bytes or as data (base64), not both")
    data, data_field = raw.get("bytes"), f"{where}.bytes"
    if raw.get("data") is not None:
        data_field = f"{where}.data"
        if isinstance(raw["data"], (bytes, bytearray, memoryview)):
            data = raw["data"]
        else:  # base64, or a data URI whose media type is a declaration like mime_type
            data, declared = decode_image_base64(raw["data"], data_field, raw.get("mime_type"), f"{where}.mime_type")
            raw["mime_type"] = declared
    part_id = check_id(raw.get("id") or str(uuid.uuid4()), f"{where}.id")
    description = check_description(raw.get("description"), f"{where}.description")
    stamp = ttl_rules.check_timestamp(raw.get("timestamp"), f"{where}.timestamp")
    stored = {"type": "image", "id": part_id, "mime_type": None, "description": description, "timestamp": stamp}
    if data is None:
        mime = check_mime_type(raw.get("mime_type"), f"{where}.mime_type")
        stored["mime_type"] = mime.value if mime else None
        return ImagePart(part=stored, image=None, generate=False, field=where)
    valid = validate_image(data, raw.get("mime_type"), limits=limits, field=data_field,
                           mime_field=f"{where}.mime_type", budget=budget)
    stored["mime_type"] = valid.mime_type.value
    return ImagePart(part=stored, image=valid, generate=description is None, field=where)


def parse_parts(content: Sequence[Any], field: str, limits: ImageInputLimitConfig | None = None,
                budget: ImageBudget | None = None) -> tuple[str, list[dict[str, Any]], list[ImagePart]]:
    """Turn an ordered content sequence into (joined text, stored part dicts, image parts).

    Text parts: ``TextContent`` or ``{"type": "text", "text": ...}``. Image
    parts: ``ImageContent`` or ``{"type": "image", "bytes": b"..." | "data":
    "<base64>", "mime_type"?, "description"?, "id"?, "timestamp"?}``, validated
    against ``limits`` (``memory.records.image_rules.validate_image``) and charged to the call's
    ``budget`` (a fresh one when omitted: ``MAX_BATCH_IMAGES`` and ``MAX_BATCH_IMAGE_PIXELS``). The joined text is
    the text parts only; an image is searchable through its own record.
    """
    if len(content) == 0:
        raise InvalidArgument(field, "a content sequence must not be empty")
    limits = limits or ImageInputLimitConfig()
    budget = budget if budget is not None else ImageBudget()
    parts: list[dict[str, Any]] = []
    images: list[ImagePart] = []
    for j, part in enumerate(content):
        where = f"{field}[{j}]"
        if isinstance(part, TextContent):
            check_text(part.text, f"{where}.text")
            parts.append({"type": "text", "id": part.id, "text": part.text, "timestamp": part.timestamp})
            continue
        if isinstance(part, Mapping) and part.get("type", "text") == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidType(f"{where}.text", "must be a string")
            check_text(text, f"{where}.text")
            part_id = part.get("id") or str(uuid.uuid4())
            parts.append({"type": "text", "id": check_id(part_id, f"{where}.id"), "text": text,
                          "timestamp": ttl_rules.check_timestamp(part.get("timestamp"), f"{where}.timestamp")})
            continue
        if isinstance(part, ImageContent) or (isinstance(part, Mapping) and part.get("type") == "image"):
            image = parse_image_part(part, where, limits, budget)
            images.append(image)
            parts.append(image.part)
            continue
        kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
        raise InvalidArgument(where, f"content part of type {kind!r} is not supported; use text or image parts")
    ids = [p["id"] for p in parts if p["type"] == "image"]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(field, "image part ids must be unique within a message")
    return "\n".join(p["text"] for p in parts if p["type"] == "text"), parts, images


def parse_message(raw: Any, index: int, limits: ImageInputLimitConfig | None = None, *,
                  field: str | None = None, budget: ImageBudget | None = None) -> NewMessage:
    """Validate one input message (a ``Message`` or a mapping with role and content); errors name
    ``messages[index]`` or the given ``field`` (an import names the file's line). Its images are charged to
    ``budget``: pass one per call, so that a batch's images count together."""
    field = field or f"messages[{index}]"
    if isinstance(raw, MessageDTO):
        data = {"role": raw.role, "content": raw.content, "id": raw.id, "timestamp": raw.timestamp,
                "metadata": raw.metadata}
    elif isinstance(raw, Mapping):
        unknown = set(raw) - _MESSAGE_KEYS
        if unknown:
            raise InvalidArgument(field, f"unknown key(s) {sorted(unknown)}; allowed: {sorted(_MESSAGE_KEYS)}")
        data = dict(raw)
    else:
        raise InvalidType(field, f"must be a Message or a mapping, not {type(raw).__name__}")
    role = check_role(data.get("role"), f"{field}.role")
    content = data.get("content")
    parts, images = None, []
    if isinstance(content, str):
        text = check_text(content, f"{field}.content")
    elif isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        text, parts, images = parse_parts(content, f"{field}.content", limits, budget)
        for image in images:
            if image.image is None:
                raise InvalidArgument(f"{image.field}.bytes", "is required: a new image part needs its bytes")
    else:
        raise InvalidArgument(f"{field}.content", "is required: a string or a sequence of content parts")
    check_size(text, f"{field}.content", MAX_CONTENT_CHARS)
    msg_id = data.get("id")
    if msg_id is not None:
        msg_id = check_id(msg_id, f"{field}.id")
    return NewMessage(
        id=msg_id,
        role=role,
        content=text,
        parts=parts,
        timestamp=ttl_rules.check_timestamp(data.get("timestamp"), f"{field}.timestamp"),
        metadata=check_metadata(data.get("metadata"), f"{field}.metadata"),
        images=images,
    )
