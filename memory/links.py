"""Relations between memory-like records: writes, lifecycle, graph expansion and autonomous linking.

Spec (the Oracle AI Agent Memory thread API spec): ``link_records``,
``update_record_link``, ``delete_record_link``; ``add_memory``'s
``memory_id_to_link``/``link_type``/``link_id``/``link_timestamp``/
``link_metadata`` and ``autonomous_linking``; ``search``'s ``num_hops`` and
``max_linked_results``.

Rules kept here:

* Both endpoints are live memory-like records ("memory", "fact", "guideline",
  "preference") whose ``thread_id`` is this exact thread; a record is never
  linked to itself; one relation per endpoint pair, in one orientation
  (``RecordLink.pair_key`` is the sorted pair, unique).
* ``relation_type`` reads source -> target, ``opposite_relation_type`` target ->
  source. Built-in types carry their fixed reverse label
  (``BUILTIN_RELATIONS``); a custom type's reverse defaults to the same label.
* Lifecycle: the target of a ``supersedes``, ``refines`` or ``duplicates``
  relation is invalid; when the last such relation into it goes away (deleted,
  retyped, or its other endpoint deleted) it is valid again. Status changes are
  written to the memory and its ``SearchChunk`` rows in the same transaction.
* Graph expansion (``linked_sql``/``attach_linked``): one recursive query walks
  relations in both directions from the direct memory results, bounded by the
  hop count, never revisiting a record on the same path, passing only through
  records the search may show (scope, expiry, status).
* Autonomous linking (``propose_links``): the LLM compares a new memory with its
  nearest stored memories of the thread and proposes relations from it, as
  JSON validated against ``link_schema``.

Ids: functions take and return public ids; rows hold stored ids of the
thread's project (``memory.tenancy``), so a relation never reaches another project.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection as default_connection, transaction
from django.db.models import Q
from django.utils import timezone

from memory import index
from memory import ttl as ttl_rules
from memory.admin_log import admin_log_erase
from memory.prompts import BUILTIN_RELATIONS, link_prompt, link_schema  # noqa: F401
from memory.errors import Conflict, InvalidArgument, InvalidType, NotFound
from memory.fields import VectorDistance
from memory.locking import lock_first
from memory.models import MEMORY_TYPES, Memory, RecordLink, SearchChunk, Thread
from memory.selectors import Records, live_q, memory_dto
from memory.validators import (  # noqa: F401  (check_relation_type, check_record_type re-exported)
    RELATION_TYPE_MAX_LENGTH,
    check_bounded_int,
    check_id,
    check_metadata,
    check_record_type,
    check_relation_type,
    check_scope_id,
)
from memory.tenancy import public_id, stored_id
from memory.types import NOTSET, LinkedRecord, RecordRelation, RecordStatus, SearchResult

logger = logging.getLogger(__name__)

#: Relation types whose target becomes invalid (see "Lifecycle" above).
INVALIDATING_RELATIONS = ("supersedes", "refines", "duplicates")
#: ``search(num_hops=...)`` accepts 0 through 5 (spec: search).
MAX_HOPS = 5
#: ``search(max_linked_results=...)`` when omitted (spec: search).
DEFAULT_MAX_LINKED_RESULTS = 100
#: Nearest stored memories shown to the LLM for autonomous linking.
LINK_CANDIDATES = 5
# Roots per graph query: stays under Oracle's 1,000-expression IN-list limit.
_ROOTS_PER_QUERY = 500
_TUPLE_FIELDS = ("source_record_id", "source_record_type", "target_record_id", "target_record_type", "relation_type")


class LinkExists(Conflict):
    """The endpoint pair already has a relation, in either orientation (``ValueError``; HTTP 409)."""

    def __init__(self, source_id: str, target_id: str, relation_id: str):
        super().__init__("target_record_id", target_id)
        self.relation_id = relation_id
        self.message = (f"records {source_id!r} and {target_id!r} are already related by relation "
                        f"{relation_id!r}; only one orientation can be stored for an endpoint pair")
        self.args = (f"target_record_id: {self.message}",)


# --- argument checks (the rest are memory.validators) ------------------------------------


def check_num_hops(value: Any) -> int:
    """``num_hops``: omitted is 0 (direct results only); given, an int from 0 through 5."""
    if value is NOTSET:
        return 0
    rule = f"must be from 0 through {MAX_HOPS}"
    return check_bounded_int(value, "num_hops", low=0, high=MAX_HOPS, low_rule=rule, high_rule=rule)


def check_max_linked_results(value: Any) -> int:
    """``max_linked_results``: omitted is 100; given, an int of 0 or more (0: no linked context)."""
    if value is NOTSET:
        return DEFAULT_MAX_LINKED_RESULTS
    return check_bounded_int(value, "max_linked_results", low=0, low_rule="must be 0 or more", sql_count=True)


def opposite_label(relation_type: str, opposite_relation_type: Any = NOTSET) -> str:
    """The reverse label: the given one, else the built-in's fixed label, else the same label."""
    if opposite_relation_type is not NOTSET:
        return check_relation_type(opposite_relation_type, "opposite_relation_type")
    return BUILTIN_RELATIONS.get(relation_type, relation_type)


