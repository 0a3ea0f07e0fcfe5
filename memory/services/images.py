"""Image writes: ``image_add``, ``image_update``, ``image_delete``, and the image parts of messages.

An image is an ``Image`` row (bytes as a BLOB) plus, when it has a description,
``SearchChunk`` rows with source_kind and record_type "image" (scope, expiry and
metadata copied like a message's; ``memory.index.writer``). An image part of a message
is an image row with ``message`` set: it shares the message's expiry, and the
message's ``parts`` JSON repeats its id, MIME type, description and timestamp so
that reading messages never touches the images table unless bytes are asked for.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.core import ttl as ttl_rules
from memory.core.errors import Conflict, InvalidArgument, InvalidType, NotFound
from memory.core.ids import public_id, stored_id, stored_ids
from memory.core.locking import lock_first
from memory.core.types import NOTSET, ImageMimeType, MemoryRetentionConfig, NotSet, TimeToLiveAnchor
from memory.embedders import embed_records
from memory.index import writer as index
from memory.models import Image, Message, Thread
from memory.records.image_rules import (
    ImageInputLimitConfig,
    ValidImage,
    check_description,
    check_mime_type,
    generate_caption,
    validate_image,
)
from memory.records.selectors import live_q
from memory.records.validators import check_id, check_metadata
from memory.services.common import lock_thread, refresh_expiry
from memory.services.erasure import images_erase
from memory.services.parts import ImagePart


def new_image_row(*, image_id: str, thread: Thread, image: ValidImage, description: str | None,
                   metadata: dict[str, Any], timestamp: str | None, expires_at, now,
                   message_id: str | None = None) -> Image:
    return Image(
        id=stored_id(thread.project_id, image_id), project_id=thread.project_id, thread_id=thread.pk,
        message_id=message_id, user_id=thread.user_id,
        agent_id=thread.agent_id, mime_type=image.mime_type.value, description=description, data=image.data,
        size_bytes=image.size_bytes, width=image.width, height=image.height, metadata=metadata,
        timestamp=timestamp, event_at=ttl_rules.parse_timestamp(timestamp), expires_at=expires_at, created_at=now,
    )


def caption_parts(parts: list[ImagePart], llm: Any, limits: ImageInputLimitConfig) -> None:
    """Fill the description of each new image part that asked for one
    (``memory.records.image_rules.generate_caption``)."""
    for part in parts:
        if part.generate and part.image is not None:
            part.part["description"] = generate_caption(part.image, llm, limits=limits, field=part.field)


def check_new_image_ids(project_id: int, parts: list[ImagePart], *, replaceable: set[str] = frozenset()) -> None:
    """New image part ids are unique in the call and not taken in the project (except by ``replaceable`` images).

    Ids are public ones (``replaceable`` too).
    """
    ids = [p.part["id"] for p in parts]
    if len(set(ids)) != len(ids):
        raise InvalidArgument("messages", "image part ids must be unique within a batch")
    taken = set(public_id(pk) for pk in Image.objects.filter(pk__in=stored_ids(project_id, ids))
                .values_list("pk", flat=True)) - set(replaceable)
    for p in parts:
        if p.part["id"] in taken:
            raise Conflict(f"{p.field}.id", p.part["id"])


def message_image_rows(thread: Thread, message_id: str, parts: list[ImagePart], expires_at, now) -> list[Image]:
    """Image rows for the new image parts of one message (scope from ``thread``, expiry from the message).

    ``message_id`` is the message's stored id. Their metadata is empty: an
    image part carries none (spec ImageContent).
    """
    return [
        new_image_row(image_id=p.part["id"], thread=thread, image=p.image, description=p.part["description"],
                       metadata={}, timestamp=p.part["timestamp"], expires_at=expires_at, now=now,
                       message_id=message_id)
        for p in parts if p.image is not None
    ]


def insert_images(rows: list[Image], field: str) -> None:
    """Insert image rows; a caller-chosen id taken since the checks is a ``Conflict``."""
    if not rows:
        return
    try:
        with transaction.atomic():
            Image.objects.bulk_create(rows)
    except IntegrityError:
        taken = Image.objects.filter(pk__in=[r.pk for r in rows]).values_list("pk", flat=True).first()
        raise Conflict(field, public_id(taken or rows[0].pk)) from None


def _check_scope_assertion(value: Any, expected: str | None, field: str) -> None:
    """Spec add_image: a given user/agent/thread id must match this thread's exactly (ValueError)."""
    if value is NOTSET:
        return
    if value is not None and not isinstance(value, str):
        raise InvalidType(field, "must be a string or None")
    if value != expected:
        raise InvalidArgument(field, f"must match this thread's {field} {expected!r} (got {value!r})")


def _image_embeddings(texts: list[str], timestamp: str | None):
    return embed_records([index.embedding_text(c, timestamp) for c in texts], field="description") if texts else []


