"""Writes of the memory engine: threads, messages and memories with their search chunks.

Every function is keyword-only, validates everything before it writes, embeds
outside the transaction, and writes a record together with its ``SearchChunk``
rows in one transaction, so a batch with one bad item writes nothing and a
failure leaves nothing half-written (ARCHITECTURE.md, "Main flows").

Errors follow the spec: ``ValueError`` (``InvalidArgument``/``Conflict``) for bad
values, ``TypeError`` for bad types, ``KeyError`` (``NotFound``) for records
that are not there, expired, or owned by another thread.

Projects (``memory.tenancy``): a function works in the project of the thread
row it is given (or of ``project``), takes and returns the caller's public
ids, and stores rows under stored ids (``stored_id``) with their ``project``
column set, so nothing it does can reach another project's records.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field as dc_field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory import ttl as ttl_rules
from memory.chunking import chunk_text
from memory.embedders import get_embedder
from memory.erasure import chunks_erase, images_erase, memories_erase, messages_erase, threads_erase
from memory.errors import (
    MAX_BATCH_CHARS,
    MAX_BATCH_MESSAGES,
    MAX_CONTENT_CHARS,
    Conflict,
    InvalidArgument,
    InvalidType,
    NotFound,
    check_depth,
    check_json_text,
    check_size,
    check_text,
)
from memory.images import (
    ImageInputLimitConfig,
    ValidImage,
    check_mime_type,
    decode_image_base64,
    generate_caption,
    validate_image,
)
from memory.models import MEMORY_TYPES, Image, Memory, Message, Project, RecordLink, SearchChunk, Thread
from memory.locking import lock_first
from memory.selectors import live_q
from memory.tenancy import public_id, stored_id, stored_ids
from memory.types import (
    NOTSET,
    ImageContent,
    Message as MessageDTO,
    MemoryRetentionConfig,
    RecordStatus,
    TextContent,
    TimeToLiveAnchor,
)

MAX_ID_LENGTH = 255


# --- argument checks ---------------------------------------------------------------


def check_id(value: Any, field: str) -> str:
    """A caller-chosen identifier: a non-empty string of at most 255 characters."""
    if not isinstance(value, str):
        raise InvalidType(field, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(field, "must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(field, f"must be at most {MAX_ID_LENGTH} characters")
    return check_text(value, field)


def check_scope_id(value: Any, field: str) -> str | None:
    """A user/agent/thread scope value: a string or None."""
    if value is None:
        return None
    return check_id(value, field)


def check_metadata(value: Any, field: str = "metadata") -> dict[str, Any]:
    """Metadata: a JSON-serialisable dict (None means empty), nested at most ``MAX_METADATA_DEPTH`` levels."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidType(field, f"must be a dict or None, not {type(value).__name__}")
    value = dict(value)
    check_depth(value, field)
    for key in value:
        if not isinstance(key, str):
            raise InvalidArgument(field, "keys must be strings")
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(field, f"must be JSON-serialisable ({exc})") from None
    check_json_text(value, field)
    return value


def check_status(value: Any, field: str = "status") -> str:
    """A ``RecordStatus`` or its string value."""
    try:
        return RecordStatus(value).value
    except ValueError:
        raise InvalidArgument(field, "must be one of: valid, invalid") from None


def check_memory_type(value: Any, field: str = "memory_type") -> str:
    """One of the spec's memory types: memory, fact, guideline, preference."""
    if value is NOTSET:
        return "memory"
    if value not in MEMORY_TYPES:
        raise InvalidArgument(field, f"must be one of: {', '.join(MEMORY_TYPES)}")
    return value


def reject_unknown(kwargs: Mapping[str, Any], where: str) -> None:
    """Unexpected keyword arguments raise TypeError (spec: ``**kwargs`` notes)."""
    if kwargs:
        names = ", ".join(sorted(kwargs))
        raise InvalidType(next(iter(sorted(kwargs))), f"{where}() got unexpected keyword argument(s): {names}")


def _per_item(value: Any, n: int, field: str) -> list[Any]:
    """Expand a scalar-or-list batch argument to one value per message."""
    if isinstance(value, list):
        if len(value) != n:
            raise InvalidArgument(field, f"a list must have one entry per message ({n}), got {len(value)}")
        return list(value)
    return [value] * n


# --- messages ---------------------------------------------------------------------------


@dataclass
class _ImagePart:
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
class _NewMessage:
    id: str | None
    role: str
    content: str
    parts: list[dict[str, Any]] | None
    timestamp: str | None
    metadata: dict[str, Any]
    images: list[_ImagePart] = dc_field(default_factory=list)


_MESSAGE_KEYS = {"role", "content", "id", "timestamp", "metadata"}
_IMAGE_PART_KEYS = {"type", "id", "bytes", "data", "mime_type", "description", "timestamp"}


def _parse_image_part(part: Any, where: str, limits: ImageInputLimitConfig) -> _ImagePart:
    """Validate one image part: an ``ImageContent`` or ``{"type": "image", ...}`` (``_parse_parts``)."""
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
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidType(f"{where}.description", "must be a string or None")
    if description is not None:
        check_text(description, f"{where}.description")
    stamp = ttl_rules.check_timestamp(raw.get("timestamp"), f"{where}.timestamp")
    stored = {"type": "image", "id": part_id, "mime_type": None, "description": description, "timestamp": stamp}
    if data is None:
        mime = check_mime_type(raw.get("mime_type"), f"{where}.mime_type")
        stored["mime_type"] = mime.value if mime else None
        return _ImagePart(part=stored, image=None, generate=False, field=where)
    valid = validate_image(data, raw.get("mime_type"), limits=limits, field=data_field,
                           mime_field=f"{where}.mime_type")
    stored["mime_type"] = valid.mime_type.value
    return _ImagePart(part=stored, image=valid, generate=description is None, field=where)


