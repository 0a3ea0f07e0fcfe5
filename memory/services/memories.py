"""Memory-like record writes: ``memory_add`` (``memory_prepare`` + ``memory_insert``), ``memory_update``,
``memory_delete``, ``memory_delete_by_id``."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from memory.core import telemetry
from memory.core import ttl as ttl_rules
from memory.core.chunking import chunk_text
from memory.core.errors import Conflict, InvalidArgument, InvalidType, NotFound
from memory.core.ids import public_id, stored_id
from memory.core.locking import lock_first
from memory.core.types import NOTSET, MemoryRetentionConfig, NotSet, RecordStatus, TimeToLiveAnchor
from memory.core.valid_time import WINDOW_FIELDS, check_instant, check_window
from memory.embedders import embed_records
from memory.extraction.jobs import jobs_fence
from memory.index import writer as index
from memory.links.dependants import change_action, dependants_flag, derivations_insert
from memory.links.rules import links_detach
from memory.links.writes import PendingLink, pending_link
from memory.models import Memory, Project, RecordLink, Thread
from memory.records import history
from memory.records.derivations import check_derived_from, sources_resolve
from memory.records.selectors import memory_live_q
from memory.records.validators import (
    check_bounded_int,
    check_content,
    check_id,
    check_memory_type,
    check_metadata,
    check_scope_id,
    check_status,
)
from memory.services.common import erase_fenced, lock_memory, lock_thread, refresh_expiry
from memory.services.erasure import memories_erase


@dataclass
class PreparedMemory:
    """A validated, embedded memory ready to insert (``memory_prepare`` -> ``memory_insert``).

    ``row`` is the unsaved ``Memory``; ``chunk_rows`` its unsaved
    ``SearchChunk`` rows with their embeddings; ``sources`` the stored ids of the memories it is derived from
    (``derived_from``, issue #32), stored as ``MemoryDerivation`` edges with it.
    """

    row: Memory
    chunk_rows: list[index.SearchChunk]
    sources: list[str] = field(default_factory=list)


def _given_id(value: Any) -> str | None:
    """A caller's record id for a span attribute before it is checked: the string, else None (left out)."""
    return value if isinstance(value, str) else None


def _traced(span, memory: Memory) -> None:
    """A memory write's span attributes (``memory.core.telemetry``) from the row as written: its public id, type
    (``oam.memory.type``), thread (``gen_ai.conversation.id``) and agent (``gen_ai.agent.id``); with content capture
    its user (``user.id``) and ``gen_ai.memory.records`` (its id, content and metadata)."""
    telemetry.set_attributes(span, {
        telemetry.RECORD_ID: memory.public_id, "oam.memory.type": memory.memory_type,
        telemetry.CONVERSATION_ID: public_id(memory.thread_id), telemetry.AGENT_ID: memory.agent_id,
    })
    telemetry.set_user(span, memory.user_id)
    if telemetry.capture_content():
        telemetry.set_content(span, records=[{"id": memory.public_id, "content": memory.content,
                                              "metadata": memory.metadata or {}}])


def memory_prepare(
    *,
    thread: Thread,
    content: Any,
    memory_type: str | NotSet = NOTSET,
    user_id: str | None | NotSet = NOTSET,
    agent_id: str | None | NotSet = NOTSET,
    thread_id: str | None | NotSet = NOTSET,
    memory_id: str | NotSet = NOTSET,
    metadata: Any = None,
    timestamp: Any = None,
    ttl_days: int | None | NotSet = NOTSET,
    ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
    status: RecordStatus | str | NotSet = NOTSET,
    source_message_ids: Sequence[str] = (),
    retention: MemoryRetentionConfig,
    review_types: Collection[str] = (),
    valid_from: datetime | date | str | None = None,
    valid_to: datetime | date | str | None = None,
    derived_from: Sequence[str] | None | NotSet = NOTSET,
    restrict: dict[str, str] | None = None,
) -> PreparedMemory:
    """Validate and embed a memory-like record without writing it (see ``memory_add`` for the rules).

    ``review_types``: the memory types that wait for review (``MemoryExtractionConfig.review_types``): a
    memory of one of them is stored ``pending`` and its chunks carry the status ``pending``
    (``memory.index.writer.chunk_status``), so no agent's read returns it until ``memory.services.review``
    approves it.

    ``valid_from``/``valid_to`` (issue #32): the validity window, each None (open) or a datetime, date or
    ISO-8601 string (``memory.core.valid_time.check_instant``: naive is UTC); ``valid_to`` not before
    ``valid_from``. Copied onto the chunks, so ``valid_at`` searches filter in SQL.

    ``derived_from`` (issue #32): public ids of the memories the new one was inferred from, at most
    ``MAX_DERIVED_FROM`` (``memory.records.derivations.check_derived_from``), each one of the project's live
    memories the caller may read (``restrict``: a restricted client's ``Tenant.row_filter``); KeyError
    (``NotFound`` naming ``derived_from``) for one that is not, as for a missing memory
    (``sources_resolve``). They become ``PreparedMemory.sources``.

    Embedding is slow and needs no database lock: callers that write several
    records in one transaction (an extraction job's commit) prepare them
    first and insert them with ``memory_insert`` inside it, so no write lock is
    held while the embedder runs. Raises as ``memory_add``.
    """
    check_content(content)
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
    sources = sources_resolve(thread.project_id, check_derived_from(derived_from), restrict=restrict)
    state = RecordStatus.VALID.value if status is NOTSET else check_status(status)
    window = {name: check_instant(value, name) for name, value in zip(WINDOW_FIELDS, (valid_from, valid_to))}
    check_window(window["valid_from"], window["valid_to"])
    now = timezone.now()
    days = ttl_rules.resolve_ttl_days(ttl_days, retention)
    anchor = TimeToLiveAnchor.CREATED_AT if ttl_anchor is NOTSET else ttl_rules.check_anchor(ttl_anchor)
    expiry = ttl_rules.expires_at(days, anchor, created_at=now, timestamp=stamp)
    if Memory.objects.filter(pk=key).exists():
        raise Conflict("memory_id", mid)
    chunks = chunk_text(content)
    vectors = embed_records([index.embedding_text(c, stamp) for c in chunks], field="content")
    row = Memory(
        id=key, project_id=thread.project_id, memory_type=mtype, content=content, timestamp=stamp,
        event_at=ttl_rules.parse_timestamp(stamp), metadata=meta, status=state, expires_at=expiry,
        source_message_ids=list(source_message_ids), created_at=now, pending=mtype in review_types, **scope,
        **window,
    )
    chunk_rows = index.chunk_rows(project_id=thread.project_id, source_kind="memory", record_id=key, record_type=mtype,
                             chunks=chunks, vectors=vectors, status=index.chunk_status(row), expires_at=expiry,
                             metadata=meta, now=now, **scope, **window)
    return PreparedMemory(row=row, chunk_rows=chunk_rows, sources=sources)


def memory_insert(prepared: PreparedMemory, *, link: Callable[[Memory], Any] | None = None) -> str:
    """Insert a prepared memory and its chunks in one transaction (a savepoint inside another); return its
    public id (the caller's, ``memory.records.tenancy``).

    ``link`` is called with the saved memory inside it (see ``memory_add``); the ``derived_from`` edges
    (``prepared.sources``) are stored in it too (``memory.links.dependants.derivations_insert``).
    Raises ``Conflict`` when the id was taken since ``memory_prepare``.
    """
    memory = prepared.row
    with transaction.atomic():
        try:
            with transaction.atomic():
                memory.save(force_insert=True)
        except IntegrityError:
            raise Conflict("memory_id", memory.public_id) from None  # lost a race for a caller-chosen id
        index.index_rows(prepared.chunk_rows)
        history.record(memory, "create", None, history.snapshot(memory))
        derivations_insert(memory, prepared.sources)
        if link is not None:
            link(memory)
    return memory.public_id


def memory_add(
    *,
    memory_id_to_link: str | NotSet = NOTSET,
    link_type: str | NotSet = NOTSET,
    link_id: str | NotSet = NOTSET,
    link_timestamp: str | None | NotSet = NOTSET,
    link_metadata: dict[str, Any] | None | NotSet = NOTSET,
    link_restrict: dict[str, str] | None = None,
    link: PendingLink | None = None,
    **fields: Any,
) -> str:
    """Store a memory-like record and index it, with its explicit relation when asked; return its id.

    ``fields`` are ``memory_prepare``'s: ``thread``, ``content``, ``retention``
    and optionally ``memory_type``, ``user_id``, ``agent_id``, ``thread_id``,
    ``memory_id``, ``metadata``, ``timestamp``, ``ttl_days``, ``ttl_anchor``,
    ``status``, ``source_message_ids``, ``review_types``, ``valid_from``, ``valid_to`` (the validity window,
    issue #32), ``derived_from`` (issue #32: the memories it was inferred from, checked within
    ``link_restrict``). Omitted scope values inherit the
    thread's user, agent and thread ids; a given ``thread_id`` names a thread of
    the same project (it need not exist; None: owned by no thread).
    ``source_message_ids`` are public message ids. ``memory_type`` defaults to "memory";
    ``status`` to valid.

    The spec's link arguments (``add_memory``: ``memory_id_to_link``,
    ``link_type``, ``link_id``, ``link_timestamp``, ``link_metadata``) are
    checked by ``memory.links.writes.pending_link`` (``link_restrict``: a restricted
    client's ``Tenant.row_filter``); omitted scope values then come from the
    linked record, and the relation is inserted with the memory in the same
    transaction, so both commit together. ``link`` is such a ``PendingLink``
    already checked by the caller (instead of the link arguments). Raises
    ValueError for an unknown type or status, a taken ``memory_id``, an empty
    content or bad link arguments; TypeError for a non-string content. Embeds
    before the transaction (``memory_prepare``, then ``memory_insert``).

    Traced as one ``create_memory`` span (``memory.core.telemetry``, ``_traced``).
    """
    with telemetry.memory_span(telemetry.CREATE_MEMORY, store_id=lambda: fields["thread"].project.slug,
                               attributes={telemetry.RECORD_ID: _given_id(fields.get("memory_id")),
                                           telemetry.RECORD_COUNT: 1}) as span:
        if link is None:
            link = pending_link(thread=fields["thread"], memory_id_to_link=memory_id_to_link, link_type=link_type,
                                link_id=link_id, link_timestamp=link_timestamp, link_metadata=link_metadata,
                                restrict=link_restrict)
            if link is not None:
                scope = link.inherit_scope(*(fields.get(name, NOTSET) for name in ("user_id", "agent_id", "thread_id")))
                fields.update((name, value) for name, value in zip(("user_id", "agent_id", "thread_id"), scope)
                              if value is not NOTSET)
        elif any(value is not NOTSET
                 for value in (memory_id_to_link, link_type, link_id, link_timestamp, link_metadata)):
            raise InvalidType("link", "give either a checked link or the link arguments, not both")
        prepared = memory_prepare(restrict=link_restrict, **fields)
        if link is not None and prepared.row.pending:
            # A relation acts at once (a supersedes invalidates its target): not from a memory nobody approved.
            raise InvalidArgument("memory_id_to_link", f"a {prepared.row.memory_type} memory waits for review "
                                                       "here (review_added_memories): link it once it is approved")
        memory_id = memory_insert(prepared, link=link)
        if span.is_recording():
            _traced(span, prepared.row)
        return memory_id


def memory_update(
    *,
    thread: Thread | None = None,
    project: Project | None = None,
    allows: Callable[[Memory], bool] = lambda row: True,
    memory_id: Any,
    content: str | NotSet = NOTSET,
    metadata: dict[str, Any] | None | NotSet = NOTSET,
    timestamp: str | None | NotSet = NOTSET,
    ttl_days: int | None | NotSet = NOTSET,
    ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
    status: RecordStatus | str | NotSet = NOTSET,
    memory_type: str | NotSet = NOTSET,
    retention: MemoryRetentionConfig,
    valid_from: datetime | date | str | None | NotSet = NOTSET,
    valid_to: datetime | date | str | None | NotSet = NOTSET,
) -> str:
    """Update a live memory-like record: with ``thread``, one whose stored thread_id is this thread's
    (``Thread.update_memory``); with ``project`` instead, one of the project by id whatever thread owns
    it or none (SDK ``OracleAgentMemory.update_memory``), and only when ``allows(row)`` (a restricted
    client's ``Tenant.allows``): the lookup and scoping rule of ``memory_delete_by_id``, so a record
    the client lists and may delete it may update too.

    Omitted values are preserved; metadata replaces the stored object; a new
    content is re-embedded; ``timestamp=None`` clears the event time. A TTL
    refresh anchored on TIMESTAMP uses the replacement timestamp or the stored
    one. ``memory_type`` (not a spec ``update_memory`` parameter: the staff
    pages and the admin retype memories) changes the record's type, its
    chunks' ``record_type`` and the endpoint types of its relations, in the
    same transaction. ``valid_from``/``valid_to`` (issue #32) set a bound
    (a datetime, date or ISO-8601 string), None clears it (open), omitted
    keeps it; the resulting window is checked (``valid_to`` not before
    ``valid_from``: ValueError naming ``valid_to``) and copied to the chunks.
    Raises KeyError when missing, expired or another
    thread's, and for a memory awaiting review (``memory.records.review_rules``: it is
    changed through the review queue, ``memory.services.review``);
    ValueError for an unknown type or status.

    A new content or type, or the status invalid, flags every memory derived from it, transitively
    (``memory.links.dependants``, issue #32), in the same transaction; a metadata, event time or TTL edit
    flags nothing.

    Traced as one ``update_memory`` span (``memory.core.telemetry``, ``_traced``).
    """
    store = (lambda: thread.project.slug) if thread is not None else getattr(project, "slug", None)
    with telemetry.memory_span(telemetry.UPDATE_MEMORY, store_id=store,
                               attributes={telemetry.RECORD_ID: _given_id(memory_id),
                                           telemetry.RECORD_COUNT: 1}) as span:
        if (thread is None) == (project is None):
            raise TypeError("memory_update: give exactly one of thread and project")
        key = stored_id(thread.project_id if thread is not None else project.pk, check_id(memory_id, "memory_id"))
        owned = {"thread_id": thread.pk} if thread is not None else {}
        new_type = check_memory_type(memory_type) if memory_type is not NOTSET else NOTSET
        if content is not NOTSET:
            check_content(content)
        new_meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
        new_stamp = ttl_rules.check_timestamp(timestamp) if timestamp is not NOTSET else NOTSET
        new_status = check_status(status) if status is not NOTSET else NOTSET
        new_window = {name: check_instant(value, name)
                      for name, value in zip(WINDOW_FIELDS, (valid_from, valid_to)) if value is not NOTSET}
        chunks = vectors = None
        if content is not NOTSET or new_stamp is not NOTSET:
            # The embedding covers content and event time (``embedding_text``).
            # Embedding is slow: refuse a missing record before paying for it.
            stored = Memory.objects.filter(memory_live_q(timezone.now()), pk=key, **owned).first()
            if stored is None or not allows(stored):
                raise NotFound("memory_id", memory_id)
            chunks = chunk_text(stored.content if content is NOTSET else content)
            stamp = stored.timestamp if new_stamp is NOTSET else new_stamp
            vectors = embed_records([index.embedding_text(c, stamp) for c in chunks], field="content")
        with transaction.atomic():
            rows = Memory.objects.filter(memory_live_q(timezone.now()), pk=key, **owned)
            if thread is not None:  # the lock order (memory.core.locking): the thread, then the memory
                lock_thread(thread.pk, required=False)
                memory = lock_first(rows)
            else:
                memory = lock_memory(rows)
            if memory is None or not allows(memory):
                raise NotFound("memory_id", memory_id)
            before = history.snapshot(memory)
            if content is not NOTSET:
                memory.content = content
            if new_meta is not NOTSET:
                memory.metadata = new_meta
            if new_stamp is not NOTSET:
                memory.timestamp = new_stamp
                memory.event_at = ttl_rules.parse_timestamp(new_stamp)
            if new_status is not NOTSET:
                memory.status = new_status
            if new_window:
                merged = {name: new_window.get(name, getattr(memory, name)) for name in WINDOW_FIELDS}
                check_window(merged["valid_from"], merged["valid_to"])
                memory.valid_from, memory.valid_to = merged["valid_from"], merged["valid_to"]
            if new_type is not NOTSET and new_type != memory.memory_type:
                memory.memory_type = new_type
                # Relations record their endpoints' types (link_records' tuple); keep them true.
                RecordLink.objects.filter(source_id=memory.pk).update(source_type=new_type)
                RecordLink.objects.filter(target_id=memory.pk).update(target_type=new_type)
            refresh_expiry(memory, ttl_days, ttl_anchor, retention, memory.timestamp)
            memory.save()
            index.sync_record(memory, "memory", memory.memory_type, chunks, vectors, made_from=before["content"])
            after = history.snapshot(memory)
            if after != before:
                history.record(memory, "update", before, after)
                _flag_dependants(memory, before, after)
        if span.is_recording():
            _traced(span, memory)
        return memory_id


def _flag_dependants(memory: Memory, before: dict[str, Any], after: dict[str, Any]) -> None:
    """After a memory's change is recorded: flag what was derived from it when the change is one
    (``memory.links.dependants.change_action``: it became invalid, or its content or type changed; issue #32)."""
    action = change_action(before, after)
    if action is not None:
        dependants_flag([memory.pk], action=action)


def memory_delete(*, thread: Thread, memory_id: Any) -> int:
    """Delete one memory-like record of this exact thread; return 1, or 0 when absent.

    Its relations go with it, and records it superseded, refined or
    duplicated are valid again unless another such relation remains
    (``memory.services.erasure.memories_erase``). The thread's running extraction is
    fenced, not waited for (see ``message_delete``).

    Traced as one ``delete_memory`` span (``memory.core.telemetry``): the record's id, count 1 (the records it
    attempted to delete, as the convention counts), ``oam.memory.deleted`` (the result).
    """
    with telemetry.memory_span(telemetry.DELETE_MEMORY, store_id=lambda: thread.project.slug,
                               attributes={telemetry.RECORD_ID: _given_id(memory_id), telemetry.RECORD_COUNT: 1,
                                           telemetry.CONVERSATION_ID: thread.public_id}) as span:
        key = stored_id(thread.project_id, check_id(memory_id, "memory_id"))
        deleted = erase_fenced(thread, Memory, key, memories_erase, f"memory {memory_id}")
        telemetry.set_attributes(span, {"oam.memory.deleted": deleted})
        return deleted


def memory_state_update(*, project: Project, memory_id: Any, status: RecordStatus | str | NotSet = NOTSET,
                        expires_at: datetime | None | NotSet = NOTSET) -> int:
    """Set a memory-like record's ``status`` and/or ``expires_at`` (a datetime or None), whatever thread owns it,
    with its chunks' copies; return 1, or 0 when absent.

    The admin's edit of the expiry (``memory_update`` refreshes it only from a
    TTL). Works on an expired record too. Raises ValueError for an unknown status.
    """
    fields = {}
    if status is not NOTSET:
        fields["status"] = check_status(status)
    if expires_at is not NOTSET:
        fields["expires_at"] = expires_at
    key = stored_id(project.pk, check_id(memory_id, "memory_id"))
    with transaction.atomic():
        row = lock_memory(Memory.objects.filter(pk=key))
        if row is None:
            return 0
        if fields:
            before = history.snapshot(row)
            for name, value in fields.items():
                setattr(row, name, value)
            row.save(update_fields=[*fields, "updated_at"])
            index.reindex_state("memory", [row.pk], **fields)
            after = history.snapshot(row)
            if after != before:
                history.record(row, "update", before, after)
                _flag_dependants(row, before, after)
    return 1


def memory_delete_by_id(*, project: Project, memory_id: Any, allows: Callable[[Memory], bool] = lambda row: True
                        ) -> int:
    """Delete a memory-like record of ``project`` by id, whatever thread owns it (or none); return 1 or 0.

    SDK ``OracleAgentMemory.delete_memory``: the way to delete a memory stored
    with another ``thread_id`` or none, which no thread handle reaches. An
    expired record is deleted too (it is stored data). ``allows`` (a
    restricted client's ``Tenant.allows``) decides whether the caller may see
    the row; one it may not counts as absent. The owning thread's running
    extraction, if any, is fenced (see ``message_delete``).

    Traced as one ``delete_memory`` span, as ``memory_delete``.
    """
    with telemetry.memory_span(telemetry.DELETE_MEMORY, store_id=project.slug,
                               attributes={telemetry.RECORD_ID: _given_id(memory_id),
                                           telemetry.RECORD_COUNT: 1}) as span:
        key = stored_id(project.pk, check_id(memory_id, "memory_id"))
        with transaction.atomic():
            row = lock_memory(Memory.objects.filter(pk=key))  # its thread first (memory.core.locking)
            if row is None or not allows(row):
                telemetry.set_attributes(span, {"oam.memory.deleted": 0})
                return 0
            if row.thread_id:
                jobs_fence(thread_id=row.thread_id, reason=f"memory {memory_id} deleted")
            memories_erase([key])
        telemetry.set_attributes(span, {"oam.memory.deleted": 1, telemetry.CONVERSATION_ID: public_id(row.thread_id)})
        return 1


def memory_restore(*, thread: Thread, memory_id: Any, version: Any, restrict: dict[str, str] | None = None) -> int:
    """Undo: put back what version ``version`` of a memory's history recorded, as a new version; return its number.

    The memory must be stored with this thread's ``thread_id`` (an expired one
    too: a restore may bring back an earlier expiry); ``restrict`` (a
    restricted client's ``Tenant.row_filter``) hides other users' and agents'
    memories. Content, type, metadata, status, expiry, event time and the validity window (issue #32; a
    snapshot without its keys: none) become
    those of the version's ``after`` snapshot (``memory.records.history.SNAPSHOT_FIELDS``;
    for a ``delete`` or ``reject`` version, its ``before``), and so does whether it awaits review
    (``pending``); the content is re-embedded and
    the search chunks rewritten through ``memory.index.writer.sync_record``, relation
    endpoint types follow a changed type (as ``memory_update``), and the
    restore is itself a ``restore`` version whose reason names ``version``. A dependant's review flag
    (``needs_review``, issue #32) stays as it is; a restore that changes the content or type, or makes the
    memory invalid, flags what was derived from it (``memory.links.dependants``).
    Raises KeyError (``NotFound``) for a missing memory or version,
    ValueError/TypeError for a bad id or version number.
    """
    key = stored_id(thread.project_id, check_id(memory_id, "memory_id"))
    number = check_bounded_int(version, "version", low=1, sql_count=True)
    rows = Memory.objects.filter(pk=key, thread_id=thread.pk, **(restrict or {}))
    if not rows.exists():
        raise NotFound("memory_id", memory_id)
    target = history.history_rows(project_id=thread.project_id, memory_id=memory_id).filter(version=number).first()
    if target is None:
        raise NotFound("version", str(number))
    state = target.after if target.after is not None else target.before
    content = state["content"]
    chunks = chunk_text(content)
    vectors = embed_records([index.embedding_text(c, state.get("timestamp")) for c in chunks], field="version")
    with transaction.atomic():
        lock_thread(thread.pk, required=False)  # memory.core.locking: the thread, then the memory
        memory = lock_first(rows)
        if memory is None:
            raise NotFound("memory_id", memory_id)
        before = history.snapshot(memory)
        new_type = check_memory_type(state["memory_type"])
        if new_type != memory.memory_type:
            RecordLink.objects.filter(source_id=memory.pk).update(source_type=new_type)
            RecordLink.objects.filter(target_id=memory.pk).update(target_type=new_type)
        memory.content, memory.memory_type = content, new_type
        memory.metadata = dict(state.get("metadata") or {})
        memory.status = check_status(state["status"])
        memory.expires_at = history.snapshot_expiry(state)
        memory.timestamp = state.get("timestamp")
        memory.event_at = ttl_rules.parse_timestamp(memory.timestamp)
        # a snapshot without a bound (one taken before valid time existed too) had none: open
        memory.valid_from, memory.valid_to = (history.snapshot_expiry(state, name) for name in WINDOW_FIELDS)
        was_pending, memory.pending = memory.pending, bool(state.get("pending"))  # back to the queue if it waited
        memory.save()
        if memory.pending and not was_pending:
            # A pending memory has no relations (memory.records.review_rules): what its approval made goes, and what
            # that invalidated is valid again (found by a review: a superseded memory stayed invalid).
            links_detach(memory_ids=[memory.pk])
        index.sync_record(memory, "memory", memory.memory_type, chunks, vectors, made_from=before["content"])
        after = history.snapshot(memory)
        history.record(memory, "restore", before, after,
                       reason=f"restore of version {number}" + (f" ({history.current_actor().reason})"
                                                                 if history.current_actor().reason else ""))
        _flag_dependants(memory, before, after)
        return history.history_rows(project_id=thread.project_id, memory_id=memory_id).last().version


# --- threads ----------------------------------------------------------------------------
