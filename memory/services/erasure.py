"""Erasure: deleting records for good, one end user or agent at a time, and what has expired.

Every delete of the engine ends here, whichever door it came through (the
spec's ``delete_*`` methods, ``AgentMemory.delete_user``/``delete_agent``/
``delete_memory``, ``DELETE`` routes, the staff pages, the admin's single and
bulk deletes, the expiry purge):

* ``images_erase``, ``messages_erase``, ``memories_erase``, ``threads_erase``
  delete rows by stored id (``memory.records.tenancy``) with everything derived from
  them: search chunks (``memory.index.writer.unindex``, which also drops the embeddings from
  this process's vector cache), attached images, relations (re-validating
  what they invalidated), summaries and extraction jobs, and the keyword
  context of the neighbouring messages. Each returns a ``Counter`` of rows.
  What was derived from a deleted memory (``derived_from``, issue #32) is flagged, never deleted
  (``memory.links.dependants``); the edges themselves go with the history (``derivations_erase``: an erasure,
  a thread's delete, the purge, which first takes the erased ids out of the causes and flag versions of the
  memories that survive), not with a single delete.
  Memory history (``memory.records.history``): a single delete (API, client, staff
  pages, the admin's single and bulk deletes, which are single deletes one
  by one) keeps it, with a ``delete`` version, for undo (``memory_restore``); a
  thread's delete takes the history of every memory written while it was
  the thread's, and the expiry purge and an erasure the history of what
  they delete: after those nothing could read or restore it.
* ``subject_erase`` erases everything held about one user or agent of a
  project (GDPR Art. 17; SDK ``delete_user``/``delete_agent`` with
  ``cascade=True``): their threads with all they hold, then every record
  still scoped to them in other threads or in none, and the history of
  those memories (``memory.records.history``), and stores an
  ``ErasureReceipt`` that names the subject only by a keyed digest.
  Another user's (agent's) memories filed in their threads survive, detached
  (``threads_erase``'s ``spare``, which a user-restricted thread delete uses too).
* ``expired_purge`` deletes records whose ``expires_at`` has passed (until
  now they were only hidden), in batches; the worker runs it on a timer
  (``oam_site.worker``) and ``manage.py purge_expired`` on demand.

Deleting rows is not enough for a file database: ``storage_scrub``
(``memory.services.scrub``) makes the deletes final in the storage after an
erasure that deleted something, an expiry purge that did and the admin's
deletes.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Max, Min, Q
from django.utils import timezone

from memory.core import progress
from memory.core.errors import InvalidArgument, NotFound, OutOfScope
from memory.core.ids import project_of, public_ids, stored_id
from memory.core.locking import lock_rows
from memory.index.writer import keep_history_vectors, refresh_message_contexts, unindex
from memory.links.dependants import causes_scrub, dependants_flag
from memory.links.rules import links_detach, set_memory_status
from memory.models import (
    ContextCardLog,
    ErasureReceipt,
    ExtractionJob,
    Image,
    Memory,
    MemoryDerivation,
    MemoryVersion,
    Message,
    RecordLink,
    SearchChunk,
    Thread,
    ThreadSummary,
)
from memory.records import history, provenance
from memory.records.admin_log import admin_log_erase
from memory.records.as_of import subject_digest
from memory.records.tenancy import Tenant
from memory.records.validators import check_id
from memory.services.cards import card_log_purge
from memory.services.scrub import chunk_deletes_since_scrub, storage_scrub
from memory.signals import purge_ran, subject_erased

#: Rows deleted per transaction by ``expired_purge``.
PURGE_BATCH = 500
SUBJECTS = ("user", "agent")
#: The kinds an erasure receipt counts, in order (``Erasure.counts``).
RECEIPT_COUNTS = ("threads", "messages", "memories", "images", "relations", "chunks", "summaries",
                  "extraction_jobs", "admin_log_entries", "api_keys", "memory_versions")


# --- rows and what is derived from them --------------------------------------------------------


def records_lock(model, keys: list[str]) -> None:
    """Steps 1 and 2 of the lock order (``memory.core.locking``) for a delete by stored ids: the threads that
    hold the ``model`` rows ``keys``, then the rows, each in primary-key order. Free for the locks the caller
    took already (``erase_fenced`` holds the thread and the row). Call inside the delete's transaction."""
    held = model.objects.filter(pk__in=keys).exclude(thread_id=None).values("thread_id")
    lock_rows(Thread.objects.filter(pk__in=held))
    lock_rows(model.objects.filter(pk__in=keys))


