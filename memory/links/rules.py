from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from memory.core.errors import Conflict
from memory.core.ids import public_id
from memory.core.types import NOTSET, NotSet, RecordRelation, RecordStatus
from memory.index import writer as index
from memory.links.dependants import dependants_flag
from memory.llm.prompts import BUILTIN_RELATIONS
from memory.models import Memory, RecordLink
from memory.records import history
from memory.records.validators import check_bounded_int, check_relation_type

logger = logging.getLogger(__name__)


#: Relation types whose target becomes invalid (see "Lifecycle" above).
INVALIDATING_RELATIONS = ("supersedes", "refines", "duplicates")


#: The relation type that also closes its target's validity window at its source's start (issue #32,
#: ``close_window``): a newer fact replaces an older one from when it starts to hold. ``refines`` and
#: ``duplicates`` say the older one was imprecise or repeated, not that it stopped holding.
WINDOW_CLOSING_RELATION = "supersedes"


#: ``search(num_hops=...)`` accepts 0 through 5 (spec: search).
MAX_HOPS = 5


#: ``search(max_linked_results=...)`` when omitted (spec: search).
DEFAULT_MAX_LINKED_RESULTS = 100


#: Nearest stored memories shown to the LLM for autonomous linking.
LINK_CANDIDATES = 5


_TUPLE_FIELDS = ("source_record_id", "source_record_type", "target_record_id", "target_record_type", "relation_type")


class LinkExists(Conflict):
    """The endpoint pair already has a relation, in either orientation (``ValueError``; HTTP 409)."""

    def __init__(self, source_id: str, target_id: str, relation_id: str):
        super().__init__("target_record_id", target_id)
        self.relation_id = relation_id
        self.message = (f"records {source_id!r} and {target_id!r} are already related by relation "
                        f"{relation_id!r}; only one orientation can be stored for an endpoint pair")
        self.args = (f"target_record_id: {self.message}",)


# --- argument checks (the rest are memory.records.validators) ------------------------------------


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


def opposite_label(relation_type: str, opposite_relation_type: str | NotSet = NOTSET) -> str:
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


def set_memory_status(memory_ids: Iterable[str], status: str, *, relation_id: str | None = None,
                      reason: str | None = None) -> list[str]:
    """Set the status of memories (stored ids) and their search chunks; return the ids that changed.

    Call inside the writing transaction: the chunk copy of ``status`` is what
    search filters on (``include_invalid_results=False``). Each change is a
    version of the memory's history (``memory.records.history``: ``invalidate`` or
    ``revalidate``), naming ``relation_id`` (stored id) when a relation drove it.
    An invalidation flags what was derived from the memories (``memory.links.dependants.dependants_flag``,
    issue #32: cause ``supersede`` for a ``supersedes`` relation, else ``invalidate``).
    """
    rows = list(Memory.objects.filter(pk__in=list(memory_ids)).exclude(status=status))
    ids = [row.pk for row in rows]
    if ids:
        Memory.objects.filter(pk__in=ids).update(status=status, updated_at=timezone.now())
        index.reindex_state("memory", ids, status=status)
        changes = []
        for row in rows:
            before = history.snapshot(row)
            row.status = status
            changes.append((row, before, history.snapshot(row)))
        history.record_many(changes, "invalidate" if status == RecordStatus.INVALID.value else "revalidate",
                            relation_id=relation_id, reason=_relation_reason(relation_id, reason))
        if status == RecordStatus.INVALID.value:
            relation = None
            if relation_id is not None:
                relation = RecordLink.objects.filter(pk=relation_id).values_list("relation_type", flat=True).first()
            dependants_flag(ids, action="supersede" if relation == "supersedes" else "invalidate",
                            relation_id=relation_id)
    return ids


def _relation_reason(relation_id: str | None, reason: str | None) -> str | None:
    """The why of a version a relation drove: ``reason``, else "<relation type> <relation id>"; with the actor's
    own reason (the request line, the extraction decision) in parentheses after it."""
    if reason is None and relation_id is not None:
        relation = RecordLink.objects.filter(pk=relation_id).values_list("relation_type", flat=True).first()
        reason = f"{relation or 'relation'} {public_id(relation_id)}"
    if relation_id is not None and history.current_actor().reason:
        reason = f"{reason} ({history.current_actor().reason})"
    return reason


# --- valid time (issue #32) ------------------------------------------------------------------


def window_start(row: Memory) -> datetime:
    """When a memory's fact starts to hold, as a supersession reads it: its ``valid_from``; else its event time
    (``event_at``: when the conversation stated it); else when it was recorded (``created_at``)."""
    return row.valid_from or row.event_at or row.created_at


def _set_valid_to(target: Memory, valid_to: datetime | None, *, relation_id: str, reason: str) -> None:
    """Set a memory's ``valid_to`` (``target``: its row as stored now) with its chunks' copy, as a version naming
    the relation (``history.record`` locks the row first)."""
    before = history.snapshot(target)
    target.valid_to = valid_to
    Memory.objects.filter(pk=target.pk).update(valid_to=valid_to, updated_at=timezone.now())
    index.reindex_state("memory", [target.pk], valid_to=valid_to)
    history.record(target, "update", before, history.snapshot(target), relation_id=relation_id,
                   reason=_relation_reason(relation_id, reason))