def pair_key(a: str, b: str) -> str:
    """The unordered endpoint pair (stored ids) as one unambiguous string (ids may contain any character)."""
    first, second = sorted((a, b))
    return f"{len(first)}:{first}|{second}"


def relation_dto(row: RecordLink) -> RecordRelation:
    """A ``RecordRelation`` value from a stored row."""
    return RecordRelation(
        relation_id=public_id(row.pk),
        thread_id=public_id(row.thread_id),
        source_record_id=public_id(row.source_id),
        source_record_type=row.source_type,
        target_record_id=public_id(row.target_id),
        target_record_type=row.target_type,
        relation_type=row.relation_type,
        opposite_relation_type=row.opposite_relation_type,
        timestamp=row.timestamp,
        metadata=dict(row.metadata or {}),
        created_at=row.created_at.isoformat() if row.created_at else None,
    )


# --- lifecycle -------------------------------------------------------------------------------


def set_memory_status(memory_ids: Iterable[str], status: str) -> list[str]:
    """Set the status of memories (stored ids) and their search chunks; return the ids that changed.

    Call inside the writing transaction: the chunk copy of ``status`` is what
    search filters on (``include_invalid_results=False``).
    """
    ids = list(Memory.objects.filter(pk__in=list(memory_ids)).exclude(status=status).values_list("pk", flat=True))
    if ids:
        Memory.objects.filter(pk__in=ids).update(status=status, updated_at=timezone.now())
        index.reindex_state("memory", ids, status=status)
    return ids


def revalidate(memory_ids: Iterable[str]) -> list[str]:
    """Make valid again the given memories that no ``supersedes``/``refines``/``duplicates`` relation targets.

    Called when such a relation went away. Returns the ids whose status changed.
    """
    ids = set(memory_ids)
    if not ids:
        return []
    still = set(RecordLink.objects.filter(target_id__in=ids, relation_type__in=INVALIDATING_RELATIONS)
                .values_list("target_id", flat=True))
    return set_memory_status(ids - still, RecordStatus.VALID.value)


def links_detach(*, memory_ids: Iterable[str], erased: set[str] | None = None) -> int:
    """Delete every relation touching the given memories (stored ids), re-validating the other endpoints.

    ``services.memory_delete`` calls this inside its transaction (relations
    cascade with their records). Returns the number of relations deleted;
    ``erased`` (a set) gets their stored ids (``memory.erasure``).
    """
    ids = list(memory_ids)
    rows = list(RecordLink.objects.filter(Q(source_id__in=ids) | Q(target_id__in=ids))
                .values_list("pk", "target_id", "relation_type"))
    if erased is not None:
        erased.update(pk for pk, _, _ in rows)
    if not rows:
        return 0
    RecordLink.objects.filter(pk__in=[pk for pk, _, _ in rows]).delete()
    revalidate(t for _, t, kind in rows if kind in INVALIDATING_RELATIONS and t not in ids)
    return len(rows)


# --- writes -----------------------------------------------------------------------------------