def _parse_parts(content: Sequence[Any], field: str, limits: ImageInputLimitConfig | None = None
                 ) -> tuple[str, list[dict[str, Any]], list[_ImagePart]]:
    """Turn an ordered content sequence into (joined text, stored part dicts, image parts).

    Text parts: ``TextContent`` or ``{"type": "text", "text": ...}``. Image
    parts: ``ImageContent`` or ``{"type": "image", "bytes": b"..." | "data":
    "<base64>", "mime_type"?, "description"?, "id"?, "timestamp"?}``, validated
    against ``limits`` (``memory.images.validate_image``). The joined text is
    the text parts only; an image is searchable through its own record.
    """
    if len(content) == 0:
        raise InvalidArgument(field, "a content sequence must not be empty")
    limits = limits or ImageInputLimitConfig()
    parts: list[dict[str, Any]] = []
    images: list[_ImagePart] = []
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
            image = _parse_image_part(part, where, limits)
            images.append(image)
            parts.append(image.part)
            continue
        kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
        raise InvalidArgument(where, f"content part of type {kind!r} is not supported; use text or image parts")
    ids = [p["id"] for p in parts if p["type"] == "image"]
    if len(set(ids)) != len(ids):
        raise InvalidArgument(field, "image part ids must be unique within a message")
    return "\n".join(p["text"] for p in parts if p["type"] == "text"), parts, images


def _parse_message(raw: Any, index: int, limits: ImageInputLimitConfig | None = None) -> _NewMessage:
    """Validate one input message (a ``Message`` or a mapping with role and content)."""
    field = f"messages[{index}]"
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
    role = data.get("role")
    if not isinstance(role, str) or not role.strip():
        raise InvalidArgument(f"{field}.role", "is required and must be a non-empty string")
    if len(role) > 255:
        raise InvalidArgument(f"{field}.role", "must be at most 255 characters")
    check_text(role, f"{field}.role")
    content = data.get("content")
    parts, images = None, []
    if isinstance(content, str):
        text = check_text(content, f"{field}.content")
    elif isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        text, parts, images = _parse_parts(content, f"{field}.content", limits)
        for image in images:
            if image.image is None:
                raise InvalidArgument(f"{image.field}.bytes", "is required: a new image part needs its bytes")
    else:
        raise InvalidArgument(f"{field}.content", "is required: a string or a sequence of content parts")
    check_size(text, f"{field}.content", MAX_CONTENT_CHARS)
    msg_id = data.get("id")
    if msg_id is not None:
        msg_id = check_id(msg_id, f"{field}.id")
    return _NewMessage(
        id=msg_id,
        role=role,
        content=text,
        parts=parts,
        timestamp=ttl_rules.check_timestamp(data.get("timestamp"), f"{field}.timestamp"),
        metadata=check_metadata(data.get("metadata"), f"{field}.metadata"),
        images=images,
    )


def message_chunk_text(role: str, content: str) -> str:
    """The text a message is indexed under: ``"<role>: <content>"``."""
    return f"{role}: {content}"


def _when(moment) -> str:
    """``1:56 pm on 8 May, 2023``: the date format that embedded best on LoCoMo."""
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {moment.strftime('%B')}, {moment.year}"


def embedding_text(text: str, timestamp: str | None) -> str:
    """What gets embedded for a chunk: its text, prefixed with the record's event time when known.

    ``"[1:56 pm on 8 May, 2023] Caroline: I went to a support group"``. On
    LoCoMo (bench/locomo_import.py, 1,536 questions) the date prefix lifted
    vector recall@10 from 0.444 to 0.502; ISO-8601 and weekday formats gave
    0.481 and 0.479.
    """
    moment = ttl_rules.parse_timestamp(timestamp)
    return f"[{_when(moment)}] {text}" if moment is not None else text


#: Turns on each side that a message's keyword ``context`` holds, and the
#: words kept from each neighbour. Two each side measured best on LoCoMo
#: (BM25 recall@10: 0 -> 0.610, 1 -> 0.673, 2 -> 0.708, 3 -> 0.666).
CONTEXT_TURNS = 2
CONTEXT_NEIGHBOUR_WORDS = 100


def _clip(text: str, words: int = CONTEXT_NEIGHBOUR_WORDS) -> str:
    parts = text.split()
    return text if len(parts) <= words else " ".join(parts[:words])


def refresh_message_contexts(thread_id: str, seq_lo: int, seq_hi: int) -> int:
    """Recompute the keyword ``context`` of messages whose window changed.

    Targets the thread's messages with ``seq`` in ``[seq_lo, seq_hi]`` plus the
    ``CONTEXT_TURNS`` messages on each side (their windows reach into the
    range). Each chunk's context is: previous turns, the chunk's own text,
    next turns. Call inside the writing transaction after messages in the
    range were added, edited or deleted. Returns the number of chunks updated.
    """
    pad = 2 * CONTEXT_TURNS
    base = Message.objects.filter(thread_id=thread_id)
    fields = ("id", "seq", "role", "content")
    before = list(base.filter(seq__lt=seq_lo).order_by("-seq").values_list(*fields)[:pad])[::-1]
    middle = list(base.filter(seq__gte=seq_lo, seq__lte=seq_hi).order_by("seq").values_list(*fields))
    after = list(base.filter(seq__gt=seq_hi).order_by("seq").values_list(*fields)[:pad])
    rows = before + middle + after
    texts = [_clip(message_chunk_text(role, content)) for _, _, role, content in rows]
    first = max(0, len(before) - CONTEXT_TURNS)
    last = len(before) + len(middle) + min(CONTEXT_TURNS, len(after))
    targets = {rows[i][0]: i for i in range(first, last)}
    chunks = list(SearchChunk.objects.filter(source_kind="message", record_id__in=list(targets)))
    for chunk in chunks:
        i = targets[chunk.record_id]
        prev = texts[max(0, i - CONTEXT_TURNS) : i]
        nxt = texts[i + 1 : i + 1 + CONTEXT_TURNS]
        chunk.context = "\n".join([*prev, chunk.text, *nxt])
    SearchChunk.objects.bulk_update(chunks, ["context"], batch_size=500)
    return len(chunks)


