"""Review decisions on memories awaiting review (``memory.records.review_rules``): ``memory_approve``,
``memory_edit_approve``, ``memory_reject``; and on memories flagged because one they were derived from changed
(issue #32, ``memory.links.dependants``): ``dependant_clear``.

Each is one transaction that locks the memory, checks that it awaits review, and appends one history
version (``memory.records.history``: ``approve`` or ``reject``) naming the actor the edge set (``acting``: the API
key, the staff user) and the reviewer's note as its reason. Approval copies the memory's status to its
search chunks (``memory.index.writer.review_settle``; they carry ``pending`` until then), so the next search finds
it, and makes the relation extraction left for it (``metadata["extraction"]["relation_on_approval"]``,
e.g. ``supersedes`` the memory it updates) when both ends are still there. Rejection deletes the memory
(``memory.services.erasure.memories_erase`` with the action ``reject``); its history stays until its user is erased.

Scope: a memory of ``project`` by public id whatever thread owns it, and only when ``allows(row)`` (a
restricted client's ``Tenant.allows``), as ``memory_delete_by_id``. Errors: KeyError (``NotFound``) when
there is none or the caller may not see it, ValueError (``NotPending``, HTTP 409) when it does not await
review, ValueError/TypeError naming the field for bad input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.core.chunking import chunk_text
from memory.core.errors import InvalidArgument, InvalidType, NotFlagged, NotFound, NotPending, check_text
from memory.core.ids import stored_id
from memory.core.types import NOTSET, NotSet
from memory.embedders import embed_records
from memory.index import writer as index
from memory.links.writes import link_create
from memory.models import Memory, Project, RecordLink, Thread
from memory.records import history
from memory.records import review_rules as review
from memory.records.selectors import memory_live_q
from memory.records.validators import check_content, check_id, check_memory_type
from memory.services.common import lock_memory
from memory.services.erasure import memories_erase

logger = logging.getLogger(__name__)

#: Characters of a reviewer's note (it becomes the history entry's reason, ``MemoryVersion.reason``).
NOTE_LENGTH = 400


@dataclass(frozen=True)
class ReviewDecision:
    """What a decision did: the memory (public id), ``action`` (approve, reject, clear), the number of the
    history version it wrote, and the relation approval made (public id; None when none)."""

    memory_id: str
    action: str
    version: int
    relation_id: str | None = None


def check_note(note: Any) -> str:
    """A reviewer's note: a string of at most ``NOTE_LENGTH`` characters ('' when None)."""
    if note is None:
        return ""
    if not isinstance(note, str):
        raise InvalidType("reason", "must be a string")
    check_text(note, "reason")
    if len(note) > NOTE_LENGTH:
        raise InvalidArgument("reason", f"must be at most {NOTE_LENGTH} characters")
    return note.strip()


def _reason(what: str, note: str) -> str:
    return f"{what} in review" + (f": {note}" if note else "")


def _locked_pending(project: Project, memory_id: str, allows: Callable[[Memory], bool]) -> Memory:
    row = lock_memory(Memory.objects.filter(pk=stored_id(project.pk, memory_id)))  # its thread first
    if row is None or not allows(row):
        raise NotFound("memory_id", memory_id)
    if not row.pending:
        raise NotPending("memory_id", memory_id)
    return row


def _version(row: Memory) -> int:
    return history.history_rows(project_id=row.project_id, memory_id=row.public_id).last().version


def _approve(row: Memory, before: dict[str, Any], reason: str, *, chunks: list[str] | None = None,
             vectors=None) -> ReviewDecision:
    """Inside the transaction: the memory leaves the queue (``pending`` False; its chunks get its status and
    type, or are replaced by ``chunks``/``vectors`` for an edited content), the ``approve`` version, then the
    relation left for the approval."""
    row.pending = False
    row.save()
    if chunks is not None:
        index.index_record(row, "memory", row.memory_type, chunks, vectors, made_from=before["content"])
    else:
        index.reindex_state("memory", [row.pk], record_type=row.memory_type)
        index.review_settle(row)
    history.record(row, "approve", before, history.snapshot(row), reason=reason)
    version = _version(row)
    return ReviewDecision(row.public_id, "approve", version, _relation_on_approval(row))


def _relation_on_approval(row: Memory) -> str | None:
    """Make the relation extraction decided for ``row`` (``metadata["extraction"]``: ``relation_on_approval``
    to ``related_memory_id``) when both ends are live memories of its thread; return its id, None otherwise
    (the related memory was deleted, moved or is itself pending, or the pair is related already)."""
    found = review.deferred_relation(row)
    thread = Thread.objects.filter(pk=row.thread_id).first() if found else None
    if thread is None:
        return None
    relation, target_row = found
    related, target = target_row.public_id, target_row.memory_type
    try:
        with transaction.atomic():
            return link_create(
                thread=thread, source_record_id=row.public_id, source_record_type=row.memory_type,
                target_record_id=related, target_record_type=target, relation_type=relation,
                metadata={"origin": "extraction", "made": "on approval"})
    except ValueError as exc:  # the pair is related already, an end expired meanwhile ...
        logger.info("relation %s from %s to %s not made on approval: %s", relation, row.pk, related, exc)
        return None


