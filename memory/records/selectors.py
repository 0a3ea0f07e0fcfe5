"""Reads of the memory engine: threads, messages, memories and search.

Expired records are invisible everywhere: every read filters with
``live_q(now)``. Functions return the public value types of ``memory.core.types``,
with public ids (``memory.records.tenancy``): a read is made for one project, that of
the thread row it is given, or the ``project`` argument.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from django.db.models import Q, QuerySet
from django.utils import timezone

from memory.core.errors import InvalidArgument, InvalidType, NotFound, check_sql_count
from memory.core.ids import public_id, stored_id, stored_ids
from memory.core.types import (
    NOTSET,
    ImageContent,
    ImageMimeType,
    ImageRecord,
    MemoryRecord,
    NotSet,
    TextContent,
    memory_record,
)
from memory.core.types import (
    Message as MessageDTO,
)
from memory.core.valid_time import check_instant
from memory.models import Image, Memory, Message, Project, Thread
from memory.records.metadata_filter import compile_filter
from memory.records.tenancy import Tenant

#: Images ``list_images`` returns when ``limit`` is omitted ("the store's default limit").
DEFAULT_IMAGE_LIST_LIMIT = 100

V = TypeVar("V")


class Records(Sequence, Generic[V]):
    """The rows of a queryset as value types, read lazily: what the API's ``{"items", "count"}`` lists page.

    ``len()`` is one SQL ``COUNT``; a slice is one ``LIMIT``/``OFFSET`` query
    whose rows ``to_value`` turns into value types; iterating reads every
    row once. ninja's limit/offset pagination slices it and takes its
    length, so a page never loads the rows it skips.
    """

    def __init__(self, queryset: QuerySet, to_value: Callable[[Any], V]):
        self._queryset = queryset
        self._to_value = to_value

    def __len__(self) -> int:
        return self._queryset.count()

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self._to_value(row) for row in self._queryset[index]]
        return self._to_value(self._queryset[index])

    def __iter__(self) -> Iterator[V]:
        return (self._to_value(row) for row in self._queryset)


@dataclasses.dataclass(frozen=True)
class Page(Generic[V]):
    """Some records of a list (``items``) and how many the whole list holds (``count``)."""

    items: list[V]
    count: int


def live_q(now) -> Q:
    """Rows that have not expired at ``now``."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=now)


def memory_live_q(now) -> Q:
    """Memory rows an agent may read at ``now``: not expired and not awaiting review (``Memory.pending``,
    ``memory.records.review_rules``). Every read of memories for agents (get, lists, relations, autonomous linking,
    updates) filters with it; the review queue and the staff pages read pending ones on purpose."""
    return live_q(now) & Q(pending=False)


def valid_at_q(at) -> Q:
    """Rows whose validity window ``[valid_from, valid_to)`` contains ``at`` (an aware datetime; issue #32,
    ``memory.core.valid_time``): a NULL bound is open, so a row with no window always passes. Memories and their
    search chunks carry the columns; a message's or image's chunks have no window and always pass, so a
    ``valid_at`` search filters memory-like records only."""
    return ((Q(valid_from__isnull=True) | Q(valid_from__lte=at))
            & (Q(valid_to__isnull=True) | Q(valid_to__gt=at)))


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def _part_dto(part: dict) -> TextContent | ImageContent:
    if part.get("type") == "image":
        return ImageContent(id=part["id"], timestamp=part.get("timestamp"), bytes=None,
                            mime_type=ImageMimeType(part["mime_type"]), description=part.get("description"))
    return TextContent(text=part["text"], id=part["id"], timestamp=part.get("timestamp"))


def message_dto(row: Message) -> MessageDTO:
    """A ``Message`` value from a stored row; timestamp falls back to the creation time.

    Image parts come back as ``ImageContent`` with ``bytes=None`` (their id,
    MIME type, description and timestamp are kept in ``Message.parts``);
    ``hydrate_images`` loads bytes for the ones asked for.
    """
    if row.parts:
        content = tuple(_part_dto(p) for p in row.parts if p.get("type") in ("text", "image"))
    else:
        content = row.content
    return MessageDTO(
        role=row.role,
        content=content,
        timestamp=row.timestamp if row.timestamp is not None else _iso(row.created_at),
        metadata=row.metadata,
        id=public_id(row.pk),
        thread_id=public_id(row.thread_id),
        status=row.status,
        created_at=_iso(row.created_at),
        expires_at=_iso(row.expires_at),
    )