def images_erase(keys: Iterable[str], *, erased: set[str] | None = None) -> Counter:
    """Delete images (stored ids), their chunks and admin history (``admin_log_erase``). Call inside a
    transaction. ``erased``: a set that gets the stored ids of the records deleted (here and in the functions
    below)."""
    keys = list(keys)
    counts: Counter = Counter()
    if erased is not None:
        erased.update(keys)
    if keys:
        records_lock(Image, keys)
        counts["chunks"] += unindex(SearchChunk.objects.filter(source_kind="image", record_id__in=keys))
        counts["images"] += Image.objects.filter(pk__in=keys).delete()[0]
        counts["admin_log_entries"] += admin_log_erase(Image, keys)
    return counts


def messages_erase(keys: Iterable[str], *, keep_history: bool = True) -> Counter:
    """Delete messages (stored ids) with their chunks and attached images, then refresh the keyword context of
    the neighbours in each thread that remains. Call inside a transaction. The memories derived only from them
    follow first (``derived_follow``; ``keep_history`` as in ``memories_erase`` for those it deletes)."""
    keys = list(keys)
    counts: Counter = Counter()
    if not keys:
        return counts
    records_lock(Message, keys)
    spans = list(Message.objects.filter(pk__in=keys).values("thread_id").annotate(lo=Min("seq"), hi=Max("seq")))
    derived_follow(keys, keep_history=keep_history, counts=counts)
    counts += images_erase(Image.objects.filter(message_id__in=keys).values_list("pk", flat=True))
    counts["chunks"] += unindex(SearchChunk.objects.filter(source_kind="message", record_id__in=keys))
    counts["messages"] += Message.objects.filter(pk__in=keys).delete()[0]
    counts["admin_log_entries"] += admin_log_erase(Message, keys)
    for span in spans:
        refresh_message_contexts(span["thread_id"], span["lo"], span["hi"])
    return counts


def derived_follow(keys: list[str], *, keep_history: bool = True, counts: Counter | None = None
                   ) -> provenance.DerivedReceipt:
    """Invalidate or delete (``OAM_DERIVED_MEMORY_POLICY``) the memories derived only from these messages
    (stored ids, about to be deleted; ``memory.records.provenance.derived_only_from``); return what was done.

    Each memory touched gets a history version whose reason names the
    messages (and the actor's own reason); an invalid memory stays as it is
    under "invalidate". The receipt goes to the caller's ``provenance.collecting()``
    and a ``derived_memories`` event to each thread's WebSocket group
    (``memory.core.progress``), sent on commit. Call inside the delete's transaction.
    ``keep_history``: as in ``memories_erase``, for the memories deleted under "delete"; ``counts`` (a
    ``Counter``) gets the rows that deletion removed.
    """
    receipt = provenance.DerivedReceipt(messages=public_ids(keys))
    rows = provenance.derived_only_from(keys)
    if not rows:
        return receipt
    actor = history.current_actor()
    why = f"source message {', '.join(receipt.messages[:5])}{' ...' if len(keys) > 5 else ''} " + (
        "expired" if actor.kind == "ttl" else "deleted") + (f" ({actor.reason})" if actor.reason else "")
    with history.because(why):
        if provenance.policy() == "delete":
            gone = memories_erase([row.pk for row in rows], keep_history=keep_history)
            if counts is not None:
                counts.update(gone)
            receipt.deleted = [row.public_id for row in rows]
        else:
            receipt.invalidated = public_ids(set_memory_status([row.pk for row in rows], "invalid", reason=why))
    threads: dict[str, list[Memory]] = {}
    for row in rows:
        if row.thread_id:
            threads.setdefault(row.thread_id, []).append(row)
    for thread_id, mine in threads.items():
        ids = {row.public_id for row in mine}
        progress.send(thread_id, "derived_memories", policy=provenance.policy(), messages=receipt.messages[:100],
                      invalidated=[m for m in receipt.invalidated if m in ids][:100],
                      deleted=[m for m in receipt.deleted if m in ids][:100])
    provenance.note(receipt)
    return receipt