def close_window(source: Memory, target_id: str, *, relation_id: str) -> bool:
    """A ``supersedes`` relation (stored id ``relation_id``) from ``source`` closes the validity window of memory
    ``target_id`` (stored id) at ``window_start(source)``; return whether it changed. Call inside the writing
    transaction, after the relation's status change (the target is read as stored now).

    Only where valid time is in play: the source states its start (``valid_from``) or the target has a window
    (either bound). Two memories without windows stay as before issue #32 (the target is invalidated, no window
    appears). Nothing changes either when the target's window already ends at or before that start (an earlier
    ``valid_to`` stands), or when its ``valid_from`` is not before it (the newer fact starts no later than the
    older one: closing would leave an empty or inverted window; the target is still invalidated).
    The change is an ``update`` version of the target's history naming the relation, which ``reopen_window``
    reads to undo it.
    """
    start = window_start(source)
    target = Memory.objects.filter(pk=target_id).first()
    if target is None or (source.valid_from is None and target.valid_from is None and target.valid_to is None):
        return False
    if (target.valid_to is not None and target.valid_to <= start) or (
            target.valid_from is not None and start <= target.valid_from):
        return False
    _set_valid_to(target, start, relation_id=relation_id,
                  reason=f"{WINDOW_CLOSING_RELATION} {public_id(relation_id)} closed the validity window")
    return True


def reopen_window(target_id: str, *, relation_id: str) -> bool:
    """Undo ``close_window`` when the ``supersedes`` relation ``relation_id`` (stored id) went away or changed
    type; return whether the target's window changed. Call inside the writing transaction.

    Mirrors ``revalidate``, and recomputes rather than steps back one version: the target's newest changes of
    ``valid_to`` that relations made (the run of ``update`` versions naming a relation, up to the newest change
    that a person or an import made, or the memory's create) give the window's own end, the one before any
    relation closed it; the relations still targeting it then close that again (``close_window``'s rules, the
    earliest start wins). Nothing is done when this relation's closing is not in that run (a later edit of
    ``valid_to`` stands) or the result equals the stored end. Stepping back one version had put back a closing by
    a relation removed earlier (two ``supersedes`` into one memory, the later-closing one removed first, then
    the other: the window stayed closed by neither; found by an outside attack).
    """
    target = Memory.objects.filter(pk=target_id).first()
    if target is None:
        return False
    run: list = []
    for version in (history.history_rows(project_id=target.project_id, memory_id=target.public_id)
                    .order_by("-version")[: history.MAX_VERSIONS]):
        if version.before is None or version.after is None:
            break  # the create (or a delete: the memory's state before it is another life)
        if version.before.get("valid_to") == version.after.get("valid_to"):
            continue
        if version.relation_id is None or version.action != "update":
            break  # a person's (or an import's) end of the window: the run stops at it
        run.append(version)
    if not any(version.relation_id == relation_id for version in run):
        return False
    end = history.snapshot_expiry(run[-1].before, "valid_to")
    for link in (RecordLink.objects.filter(target_id=target_id, relation_type=WINDOW_CLOSING_RELATION)
                 .exclude(pk=relation_id).order_by("pk")):
        source = Memory.objects.filter(pk=link.source_id).first()
        if source is None or (source.valid_from is None and target.valid_from is None and end is None):
            continue
        start = window_start(source)
        if (end is None or start < end) and (target.valid_from is None or target.valid_from < start):
            end = start
    if end == target.valid_to:
        return False
    _set_valid_to(target, end, relation_id=relation_id,
                  reason=f"relation {public_id(relation_id)} removed: its closing of the validity window undone")
    return True


def revalidate(memory_ids: Iterable[str], *, relation_id: str | None = None, reason: str | None = None) -> list[str]:
    """Make valid again the given memories that no ``supersedes``/``refines``/``duplicates`` relation targets.

    Called when such a relation went away (``relation_id``: its stored id, for
    the history). Returns the ids whose status changed.
    """
    ids = set(memory_ids)
    if not ids:
        return []
    still = set(RecordLink.objects.filter(target_id__in=ids, relation_type__in=INVALIDATING_RELATIONS)
                .values_list("target_id", flat=True))
    return set_memory_status(ids - still, RecordStatus.VALID.value, relation_id=relation_id,
                             reason=reason or (f"relation {public_id(relation_id)} removed" if relation_id else None))


def links_detach(*, memory_ids: Iterable[str], erased: set[str] | None = None) -> int:
    """Delete every relation touching the given memories (stored ids), re-validating the other endpoints.

    ``services.memory_delete`` calls this inside its transaction (relations
    cascade with their records). Returns the number of relations deleted;
    ``erased`` (a set) gets their stored ids (``memory.services.erasure``).
    """
    ids = list(memory_ids)
    rows = list(RecordLink.objects.filter(Q(source_id__in=ids) | Q(target_id__in=ids))
                .values_list("pk", "target_id", "relation_type"))
    if erased is not None:
        erased.update(pk for pk, _, _ in rows)
    if not rows:
        return 0
    RecordLink.objects.filter(pk__in=[pk for pk, _, _ in rows]).delete()
    for pk, target, kind in rows:
        if kind in INVALIDATING_RELATIONS and target not in ids:
            revalidate([target], relation_id=pk, reason=f"relation {public_id(pk)} removed with its source")
        if kind == WINDOW_CLOSING_RELATION and target not in ids:
            reopen_window(target, relation_id=pk)
    return len(rows)
