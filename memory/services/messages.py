"""Message writes: ``messages_add``, ``message_update``, ``message_delete`` (with their chunks and images)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.core import ttl as ttl_rules
from memory.core.chunking import chunk_text
from memory.core.errors import (
    MAX_BATCH_CHARS,
    MAX_BATCH_MESSAGES,
    MAX_CONTENT_CHARS,
    Conflict,
    InvalidArgument,
    InvalidType,
    NotFound,
    check_size,
    check_text,
)
from memory.core.ids import public_id, stored_id, stored_ids
from memory.core.locking import lock_first
from memory.core.types import (
    NOTSET,
    MemoryRetentionConfig,
    MessageContent,
    NotSet,
    RecordStatus,
    TimeToLiveAnchor,
)
from memory.embedders import embed_records
from memory.index import writer as index
from memory.index.bulk import rows_insert
from memory.models import Image, Message, Thread
from memory.records.image_rules import ImageBudget, ImageInputLimitConfig
from memory.records.selectors import live_q
from memory.records.validators import check_id, check_metadata, check_status, per_item
from memory.services.common import erase_fenced, lock_thread, refresh_expiry
from memory.services.erasure import images_erase, messages_erase
from memory.services.images import caption_parts, check_new_image_ids, insert_images, message_image_rows
from memory.services.parts import ImagePart, parse_message, parse_parts


def messages_add(
    *,
    thread: Thread,
    messages: Sequence[Any],
    metadata: dict[str, Any] | None | list[dict[str, Any] | None] | NotSet = NOTSET,
    ttl_days: int | None | list[int | None] | NotSet = NOTSET,
    ttl_anchor: TimeToLiveAnchor | str | list[TimeToLiveAnchor | str] | NotSet = NOTSET,
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
    written (``memory.records.image_rules.generate_caption``); each becomes an ``Image``
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
    budget = ImageBudget()  # the whole batch's images count together (MAX_BATCH_IMAGES, MAX_BATCH_IMAGE_PIXELS)
    parsed = [parse_message(m, i, limits, budget=budget) for i, m in enumerate(messages)]
    total = sum(len(m.content) for m in parsed)
    if total > MAX_BATCH_CHARS:
        raise InvalidArgument("messages", f"hold {total} characters of text; the limit is {MAX_BATCH_CHARS} per call")
    metas = per_item(metadata, n, "metadata")
    days_list = per_item(ttl_days, n, "ttl_days")
    anchors = per_item(ttl_anchor, n, "ttl_anchor")
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
    check_new_image_ids(project_id, new_images)
    caption_parts(new_images, llm, limits)

    chunk_lists = [chunk_text(index.message_chunk_text(m.role, m.content)) for m in parsed]
    flat = [index.embedding_text(c, m.timestamp) for m, chunks in zip(parsed, chunk_lists) for c in chunks]
    image_chunks = [index.image_chunk_texts(img.part["description"]) for m in parsed for img in m.images]
    stamps = [img.part["timestamp"] or m.timestamp for m in parsed for img in m.images]
    flat += [index.embedding_text(c, stamp) for texts, stamp in zip(image_chunks, stamps) for c in texts]
    vectors = embed_records(flat, field="messages")

    with transaction.atomic():
        locked = lock_thread(thread.pk)
        first_seq = locked.next_seq
        locked.next_seq = first_seq + n
        locked.save(update_fields=["next_seq", "updated_at"])
        contexts, earlier = index.appended_message_contexts(
            locked.pk, first_seq, [(m.role, m.content) for m in parsed], chunk_lists)
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
            chunk_rows += index.chunk_rows(
                project_id=project_id, source_kind="message", record_id=keys[i], record_type="message",
                chunks=chunk_lists[i],
                vectors=vectors[offset : offset + k], user_id=locked.user_id, agent_id=locked.agent_id,
                thread_id=locked.pk, status=RecordStatus.VALID.value, expires_at=expiries[i],
                metadata=msg.metadata, now=now, contexts=contexts[i],
            )
            offset += k
        try:
            with transaction.atomic():
                rows_insert(Message, rows)  # Oracle: no JSON bind of parts/metadata in a UNION ALL (bulk)
        except IntegrityError:
            # Lost a race for a caller-chosen id since the check above.
            taken = Message.objects.filter(pk__in=keys).values_list("pk", flat=True).first()
            raise Conflict("messages[].id", public_id(taken) if taken else ids[0]) from None
        image_rows = [row for i, msg in enumerate(parsed)
                      for row in message_image_rows(locked, keys[i], msg.images, expiries[i], now)]
        insert_images(image_rows, "messages[].content[].id")
        for row, texts in zip(image_rows, image_chunks):
            chunk_rows += index.image_chunk_rows(row, texts, vectors[offset : offset + len(texts)])
            offset += len(texts)
        index.index_rows(chunk_rows)
        if earlier:  # the turns before the new ones: their windows now reach them
            index.refresh_message_contexts(locked.pk, *earlier, neighbours=False)
    thread.next_seq = first_seq + n
    return ids

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
    content: str | Sequence[MessageContent | Mapping[str, Any]] | NotSet = NOTSET,
    metadata: dict[str, Any] | None | NotSet = NOTSET,
    ttl_days: int | None | NotSet = NOTSET,
    ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
    retention: MemoryRetentionConfig,
    image_limits: ImageInputLimitConfig | None = None,
    llm: Any = None,
) -> str:
    """Update a message of this exact thread; omitted fields are preserved.

    New content is re-embedded; metadata replaces the stored object (no deep
    merge); a TTL refresh follows ``memory.core.ttl``. Role and timestamp never
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
            text, parts, images = parse_parts(content, "content", limits)
        else:
            raise InvalidArgument("content", "must be a string or a sequence of content parts")
        check_size(text, "content", MAX_CONTENT_CHARS)
    new_meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
    vectors = chunks = None
    new_images: list[ImagePart] = []
    kept: dict[str, ImagePart] = {}
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
        check_new_image_ids(thread.project_id, new_images, replaceable=set(attached))
        caption_parts(new_images, llm, limits)
        chunks = chunk_text(index.message_chunk_text(current[0], text))
        reindexed = new_images + [k for k in kept.values() if k.generate]
        image_chunks = [index.image_chunk_texts(p.part["description"]) for p in reindexed]
        flat = [index.embedding_text(c, current[1]) for c in chunks]
        flat += [index.embedding_text(c, p.part["timestamp"] or current[1])
                 for p, texts in zip(reindexed, image_chunks) for c in texts]
        vectors = embed_records(flat, field="content")
    with transaction.atomic():
        lock_thread(thread.pk, required=False)  # memory.core.locking: the thread, then the message
        msg = _visible_message(thread, message_id)
        fields = ["updated_at"]
        if content is not NOTSET:
            msg.content, msg.parts = text, parts
            fields += ["content", "parts"]
        if new_meta is not NOTSET:
            msg.metadata = new_meta
            fields.append("metadata")
        if refresh_expiry(msg, ttl_days, ttl_anchor, retention, msg.timestamp):
            fields.append("expires_at")
        msg.save(update_fields=fields)
        if content is not NOTSET:
            offset = len(chunks)
            index.sync_record(msg, "message", "message", chunks, vectors[:offset], scope=thread)
            index.refresh_message_contexts(thread.pk, msg.seq, msg.seq)
            kept_keys = set(stored_ids(thread.project_id, kept))
            stale = set(Image.objects.filter(message_id=msg.pk).values_list("pk", flat=True)) - kept_keys
            images_erase(stale)
            rows = message_image_rows(thread, msg.pk, new_images, msg.expires_at, timezone.now())
            insert_images(rows, "content[].id")
            reindex = rows + [Image.objects.filter(pk=stored_id(thread.project_id, k)).first()
                              for k, p in kept.items() if p.generate]
            for row, texts in zip(reindex, image_chunks):
                if row.pk in kept_keys:
                    row.description = kept[row.public_id].part["description"]
                    row.save(update_fields=["description", "updated_at"])
                index.index_record(row, "image", "image", texts, vectors[offset : offset + len(texts)],
                                   replace=row.pk in kept_keys)
                offset += len(texts)
        else:
            index.sync_record(msg, "message", "message", scope=thread)
        if "expires_at" in fields:
            image_ids = list(Image.objects.filter(message_id=msg.pk).values_list("pk", flat=True))
            Image.objects.filter(pk__in=image_ids).update(expires_at=msg.expires_at)
            index.reindex_state("image", image_ids, expires_at=msg.expires_at)
    return message_id