def image_add(
    *,
    thread: Thread,
    image: Any,
    description: str | None | NotSet = NOTSET,
    mime_type: Any = None,
    image_id: str | None | NotSet = NOTSET,
    user_id: str | None | NotSet = NOTSET,
    agent_id: str | None | NotSet = NOTSET,
    thread_id: str | None | NotSet = NOTSET,
    metadata: Any = None,
    timestamp: Any = None,
    ttl_days: int | None | NotSet = NOTSET,
    ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
    retention: MemoryRetentionConfig,
    limits: ImageInputLimitConfig | None = None,
    llm: Any = None,
    caption_required: bool = False,
) -> str:
    """Store one image owned by ``thread`` and index its description; return its id (spec: add_image).

    ``image``: raw bytes, validated by ``memory.records.image_rules.validate_image`` against
    ``limits`` (``mime_type`` omitted/None: detected; given: must match the
    bytes). ``description`` omitted or None: a caption from ``llm``
    (``memory.records.image_rules.generate_caption``; no LLM: ValueError naming
    ``description`` with ``caption_required``, the SDK's rule, else None, and the image is not
    searchable until described). ``user_id``/``agent_id``/``thread_id``: scope
    assertions that must equal the thread's. ``timestamp``/``ttl_days``/
    ``ttl_anchor`` as for memories (``memory.core.ttl``). The row and its chunks are
    written in one transaction. Raises ValueError for a refused image, a lying
    ``mime_type``, a scope mismatch, bad TTL values or a taken ``image_id``
    (``Conflict``); TypeError for wrong types; ``memory.llm.adapters.LlmError`` when
    the caption request fails (nothing stored).
    """
    limits = limits or ImageInputLimitConfig()
    _check_scope_assertion(user_id, thread.user_id, "user_id")
    _check_scope_assertion(agent_id, thread.agent_id, "agent_id")
    _check_scope_assertion(thread_id, thread.public_id, "thread_id")
    valid = validate_image(image, mime_type, limits=limits)
    iid = str(uuid.uuid4()) if image_id is NOTSET or image_id is None else check_id(image_id, "image_id")
    if description is not NOTSET:
        check_description(description)
    meta = check_metadata(metadata)
    stamp = ttl_rules.check_timestamp(timestamp)
    now = timezone.now()
    days = ttl_rules.resolve_ttl_days(ttl_days, retention)
    anchor = TimeToLiveAnchor.CREATED_AT if ttl_anchor is NOTSET else ttl_rules.check_anchor(ttl_anchor)
    expiry = ttl_rules.expires_at(days, anchor, created_at=now, timestamp=stamp)
    if Image.objects.filter(pk=stored_id(thread.project_id, iid)).exists():
        raise Conflict("image_id", iid)
    if description is NOTSET or description is None:
        if llm is None and caption_required:
            raise InvalidArgument("description", "required: there is no LLM to caption the image")
        description = generate_caption(valid, llm, limits=limits)
    chunks = index.image_chunk_texts(description)
    vectors = _image_embeddings(chunks, stamp)
    with transaction.atomic():
        locked = lock_thread(thread.pk)
        row = new_image_row(image_id=iid, thread=locked, image=valid, description=description, metadata=meta,
                             timestamp=stamp, expires_at=expiry, now=now)
        insert_images([row], "image_id")
        index.index_record(row, "image", "image", chunks, vectors, replace=False)
    return iid


def _visible_image(thread: Thread, image_id: Any, *, lock: bool = False) -> Image | None:
    """A live image (public id) owned by this thread (bytes deferred), or None."""
    check_id(image_id, "image_id")
    qs = Image.objects.filter(live_q(timezone.now()), pk=stored_id(thread.project_id, image_id), thread_id=thread.pk)
    return lock_first(qs) if lock else qs.first()


def _sync_message_part(row: Image) -> None:
    """Repeat an attached image's MIME type, description and timestamp in its message's ``parts``."""
    msg = lock_first(Message.objects.filter(pk=row.message_id))
    if msg is None or not msg.parts:
        return
    for part in msg.parts:
        if part.get("type") == "image" and part.get("id") == row.public_id:
            part.update(mime_type=row.mime_type, description=row.description, timestamp=row.timestamp)
    msg.save(update_fields=["parts", "updated_at"])