def _chunk_rows(
    *,
    project_id: int,
    source_kind: str,
    record_id: str,
    record_type: str,
    chunks: list[str],
    vectors,
    contexts: list[str] | None = None,
    user_id: str | None,
    agent_id: str | None,
    thread_id: str | None,
    status: str,
    expires_at,
    metadata: dict[str, Any],
    now,
) -> list[SearchChunk]:
    return [
        SearchChunk(
            project_id=project_id,
            source_kind=source_kind,
            record_id=record_id,
            record_type=record_type,
            chunk_index=i,
            user_id=user_id,
            agent_id=agent_id,
            thread_id=thread_id,
            status=status,
            expires_at=expires_at,
            metadata=metadata,
            text=text,
            context=text if contexts is None else contexts[i],
            embedding=vectors[i],
            created_at=now,
        )
        for i, text in enumerate(chunks)
    ]


def _lock_thread(thread_id: str) -> Thread:
    """Re-read the thread (by stored id) inside the transaction, locked for update where the DB can."""
    try:
        return Thread.objects.select_for_update().get(pk=thread_id)
    except Thread.DoesNotExist:
        raise NotFound("thread_id", public_id(thread_id)) from None


def messages_add(
    *,
    thread: Thread,
    messages: Sequence[Any],
    metadata: Any = NOTSET,
    ttl_days: Any = NOTSET,
    ttl_anchor: Any = NOTSET,
    retention: MemoryRetentionConfig,
    image_limits: ImageInputLimitConfig | None = None,
    llm: Any = None,
) -> list[str]:
    """Append ``messages`` to ``thread``; return their ids in input order.

    ``metadata`` is one dict for the batch or a list with one entry per message;
    a given dict replaces the message's own metadata (SDK 26.8.0; omitted or None
    keeps the message's own). ``ttl_days``/``ttl_anchor`` are scalars for the batch or
    lists. The whole batch is validated, embedded, then inserted in one
    transaction with its search chunks: one bad message writes nothing.
    Raises ValueError/TypeError naming the field (``messages[i].role`` ...).

    Image parts (``_parse_parts``) are validated against ``image_limits``;
    those without a description are captioned by ``llm`` before anything is
    written (``memory.images.generate_caption``); each becomes an ``Image``
    row attached to its message, with the message's expiry, inserted with the
    messages. A taken image part id is a ``Conflict`` naming the part.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidType("messages", "must be a list of messages")
    n = len(messages)
    if n == 0:
        return []
    if n > MAX_BATCH_MESSAGES:
        raise InvalidArgument("messages", f"holds {n} messages; the limit is {MAX_BATCH_MESSAGES} per call")
    limits = image_limits or ImageInputLimitConfig()
    parsed = [_parse_message(m, i, limits) for i, m in enumerate(messages)]
    total = sum(len(m.content) for m in parsed)
    if total > MAX_BATCH_CHARS:
        raise InvalidArgument("messages", f"hold {total} characters of text; the limit is {MAX_BATCH_CHARS} per call")
    metas = _per_item(metadata, n, "metadata")
    days_list = _per_item(ttl_days, n, "ttl_days")
    anchors = _per_item(ttl_anchor, n, "ttl_anchor")
    now = timezone.now()
    expiries = []
    for i, msg in enumerate(parsed):
        given = metas[i]
        if given is not NOTSET and given is not None:
            # replaces the message's own metadata (SDK 26.8.0), it is not merged into it
            msg.metadata = check_metadata(given, f"metadata[{i}]" if isinstance(metadata, list) else "metadata")
        days = ttl_rules.resolve_ttl_days(days_list[i], retention, "ttl_days")
        anchor = TimeToLiveAnchor.CREATED_AT if anchors[i] is NOTSET else ttl_rules.check_anchor(anchors[i])
        expiries.append(ttl_rules.expires_at(days, anchor, created_at=now, timestamp=msg.timestamp,
                                            field=f"messages[{i}].timestamp"))
        if msg.id is None:
            msg.id = str(uuid.uuid4())
    ids = [m.id for m in parsed]
    if len(set(ids)) != n:
        raise InvalidArgument("messages", "message ids must be unique within a batch")
    project_id = thread.project_id
    keys = stored_ids(project_id, ids)
    taken = set(Message.objects.filter(pk__in=keys).values_list("pk", flat=True))
    if taken:
        raise Conflict("messages[].id", public_id(sorted(taken)[0]))
    new_images = [img for m in parsed for img in m.images]
    _check_new_image_ids(project_id, new_images)
    _caption_parts(new_images, llm, limits)

    chunk_lists = [chunk_text(message_chunk_text(m.role, m.content)) for m in parsed]
    flat = [embedding_text(c, m.timestamp) for m, chunks in zip(parsed, chunk_lists) for c in chunks]
    image_chunks = [image_chunk_texts(img.part["description"]) for m in parsed for img in m.images]
    stamps = [img.part["timestamp"] or m.timestamp for m in parsed for img in m.images]
    flat += [embedding_text(c, stamp) for texts, stamp in zip(image_chunks, stamps) for c in texts]
    vectors = get_embedder().embed(flat)

    with transaction.atomic():
        locked = _lock_thread(thread.pk)
        first_seq = locked.next_seq
        locked.next_seq = first_seq + n
        locked.save(update_fields=["next_seq", "updated_at"])
        rows, chunk_rows, offset = [], [], 0
        for i, msg in enumerate(parsed):
            rows.append(
                Message(
                    id=keys[i],
                    project_id=project_id,
                    thread_id=locked.pk,
                    seq=first_seq + i,
                    role=msg.role,
                    content=msg.content,
                    parts=msg.parts,
                    timestamp=msg.timestamp,
                    event_at=ttl_rules.parse_timestamp(msg.timestamp),
                    metadata=msg.metadata,
                    status=RecordStatus.VALID.value,
                    expires_at=expiries[i],
                    created_at=now,
                )
            )
            k = len(chunk_lists[i])
            chunk_rows += _chunk_rows(
                project_id=project_id, source_kind="message", record_id=keys[i], record_type="message",
                chunks=chunk_lists[i],
                vectors=vectors[offset : offset + k], user_id=locked.user_id, agent_id=locked.agent_id,
                thread_id=locked.pk, status=RecordStatus.VALID.value, expires_at=expiries[i],
                metadata=msg.metadata, now=now, contexts=[""] * k,
            )
            offset += k
        try:
            with transaction.atomic():
                Message.objects.bulk_create(rows)
        except IntegrityError:
            # Lost a race for a caller-chosen id since the check above.
            taken = Message.objects.filter(pk__in=keys).values_list("pk", flat=True).first()
            raise Conflict("messages[].id", public_id(taken) if taken else ids[0]) from None
        image_rows = [row for i, msg in enumerate(parsed)
                      for row in _message_image_rows(locked, keys[i], msg.images, expiries[i], now)]
        _insert_images(image_rows, "messages[].content[].id")
        for row, texts in zip(image_rows, image_chunks):
            chunk_rows += _image_chunk_rows(row, texts, vectors[offset : offset + len(texts)])
            offset += len(texts)
        SearchChunk.objects.bulk_create(chunk_rows)
        refresh_message_contexts(locked.pk, first_seq, first_seq + n - 1)
    thread.next_seq = first_seq + n
    return ids


def _refresh_expiry(record, ttl_days: Any, ttl_anchor: Any, retention: MemoryRetentionConfig,
                    timestamp: str | None) -> bool:
    """Apply an expiration refresh to ``record`` per the update rules; True if changed."""
    if ttl_days is NOTSET and ttl_anchor is NOTSET:
        return False
    days = ttl_rules.resolve_ttl_days(ttl_days, retention, "ttl_days")
    anchor = TimeToLiveAnchor.CREATED_AT if ttl_anchor is NOTSET else ttl_rules.check_anchor(ttl_anchor)
    record.expires_at = ttl_rules.expires_at(days, anchor, created_at=record.created_at, timestamp=timestamp)
    return True


def _visible_message(thread: Thread, message_id: Any, now=None) -> Message:
    """The live message ``message_id`` (public id) of this exact thread, locked; KeyError otherwise."""
    check_id(message_id, "message_id")
    msg = lock_first(Message.objects.filter(live_q(now or timezone.now()), pk=stored_id(thread.project_id, message_id),
                                            thread_id=thread.pk))
    if msg is None:
        raise NotFound("message_id", message_id)
    return msg


def message_update(
    *,
    thread: Thread,
    message_id: str,
    content: Any = NOTSET,
    metadata: Any = NOTSET,
    ttl_days: Any = NOTSET,
    ttl_anchor: Any = NOTSET,
    retention: MemoryRetentionConfig,
    image_limits: ImageInputLimitConfig | None = None,
    llm: Any = None,
) -> str:
    """Update a message of this exact thread; omitted fields are preserved.

    New content is re-embedded; metadata replaces the stored object (no deep
    merge); a TTL refresh follows ``memory.ttl``. Role and timestamp never
    change. Raises KeyError when the message is missing, expired or another
    thread's.

    Images (spec update_message: "an ordered sequence of text and image
    content parts"): new content replaces the attached images. An image part
    with bytes is a new image (validated, captioned by ``llm`` when it has no
    description; its id may be that of an attached image, which it
    replaces). An image part without bytes whose id is an image attached to
    this message keeps that image (a non-null description replaces its
    description); any other part without bytes is a ValueError. Attached
    images the new content leaves out are deleted. A TTL refresh moves the
    expiry of every attached image with the message's.
    """
    limits = image_limits or ImageInputLimitConfig()
    parts, images = None, []
    if content is not NOTSET:
        if isinstance(content, str):
            text = check_text(content, "content")
        elif isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
            text, parts, images = _parse_parts(content, "content", limits)
        else:
            raise InvalidArgument("content", "must be a string or a sequence of content parts")
        check_size(text, "content", MAX_CONTENT_CHARS)
    new_meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
    vectors = chunks = None
    new_images: list[_ImagePart] = []
    kept: dict[str, _ImagePart] = {}
    image_chunks: list[list[str]] = []  # per new image, then per kept image with a new description
    message_key = stored_id(thread.project_id, check_id(message_id, "message_id"))
    if content is not NOTSET:
        current = (Message.objects.filter(live_q(timezone.now()), pk=message_key, thread_id=thread.pk)
                   .values_list("role", "timestamp").first())
        if current is None:
            raise NotFound("message_id", message_id)
        # Keyed by public id: image parts name their images by public id.
        attached = {public_id(row[0]): row for row in Image.objects.filter(message_id=message_key)
                    .values_list("id", "mime_type", "description", "timestamp")}
        for image in images:
            if image.image is not None:
                new_images.append(image)
                continue
            image_id = image.part["id"]
            if image_id not in attached:
                raise InvalidArgument(f"{image.field}.bytes", f"is required: image {image_id!r} is not attached "
                                                              "to this message")
            _, mime, description, stamp = attached[image_id]
            if image.part["mime_type"] not in (None, mime):
                raise InvalidArgument(f"{image.field}.mime_type", f"image {image_id!r} is {mime}; "
                                                                  "send its bytes to change it")
            changed = image.part["description"] is not None and image.part["description"] != description
            image.generate = changed  # reused as "re-index this kept image"
            image.part.update(mime_type=mime, timestamp=stamp,
                              description=image.part["description"] if changed else description)
            kept[image_id] = image
        _check_new_image_ids(thread.project_id, new_images, replaceable=set(attached))
        _caption_parts(new_images, llm, limits)
        chunks = chunk_text(message_chunk_text(current[0], text))
        reindexed = new_images + [k for k in kept.values() if k.generate]
        image_chunks = [image_chunk_texts(p.part["description"]) for p in reindexed]
        flat = [embedding_text(c, current[1]) for c in chunks]
        flat += [embedding_text(c, p.part["timestamp"] or current[1])
                 for p, texts in zip(reindexed, image_chunks) for c in texts]
        vectors = get_embedder().embed(flat)
    with transaction.atomic():
        msg = _visible_message(thread, message_id)
        fields = ["updated_at"]
        if content is not NOTSET:
            msg.content, msg.parts = text, parts
            fields += ["content", "parts"]
        if new_meta is not NOTSET:
            msg.metadata = new_meta
            fields.append("metadata")
        if _refresh_expiry(msg, ttl_days, ttl_anchor, retention, msg.timestamp):
            fields.append("expires_at")
        msg.save(update_fields=fields)
        if content is not NOTSET:
            offset = len(chunks)
            _sync_chunks(msg, "message", "message", chunks, vectors[:offset], thread=thread)
            refresh_message_contexts(thread.pk, msg.seq, msg.seq)
            kept_keys = set(stored_ids(thread.project_id, kept))
            stale = set(Image.objects.filter(message_id=msg.pk).values_list("pk", flat=True)) - kept_keys
            images_erase(stale)
            rows = _message_image_rows(thread, msg.pk, new_images, msg.expires_at, timezone.now())
            _insert_images(rows, "content[].id")
            reindex = rows + [Image.objects.filter(pk=stored_id(thread.project_id, k)).first()
                              for k, p in kept.items() if p.generate]
            for row, texts in zip(reindex, image_chunks):
                if row.pk in kept_keys:
                    row.description = kept[row.public_id].part["description"]
                    row.save(update_fields=["description", "updated_at"])
                    chunks_erase(SearchChunk.objects.filter(source_kind="image", record_id=row.pk))
                SearchChunk.objects.bulk_create(_image_chunk_rows(row, texts, vectors[offset : offset + len(texts)]))
                offset += len(texts)
        else:
            _sync_chunks(msg, "message", "message", None, None, thread=thread)
        if "expires_at" in fields:
            image_ids = list(Image.objects.filter(message_id=msg.pk).values_list("pk", flat=True))
            Image.objects.filter(pk__in=image_ids).update(expires_at=msg.expires_at)
            SearchChunk.objects.filter(source_kind="image", record_id__in=image_ids).update(expires_at=msg.expires_at)
    return message_id


def _sync_chunks(record, source_kind: str, record_type: str, chunks, vectors, *, thread: Thread | None = None) -> None:
    """Bring a record's search chunks in step with it (text/embedding when re-embedded)."""
    qs = SearchChunk.objects.filter(source_kind=source_kind, record_id=record.pk)
    if chunks is None:
        qs.update(status=record.status, expires_at=record.expires_at, metadata=record.metadata,
                  record_type=record_type)
        return
    # Messages take their thread's scope; memories carry their own.
    scope = record if source_kind == "memory" else thread
    chunks_erase(qs)
    SearchChunk.objects.bulk_create(
        _chunk_rows(
            project_id=record.project_id, source_kind=source_kind, record_id=record.pk, record_type=record_type,
            chunks=chunks,
            vectors=vectors, user_id=scope.user_id, agent_id=scope.agent_id, thread_id=record.thread_id,
            status=record.status, expires_at=record.expires_at, metadata=record.metadata, now=timezone.now(),
        )
    )


def message_delete(*, thread: Thread, message_id: Any) -> int:
    """Delete one live message of this exact thread with its chunks and its images; return 1, or 0 when absent.

    The deletion itself is ``memory.erasure.messages_erase`` (which also closes
    the gap in the neighbours' keyword context). Does not wait for the thread's
    running extraction: it is fenced in the same transaction
    (``memory.extraction.jobs_fence``), so its commit writes nothing and its
    next run no longer sees the message.
    """
    key = stored_id(thread.project_id, check_id(message_id, "message_id"))
    return _erase_fenced(thread, Message, key, messages_erase, f"message {message_id}")


def _erase_fenced(thread: Thread, model, key: str, erase: Callable[[list[str]], Any], what: str) -> int:
    """Erase the live ``model`` row ``key`` of this exact thread with ``erase``, fencing the thread's running
    extraction in the same transaction (``memory.extraction.jobs_fence``); return 1, or 0 when absent."""
    from memory.extraction import jobs_fence  # memory.extraction imports this module

    with transaction.atomic():
        _lock_thread(thread.pk)
        if not model.objects.filter(live_q(timezone.now()), pk=key, thread_id=thread.pk).exists():
            return 0
        jobs_fence(thread_id=thread.pk, reason=f"{what} deleted")
        erase([key])
    return 1


# --- memories -------------------------------------------------------------------------


@dataclass
class PreparedMemory:
    """A validated, embedded memory ready to insert (``memory_prepare`` -> ``memory_insert``).

    ``row`` is the unsaved ``Memory``; ``chunk_rows`` its unsaved
    ``SearchChunk`` rows with their embeddings.
    """

    row: Memory
    chunk_rows: list[SearchChunk]


def memory_prepare(
    *,
    thread: Thread,
    content: Any,
    memory_type: Any = NOTSET,
    user_id: Any = NOTSET,
    agent_id: Any = NOTSET,
    thread_id: Any = NOTSET,
    memory_id: Any = NOTSET,
    metadata: Any = None,
    timestamp: Any = None,
    ttl_days: Any = NOTSET,
    ttl_anchor: Any = NOTSET,
    status: Any = NOTSET,
    source_message_ids: Sequence[str] = (),
    retention: MemoryRetentionConfig,
) -> PreparedMemory:
    """Validate and embed a memory-like record without writing it (see ``memory_add`` for the rules).

    Embedding is slow and needs no database lock: callers that write several
    records in one transaction (an extraction job's commit) prepare them
    first and insert them with ``memory_insert`` inside it, so no write lock is
    held while the embedder runs (issue #13). Raises as ``memory_add``.
    """
    if not isinstance(content, str):
        raise InvalidType("content", f"must be a string, not {type(content).__name__}")
    if not content.strip():
        raise InvalidArgument("content", "must not be empty")
    check_text(content, "content")
    check_size(content, "content", MAX_CONTENT_CHARS)
    mtype = check_memory_type(memory_type)
    owner = thread.pk if thread_id is NOTSET else check_scope_id(thread_id, "thread_id")
    scope = {
        "user_id": thread.user_id if user_id is NOTSET else check_scope_id(user_id, "user_id"),
        "agent_id": thread.agent_id if agent_id is NOTSET else check_scope_id(agent_id, "agent_id"),
        "thread_id": owner if thread_id is NOTSET or owner is None else stored_id(thread.project_id, owner),
    }
    mid = str(uuid.uuid4()) if memory_id is NOTSET else check_id(memory_id, "memory_id")
    key = stored_id(thread.project_id, mid)
    meta = check_metadata(metadata)
    stamp = ttl_rules.check_timestamp(timestamp)
    state = RecordStatus.VALID.value if status is NOTSET else check_status(status)
    now = timezone.now()
    days = ttl_rules.resolve_ttl_days(ttl_days, retention)
    anchor = TimeToLiveAnchor.CREATED_AT if ttl_anchor is NOTSET else ttl_rules.check_anchor(ttl_anchor)
    expiry = ttl_rules.expires_at(days, anchor, created_at=now, timestamp=stamp)
    if Memory.objects.filter(pk=key).exists():
        raise Conflict("memory_id", mid)
    chunks = chunk_text(content)
    vectors = get_embedder().embed([embedding_text(c, stamp) for c in chunks])
    row = Memory(
        id=key, project_id=thread.project_id, memory_type=mtype, content=content, timestamp=stamp,
        event_at=ttl_rules.parse_timestamp(stamp), metadata=meta, status=state, expires_at=expiry,
        source_message_ids=list(source_message_ids), created_at=now, **scope,
    )
    chunk_rows = _chunk_rows(project_id=thread.project_id, source_kind="memory", record_id=key, record_type=mtype,
                             chunks=chunks, vectors=vectors, status=state, expires_at=expiry, metadata=meta,
                             now=now, **scope)
    return PreparedMemory(row=row, chunk_rows=chunk_rows)


def memory_insert(prepared: PreparedMemory, *, link: Callable[[Memory], Any] | None = None) -> str:
    """Insert a prepared memory and its chunks in one transaction (a savepoint inside another); return its
    public id (the caller's, ``memory.tenancy``).

    ``link`` is called with the saved memory inside it (see ``memory_add``).
    Raises ``Conflict`` when the id was taken since ``memory_prepare``.
    """
    memory = prepared.row
    with transaction.atomic():
        try:
            with transaction.atomic():
                memory.save(force_insert=True)
        except IntegrityError:
            raise Conflict("memory_id", memory.public_id) from None  # lost a race for a caller-chosen id
        SearchChunk.objects.bulk_create(prepared.chunk_rows)
        if link is not None:
            link(memory)
    return memory.public_id


def memory_add(*, link: Callable[[Memory], Any] | None = None, **fields: Any) -> str:
    """Store a memory-like record and index it; return its id.

    ``fields`` are ``memory_prepare``'s: ``thread``, ``content``, ``retention``
    and optionally ``memory_type``, ``user_id``, ``agent_id``, ``thread_id``,
    ``memory_id``, ``metadata``, ``timestamp``, ``ttl_days``, ``ttl_anchor``,
    ``status``, ``source_message_ids``. Omitted scope values inherit the
    thread's user, agent and thread ids; a given ``thread_id`` names a thread of
    the same project (it need not exist; None: owned by no thread).
    ``source_message_ids`` are public message ids. ``memory_type`` defaults to "memory";
    ``status`` to valid. ``link`` (a ``memory.links.PendingLink``) is called
    with the saved memory inside the same transaction, so the memory and its
    explicit relation commit together. Raises ValueError for an unknown type or
    status, a taken ``memory_id`` or an empty content; TypeError for a
    non-string content. Embeds before the transaction (``memory_prepare``,
    then ``memory_insert``).
    """
    return memory_insert(memory_prepare(**fields), link=link)


def memory_update(
    *,
    thread: Thread,
    memory_id: Any,
    content: Any = NOTSET,
    metadata: Any = NOTSET,
    timestamp: Any = NOTSET,
    ttl_days: Any = NOTSET,
    ttl_anchor: Any = NOTSET,
    status: Any = NOTSET,
    memory_type: Any = NOTSET,
    retention: MemoryRetentionConfig,
) -> str:
    """Update a memory-like record whose stored thread_id is this thread's.

    Omitted values are preserved; metadata replaces the stored object; a new
    content is re-embedded; ``timestamp=None`` clears the event time. A TTL
    refresh anchored on TIMESTAMP uses the replacement timestamp or the stored
    one. ``memory_type`` (not a spec ``update_memory`` parameter: the staff
    pages and the admin retype memories) changes the record's type, its
    chunks' ``record_type`` and the endpoint types of its relations, in the
    same transaction. Raises KeyError when missing, expired or another
    thread's; ValueError for an unknown type or status.
    """
    key = stored_id(thread.project_id, check_id(memory_id, "memory_id"))
    new_type = check_memory_type(memory_type) if memory_type is not NOTSET else NOTSET
    if content is not NOTSET:
        if not isinstance(content, str):
            raise InvalidType("content", f"must be a string, not {type(content).__name__}")
        if not content.strip():
            raise InvalidArgument("content", "must not be empty")
        check_text(content, "content")
        check_size(content, "content", MAX_CONTENT_CHARS)
    new_meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
    new_stamp = ttl_rules.check_timestamp(timestamp) if timestamp is not NOTSET else NOTSET
    new_status = check_status(status) if status is not NOTSET else NOTSET
    chunks = vectors = None
    if content is not NOTSET or new_stamp is not NOTSET:
        # The embedding covers content and event time (``embedding_text``).
        # Embedding is slow: refuse a missing record before paying for it.
        stored = (Memory.objects.filter(live_q(timezone.now()), pk=key, thread_id=thread.pk)
                  .values_list("content", "timestamp").first())
        if stored is None:
            raise NotFound("memory_id", memory_id)
        chunks = chunk_text(stored[0] if content is NOTSET else content)
        stamp = stored[1] if new_stamp is NOTSET else new_stamp
        vectors = get_embedder().embed([embedding_text(c, stamp) for c in chunks])
    with transaction.atomic():
        memory = lock_first(Memory.objects.filter(live_q(timezone.now()), pk=key, thread_id=thread.pk))
        if memory is None:
            raise NotFound("memory_id", memory_id)
        if content is not NOTSET:
            memory.content = content
        if new_meta is not NOTSET:
            memory.metadata = new_meta
        if new_stamp is not NOTSET:
            memory.timestamp = new_stamp
            memory.event_at = ttl_rules.parse_timestamp(new_stamp)
        if new_status is not NOTSET:
            memory.status = new_status
        if new_type is not NOTSET and new_type != memory.memory_type:
            memory.memory_type = new_type
            # Relations record their endpoints' types (link_records' tuple); keep them true.
            RecordLink.objects.filter(source_id=memory.pk).update(source_type=new_type)
            RecordLink.objects.filter(target_id=memory.pk).update(target_type=new_type)
        _refresh_expiry(memory, ttl_days, ttl_anchor, retention, memory.timestamp)
        memory.save()
        _sync_chunks(memory, "memory", memory.memory_type, chunks, vectors)
    return memory_id


def memory_delete(*, thread: Thread, memory_id: Any) -> int:
    """Delete one memory-like record of this exact thread; return 1, or 0 when absent.

    Its relations go with it, and records it superseded, refined or
    duplicated are valid again unless another such relation remains
    (``memory.erasure.memories_erase``). The thread's running extraction is
    fenced, not waited for (see ``message_delete``).
    """
    key = stored_id(thread.project_id, check_id(memory_id, "memory_id"))
    return _erase_fenced(thread, Memory, key, memories_erase, f"memory {memory_id}")


def memory_delete_by_id(*, project: Project, memory_id: Any, allows: Callable[[Memory], bool] = lambda row: True
                        ) -> int:
    """Delete a memory-like record of ``project`` by id, whatever thread owns it (or none); return 1 or 0.

    SDK ``OracleAgentMemory.delete_memory``: the way to delete a memory stored
    with another ``thread_id`` or none, which no thread handle reaches. An
    expired record is deleted too (it is stored data). ``allows`` (a
    restricted client's ``Tenant.allows``) decides whether the caller may see
    the row; one it may not counts as absent. The owning thread's running
    extraction, if any, is fenced (see ``message_delete``).
    """
    from memory.extraction import jobs_fence  # memory.extraction imports this module

    key = stored_id(project.pk, check_id(memory_id, "memory_id"))
    with transaction.atomic():
        row = lock_first(Memory.objects.filter(pk=key))
        if row is None or not allows(row):
            return 0
        if row.thread_id and lock_first(Thread.objects.filter(pk=row.thread_id)) is not None:
            jobs_fence(thread_id=row.thread_id, reason=f"memory {memory_id} deleted")
        memories_erase([key])
    return 1


# --- threads ----------------------------------------------------------------------------


def thread_create(
    *,
    project: Project,
    thread_id: Any = NOTSET,
    user_id: Any = NOTSET,
    agent_id: Any = NOTSET,
    metadata: Any = None,
    config: dict[str, Any] | None = None,
) -> Thread:
    """Create a thread in ``project``. Omitted ids are generated (UUID4), as the spec's OracleThread does.

    Raises ValueError (``Conflict``) when ``thread_id`` is taken in this project
    (another project's thread of that id is another thread).
    """
    tid = str(uuid.uuid4()) if thread_id is NOTSET or thread_id is None else check_id(thread_id, "thread_id")
    uid = str(uuid.uuid4()) if user_id is NOTSET else check_scope_id(user_id, "user_id")
    aid = str(uuid.uuid4()) if agent_id is NOTSET else check_scope_id(agent_id, "agent_id")
    meta = check_metadata(metadata)
    key = stored_id(project.pk, tid)
    if Thread.objects.filter(pk=key).exists():
        raise Conflict("thread_id", tid)
    thread = Thread(id=key, project=project, user_id=uid, agent_id=aid, metadata=meta, config=config or {})
    try:
        with transaction.atomic():
            thread.save(force_insert=True)
    except IntegrityError:
        raise Conflict("thread_id", tid) from None  # lost a race since the check
    return thread


def thread_update(*, thread: Thread, metadata: Any = NOTSET, config_changes: dict[str, Any] | None = None) -> Thread:
    """Replace a thread's metadata and/or set keys of its ``config`` (``config_changes``, already
    validated by the caller); return the row. KeyError when gone."""
    with transaction.atomic():
        thread = _lock_thread(thread.pk)
        fields = []
        if metadata is not NOTSET:
            thread.metadata = check_metadata(metadata)
            fields.append("metadata")
        if config_changes:
            thread.config = {**(thread.config or {}), **config_changes}
            fields.append("config")
        if fields:
            thread.save(update_fields=[*fields, "updated_at"])
    return thread


def thread_delete(*, project: Project, thread_id: Any) -> int:
    """Delete a thread of ``project`` with its messages, memories, their relations and all chunks; return 1 or 0.

    Its extraction jobs go with it, running ones included: a worker still
    waiting for its LLM finds them gone at its commit and writes nothing
    (``memory.extraction._commit``), so nothing waits for it.
    """
    key = stored_id(project.pk, check_id(thread_id, "thread_id"))
    with transaction.atomic():
        if lock_first(Thread.objects.filter(pk=key)) is None:
            return 0
        threads_erase([key])
    return 1


# --- images -------------------------------------------------------------------------------
#
# An image is an ``Image`` row (bytes as a BLOB) plus, when it has a description,
# ``SearchChunk`` rows with source_kind and record_type "image" (scope, expiry and
# metadata copied like a message's). An image part of a message is an image row
# with ``message`` set: it shares the message's expiry, and the message's
# ``parts`` JSON repeats its id, MIME type, description and timestamp so that
# reading messages never touches the images table unless bytes are asked for.


def image_chunk_texts(description: str | None) -> list[str]:
    """The chunks an image is searched by: its description, chunked; none when it is blank."""
    if description is None or not description.strip():
        return []
    return chunk_text(description)


def _image_chunk_rows(row: Image, chunks: list[str], vectors) -> list[SearchChunk]:
    return _chunk_rows(
        project_id=row.project_id, source_kind="image", record_id=row.pk, record_type="image", chunks=chunks,
        vectors=vectors, user_id=row.user_id, agent_id=row.agent_id, thread_id=row.thread_id,
        status=RecordStatus.VALID.value,
        expires_at=row.expires_at, metadata=row.metadata, now=timezone.now(),
    )


def _new_image_row(*, image_id: str, thread: Thread, image: ValidImage, description: str | None,
                   metadata: dict[str, Any], timestamp: str | None, expires_at, now,
                   message_id: str | None = None) -> Image:
    return Image(
        id=stored_id(thread.project_id, image_id), project_id=thread.project_id, thread_id=thread.pk,
        message_id=message_id, user_id=thread.user_id,
        agent_id=thread.agent_id, mime_type=image.mime_type.value, description=description, data=image.data,
        size_bytes=image.size_bytes, width=image.width, height=image.height, metadata=metadata,
        timestamp=timestamp, event_at=ttl_rules.parse_timestamp(timestamp), expires_at=expires_at, created_at=now,
    )


def _caption_parts(parts: list[_ImagePart], llm: Any, limits: ImageInputLimitConfig) -> None:
    """Fill the description of each new image part that asked for one (``memory.images.generate_caption``)."""
    for part in parts:
        if part.generate and part.image is not None:
            part.part["description"] = generate_caption(part.image, llm, limits=limits, field=part.field)


def _check_new_image_ids(project_id: int, parts: list[_ImagePart], *, replaceable: set[str] = frozenset()) -> None:
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


def _message_image_rows(thread: Thread, message_id: str, parts: list[_ImagePart], expires_at, now) -> list[Image]:
    """Image rows for the new image parts of one message (scope from ``thread``, expiry from the message).

    ``message_id`` is the message's stored id. Their metadata is empty: an
    image part carries none (spec ImageContent).
    """
    return [
        _new_image_row(image_id=p.part["id"], thread=thread, image=p.image, description=p.part["description"],
                       metadata={}, timestamp=p.part["timestamp"], expires_at=expires_at, now=now,
                       message_id=message_id)
        for p in parts if p.image is not None
    ]


def _insert_images(rows: list[Image], field: str) -> None:
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
    return get_embedder().embed([embedding_text(c, timestamp) for c in texts]) if texts else []


def image_add(
    *,
    thread: Thread,
    image: Any,
    description: Any = NOTSET,
    mime_type: Any = None,
    image_id: Any = NOTSET,
    user_id: Any = NOTSET,
    agent_id: Any = NOTSET,
    thread_id: Any = NOTSET,
    metadata: Any = None,
    timestamp: Any = None,
    ttl_days: Any = NOTSET,
    ttl_anchor: Any = NOTSET,
    retention: MemoryRetentionConfig,
    limits: ImageInputLimitConfig | None = None,
    llm: Any = None,
    caption_required: bool = False,
) -> str:
    """Store one image owned by ``thread`` and index its description; return its id (spec: add_image).

    ``image``: raw bytes, validated by ``memory.images.validate_image`` against
    ``limits`` (``mime_type`` omitted/None: detected; given: must match the
    bytes). ``description`` omitted or None: a caption from ``llm``
    (``memory.images.generate_caption``; no LLM: ValueError naming
    ``description`` with ``caption_required``, the SDK's rule, else None, and the image is not
    searchable until described). ``user_id``/``agent_id``/``thread_id``: scope
    assertions that must equal the thread's. ``timestamp``/``ttl_days``/
    ``ttl_anchor`` as for memories (``memory.ttl``). The row and its chunks are
    written in one transaction. Raises ValueError for a refused image, a lying
    ``mime_type``, a scope mismatch, bad TTL values or a taken ``image_id``
    (``Conflict``); TypeError for wrong types; ``memory.llm.LlmError`` when
    the caption request fails (nothing stored).
    """
    limits = limits or ImageInputLimitConfig()
    _check_scope_assertion(user_id, thread.user_id, "user_id")
    _check_scope_assertion(agent_id, thread.agent_id, "agent_id")
    _check_scope_assertion(thread_id, thread.public_id, "thread_id")
    valid = validate_image(image, mime_type, limits=limits)
    iid = str(uuid.uuid4()) if image_id is NOTSET or image_id is None else check_id(image_id, "image_id")
    if description is not NOTSET and description is not None and not isinstance(description, str):
        raise InvalidType("description", "must be a string or None")
    if isinstance(description, str):
        check_text(description, "description")
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
    chunks = image_chunk_texts(description)
    vectors = _image_embeddings(chunks, stamp)
    with transaction.atomic():
        locked = _lock_thread(thread.pk)
        row = _new_image_row(image_id=iid, thread=locked, image=valid, description=description, metadata=meta,
                             timestamp=stamp, expires_at=expiry, now=now)
        _insert_images([row], "image_id")
        SearchChunk.objects.bulk_create(_image_chunk_rows(row, chunks, vectors))
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
    image: Any = NOTSET,
    description: Any = NOTSET,
    mime_type: Any = NOTSET,
    metadata: Any = NOTSET,
    timestamp: Any = NOTSET,
    ttl_days: Any = NOTSET,
    ttl_anchor: Any = NOTSET,
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
    if description is not NOTSET and description is not None and not isinstance(description, str):
        raise InvalidType("description", "must be a string or None")
    if isinstance(description, str):
        check_text(description, "description")
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
        chunks = image_chunk_texts(text)
        vectors = _image_embeddings(chunks, row.timestamp if new_stamp is NOTSET else new_stamp)
    with transaction.atomic():
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
        if row.message_id is None and _refresh_expiry(row, ttl_days, ttl_anchor, retention, row.timestamp):
            fields.append("expires_at")
        row.save(update_fields=fields)
        qs = SearchChunk.objects.filter(source_kind="image", record_id=row.pk)
        if chunks is None:
            qs.update(expires_at=row.expires_at, metadata=row.metadata)
        else:
            chunks_erase(qs)
            SearchChunk.objects.bulk_create(_image_chunk_rows(row, chunks, vectors))
        if row.message_id is not None and {"mime_type", "description", "timestamp"} & set(fields):
            _sync_message_part(row)
    return image_id


def image_delete(*, thread: Thread, image_id: Any) -> int:
    """Delete a standalone image of this thread with its chunks; return 1, or 0 when absent (spec: delete_image).

    0 also when the image is expired or another thread's. Raises ValueError
    for an image attached to a message: delete or update the message instead.
    """
    with transaction.atomic():
        row = _visible_image(thread, image_id, lock=True)
        if row is None:
            return 0
        if row.message_id is not None:
            raise InvalidArgument("image_id", f"image {image_id!r} is attached to message "
                                              f"{public_id(row.message_id)!r}; delete or update the parent message "
                                              "instead")
        images_erase([row.pk])
    return 1
