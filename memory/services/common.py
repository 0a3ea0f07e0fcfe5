"""Helpers the entity services share: the thread and memory locks (in the order ``memory.core.locking``
states), the TTL refresh, fenced deletes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.core import ttl as ttl_rules
from memory.core.errors import NotFound
from memory.core.ids import public_id
from memory.core.locking import lock_first
from memory.core.types import NOTSET, MemoryRetentionConfig, TimeToLiveAnchor
from memory.extraction.jobs import jobs_fence
from memory.models import Memory, Thread
from memory.records.selectors import live_q


def lock_thread(thread_id: str, *, required: bool = True) -> Thread | None:
    """Re-read the thread (by stored id) inside the transaction, locked for update where the DB can: step 1 of
    ``memory.core.locking``'s order. A missing thread raises ``NotFound`` (``thread_id``), or is None when not
    ``required`` (a write whose own lookup then answers for the missing record)."""
    row = lock_first(Thread.objects.filter(pk=thread_id))
    if row is None and required:
        raise NotFound("thread_id", public_id(thread_id))
    return row


def lock_memory(queryset, *, attempts: int = 3) -> Memory | None:
    """Lock the memory row ``queryset`` selects (by primary key; other filters allowed) after its thread's row,
    the lock order of ``memory.core.locking``; return it, or None when there is none.

    For writes that reach a memory by id, not through its thread (``memory_delete_by_id``, the state edits,
    an update by project, review decisions). The memory's ``thread_id`` is read unlocked, that thread (if any)
    is locked, then the memory; if the memory changed threads in between (a thread delete detaches it), it
    starts again, up to ``attempts`` times (after the last one it returns the row as locked, its new thread
    not locked; a thread it locked and no longer needs does no harm). Call inside a transaction.
    """
    for _ in range(attempts):
        thread_id = queryset.values_list("thread_id", flat=True).first()
        if thread_id is not None:
            lock_first(Thread.objects.filter(pk=thread_id))
        row = lock_first(queryset)
        if row is None or row.thread_id == thread_id:
            return row
    return row


def refresh_expiry(record, ttl_days: Any, ttl_anchor: Any, retention: MemoryRetentionConfig,
                    timestamp: str | None) -> bool:
    """Apply an expiration refresh to ``record`` per the update rules; True if changed."""
    if ttl_days is NOTSET and ttl_anchor is NOTSET:
        return False
    days = ttl_rules.resolve_ttl_days(ttl_days, retention, "ttl_days")
    anchor = TimeToLiveAnchor.CREATED_AT if ttl_anchor is NOTSET else ttl_rules.check_anchor(ttl_anchor)
    record.expires_at = ttl_rules.expires_at(days, anchor, created_at=record.created_at, timestamp=timestamp)
    return True


def erase_fenced(thread: Thread, model, key: str, erase: Callable[[list[str]], Any], what: str, *,
                 include_expired: bool = False) -> int:
    """Erase the live ``model`` row ``key`` of this exact thread with ``erase``, fencing the thread's running
    extraction in the same transaction (``memory.extraction.jobs.jobs_fence``); return 1, or 0 when absent.
    ``include_expired`` erases an expired row too (the admin's deletes: it is stored data)."""
    with transaction.atomic():
        lock_thread(thread.pk)  # the lock order (memory.core.locking): the thread, then the row
        rows = model.objects.filter(pk=key, thread_id=thread.pk)
        if lock_first(rows if include_expired else rows.filter(live_q(timezone.now()))) is None:
            return 0
        jobs_fence(thread_id=thread.pk, reason=f"{what} deleted")
        erase([key])
    return 1