def image_update(
    *,
    thread: Thread,
    image_id: Any,
    image: bytes | NotSet = NOTSET,
    description: str | None | NotSet = NOTSET,
    mime_type: ImageMimeType | str | NotSet = NOTSET,
    metadata: dict[str, Any] | None | NotSet = NOTSET,
    timestamp: str | None | NotSet = NOTSET,
    ttl_days: int | None | NotSet = NOTSET,
    ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
    retention: MemoryRetentionConfig,
    limits: ImageInputLimitConfig | None = None,
    llm: Any = None,
) -> str:
    """Update an image owned by this thread; return its id (spec: update_image).

    Omitted values are kept. New ``image`` bytes need ``mime_type`` with them
    (and must match it); ``mime_type`` alone is refused. ``description``: a
    string replaces it, None asks ``llm`` for a new caption of the (new or
    stored) bytes; with no LLM, None is refused (ValueError) unless new bytes
    come with it (then the old text no longer describes them: None). ``metadata`` replaces the stored object,
    ``timestamp=None`` clears the event time, ``ttl_days``/``ttl_anchor``
    refresh the expiry like ``update_memory`` except on an image attached to a
    message, whose expiry is the message's (ValueError: use update_message).
    An attached image's new MIME type, description and timestamp are repeated
    in its message's parts in the same transaction. Raises KeyError when the
    image is absent, expired or another thread's.
    """
    limits = limits or ImageInputLimitConfig()
    row = _visible_image(thread, image_id)
    if row is None:
        raise NotFound("image_id", image_id)
    if row.message_id is not None:
        for name, value in (("ttl_days", ttl_days), ("ttl_anchor", ttl_anchor)):
            if value is not NOTSET:
                raise InvalidArgument(name, f"image {image_id!r} is attached to message "
                                            f"{public_id(row.message_id)!r}; change its expiration through "
                                            "update_message()")
    valid = None
    if image is not NOTSET:
        if mime_type is NOTSET or mime_type is None:
            raise InvalidArgument("mime_type", "is required when image is given")
        valid = validate_image(image, mime_type, limits=limits)
    elif mime_type is not NOTSET:
        raise InvalidArgument("mime_type", "can only be given together with new image bytes")
    if description is not NOTSET:
        check_description(description)
    new_meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
    new_stamp = ttl_rules.check_timestamp(timestamp) if timestamp is not NOTSET else NOTSET
    new_description = description
    if description is None and llm is None and valid is None:
        # Without an LLM, None could only erase the stored description.
        raise InvalidArgument("description", "None asks the thread's LLM for a new description, and no LLM is "
                              "configured; pass a string to replace the description")
    if description is None:
        source = valid
        if source is None:
            stored = Image.objects.with_bytes().filter(pk=row.pk).first()
            source = ValidImage(data=bytes(stored.data), mime_type=check_mime_type(stored.mime_type),
                                width=stored.width, height=stored.height)
        new_description = generate_caption(source, llm, limits=limits)
    chunks = vectors = None
    if new_description is not NOTSET or new_stamp is not NOTSET:
        text = row.description if new_description is NOTSET else new_description
        chunks = index.image_chunk_texts(text)
        vectors = _image_embeddings(chunks, row.timestamp if new_stamp is NOTSET else new_stamp)
    with transaction.atomic():
        lock_thread(thread.pk, required=False)  # memory.core.locking: the thread, then the image
        row = _visible_image(thread, image_id, lock=True)
        if row is None:
            raise NotFound("image_id", image_id)
        fields = ["updated_at"]
        if valid is not None:
            row.data, row.mime_type, row.size_bytes = valid.data, valid.mime_type.value, valid.size_bytes
            row.width, row.height = valid.width, valid.height
            fields += ["data", "mime_type", "size_bytes", "width", "height"]
        if new_description is not NOTSET:
            row.description = new_description
            fields.append("description")
        if new_meta is not NOTSET:
            row.metadata = new_meta
            fields.append("metadata")
        if new_stamp is not NOTSET:
            row.timestamp, row.event_at = new_stamp, ttl_rules.parse_timestamp(new_stamp)
            fields += ["timestamp", "event_at"]
        if row.message_id is None and refresh_expiry(row, ttl_days, ttl_anchor, retention, row.timestamp):
            fields.append("expires_at")
        row.save(update_fields=fields)
        if chunks is None:
            index.reindex_state("image", [row.pk], expires_at=row.expires_at, metadata=row.metadata)
        else:
            index.index_record(row, "image", "image", chunks, vectors)
        if row.message_id is not None and {"mime_type", "description", "timestamp"} & set(fields):
            _sync_message_part(row)
    return image_id


def image_delete(*, thread: Thread, image_id: Any) -> int:
    """Delete a standalone image of this thread with its chunks; return 1, or 0 when absent (spec: delete_image).

    0 also when the image is expired or another thread's. Raises ValueError
    for an image attached to a message: delete or update the message instead.
    """
    with transaction.atomic():
        lock_thread(thread.pk, required=False)  # memory.core.locking: the thread, then the image
        row = _visible_image(thread, image_id, lock=True)
        if row is None:
            return 0
        if row.message_id is not None:
            raise InvalidArgument("image_id", f"image {image_id!r} is attached to message "
                                              f"{public_id(row.message_id)!r}; delete or update the parent message "
                                              "instead")
        images_erase([row.pk])
    return 1
