from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from memory.core import ttl as ttl_rules
from memory.core.errors import Conflict, InvalidArgument, InvalidType, NotFound
from memory.core.ids import public_id, stored_id
from memory.core.locking import lock_first
from memory.core.types import NOTSET, NotSet, RecordRelation, RecordStatus
from memory.links.rules import (
    _TUPLE_FIELDS,
    INVALIDATING_RELATIONS,
    WINDOW_CLOSING_RELATION,
    LinkExists,
    close_window,
    opposite_label,
    pair_key,
    relation_dto,
    reopen_window,
    revalidate,
    set_memory_status,
)
from memory.llm.prompts import BUILTIN_RELATIONS
from memory.models import Memory, RecordLink, Thread
from memory.records.admin_log import admin_log_erase
from memory.records.selectors import Records, memory_live_q
from memory.records.validators import check_id, check_metadata, check_record_type, check_relation_type, check_scope_id

# --- writes -----------------------------------------------------------------------------------


def _thread_lock(thread: Thread) -> None:
    """Lock the relation's thread row before its memories and relations: step 1 of ``memory.core.locking``'s
    order (two writers locking a pair's endpoints in opposite orders would deadlock otherwise)."""
    lock_first(Thread.objects.filter(pk=thread.pk))


def _endpoint(thread: Thread, record_id: Any, record_type: Any, prefix: str, *, now,
              restrict: dict[str, str] | None = None) -> Memory:
    """The live memory-like record of this exact thread named by an endpoint (public id), locked; else ValueError
    (also for another user's or agent's record when ``restrict``, ``Tenant.row_filter``, excludes it, and for
    a memory awaiting review: it has no effect on others before it is approved, ``memory.records.review_rules``)."""
    rid = check_id(record_id, f"{prefix}_record_id")
    rtype = check_record_type(record_type, f"{prefix}_record_type")
    row = lock_first(Memory.objects.filter(memory_live_q(now), pk=stored_id(thread.project_id, rid),
                                           thread_id=thread.pk, **(restrict or {})))
    if row is None:
        raise InvalidArgument(f"{prefix}_record_id",
                              f"no memory-like record {rid!r} owned by thread {thread.public_id!r}")
    if row.memory_type != rtype:
        raise InvalidArgument(f"{prefix}_record_type",
                              f"record {rid!r} is a {row.memory_type!r}, not a {rtype!r}")
    return row


def _insert(*, thread: Thread, source: Memory, target: Memory, relation_type: str, opposite: str,
            relation_id: str, timestamp: str | None, metadata: dict[str, Any], id_field: str = "relation_id") -> str:
    """Insert one relation between two locked, checked endpoints and apply the lifecycle rule; return its public id.

    Run inside a transaction. ``relation_id`` is public (``id_field`` names it
    in errors). Raises ``InvalidArgument`` for a self-link, ``LinkExists`` when
    the pair is related already, ``Conflict`` for a taken id.
    """
    if source.pk == target.pk:
        raise InvalidArgument("target_record_id", "a record cannot be related to itself")
    key = pair_key(source.pk, target.pk)
    existing = RecordLink.objects.filter(pair_key=key).values_list("pk", flat=True).first()
    if existing is not None:
        raise LinkExists(source.public_id, target.public_id, public_id(existing))
    row_id = stored_id(thread.project_id, relation_id)
    if RecordLink.objects.filter(pk=row_id).exists():
        raise Conflict(id_field, relation_id)
    row = RecordLink(
        id=row_id, project_id=thread.project_id, thread_id=thread.pk, source_id=source.pk,
        source_type=source.memory_type,
        target_id=target.pk, target_type=target.memory_type, relation_type=relation_type,
        opposite_relation_type=opposite, pair_key=key, metadata=metadata, timestamp=timestamp,
        created_at=timezone.now(),
    )
    try:
        with transaction.atomic():
            row.save(force_insert=True)
    except IntegrityError:  # lost a race since the checks above
        existing = RecordLink.objects.filter(pair_key=key).values_list("pk", flat=True).first()
        if existing is not None:
            raise LinkExists(source.public_id, target.public_id, public_id(existing)) from None
        raise Conflict(id_field, relation_id) from None
    if relation_type in INVALIDATING_RELATIONS:
        set_memory_status([target.pk], RecordStatus.INVALID.value, relation_id=row_id)
    if relation_type == WINDOW_CLOSING_RELATION:
        close_window(source, target.pk, relation_id=row_id)
    return relation_id