def memory_dto(row: Memory) -> MemoryRecord:
    """A ``MemoryRecord`` from a stored row; timestamp falls back to the creation time."""
    return memory_record(
        id=public_id(row.pk),
        content=row.content,
        memory_type=row.memory_type,
        user_id=row.user_id,
        agent_id=row.agent_id,
        thread_id=public_id(row.thread_id),
        timestamp=row.timestamp if row.timestamp is not None else _iso(row.created_at),
        metadata=row.metadata,
        status=row.status,
        created_at=_iso(row.created_at),
        expires_at=_iso(row.expires_at),
        source_message_ids=list(row.source_message_ids or []),
        valid_from=_iso(row.valid_from),
        valid_to=_iso(row.valid_to),
        needs_review=row.needs_review,
        review_cause=row.review_cause if row.needs_review else None,
    )


def thread_get(*, project: Project, thread_id: Any) -> Thread:
    """Return the thread row of ``project`` whose public id is ``thread_id``; KeyError (``NotFound``) when none."""
    if not isinstance(thread_id, str):
        raise InvalidType("thread_id", "must be a string")
    thread = Thread.objects.filter(pk=stored_id(project.pk, thread_id)).first()
    if thread is None:
        raise NotFound("thread_id", thread_id)
    return thread


def thread_list(*, tenant: Tenant, user_id: str | None | NotSet = NOTSET,
                agent_id: str | None | NotSet = NOTSET) -> QuerySet[Thread]:
    """Threads of the tenant's project, most recently active first, optionally filtered by user and agent.

    A restricted tenant lists its own user's and agent's threads only; a
    filter naming another raises ``OutOfScope`` (``Tenant.fill``).
    """
    user_id, agent_id = tenant.fill("user_id", user_id), tenant.fill("agent_id", agent_id)
    qs = Thread.objects.filter(project=tenant.project).order_by("-updated_at", "id")
    if user_id is not NOTSET:
        qs = qs.filter(user_id=user_id)
    if agent_id is not NOTSET:
        qs = qs.filter(agent_id=agent_id)
    return qs