def memories_erase(keys: Iterable[str], *, erased: set[str] | None = None, keep_history: bool = True,
                   action: str = "delete", reason: str | None = None) -> Counter:
    """Delete memory-like records (stored ids) with their chunks and relations; what their relations
    invalidated is valid again unless another relation holds it (``memory.links.rules.links_detach``). Call inside
    a transaction. ``erased`` as in ``images_erase`` (the relations' ids too).

    ``keep_history`` (a single delete through the services, the admin's deletes, which are single deletes
    one by one, a review's rejection): each record gets a version in its history (``memory.records.history``;
    ``action``/``reason`` name it: ``delete``, or the review queue's ``reject``) and the rest is kept,
    readable after the delete (``get_memory_history``). False (the expiry purge, a thread's
    delete, an erasure: nothing can reach the history afterwards): the record's whole history goes too,
    counted as ``memory_versions``, and so do its ``derived_from`` edges, either end (``derivations_erase``;
    a single delete keeps them, as ``MemoryDerivation`` says).

    Every memory derived from one deleted here, transitively, and not deleted with it, is flagged first
    (``memory.links.dependants.dependants_flag``, cause ``delete``; issue #32): kept, never deleted for it.
    """
    keys = list(keys)
    counts: Counter = Counter()
    if erased is not None:
        erased.update(keys)
    if keys:
        records_lock(Memory, keys)  # before their chunks, relations and history (memory.core.locking)
        relations: set[str] = set()
        if keep_history:  # the history keeps the vectors of the content it ends with (issue #32)
            rows = list(Memory.objects.filter(pk__in=keys))
            keep_history_vectors({row.pk: row.content for row in rows})
            history.record_many(((row, history.snapshot(row), None) for row in rows), action, reason=reason)
        dependants_flag(keys, action="delete", exclude=keys)  # what was derived from them (issue #32)
        counts["chunks"] += unindex(SearchChunk.objects.filter(source_kind="memory", record_id__in=keys))
        counts["relations"] += links_detach(memory_ids=keys, erased=relations)
        counts["memories"] += Memory.objects.filter(pk__in=keys).delete()[0]
        counts["admin_log_entries"] += admin_log_erase(Memory, keys) + admin_log_erase(RecordLink, relations)
        if not keep_history:  # after links_detach, whose revalidations may have written versions of these
            counts["memory_versions"] += history.history_erase(MemoryVersion.objects.filter(memory_id__in=keys))
            derivations_erase(keys)
        if erased is not None:
            erased.update(relations)
    return counts


def derivations_erase(keys, *, thread_keys: Iterable[str] = ()) -> int:
    """Delete the ``derived_from`` edges (``MemoryDerivation``, issue #32) with either end among ``keys`` (stored
    memory ids: a list, or a subquery of them such as the history an erasure deletes: a memory deleted before
    keeps its edges until then), and those of the threads ``thread_keys`` (stored ids); return how many went.
    Nothing is left that names an erased memory: first the causes and flag versions of the memories derived from
    them that survive lose those ids (``memory.links.dependants.causes_scrub``, through these edges). Call after
    the memories' rows are deleted, in the erasure's transaction."""
    causes_scrub(keys)
    where = Q(memory_id__in=keys) | Q(source_id__in=keys)
    if thread_keys:
        where |= Q(thread_id__in=list(thread_keys))
    return MemoryDerivation.objects.filter(where).delete()[0]