def link_create(
    *,
    thread: Thread,
    source_record_id: Any,
    source_record_type: Any,
    target_record_id: Any,
    target_record_type: Any,
    relation_type: Any,
    opposite_relation_type: str | NotSet = NOTSET,
    relation_id: str | NotSet = NOTSET,
    timestamp: Any = None,
    metadata: Any = None,
    restrict: dict[str, str] | None = None,
) -> str:
    """Create a directed relation between two records of this exact thread; return its id.

    Spec: link_records. Both endpoints must be live memory-like records owned
    by ``thread`` and of the given types; a built-in ``relation_type`` gets its
    fixed reverse label unless ``opposite_relation_type`` is given, a custom one
    the same label. ``relation_id`` is generated when omitted. Raises
    ValueError for a self-link, an unknown endpoint, a pair that is already
    related (either orientation; ``LinkExists``) or a taken ``relation_id``
    (``Conflict``); TypeError for non-string values. ``restrict``
    (``Tenant.row_filter``): an endpoint of another user or agent is unknown.
    """
    label = check_relation_type(relation_type)
    opposite = opposite_label(label, opposite_relation_type)
    rid = str(uuid.uuid4()) if relation_id is NOTSET else check_id(relation_id, "relation_id")
    stamp = ttl_rules.check_timestamp(timestamp)
    meta = check_metadata(metadata)
    now = timezone.now()
    with transaction.atomic():
        _thread_lock(thread)
        source = _endpoint(thread, source_record_id, source_record_type, "source", now=now, restrict=restrict)
        target = _endpoint(thread, target_record_id, target_record_type, "target", now=now, restrict=restrict)
        return _insert(thread=thread, source=source, target=target, relation_type=label, opposite=opposite,
                       relation_id=rid, timestamp=stamp, metadata=meta)


def link_update(
    *,
    thread: Thread,
    relation_id: Any,
    relation_type: str | NotSet = NOTSET,
    opposite_relation_type: str | NotSet = NOTSET,
    timestamp: str | None | NotSet = NOTSET,
    metadata: dict[str, Any] | None | NotSet = NOTSET,
    restrict: dict[str, str] | None = None,
) -> int:
    """Update a relation of this thread; return 1, or 0 when there is none (or ``restrict`` hides it: ``visible``).

    Spec: update_record_link. Omitted values are preserved; ``timestamp=None``
    clears it; ``metadata`` replaces the stored object. A new built-in
    ``relation_type`` sets its fixed reverse label, unless the same call gives
    ``opposite_relation_type`` (an explicit label always wins, as in
    ``link_records``). Changing the type in or out of supersedes/refines/
    duplicates invalidates or re-validates the target; in or out of
    supersedes closes its validity window or undoes that closing (issue #32,
    ``memory.links.rules.close_window``/``reopen_window``).
    """
    rid = check_id(relation_id, "relation_id")
    label = check_relation_type(relation_type) if relation_type is not NOTSET else NOTSET
    opposite = (check_relation_type(opposite_relation_type, "opposite_relation_type")
                if opposite_relation_type is not NOTSET else NOTSET)
    stamp = ttl_rules.check_timestamp(timestamp) if timestamp is not NOTSET else NOTSET
    meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
    with transaction.atomic():
        _thread_lock(thread)
        row = lock_first(visible(RecordLink.objects.filter(pk=stored_id(thread.project_id, rid), thread_id=thread.pk),
                                 thread, restrict))
        if row is None:
            return 0
        was_invalidating = row.relation_type in INVALIDATING_RELATIONS
        was_closing = row.relation_type == WINDOW_CLOSING_RELATION
        if label is not NOTSET:
            row.relation_type = label
            if label in BUILTIN_RELATIONS:
                row.opposite_relation_type = BUILTIN_RELATIONS[label]
        if opposite is not NOTSET:
            row.opposite_relation_type = opposite
        if stamp is not NOTSET:
            row.timestamp = stamp
        if meta is not NOTSET:
            row.metadata = meta
        row.save()
        now_invalidating = row.relation_type in INVALIDATING_RELATIONS
        if now_invalidating and not was_invalidating:
            set_memory_status([row.target_id], RecordStatus.INVALID.value, relation_id=row.pk)
        elif was_invalidating and not now_invalidating:
            revalidate([row.target_id], relation_id=row.pk,
                       reason=f"relation {public_id(row.pk)} is now {row.relation_type}")
        if (row.relation_type == WINDOW_CLOSING_RELATION) != was_closing:  # valid time, issue #32
            if was_closing:
                reopen_window(row.target_id, relation_id=row.pk)
            else:
                close_window(Memory.objects.get(pk=row.source_id), row.target_id, relation_id=row.pk)
    return 1