def message_delete(*, thread: Thread, message_id: Any, include_expired: bool = False) -> int:
    """Delete one live message of this exact thread with its chunks and its images; return 1, or 0 when absent.

    The deletion itself is ``memory.services.erasure.messages_erase`` (which also closes
    the gap in the neighbours' keyword context). Does not wait for the thread's
    running extraction: it is fenced in the same transaction
    (``memory.extraction.jobs.jobs_fence``), so its commit writes nothing and its
    next run no longer sees the message. ``include_expired`` deletes an
    expired message too (the admin's deletes; the API sees no expired record).
    """
    key = stored_id(thread.project_id, check_id(message_id, "message_id"))
    return erase_fenced(thread, Message, key, messages_erase, f"message {message_id}", include_expired=include_expired)


def message_state_update(*, thread: Thread, message_id: Any, status: RecordStatus | str | NotSet = NOTSET,
                         expires_at: datetime | None | NotSet = NOTSET) -> int:
    """Set a message's ``status`` and/or ``expires_at`` (a datetime or None) with its chunks' copies; return 1 or 0.

    The admin's edit of those two columns (no spec method changes them; a TTL
    refresh is ``message_update``). Works on an expired message too. Raises
    ValueError for an unknown status.
    """
    fields = {}
    if status is not NOTSET:
        fields["status"] = check_status(status)
    if expires_at is not NOTSET:
        fields["expires_at"] = expires_at
    key = stored_id(thread.project_id, check_id(message_id, "message_id"))
    with transaction.atomic():
        lock_thread(thread.pk, required=False)  # memory.core.locking: the thread, then the message
        msg = lock_first(Message.objects.filter(pk=key, thread_id=thread.pk))
        if msg is None:
            return 0
        if fields:
            for name, value in fields.items():
                setattr(msg, name, value)
            msg.save(update_fields=[*fields, "updated_at"])
            index.reindex_state("message", [msg.pk], **fields)
    return 1