def detached_thread_key(project_id: int) -> str:
    """The ``thread_id`` of a relation between two memories detached from their deleted thread
    (``memories_detach``): the stored id of the empty public id, which no thread can have (``check_id``
    refuses it), so no thread created later lists the relation. ``RecordLink.thread_id`` is NOT NULL."""
    return stored_id(project_id, "")


def foreign_q(fixed: dict[str, str]) -> Q:
    """Rows scoped to another user or agent than ``fixed`` (``{"user_id": ..., "agent_id": ...}``, either or
    both): a column of ``fixed`` that is set (not NULL) and differs. A row with no user is nobody else's."""
    q = Q(pk__in=[])
    for name, value in fixed.items():
        q |= Q(**{f"{name}__isnull": False}) & ~Q(**{name: value})
    return q


def memories_detach(keys: Iterable[str], thread_keys: Iterable[str]) -> Counter:
    """Detach memory-like records (stored ids) from the threads ``thread_keys`` (stored ids) about to be
    deleted: they stay, stored in no thread (``thread_id`` NULL; ``AgentMemory.delete_memory`` and searches of
    their user still reach them), and so do the thread copies of their search chunks and history versions;
    relations between two of them move to ``detached_thread_key``. Call inside the thread delete's
    transaction, after the other records of the threads are erased. Returns ``{"memories_detached": n}``."""
    keys, thread_keys = list(keys), list(thread_keys)
    if not keys:
        return Counter()
    detached = Memory.objects.filter(pk__in=keys).update(thread_id=None)
    SearchChunk.objects.filter(source_kind="memory", record_id__in=keys).update(thread_id=None)
    MemoryVersion.objects.filter(memory_id__in=keys).update(thread_id=None)
    MemoryDerivation.objects.filter(memory_id__in=keys).update(thread_id=None)
    for project_id in {project_of(key) for key in keys}:
        RecordLink.objects.filter(thread_id__in=thread_keys, source_id__in=keys, target_id__in=keys,
                                  project_id=project_id).update(thread_id=detached_thread_key(project_id))
    return Counter(memories_detached=detached)


def threads_erase(keys: Iterable[str], *, erased: set[str] | None = None,
                  spare: dict[str, str] | None = None) -> Counter:
    """Delete threads (stored ids) with everything they hold: messages, images, the memories they own,
    relations, summaries, extraction jobs, every chunk scoped to them, and the history of every memory
    written while it was theirs (memories deleted earlier included: nothing reaches it once the thread is
    gone; a thread created later with the same id must not see it). Call inside a transaction.
    ``erased`` as in ``images_erase``: the threads' memories, images and relations (their messages are not
    listed: they are only ever named together with their thread).

    ``spare`` (``{"user_id": ...}`` and/or ``{"agent_id": ...}``): the memories of these threads scoped to
    another user or agent (``foreign_q``) are not deleted but detached (``memories_detach``; counted as
    ``memories_detached``), with their chunks, relations among them and their history: a user-restricted
    caller never changes another user's records, and an erasure of one user leaves another's (found by a
    security review). Images copy their thread's scope (``services.image_add``), so none is foreign.
    Without ``spare`` (an unrestricted delete) everything goes, as the spec's ``delete_thread`` says.
    """
    keys = list(keys)
    counts: Counter = Counter()
    if not keys:
        return counts
    held = Memory.objects.filter(thread_id__in=keys)
    survivors = list(held.filter(foreign_q(spare)).values_list("pk", flat=True)) if spare else []
    counts += memories_erase(held.exclude(pk__in=survivors).values_list("pk", flat=True), erased=erased,
                             keep_history=False)
    counts += memories_detach(survivors, keys)
    counts += images_erase(Image.objects.filter(thread_id__in=keys).values_list("pk", flat=True), erased=erased)
    counts["chunks"] += unindex(SearchChunk.objects.filter(thread_id__in=keys))
    relations = list(RecordLink.objects.filter(thread_id__in=keys).values_list("pk", flat=True))
    if erased is not None:
        erased.update(relations)
    counts["relations"] += RecordLink.objects.filter(pk__in=relations).delete()[0]
    versions = MemoryVersion.objects.filter(thread_id__in=keys)
    derivations_erase(versions.values("memory_id"), thread_keys=keys)
    counts["memory_versions"] += history.history_erase(versions)
    counts["summaries"] += ThreadSummary.objects.filter(thread_id__in=keys).count()
    counts["context_cards"] += ContextCardLog.objects.filter(thread_id__in=keys).delete()[0]  # issue #32: erasure
    # wins over the card log
    counts["extraction_jobs"] += ExtractionJob.objects.filter(thread_id__in=keys).count()
    counts["messages"] += Message.objects.filter(thread_id__in=keys).count()
    counts["admin_log_entries"] += (
        admin_log_erase(RecordLink, relations) + admin_log_erase(Thread, keys)
        + admin_log_erase(Message, Message.objects.filter(thread_id__in=keys).values_list("pk", flat=True)))
    Thread.objects.filter(pk__in=keys).delete()  # cascades to messages, summaries and jobs
    counts["threads"] += len(keys)
    return counts