def link_delete(
    *,
    thread: Thread,
    source_record_id: str | NotSet = NOTSET,
    source_record_type: str | NotSet = NOTSET,
    target_record_id: str | NotSet = NOTSET,
    target_record_type: str | NotSet = NOTSET,
    relation_type: str | NotSet = NOTSET,
    relation_id: str | NotSet = NOTSET,
    restrict: dict[str, str] | None = None,
) -> int:
    """Delete a relation of this thread by id alone or by its complete endpoint tuple; return 0 or 1 (0 also
    when ``restrict`` hides it: ``visible``).

    Spec: delete_record_link. The tuple is source id and type, target id and
    type and ``relation_type``, in the stored source-to-target orientation (the
    reverse orientation matches nothing). ``relation_id`` must come alone.
    Removing the last supersedes/refines/duplicates relation into a record makes
    it valid again, and removing a supersedes relation undoes its closing of the
    target's validity window (issue #32, ``memory.links.rules.reopen_window``).
    The admin's history of the relation goes too (``memory.records.admin_log.admin_log_erase``).
    Raises ValueError for a mixed or incomplete selector.
    """
    given = {name: value for name, value in zip(
        _TUPLE_FIELDS, (source_record_id, source_record_type, target_record_id, target_record_type, relation_type)
    ) if value is not NOTSET}
    if relation_id is not NOTSET:
        if given:
            raise InvalidArgument("relation_id", "provide relation_id alone, or the endpoint tuple without it")
        filters = {"pk": stored_id(thread.project_id, check_id(relation_id, "relation_id"))}
    else:
        missing = [name for name in _TUPLE_FIELDS if name not in given]
        if missing:
            raise InvalidArgument(missing[0], "give relation_id, or the complete endpoint tuple "
                                              f"({', '.join(_TUPLE_FIELDS)}); missing: {', '.join(missing)}")
        for name, value in given.items():
            if not isinstance(value, str):
                raise InvalidType(name, f"must be a string, not {type(value).__name__}")
        filters = {"source_id": stored_id(thread.project_id, source_record_id), "source_type": source_record_type,
                   "target_id": stored_id(thread.project_id, target_record_id), "target_type": target_record_type,
                   "relation_type": relation_type}
    with transaction.atomic():
        _thread_lock(thread)
        row = lock_first(visible(RecordLink.objects.filter(thread_id=thread.pk, **filters), thread, restrict))
        if row is None:
            return 0
        key = row.pk  # Model.delete() sets row.pk to None
        row.delete()
        admin_log_erase(RecordLink, [key])
        if row.relation_type in INVALIDATING_RELATIONS:
            revalidate([row.target_id], relation_id=key)
        if row.relation_type == WINDOW_CLOSING_RELATION:
            reopen_window(row.target_id, relation_id=key)
    return 1


def visible(qs, thread: Thread, restrict: dict[str, str] | None):
    """The relations of ``qs`` (of ``thread``) a client restricted by ``restrict`` (``Tenant.row_filter``) may see:
    both endpoints are memories of its user/agent. A relation to another user's or agent's record stored in
    the thread does not exist for it (found by a security review). ``restrict`` empty or None: all of ``qs``.

    Endpoints are always memories of the relation's own thread (``link_create``), hence the subquery's filter.
    """
    if not restrict:
        return qs
    mine = Memory.objects.filter(thread_id=thread.pk, **restrict).values("pk")
    return qs.filter(source_id__in=mine, target_id__in=mine)


def link_get(*, thread: Thread, relation_id: Any, restrict: dict[str, str] | None = None) -> RecordRelation:
    """One relation of this thread (``visible`` within ``restrict``); KeyError (``NotFound``) otherwise. Not in
    the spec (HTTP read-back)."""
    rid = check_id(relation_id, "relation_id")
    row = visible(RecordLink.objects.filter(pk=stored_id(thread.project_id, rid), thread_id=thread.pk),
                  thread, restrict).first()
    if row is None:
        raise NotFound("relation_id", rid)
    return relation_dto(row)


def link_list(*, thread: Thread, record_id: Any = None,
              restrict: dict[str, str] | None = None) -> Records[RecordRelation]:
    """This thread's relations (``visible`` within ``restrict``), oldest first, read lazily (the API pages
    them); with ``record_id``, those touching that record. Not in the spec."""
    qs = visible(RecordLink.objects.filter(thread_id=thread.pk), thread, restrict).order_by("created_at", "id")
    if record_id is not None:
        rid = stored_id(thread.project_id, check_id(record_id, "record_id"))
        qs = qs.filter(Q(source_id=rid) | Q(target_id=rid))
    return Records(qs, relation_dto)


# --- add_memory(..., memory_id_to_link=...) ------------------------------------------------