def memory_approve(*, project: Project, memory_id: Any, allows: Callable[[Memory], bool] = lambda row: True,
                   reason: Any = None) -> ReviewDecision:
    """Approve a memory awaiting review as it is: from now on searches, context cards and lists return it.

    ``reason``: the reviewer's note (at most ``NOTE_LENGTH`` characters), kept in the ``approve`` history
    entry ("approved in review: <note>"). Makes the relation extraction left for the approval
    (``_relation_on_approval``). Errors: see the module docstring.
    """
    mid = check_id(memory_id, "memory_id")
    note = check_note(reason)
    with transaction.atomic():
        row = _locked_pending(project, mid, allows)
        return _approve(row, history.snapshot(row), _reason("approved", note))


def memory_edit_approve(*, project: Project, memory_id: Any, content: str | NotSet = NOTSET,
                        memory_type: str | NotSet = NOTSET, allows: Callable[[Memory], bool] = lambda row: True,
                        reason: Any = None) -> ReviewDecision:
    """Edit a memory awaiting review, then approve it, as one ``approve`` history entry whose ``before`` holds
    what was extracted and ``after`` what was approved ("edited and approved in review: <note>").

    ``content`` (a non-empty string, re-embedded before the transaction, the chunks rewritten) and/or
    ``memory_type`` (one of ``memory.models.MEMORY_TYPES``); at least one of them (ValueError naming
    ``content`` otherwise: a plain approval is ``memory_approve``). Errors: see the module docstring.
    """
    mid = check_id(memory_id, "memory_id")
    note = check_note(reason)
    if content is NOTSET and memory_type is NOTSET:
        raise InvalidArgument("content", "give the edited content or memory_type (or approve it as it is)")
    new_type = check_memory_type(memory_type) if memory_type is not NOTSET else NOTSET
    chunks = vectors = None
    if content is not NOTSET:
        check_content(content)
        # Embedding is slow: refuse a memory that is not in the queue before paying for it.
        stored = Memory.objects.filter(pk=stored_id(project.pk, mid)).first()
        if stored is None or not allows(stored):
            raise NotFound("memory_id", mid)
        if not stored.pending:
            raise NotPending("memory_id", mid)
        chunks = chunk_text(content)
        vectors = embed_records([index.embedding_text(c, stored.timestamp) for c in chunks], field="content")
    with transaction.atomic():
        row = _locked_pending(project, mid, allows)
        before = history.snapshot(row)
        if content is not NOTSET:
            row.content = content
        if new_type is not NOTSET and new_type != row.memory_type:
            row.memory_type = new_type
            # A pending memory has no relations (memory.records.review_rules); kept true all the same, as
            # memory_update does.
            RecordLink.objects.filter(source_id=row.pk).update(source_type=new_type)
            RecordLink.objects.filter(target_id=row.pk).update(target_type=new_type)
        return _approve(row, before, _reason("edited and approved", note), chunks=chunks, vectors=vectors)


def memory_reject(*, project: Project, memory_id: Any, allows: Callable[[Memory], bool] = lambda row: True,
                  reason: Any = None) -> ReviewDecision:
    """Reject a memory awaiting review: delete it with its chunks (``memories_erase``), writing one ``reject``
    history entry ("rejected in review: <note>") instead of a ``delete``; its history stays until its user
    is erased. Errors: see the module docstring."""
    mid = check_id(memory_id, "memory_id")
    note = check_note(reason)
    with transaction.atomic():
        row = _locked_pending(project, mid, allows)
        memories_erase([row.pk], action="reject", reason=_reason("rejected", note))
        return ReviewDecision(row.public_id, "reject", _version(row))


def dependant_clear(*, project: Project, memory_id: Any, allows: Callable[[Memory], bool] = lambda row: True,
                    reason: Any = None) -> ReviewDecision:
    """Clear the review flag of a memory flagged because a memory it was derived from changed (issue #32,
    ``memory.links.dependants``): ``needs_review`` false, ``review_cause`` None, one ``unflag`` history entry
    naming the actor ("cleared in review: <note>", the cause it cleared in ``before``). The memory is not
    otherwise changed: one the "invalidate" policy made invalid stays invalid (a status edit makes it valid).

    Scope as the decisions above: a live memory of ``project`` by public id (not expired, not awaiting review),
    only when ``allows(row)``; KeyError (``NotFound``) otherwise, ValueError (``NotFlagged``, HTTP 409) when it
    is not flagged, ValueError/TypeError naming the field for bad input.
    """
    mid = check_id(memory_id, "memory_id")
    note = check_note(reason)
    with transaction.atomic():
        rows = Memory.objects.filter(memory_live_q(timezone.now()), pk=stored_id(project.pk, mid))
        row = lock_memory(rows)  # its thread first
        if row is None or not allows(row):
            raise NotFound("memory_id", mid)
        if not row.needs_review:
            raise NotFlagged("memory_id", mid)
        before = history.snapshot(row)
        row.needs_review, row.review_cause = False, None
        row.save(update_fields=["needs_review", "review_cause", "updated_at"])
        history.record(row, "unflag", before, history.snapshot(row), reason=_reason("cleared", note))
        return ReviewDecision(row.public_id, "clear", _version(row))
