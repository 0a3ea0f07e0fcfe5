"""Helpers the entity services share: the thread lock, the TTL refresh, fenced deletes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.core import ttl as ttl_rules
from memory.core.errors import NotFound
from memory.core.ids import public_id
from memory.core.types import NOTSET, MemoryRetentionConfig, TimeToLiveAnchor
from memory.extraction.jobs import jobs_fence
from memory.models import Thread
from memory.records.selectors import live_q


def lock_thread(thread_id: str) -> Thread:
    """Re-read the thread (by stored id) inside the transaction, locked for update where the DB can."""
    try:
        return Thread.objects.select_for_update().get(pk=thread_id)
    except Thread.DoesNotExist:
        raise NotFound("thread_id", public_id(thread_id)) from None


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
        lock_thread(thread.pk)
        rows = model.objects.filter(pk=key, thread_id=thread.pk)
        if not (rows if include_expired else rows.filter(live_q(timezone.now()))).exists():
            return 0
        jobs_fence(thread_id=thread.pk, reason=f"{what} deleted")
        erase([key])
    return 1