# --- one user or agent ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Erasure:
    """What ``subject_erase`` did (the stored ``ErasureReceipt`` plus the subject's id, which is not stored).

    ``counts``: rows deleted per kind (``RECEIPT_COUNTS``: threads, messages,
    memories, images, relations, chunks, summaries, extraction_jobs,
    admin_log_entries, and api_keys, which the delivery layer deletes on
    ``memory.signals.subject_erased``); ``found``: whether the
    project held anything about the subject; ``storage``: what was done to
    the storage afterwards (``storage_scrub``).
    """

    receipt_id: str
    project: str
    subject: str
    subject_id: str
    cascade: bool
    counts: dict[str, int]
    storage: dict[str, Any]
    requested_by: str
    requested_at: datetime
    completed_at: datetime | None
    found: bool = field(default=False)


def subject_threads(tenant: Tenant, subject: str, value: str) -> list[str]:
    """Stored ids of the threads of ``tenant``'s project owned by this user or agent."""
    return list(Thread.objects.filter(project=tenant.project, **{f"{subject}_id": value})
                .values_list("pk", flat=True))


def subjects_lock(tenant: Tenant, field_name: str, value: str) -> list[str]:
    """Lock, in one statement and primary-key order, every thread an erasure of ``value`` touches: the
    subject's own threads and those holding a memory or image scoped to it (step 1 of ``memory.core.locking``'s
    order, all at once, before any record); return the stored ids of the subject's own threads.

    A writer already inside one of them (``messages_add`` holds its thread row) commits first and the
    erasure then reads and erases what it wrote; a writer that comes later waits, then finds its thread
    gone (``NotFound``). Without this the erasure deleted a thread under a writer's committed messages,
    or deadlocked with it (``tests/concurrency``).
    """
    scoped = {"project": tenant.project, field_name: value}
    holding = (Q(project=tenant.project, **{field_name: value})
               | Q(pk__in=Memory.objects.filter(**scoped).exclude(thread_id=None).values("thread_id"))
               | Q(pk__in=Image.objects.filter(**scoped).exclude(thread_id=None).values("thread_id")))
    return [row.pk for row in lock_rows(Thread.objects.filter(holding)) if getattr(row, field_name) == value]