def _check_index(value: Any, field: str) -> int:
    """An int index of at most ``MAX_SQL_COUNT`` (TypeError/ValueError naming ``field``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, "must be an int or None")
    return check_sql_count(value, field)


def message_page(*, thread: Thread, start: int | None | NotSet = NOTSET, end: int | None | NotSet = NOTSET, window: int,
                 include_image_bytes: Any = False, max_items: int | None = None) -> Page[MessageDTO]:
    """The thread's live messages from ``start`` to ``end`` in chronological order, and how many it has.

    ``start``/``end`` are 0-based indexes over the live messages, ``end``
    exclusive (spec: get_messages). Both omitted: the ``window`` most recent
    messages. ``start`` alone: ``window`` messages from ``start``.
    ``end=None`` or ``-1``: all messages from ``start`` (default 0). A
    negative ``start`` is a ValueError. ``include_image_bytes=True`` loads
    the bytes of every image part (one query); otherwise image parts carry
    ``bytes=None`` and no BLOB is read. ``count``: all live messages.
    ``max_items`` (the HTTP API's page cap): a window of more messages than
    that is an ``InvalidArgument`` naming ``end`` (or ``start``), before any
    row is read.
    """
    if not isinstance(include_image_bytes, bool):
        raise InvalidType("include_image_bytes", "must be a bool")
    qs = Message.objects.filter(live_q(timezone.now()), thread_id=thread.pk).order_by("seq")
    total = qs.count()
    if start is NOTSET and end is NOTSET:
        rows = qs[max(0, total - window):]
    else:
        first = 0 if start is NOTSET or start is None else _check_index(start, "start")
        if first < 0:
            raise InvalidArgument("start", "must be 0 or more")
        if end is NOTSET:
            last = first + window
        elif end is None or end == -1:
            last = total
        else:
            last = _check_index(end, "end")
            if last < -1:
                raise InvalidArgument("end", "must be -1, None, or an index of 0 or more")
        held = max(0, min(last, total) - first)
        if max_items is not None and held > max_items:
            raise InvalidArgument("start" if end is NOTSET else "end",
                                  f"the window holds {held} messages; a page holds at most {max_items} "
                                  "(OAM_API_MAX_PAGE): page with limit/offset")
        rows = qs[first:last] if last > first else []
    messages = [message_dto(r) for r in rows]
    return Page(items=hydrate_images(messages, None, project_id=thread.project_id) if include_image_bytes
                else messages, count=total)


def message_list(*, thread: Thread, start: int | None | NotSet = NOTSET, end: int | None | NotSet = NOTSET, window: int,
                 include_image_bytes: Any = False) -> list[MessageDTO]:
    """Return the thread's live messages in chronological order (spec: get_messages; see ``message_page``)."""
    return message_page(thread=thread, start=start, end=end, window=window,
                        include_image_bytes=include_image_bytes).items


def message_recent(*, thread: Thread, limit: Any) -> list[MessageDTO]:
    """The thread's ``limit`` most recent live messages, oldest first (one query that reads those rows only).

    ``limit``: an int from 1 to ``MAX_SQL_COUNT`` (TypeError/ValueError naming ``limit``). Image parts carry
    ``bytes=None``, as ``message_list``'s. Not in the spec: a bounded read of a conversation's tail (the
    OpenAI Agents session of ``integrations.openai_agents``).
    """
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidType("limit", "must be an int")
    if limit < 1:
        raise InvalidArgument("limit", "must be at least 1")
    check_sql_count(limit, "limit")
    rows = Message.objects.filter(live_q(timezone.now()), thread_id=thread.pk).order_by("-seq")[:limit]
    return [message_dto(r) for r in reversed(list(rows))]


def message_get(*, thread: Thread, message_id: Any, included_image_ids: Any = None) -> MessageDTO:
    """One live message of this exact thread; KeyError otherwise.

    ``included_image_ids``: ids of attached image parts whose bytes to load
    (spec get_message: "Unrelated identifiers are ignored"); None loads none.
    """
    if not isinstance(message_id, str):
        raise InvalidType("message_id", "must be a string")
    wanted = _check_image_ids(included_image_ids)
    row = Message.objects.filter(live_q(timezone.now()), pk=stored_id(thread.project_id, message_id),
                                 thread_id=thread.pk).first()
    if row is None:
        raise NotFound("message_id", message_id)
    message = message_dto(row)
    return hydrate_images([message], wanted, project_id=thread.project_id)[0] if wanted else message


def _check_image_ids(value: Any) -> set[str] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise InvalidType("included_image_ids", "must be a list of image ids or None")
    if not all(isinstance(v, str) for v in value):
        raise InvalidType("included_image_ids", "must contain strings only")
    return set(value)


def hydrate_images(messages: list[MessageDTO], image_ids: set[str] | None, *, project_id: int) -> list[MessageDTO]:
    """Load the bytes of image parts in ``messages`` (all of them when ``image_ids`` is None) in one query.

    ``messages`` are of project ``project_id``; ids are public. Returns the
    messages with those ``ImageContent`` parts replaced by copies carrying
    ``bytes``; other parts and unrelated ids are left alone.
    """
    wanted = [p.id for m in messages if not isinstance(m.content, str) for p in m.content
              if isinstance(p, ImageContent) and (image_ids is None or p.id in image_ids)]
    if not wanted:
        return messages
    data = {public_id(pk): bytes(blob) for pk, blob in
            Image.objects.with_bytes().filter(pk__in=stored_ids(project_id, wanted)).values_list("pk", "data")}
    for message in messages:
        if not isinstance(message.content, str):
            message.content = tuple(
                dataclasses.replace(p, bytes=data[p.id]) if isinstance(p, ImageContent) and p.id in data else p
                for p in message.content
            )
    return messages


def memory_get(*, thread: Thread, memory_id: Any, restrict: dict[str, str] | None = None) -> MemoryRecord:
    """One live memory-like record of this exact thread; KeyError otherwise (a memory awaiting review too).

    ``restrict`` (``Tenant.row_filter``) hides records of other users/agents
    stored in the thread from a restricted client: they are "not found".
    """
    if not isinstance(memory_id, str):
        raise InvalidType("memory_id", "must be a string")
    row = Memory.objects.filter(memory_live_q(timezone.now()), pk=stored_id(thread.project_id, memory_id),
                                thread_id=thread.pk, **(restrict or {})).first()
    if row is None:
        raise NotFound("memory_id", memory_id)
    return memory_dto(row)


def message_stored(*, thread: Thread, message_id: str) -> MessageDTO:
    """A message of a thread by (public) id, expired or not: for reading back a write just made."""
    row = Message.objects.filter(pk=stored_id(thread.project_id, message_id), thread_id=thread.pk).first()
    if row is None:
        raise NotFound("message_id", message_id)
    return message_dto(row)


def memory_stored(*, project: Project, memory_id: str) -> MemoryRecord:
    """A memory of ``project`` by (public) id whatever its owner thread or expiry: for reading back a write."""
    row = Memory.objects.filter(pk=stored_id(project.pk, memory_id)).first()
    if row is None:
        raise NotFound("memory_id", memory_id)
    return memory_dto(row)


def filter_valid_at(qs: QuerySet, valid_at: Any) -> QuerySet:
    """``qs`` (memories) narrowed to those whose validity window contains ``valid_at`` (issue #32: ``valid_at_q``);
    None leaves it unchanged. ``valid_at``: a datetime, date or ISO-8601 string (no zone: UTC); TypeError/ValueError
    naming ``valid_at`` otherwise (``memory.core.valid_time.check_instant``)."""
    at = check_instant(valid_at, "valid_at")
    return qs if at is None else qs.filter(valid_at_q(at))


def memory_records(*, thread: Thread, memory_type: str | None = None,
                   restrict: dict[str, str] | None = None, valid_at: Any = None) -> Records[MemoryRecord]:
    """The live memories owned by this exact thread, oldest first, optionally of one type (read lazily);
    ``restrict`` as in ``memory_get``. Memories awaiting review are left out (``memory_live_q``). ``valid_at``
    (issue #32): only memories valid at that instant (``filter_valid_at``); None: every one."""
    qs = (Memory.objects.filter(memory_live_q(timezone.now()), thread_id=thread.pk, **(restrict or {}))
          .order_by("created_at", "id"))
    if memory_type:
        qs = qs.filter(memory_type=memory_type)
    return Records(filter_valid_at(qs, valid_at), memory_dto)


def memory_list(*, thread: Thread, memory_type: str | None = None,
                restrict: dict[str, str] | None = None, valid_at: Any = None) -> list[MemoryRecord]:
    """The live memories owned by this exact thread, oldest first (``restrict`` as in ``memory_get``, ``valid_at``
    as in ``memory_records``)."""
    return list(memory_records(thread=thread, memory_type=memory_type, restrict=restrict, valid_at=valid_at))


# --- images -------------------------------------------------------------------------------


def image_dto(row: Image, data: bytes | None = None) -> ImageRecord:
    """An ``ImageRecord`` from a stored row (``bytes`` only when ``data`` is given); timestamp falls back
    to the creation time."""
    return ImageRecord(
        id=public_id(row.pk),
        mime_type=ImageMimeType(row.mime_type),
        description=row.description,
        bytes=data,
        thread_id=public_id(row.thread_id),
        user_id=row.user_id,
        agent_id=row.agent_id,
        message_id=public_id(row.message_id),
        metadata=dict(row.metadata or {}),
        timestamp=row.timestamp if row.timestamp is not None else _iso(row.created_at),
        created_at=_iso(row.created_at),
        expires_at=_iso(row.expires_at),
        width=row.width,
        height=row.height,
        size_bytes=row.size_bytes,
    )


def image_queryset(*, thread: Thread, now=None):
    """The live images owned by ``thread``, in store order (creation time, then id), bytes deferred."""
    return Image.objects.filter(live_q(now or timezone.now()), thread_id=thread.pk).order_by("created_at", "id")


def image_list_queryset(*, thread: Thread, image_id: str | None | NotSet = NOTSET, metadata_filter: Any = None,
                        include_bytes: Any = False, limit: int | None | NotSet = NOTSET, now=None):
    """The validated query behind ``image_list`` (also compiled for Oracle in tests/oracle)."""
    if not isinstance(include_bytes, bool):
        raise InvalidType("include_bytes", "must be a bool")
    if include_bytes and (image_id is NOTSET or image_id is None):
        raise InvalidArgument("include_bytes", "loading bytes requires an image_id")
    if limit is NOTSET:
        limit = DEFAULT_IMAGE_LIST_LIMIT
    elif limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise InvalidType("limit", "must be an int or None")
        if limit < 1:
            raise InvalidArgument("limit", "must be at least 1, or None for no limit")
        check_sql_count(limit, "limit", ", or None for no limit")
    if metadata_filter is not None and not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    qs = image_queryset(thread=thread, now=now).filter(compile_filter(metadata_filter))
    if image_id is not NOTSET and image_id is not None:
        if not isinstance(image_id, str):
            raise InvalidType("image_id", "must be a string")
        qs = qs.filter(pk=stored_id(thread.project_id, image_id))
    if include_bytes:
        qs = qs.with_bytes()
    return qs[:limit] if limit is not None else qs


def image_list(*, thread: Thread, image_id: str | None | NotSet = NOTSET, metadata_filter: Any = None,
               include_bytes: Any = False, limit: int | None | NotSet = NOTSET) -> list[ImageRecord]:
    """Images owned by this thread in store order (spec: list_images).

    ``image_id`` filters by id (omitted: no id filter); ``metadata_filter``
    follows the search grammar (``memory.records.metadata_filter``); ``include_bytes``
    loads bytes and needs ``image_id`` (ValueError otherwise); ``limit``: at
    most that many (omitted: ``DEFAULT_IMAGE_LIST_LIMIT``, 100; None: no
    limit; otherwise an int of at least 1). Attached and standalone images
    alike; expired ones are not listed.
    """
    qs = image_list_queryset(thread=thread, image_id=image_id, metadata_filter=metadata_filter,
                             include_bytes=include_bytes, limit=limit)
    return list(Records(qs, _image_value(include_bytes)))


def image_records(*, thread: Thread, image_id: str | None | NotSet = NOTSET, metadata_filter: Any = None,
                  include_bytes: Any = False) -> Records[ImageRecord]:
    """Every image ``image_list`` would return without a limit, read lazily (the API pages it)."""
    qs = image_list_queryset(thread=thread, image_id=image_id, metadata_filter=metadata_filter,
                             include_bytes=include_bytes, limit=None)
    return Records(qs, _image_value(include_bytes))


def _image_value(include_bytes: bool) -> Callable[[Image], ImageRecord]:
    """Row to ``ImageRecord``, with its bytes when they were selected (``include_bytes``)."""
    return lambda row: image_dto(row, bytes(row.data) if include_bytes else None)


def image_get(*, thread: Thread, image_id: Any, include_bytes: bool = False) -> ImageRecord:
    """One live image owned by this thread; KeyError (``NotFound``) otherwise."""
    if not isinstance(image_id, str):
        raise InvalidType("image_id", "must be a string")
    qs = image_queryset(thread=thread).filter(pk=stored_id(thread.project_id, image_id))
    row = (qs.with_bytes() if include_bytes else qs).first()
    if row is None:
        raise NotFound("image_id", image_id)
    return image_dto(row, bytes(row.data) if include_bytes else None)


def image_stored(*, thread: Thread, image_id: str) -> ImageRecord:
    """An image of this thread by (public) id whatever its expiry: for reading back a write just made."""
    row = Image.objects.filter(pk=stored_id(thread.project_id, image_id), thread_id=thread.pk).first()
    if row is None:
        raise NotFound("image_id", image_id)
    return image_dto(row)