@dataclass
class PendingLink:
    """The explicit link of an ``add_memory`` call, checked before the memory is written.

    ``services.memory_add(link=...)`` calls it with the new ``Memory`` inside its
    transaction, so the memory and its relation commit together or not at all.
    ``target_scope`` is the target's (user_id, agent_id, thread_id), public
    ids: omitted scopes of the new memory inherit them (spec: add_memory).
    ``target_id`` and ``relation_id`` are public ids of the thread's project.
    """

    thread: Thread
    target_id: str
    relation_type: str
    relation_id: str
    timestamp: str | None
    metadata: dict[str, Any]
    target_scope: tuple[str | None, str | None, str | None]

    def inherit_scope(self, user_id: Any, agent_id: Any, thread_id: Any) -> tuple[Any, Any, Any]:
        """Fill omitted scope values from the target; a given ``thread_id`` must be this thread."""
        if thread_id is not NOTSET and check_scope_id(thread_id, "thread_id") != self.thread.public_id:
            raise InvalidArgument("thread_id", "a memory created with memory_id_to_link must belong to this "
                                               f"thread ({self.thread.public_id!r}): both endpoints are thread-owned")
        user, agent, owner = self.target_scope
        return (user if user_id is NOTSET else user_id, agent if agent_id is NOTSET else agent_id,
                owner if thread_id is NOTSET else thread_id)

    def __call__(self, memory: Memory) -> str:
        """Insert the relation from the just-saved ``memory`` to the target (inside the caller's transaction;
        the new memory is invisible to others, so the thread comes first among the locks that count)."""
        _thread_lock(self.thread)
        target = lock_first(Memory.objects.filter(memory_live_q(timezone.now()),
                                                  pk=stored_id(self.thread.project_id, self.target_id),
                                                  thread_id=self.thread.pk))
        if target is None:  # deleted or expired since the check: the memory write rolls back too
            raise InvalidArgument("memory_id_to_link", f"no memory-like record {self.target_id!r} owned by "
                                                       f"thread {self.thread.public_id!r}")
        return _insert(thread=self.thread, source=memory, target=target, relation_type=self.relation_type,
                       opposite=BUILTIN_RELATIONS[self.relation_type], relation_id=self.relation_id,
                       timestamp=self.timestamp, metadata=self.metadata, id_field="link_id")


def pending_link(
    *,
    thread: Thread,
    memory_id_to_link: str | NotSet = NOTSET,
    link_type: str | NotSet = NOTSET,
    link_id: str | NotSet = NOTSET,
    link_timestamp: str | None | NotSet = NOTSET,
    link_metadata: dict[str, Any] | None | NotSet = NOTSET,
    restrict: dict[str, str] | None = None,
) -> PendingLink | None:
    """Check ``add_memory``'s link arguments; return the ``PendingLink``, or None when there is none.

    ``memory_id_to_link`` and ``link_type`` come together (a built-in type);
    ``link_id``/``link_timestamp``/``link_metadata`` only with them. The target
    must be a live memory-like record of this exact thread (ValueError; also
    for another user's or agent's record when ``restrict``, ``Tenant.row_filter``,
    excludes it), and a given ``link_id`` must be free (``Conflict``).
    """
    if memory_id_to_link is NOTSET and link_type is NOTSET:
        for name, value in (("link_id", link_id), ("link_timestamp", link_timestamp),
                            ("link_metadata", link_metadata)):
            if value is not NOTSET:
                raise InvalidArgument(name, "only applies together with memory_id_to_link and link_type")
        return None
    if memory_id_to_link is NOTSET or link_type is NOTSET:
        missing = "memory_id_to_link" if memory_id_to_link is NOTSET else "link_type"
        raise InvalidArgument(missing, "memory_id_to_link and link_type must be given together")
    target_id = check_id(memory_id_to_link, "memory_id_to_link")
    if link_type not in BUILTIN_RELATIONS:
        raise InvalidArgument("link_type", f"must be one of: {', '.join(BUILTIN_RELATIONS)}")
    rid = str(uuid.uuid4()) if link_id is NOTSET else check_id(link_id, "link_id")
    if RecordLink.objects.filter(pk=stored_id(thread.project_id, rid)).exists():
        raise Conflict("link_id", rid)
    target = (Memory.objects.filter(memory_live_q(timezone.now()), pk=stored_id(thread.project_id, target_id),
                                    thread_id=thread.pk, **(restrict or {}))
              .values_list("user_id", "agent_id", "thread_id").first())
    if target is None:
        raise InvalidArgument("memory_id_to_link", f"no memory-like record {target_id!r} owned by thread "
                                                   f"{thread.public_id!r}")
    user, agent, owner = target
    return PendingLink(
        thread=thread, target_id=target_id, relation_type=link_type, relation_id=rid,
        timestamp=ttl_rules.check_timestamp(None if link_timestamp is NOTSET else link_timestamp, "link_timestamp"),
        metadata=check_metadata(None if link_metadata is NOTSET else link_metadata, "link_metadata"),
        target_scope=(user, agent, public_id(owner)),
    )