def subject_erase(*, tenant: Tenant, subject: str, value: Any, cascade: bool = True,
                  requested_by: str = "") -> Erasure:
    """Erase everything ``tenant``'s project holds about one user (``subject="user"``) or agent; return the receipt.

    With ``cascade`` (the SDK's default): in one transaction, the threads
    owned by ``value`` (``threads_erase``), then every memory, image and
    chunk still scoped to it in other threads or in none; then the storage is
    scrubbed (``storage_scrub``; the receipt's ``storage`` is what it did,
    with ``"scrubbed": True``). When nothing at all was deleted (an unknown
    id, or one erased before), nothing scrubs the file every project shares:
    ``storage`` is ``{"scrubbed": False, "reason": "nothing was deleted"}``
    and the receipt row is the only write (found by a security review: a
    loop of erasures of unknown ids was unbounded shared work). Memories
    scoped to another user (agent) that are filed in the subject's threads
    are not the subject's: they survive, detached from the deleted thread
    (``threads_erase`` with ``spare``), with their chunks and history.
    Without ``cascade`` nothing is deleted:
    the SDK then removes only a profile row, which this service does not keep.
    An ``ErasureReceipt`` is stored either way, naming the subject only by
    ``subject_digest``. A restricted tenant may erase only its own user (and
    not while restricted to an agent), or its own agent (not while
    restricted to a user): ``OutOfScope`` otherwise. ValueError/TypeError for
    a bad id or subject. The history of every memory scoped to the subject,
    held in its threads or erased with them goes too
    (``memory.records.history.history_erase``; single deletes had kept it), counted as
    ``memory_versions``.
    ``memory.signals.subject_erased`` goes out in the
    same transaction, so that other layers drop what they keep about the
    erased threads and records (access records: ``thread_ids`` of the erased
    threads, ``record_ids`` of every memory, image and relation erased,
    wherever it lived, found by a security review; API keys: every key fixed
    to the subject, ``threads.auth.subject_keys_erase``); what the receivers
    return is counted in the receipt. Callers wait for
    background extraction first (the client does, ``AgentMemory.delete_user``).
    """
    if subject not in SUBJECTS:
        raise InvalidArgument("subject", f"must be one of: {', '.join(SUBJECTS)}")
    field_name = f"{subject}_id"
    value = check_id(value, field_name)
    other = "agent" if subject == "user" else "user"
    if getattr(tenant, f"{other}_id") is not None:
        raise OutOfScope(field_name, f"a client restricted to one {other} cannot erase a whole {subject}")
    value = tenant.fill(field_name, value)
    if not isinstance(cascade, bool):
        raise InvalidArgument("cascade", "must be a bool")
    receipt = ErasureReceipt(project=tenant.project, subject=subject, cascade=cascade,
                             subject_digest=subject_digest(tenant.project.pk, subject, value),
                             requested_by=requested_by[:200], requested_at=timezone.now())
    counts: Counter = Counter()
    if cascade:
        with transaction.atomic():
            scoped = {"project": tenant.project, field_name: value}
            threads = subjects_lock(tenant, field_name, value)
            erased: set[str] = set()
            counts += threads_erase(threads, erased=erased, spare={field_name: value})
            counts += memories_erase(Memory.objects.filter(**scoped).values_list("pk", flat=True), erased=erased,
                                     keep_history=False)
            counts += images_erase(Image.objects.filter(**scoped).values_list("pk", flat=True), erased=erased)
            counts["chunks"] += unindex(SearchChunk.objects.filter(**scoped))
            versions = MemoryVersion.objects.filter(
                Q(**{field_name: value}) | Q(thread_id__in=threads) | Q(memory_id__in=erased), project=tenant.project)
            derivations_erase(versions.values("memory_id"))
            counts["memory_versions"] += history.history_erase(versions)
            counts["context_cards"] += ContextCardLog.objects.filter(project=tenant.project, **{field_name: value}
                                                                     ).delete()[0]
            for _receiver, deleted in subject_erased.send(
                    sender=ErasureReceipt, project=tenant.project, subject=subject, subject_id=value,
                    thread_ids=public_ids(threads), record_ids=public_ids(sorted(erased))):
                if isinstance(deleted, dict):  # rows other layers deleted: the keys fixed to the subject ...
                    counts.update(deleted)
    receipt.counts = {name: counts.get(name, 0) for name in RECEIPT_COUNTS}
    if not cascade:
        receipt.storage = {}
    elif any(n for name, n in counts.items() if name != "memories_detached"):
        receipt.storage = {"scrubbed": True, **storage_scrub()}
    else:  # nothing deleted: no scrub of the file every project shares (security review: a loop of erasures
        # of unknown ids was unbounded shared work, 0.13-0.22 s each on a 10.8 MB file)
        receipt.storage = {"scrubbed": False, "reason": "nothing was deleted"}
    receipt.completed_at = timezone.now()
    receipt.save()
    return receipt_dto(receipt, subject_id=value)


