"""Row locks that work on SQLite, PostgreSQL and Oracle, and the one order every write takes them in.

``queryset.select_for_update().first()`` adds a row limit, and Oracle cannot
combine ``FOR UPDATE`` with one (ORA-02014; Django's
``supports_select_for_update_with_limit`` is False there and raises
``NotSupportedError``). Every lookup here is by primary key (or a set of
them), so none needs a limit. SQLite ignores the lock clause: its IMMEDIATE
transactions already hold the one write lock, so no order matters there.

The lock order
--------------

On a database with row locks that block (PostgreSQL, Oracle) two writers that
take the same two locks in opposite orders deadlock: the database aborts one
of them (PostgreSQL: ``deadlock detected``, a 500). Every write of the engine
(``memory.services``, ``memory.links``, ``memory.extraction``) therefore takes its
locks in this order, and never goes back up it:

1. **The thread row** (``memory.services.common.lock_thread``; several threads in
   primary-key order, in one statement: ``lock_rows``). It is the mutex of
   everything the thread holds: a write that changes a message, memory, image
   or relation of a thread, or numbers its messages, locks the thread first,
   even when it reached the record by id (``memory.services.common.lock_memory``
   reads the memory's ``thread_id``, locks that thread, then the memory, and
   starts again if the memory moved meanwhile).
2. **The record rows** it writes: messages, memories, images, relations, in
   primary-key order when there are several (``lock_rows``). A memory stored in
   no thread has no step 1: its own row comes first.
3. **What is derived from them**: search chunks, history versions
   (``memory.records.history.record_many`` locks the memories it numbers, a no-op
   when the writer holds them already), summaries, and the thread's extraction
   jobs (``memory.extraction.jobs``: ``_claim`` and ``_commit`` lock the thread,
   then the job; ``jobs_fence`` runs after the delete's locks). These are
   written after their record's lock, never locked before it.

A transaction that needs several threads (an erasure, the expiry purge) locks
all of them first, in primary-key order (``memory.services.erasure``). Taking a
lock one already holds is free, so a helper may re-lock what its caller took.
Rows created by the transaction itself are invisible to others and count for
nothing. The thread's summary row (``memory.context.summaries``) is locked alone
in its own transaction. Where this comes from: the lock-order inversion between
``memory_delete_by_id`` (memory, then thread) and ``memory_delete`` (thread, then
memory), and the races ``tests/concurrency`` forces on PostgreSQL.

On Oracle, ``lock_rows``'s one ``SELECT ... ORDER BY ... FOR UPDATE`` locks its
rows when the cursor opens, in no promised order; two writers locking
overlapping sets of several rows at once (only the erasure and the purge do)
can still meet there, and Oracle answers ORA-00060 to one of them.
"""

from __future__ import annotations

from django.db.models import QuerySet


def lock_first(queryset: QuerySet):
    """Return the first row of ``queryset`` locked ``FOR UPDATE``, or None; no LIMIT, no ORDER BY.

    Meant for primary-key lookups (one row at most).
    """
    for row in queryset.select_for_update().order_by():
        return row
    return None


def lock_rows(queryset: QuerySet) -> list:
    """Lock every row of ``queryset`` ``FOR UPDATE`` in primary-key order (step 1 or 2 of the lock order);
    return them. PostgreSQL locks them as it reads them, in that order, so two callers never hold parts of
    one set each. An empty queryset locks nothing."""
    return list(queryset.select_for_update().order_by("pk"))