def _endpoint(thread: Thread, record_id: Any, record_type: Any, prefix: str, *, now,
              restrict: dict[str, str] | None = None) -> Memory:
    """The live memory-like record of this exact thread named by an endpoint (public id), locked; else ValueError
    (also for another user's or agent's record when ``restrict``, ``Tenant.row_filter``, excludes it)."""
    rid = check_id(record_id, f"{prefix}_record_id")
    rtype = check_record_type(record_type, f"{prefix}_record_type")
    row = lock_first(Memory.objects.filter(live_q(now), pk=stored_id(thread.project_id, rid), thread_id=thread.pk,
                                           **(restrict or {})))
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
        set_memory_status([target.pk], RecordStatus.INVALID.value)
    return relation_id


def link_create(
    *,
    thread: Thread,
    source_record_id: Any,
    source_record_type: Any,
    target_record_id: Any,
    target_record_type: Any,
    relation_type: Any,
    opposite_relation_type: Any = NOTSET,
    relation_id: Any = NOTSET,
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
        source = _endpoint(thread, source_record_id, source_record_type, "source", now=now, restrict=restrict)
        target = _endpoint(thread, target_record_id, target_record_type, "target", now=now, restrict=restrict)
        return _insert(thread=thread, source=source, target=target, relation_type=label, opposite=opposite,
                       relation_id=rid, timestamp=stamp, metadata=meta)


def link_update(
    *,
    thread: Thread,
    relation_id: Any,
    relation_type: Any = NOTSET,
    opposite_relation_type: Any = NOTSET,
    timestamp: Any = NOTSET,
    metadata: Any = NOTSET,
    restrict: dict[str, str] | None = None,
) -> int:
    """Update a relation of this thread; return 1, or 0 when there is none (or ``restrict`` hides it: ``visible``).

    Spec: update_record_link. Omitted values are preserved; ``timestamp=None``
    clears it; ``metadata`` replaces the stored object. A new built-in
    ``relation_type`` sets its fixed reverse label, unless the same call gives
    ``opposite_relation_type`` (an explicit label always wins, as in
    ``link_records``). Changing the type in or out of supersedes/refines/
    duplicates invalidates or re-validates the target.
    """
    rid = check_id(relation_id, "relation_id")
    label = check_relation_type(relation_type) if relation_type is not NOTSET else NOTSET
    opposite = (check_relation_type(opposite_relation_type, "opposite_relation_type")
                if opposite_relation_type is not NOTSET else NOTSET)
    stamp = ttl_rules.check_timestamp(timestamp) if timestamp is not NOTSET else NOTSET
    meta = check_metadata(metadata) if metadata is not NOTSET else NOTSET
    with transaction.atomic():
        row = lock_first(visible(RecordLink.objects.filter(pk=stored_id(thread.project_id, rid), thread_id=thread.pk),
                                 thread, restrict))
        if row is None:
            return 0
        was_invalidating = row.relation_type in INVALIDATING_RELATIONS
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
            set_memory_status([row.target_id], RecordStatus.INVALID.value)
        elif was_invalidating and not now_invalidating:
            revalidate([row.target_id])
    return 1


def link_delete(
    *,
    thread: Thread,
    source_record_id: Any = NOTSET,
    source_record_type: Any = NOTSET,
    target_record_id: Any = NOTSET,
    target_record_type: Any = NOTSET,
    relation_type: Any = NOTSET,
    relation_id: Any = NOTSET,
    restrict: dict[str, str] | None = None,
) -> int:
    """Delete a relation of this thread by id alone or by its complete endpoint tuple; return 0 or 1 (0 also
    when ``restrict`` hides it: ``visible``).

    Spec: delete_record_link. The tuple is source id and type, target id and
    type and ``relation_type``, in the stored source-to-target orientation (the
    reverse orientation matches nothing). ``relation_id`` must come alone.
    Removing the last supersedes/refines/duplicates relation into a record makes
    it valid again. The admin's history of the relation goes too (``memory.admin_log.admin_log_erase``).
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
        row = lock_first(visible(RecordLink.objects.filter(thread_id=thread.pk, **filters), thread, restrict))
        if row is None:
            return 0
        row.delete()
        admin_log_erase(RecordLink, [row.pk])
        if row.relation_type in INVALIDATING_RELATIONS:
            revalidate([row.target_id])
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
        """Insert the relation from the just-saved ``memory`` to the target (inside the caller's transaction)."""
        target = lock_first(Memory.objects.filter(live_q(timezone.now()),
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
    memory_id_to_link: Any = NOTSET,
    link_type: Any = NOTSET,
    link_id: Any = NOTSET,
    link_timestamp: Any = NOTSET,
    link_metadata: Any = NOTSET,
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
    target = (Memory.objects.filter(live_q(timezone.now()), pk=stored_id(thread.project_id, target_id),
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


# --- graph expansion (search num_hops) -------------------------------------------------------


def linked_sql(root_ids: list[str], *, thread_ids: list[str], num_hops: int, limit: int, node_filter: Q,
               connection=None) -> tuple[str, list]:
    """SQL walking relations from ``root_ids``: rows (root_id, node_id, hops, rel_id, rel_type, from_id).

    One recursive query, the same text on both vendors but for the keyword
    that opens it (``WITH RECURSIVE`` on SQLite; Oracle's recursive subquery
    factoring is a plain ``WITH`` with a column list) and two spellings
    (separator character, path type):

    * ``edges``: each relation of ``thread_ids`` (the roots' owner threads: a
      relation never leaves its thread) twice, source -> target labelled
      ``relation_type`` and target -> source labelled ``opposite_relation_type``.
      The thread filter keeps what the recursive step reads small (SQLite
      materializes ``edges`` there).
    * ``walk``: anchor = the first hop from each root; recursive member = one
      more hop while ``hops < num_hops`` (depth bound). ``walk_path`` lists the
      records on the path between separators; a record already on it is not
      entered again (cycle guard), so the root is never its own neighbour.
      Every record entered must match ``node_filter`` (scope, expiry, status),
      compiled by the ORM on ``connection``: the walk does not pass through
      records the search would hide.
    * ``firsts``/``ranked``: for each (root, record) the shortest path (ties:
      lowest relation id), then at most ``limit`` records per root, nearest
      first (then by record id).
    """
    if not root_ids or not thread_ids:
        raise ValueError("root_ids and thread_ids must not be empty")
    connection = connection or default_connection
    quote = connection.ops.quote_name
    qs = Memory.objects.filter(node_filter)
    where_sql, where_params = qs.query.get_compiler(connection=connection).compile(qs.query.where)
    where_sql = where_sql or "1 = 1"
    links, mem = quote(RecordLink._meta.db_table), quote(Memory._meta.db_table)
    col = {name: f"{links}.{quote(name)}" for name in ("id", "thread_id", "source_id", "target_id",
                                                       "relation_type", "opposite_relation_type")}
    mem_id = f"{mem}.{quote('id')}"
    if connection.vendor == "oracle":
        opening, sep, path_type = "WITH", "CHR(31 USING NCHAR_CS)", "NVARCHAR2(2000)"
    elif connection.vendor == "sqlite":
        opening, sep, path_type = "WITH RECURSIVE", "char(31)", "TEXT"
    else:
        raise NotImplementedError(f"graph expansion is not available on {connection.vendor}")
    roots = ", ".join(["%s"] * len(root_ids))
    threads = f"{col['thread_id']} IN ({', '.join(['%s'] * len(thread_ids))})"
    sql = (
        f"{opening} edges (src, dst, rel_id, rel_type) AS ("
        f"SELECT {col['source_id']}, {col['target_id']}, {col['id']}, {col['relation_type']} FROM {links} "
        f"WHERE {threads} "
        f"UNION ALL "
        f"SELECT {col['target_id']}, {col['source_id']}, {col['id']}, {col['opposite_relation_type']} FROM {links} "
        f"WHERE {threads}"
        f"), "
        f"walk (root_id, node_id, hops, rel_id, rel_type, from_id, walk_path) AS ("
        f"SELECT e.src, e.dst, 1, e.rel_id, e.rel_type, e.src, "
        f"CAST({sep} || e.src || {sep} || e.dst || {sep} AS {path_type}) "
        f"FROM edges e JOIN {mem} ON {mem_id} = e.dst "
        f"WHERE e.src IN ({roots}) AND ({where_sql}) "
        f"UNION ALL "
        f"SELECT w.root_id, e.dst, w.hops + 1, e.rel_id, e.rel_type, w.node_id, "
        f"CAST(w.walk_path || e.dst || {sep} AS {path_type}) "
        f"FROM walk w JOIN edges e ON e.src = w.node_id JOIN {mem} ON {mem_id} = e.dst "
        f"WHERE w.hops < %s AND INSTR(w.walk_path, {sep} || e.dst || {sep}) = 0 AND ({where_sql})"
        f"), "
        f"firsts AS ("
        f"SELECT root_id, node_id, hops, rel_id, rel_type, from_id, "
        f"ROW_NUMBER() OVER (PARTITION BY root_id, node_id ORDER BY hops, rel_id, from_id) AS rn FROM walk"
        f"), "
        f"ranked AS ("
        f"SELECT root_id, node_id, hops, rel_id, rel_type, from_id, "
        f"ROW_NUMBER() OVER (PARTITION BY root_id ORDER BY hops, node_id) AS pos FROM firsts WHERE rn = 1"
        f") "
        f"SELECT root_id, node_id, hops, rel_id, rel_type, from_id FROM ranked WHERE pos <= %s "
        f"ORDER BY root_id, pos"
    )
    params = [*thread_ids, *thread_ids, *root_ids, *where_params, int(num_hops), *where_params, int(limit)]
    return sql, params


def attach_linked(results: list[SearchResult], *, node_filter: Q, num_hops: int, max_linked_results: int,
                  project_id: int, connection=None) -> list[SearchResult]:
    """Fill ``result.linked`` of each direct memory-like result with the memories reached from it.

    Spec: search ``num_hops``/``max_linked_results``. Message (and other
    non-memory) results keep an empty ``linked``. Each reached record appears
    once per direct result, at its fewest hops, with the relation that led
    there and its label as traversed. ``node_filter`` is a ``Memory`` filter
    (project, scope, expiry, status); ``results`` are of project ``project_id``
    (public ids). Returns ``results``.
    """
    direct = [r.record for r in results if r.record_type in MEMORY_TYPES and r.record.thread_id is not None]
    if not direct or num_hops < 1 or max_linked_results < 1:
        return results
    connection = connection or default_connection
    rows = []
    for start in range(0, len(direct), _ROOTS_PER_QUERY):
        batch = direct[start:start + _ROOTS_PER_QUERY]
        sql, params = linked_sql([stored_id(project_id, r.id) for r in batch],
                                 thread_ids=sorted({stored_id(project_id, r.thread_id) for r in batch}),
                                 num_hops=num_hops, limit=max_linked_results, node_filter=node_filter,
                                 connection=connection)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows += cursor.fetchall()
    records = {row.pk: memory_dto(row) for row in Memory.objects.filter(pk__in={r[1] for r in rows})}
    linked: dict[str, list[LinkedRecord]] = {}
    for root_id, node_id, hops, rel_id, rel_type, from_id in rows:
        if node_id in records:
            linked.setdefault(public_id(root_id), []).append(LinkedRecord(
                record=records[node_id], relation_type=rel_type, relation_id=public_id(rel_id), hops=int(hops),
                from_record_id=public_id(from_id),
            ))
    for result in results:
        if result.record_type in MEMORY_TYPES:
            result.linked = linked.get(result.record.id, [])
    return results


# --- autonomous linking ----------------------------------------------------------------------






def nearest_memory_chunks(*, thread_id: str, memory_id: str, vector, now, limit: int,
                          restrict: dict[str, str] | None = None):
    """Record ids of the live, valid memory chunks of a thread nearest ``vector``, ``memory_id`` left out (and,
    with ``restrict``, those of other users or agents: chunks carry their record's user and agent).

    Ids are stored ids (the thread's, so of its project only).

    One ranked query (cosine distance in SQL, ``FETCH FIRST`` on Oracle); a
    record split into several chunks may appear more than once.
    """
    return (SearchChunk.objects.filter(live_q(now), source_kind="memory", thread_id=thread_id,
                                       status=RecordStatus.VALID.value, **(restrict or {}))
            .exclude(record_id=memory_id)
            .annotate(distance=VectorDistance("embedding", vector))
            .order_by("distance", "id")
            .values_list("record_id", flat=True)[:limit])


def link_candidates(*, thread_id: str, memory_id: str, limit: int = LINK_CANDIDATES,
                    restrict: dict[str, str] | None = None) -> list[Memory]:
    """The nearest live, valid memories of the thread to ``memory_id`` not yet related to it, nearest first
    (within ``restrict``, ``Tenant.row_filter``, when given).

    Ranked in the database by cosine distance to the memory's first chunk.
    ``thread_id`` and ``memory_id`` are stored ids.
    """
    vector = (SearchChunk.objects.filter(source_kind="memory", record_id=memory_id)
              .order_by("chunk_index").values_list("embedding", flat=True).first())
    if vector is None:
        return []
    related = set()
    for source, target in RecordLink.objects.filter(Q(source_id=memory_id) | Q(target_id=memory_id)) \
            .values_list("source_id", "target_id"):
        related.update((source, target))
    now = timezone.now()
    ids: list[str] = []
    for rid in nearest_memory_chunks(thread_id=thread_id, memory_id=memory_id, vector=vector, now=now,
                                     limit=(limit + len(related)) * 3, restrict=restrict):
        if rid not in related and rid not in ids:
            ids.append(rid)
    rows = {m.pk: m for m in Memory.objects.filter(live_q(now), pk__in=ids, thread_id=thread_id, **(restrict or {}))}
    return [rows[rid] for rid in ids if rid in rows][:limit]


def propose_links(thread: Thread, memory_id: str, llm, *, max_candidates: int = LINK_CANDIDATES,
                  restrict: dict[str, str] | None = None) -> list[str]:
    """Let ``llm`` relate a stored memory to its nearest memories of ``thread``; return the new relation ids.

    Spec: add_memory ``autonomous_linking``. ``thread`` is a ``memory.models.Thread``
    row; ``memory_id`` (public) a memory it owns (anything else: no links). The LLM sees
    the memory and up to ``max_candidates`` nearest valid memories not yet
    related to it, and answers JSON valid against ``link_schema``; each proposal
    becomes a relation from the new memory, in its own transaction, with the
    usual lifecycle (a superseded preference becomes invalid). Proposals that
    can no longer be stored (pair related meanwhile, record gone) are skipped.
    No candidates: no LLM call. Raises ``memory.llm.LlmError`` when the LLM
    fails; relations already made stay. Extraction calls this for each memory
    it stores. ``restrict`` (``Tenant.row_filter`` of a restricted client's
    ``add_memory``): the LLM sees, and links to, memories of that user/agent only.
    """
    memory = Memory.objects.filter(live_q(timezone.now()), pk=stored_id(thread.project_id, memory_id),
                                   thread_id=thread.pk, **(restrict or {})).first()
    if memory is None:
        return []
    candidates = link_candidates(thread_id=thread.pk, memory_id=memory.pk, limit=max_candidates, restrict=restrict)
    if not candidates:
        return []
    labels = [f"M{i}" for i in range(1, len(candidates) + 1)]
    reply = llm.complete_json(link_prompt(memory, candidates), link_schema(labels), schema_name="memory_links",
                              max_tokens=300)
    by_label = dict(zip(labels, candidates))
    created: list[str] = []
    seen: set[str] = set()
    for proposal in reply.get("links", []):
        target = by_label[proposal["candidate"]]
        if target.pk in seen:
            continue
        seen.add(target.pk)
        try:
            created.append(link_create(
                thread=thread, source_record_id=memory.public_id, source_record_type=memory.memory_type,
                target_record_id=target.public_id, target_record_type=target.memory_type,
                relation_type=proposal["relation_type"], metadata={"origin": "autonomous_linking"}, restrict=restrict,
            ))
        except ValueError as exc:
            logger.info("autonomous link %s -> %s skipped: %s", memory.pk, target.pk, exc)
    return created