# --- expired records ----------------------------------------------------------------------------


def expired_purge(*, now: datetime | None = None, batch: int = PURGE_BATCH) -> Counter:
    """Delete every message, memory and standalone image whose ``expires_at`` has passed; return the counts.

    Expired records were only hidden from reads; this deletes them with what
    is derived from them (``messages_erase``/``memories_erase``/``images_erase``),
    ``batch`` rows per transaction, every project. Threads do not expire.
    The history of every memory it deletes goes too (``keep_history=False``,
    counted as ``memory_versions``: nothing could read or restore it, and its
    text is what expired; found by a security review), also of the
    memories that follow an expired message under the "delete" policy.
    Safe to run anywhere, any number of times, concurrently. Then
    ``memory.signals.purge_ran`` lets other layers purge what they keep for a
    bounded time (access records older than ``OAM_ACCESS_LOG_DAYS``, counted as
    ``access_records``). The storage is scrubbed afterwards (``storage_scrub``)
    when this purge deleted anything or when any search chunk was deleted since
    the last scrub by any path (``chunk_deletes_since_scrub``: a single delete
    through the API, the staff pages or the client overwrites the row and its
    FTS postings at once, but FTS5 may keep one of its terms as a page key
    until the index is rewritten; so that key lives at most until the next
    purge, ``OAM_PURGE_EXPIRED_SECONDS``, default an hour).
    """
    now = now or timezone.now()
    counts: Counter = Counter()
    sources = (
        (Message.objects.filter(expires_at__lte=now), messages_erase),
        (Memory.objects.filter(expires_at__lte=now), memories_erase),
        (Image.objects.filter(expires_at__lte=now, message__isnull=True), images_erase),
    )
    with history.acting("ttl", reason="time to live over"):  # the versions the invalidations write
        for qs, erase in sources:
            while keys := list(qs.order_by("pk").values_list("pk", flat=True)[:batch]):
                with transaction.atomic():
                    counts += erase(keys) if erase is images_erase else erase(keys, keep_history=False)
    if purged := card_log_purge(now=now):  # issue #32: cards kept past OAM_CONTEXT_CARD_LOG_DAYS
        counts["context_cards"] += purged
    for _receiver, result in purge_ran.send_robust(sender=expired_purge, now=now):
        if isinstance(result, int) and result:
            counts["access_records"] += result
    if any(counts.values()) or chunk_deletes_since_scrub():
        storage_scrub()
    return counts


def receipt_dto(row: ErasureReceipt, *, subject_id: str = "") -> Erasure:
    """An ``Erasure`` value from a stored receipt (``subject_id`` is not stored: the caller's, else "")."""
    return Erasure(
        receipt_id=str(row.pk), project=row.project.slug, subject=row.subject, subject_id=subject_id,
        cascade=row.cascade, counts=dict(row.counts), storage=dict(row.storage), requested_by=row.requested_by,
        requested_at=row.requested_at, completed_at=row.completed_at, found=any(row.counts.values()),
    )


def receipt_list(*, project: Any) -> list[Erasure]:
    """The erasure receipts of ``project``, newest first."""
    return [receipt_dto(row) for row in ErasureReceipt.objects.select_related("project").filter(project=project)
            .order_by("-requested_at", "pk")]


def receipt_get(*, project: Any, receipt_id: Any) -> Erasure:
    """One receipt of ``project``; KeyError (``NotFound``) otherwise, ValueError for an id that is not a UUID."""
    if not isinstance(receipt_id, str):
        raise InvalidArgument("receipt_id", "must be a string")
    try:
        key = uuid.UUID(receipt_id)
    except ValueError:
        raise InvalidArgument("receipt_id", "must be a UUID") from None
    row = ErasureReceipt.objects.select_related("project").filter(pk=key, project=project).first()
    if row is None:
        raise NotFound("receipt_id", receipt_id)
    return receipt_dto(row)
