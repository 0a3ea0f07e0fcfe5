"""Reads of the memory engine: threads, messages, memories and search.

Expired records are invisible everywhere: every read filters with
``live_q(now)``. Functions return the public value types of ``memory.types``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from memory.errors import InvalidArgument, InvalidType, NotFound
from memory.models import Memory, Message, Thread
from memory.types import NOTSET, MemoryRecord, Message as MessageDTO, TextContent


def live_q(now) -> Q:
    """Rows that have not expired at ``now``."""
    return Q(expires_at__isnull=True) | Q(expires_at__gt=now)


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def message_dto(row: Message) -> MessageDTO:
    """A ``Message`` value from a stored row; timestamp falls back to the creation time."""
    if row.parts:
        content = tuple(
            TextContent(text=p["text"], id=p["id"], timestamp=p.get("timestamp"))
            for p in row.parts
            if p.get("type") == "text"
        )
    else:
        content = row.content
    return MessageDTO(
        role=row.role,
        content=content,
        timestamp=row.timestamp if row.timestamp is not None else _iso(row.created_at),
        metadata=row.metadata,
        id=row.pk,
        thread_id=row.thread_id,
        status=row.status,
        created_at=_iso(row.created_at),
        expires_at=_iso(row.expires_at),
    )


def memory_dto(row: Memory) -> MemoryRecord:
    """A ``MemoryRecord`` from a stored row; timestamp falls back to the creation time."""
    return MemoryRecord(
        id=row.pk,
        content=row.content,
        memory_type=row.memory_type,
        user_id=row.user_id,
        agent_id=row.agent_id,
        thread_id=row.thread_id,
        timestamp=row.timestamp if row.timestamp is not None else _iso(row.created_at),
        metadata=row.metadata,
        status=row.status,
        created_at=_iso(row.created_at),
        expires_at=_iso(row.expires_at),
        source_message_ids=list(row.source_message_ids or []),
    )


def thread_get(thread_id: Any) -> Thread:
    """Return the thread row; KeyError (``NotFound``) when there is none."""
    if not isinstance(thread_id, str):
        raise InvalidType("thread_id", "must be a string")
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None:
        raise NotFound("thread_id", thread_id)
    return thread


def thread_list(*, user_id: Any = NOTSET, agent_id: Any = NOTSET) -> QuerySet[Thread]:
    """Threads, most recently active first, optionally filtered by user and agent."""
    qs = Thread.objects.order_by("-updated_at", "id")
    if user_id is not NOTSET:
        qs = qs.filter(user_id=user_id)
    if agent_id is not NOTSET:
        qs = qs.filter(agent_id=agent_id)
    return qs


def _check_index(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, "must be an int or None")
    return value


def message_list(*, thread: Thread, start: Any = NOTSET, end: Any = NOTSET, window: int) -> list[MessageDTO]:
    """Return the thread's live messages in chronological order (spec: get_messages).

    ``start``/``end`` are 0-based indexes over the live messages, ``end``
    exclusive. Both omitted: the ``window`` most recent messages. ``start``
    alone: ``window`` messages from ``start``. ``end=None`` or ``-1``: all
    messages from ``start`` (default 0). A negative ``start`` is a ValueError.
    """
    qs = Message.objects.filter(live_q(timezone.now()), thread_id=thread.pk).order_by("seq")
    if start is NOTSET and end is NOTSET:
        total = qs.count()
        rows = qs[max(0, total - window):]
    else:
        first = 0 if start is NOTSET or start is None else _check_index(start, "start")
        if first < 0:
            raise InvalidArgument("start", "must be 0 or more")
        if end is NOTSET:
            rows = qs[first : first + window]
        elif end is None or end == -1:
            rows = qs[first:]
        else:
            last = _check_index(end, "end")
            if last < -1:
                raise InvalidArgument("end", "must be -1, None, or an index of 0 or more")
            rows = qs[first:last] if last > first else []
    return [message_dto(r) for r in rows]


def message_get(*, thread: Thread, message_id: Any) -> MessageDTO:
    """One live message of this exact thread; KeyError otherwise."""
    if not isinstance(message_id, str):
        raise InvalidType("message_id", "must be a string")
    row = Message.objects.filter(live_q(timezone.now()), pk=message_id, thread_id=thread.pk).first()
    if row is None:
        raise NotFound("message_id", message_id)
    return message_dto(row)


def memory_get(*, thread: Thread, memory_id: Any) -> MemoryRecord:
    """One live memory-like record of this exact thread; KeyError otherwise."""
    if not isinstance(memory_id, str):
        raise InvalidType("memory_id", "must be a string")
    row = Memory.objects.filter(live_q(timezone.now()), pk=memory_id, thread_id=thread.pk).first()
    if row is None:
        raise NotFound("memory_id", memory_id)
    return memory_dto(row)


def message_stored(*, thread_id: str, message_id: str) -> MessageDTO:
    """A message of a thread by id, expired or not: for reading back a write just made."""
    row = Message.objects.filter(pk=message_id, thread_id=thread_id).first()
    if row is None:
        raise NotFound("message_id", message_id)
    return message_dto(row)


def memory_stored(*, memory_id: str) -> MemoryRecord:
    """A memory by id whatever its owner thread or expiry: for reading back a write just made."""
    row = Memory.objects.filter(pk=memory_id).first()
    if row is None:
        raise NotFound("memory_id", memory_id)
    return memory_dto(row)


def memory_list(*, thread: Thread, memory_type: str | None = None) -> list[MemoryRecord]:
    """The live memories owned by this exact thread, oldest first."""
    qs = Memory.objects.filter(live_q(timezone.now()), thread_id=thread.pk).order_by("created_at", "id")
    if memory_type:
        qs = qs.filter(memory_type=memory_type)
    return [memory_dto(r) for r in qs]
