"""Dependants (issue #32), the writes: ``derived_from`` edges, and flagging what was derived from a changed memory.

When a fact is superseded, what was derived from it (a summary, a preference inferred from it, a guideline
built on it) should not keep going unexamined. A memory names the memories it was inferred from
(``add_memory(derived_from=[...])``, extraction's KNOWN memories: ``derivations_insert``); when a source is

* superseded or otherwise invalidated by a relation, by a deleted source message or by a status edit
  (``memory.links.rules.set_memory_status``, ``memory.services.memories.memory_update``/``memory_state_update``),
* edited: its content or type changes (``memory_update``, ``memory_restore``; a metadata, event time or expiry
  edit is not a change of what it says, and flags nothing),
* or deleted (every delete: ``memory.services.erasure.memories_erase``, review rejections and erasures too),

every memory derived from it, transitively (``memory.records.derivations.dependants_of``), is flagged
(``dependants_flag``): ``Memory.needs_review`` true and ``Memory.review_cause`` naming the change, one ``flag``
version of its history each, in the change's transaction. A flagged memory is kept and stays searchable; its
record says ``needs_review``, the context card marks it (``memory.context.cards``) and the staff review page
lists it with its cause, until a reviewer clears it (``memory.services.review.dependant_clear``). Nothing is
ever deleted for it. ``OAM_DEPENDANTS_POLICY = "invalidate"`` (default ``"flag"``) makes the dependants
invalid too (their chunks' status copies as well, so ``include_invalid_results=False`` leaves them out), still
flagged so the reviewer sees why.

The cause: ``{"memory_id": <public id of the changed source>, "action": "supersede" | "invalidate" | "update" |
"delete", "version": <the source's history version of the change, or None>, "relation_id": <public id or
None>, "at": <ISO 8601>}``, plus ``"via"`` (the public id of the memory it is directly derived from) for a
dependant reached through another. The first cause is kept: a memory flagged already is left as it is (no new
version), so the reviewer sees what first made it doubtful, and a repeat change writes nothing. Editing a flagged
memory does not clear its flag (an agent's edit need not have looked at the cause): only a reviewer does.
Restoring an old version leaves it as it is (``memory.records.history.SNAPSHOT_FIELDS``).

Locks: the dependants are locked after what the change holds (their rows, ``memory.core.locking``'s step 2, in
primary-key order), not their threads: a dependant in another thread is not that thread's mutex's to guard here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Max
from django.utils import timezone

from memory.core import conf
from memory.core.ids import public_id
from memory.core.locking import lock_rows
from memory.core.types import RecordStatus
from memory.index import writer as index
from memory.models import Memory, MemoryDerivation, MemoryVersion
from memory.records import history
from memory.records.derivations import dependants_of

#: What ``OAM_DEPENDANTS_POLICY`` may say.
POLICIES = ("flag", "invalidate")
#: What a ``review_cause`` names as the change.
CAUSE_ACTIONS = ("supersede", "invalidate", "update", "delete")


def policy() -> str:
    """``OAM_DEPENDANTS_POLICY``: "flag" (default) or "invalidate" (``memory.core.conf``)."""
    return conf.get("OAM_DEPENDANTS_POLICY")


def derivations_insert(memory: Memory, source_keys: Iterable[str]) -> int:
    """Store ``derived_from`` edges from the just-saved ``memory`` to ``source_keys`` (stored ids, checked by
    ``memory.records.derivations.sources_resolve``) inside its transaction; return how many. A source deleted
    since the check is left out (the new memory was never derived from what is gone)."""
    keys = [key for key in dict.fromkeys(source_keys) if key != memory.pk]
    if not keys:
        return 0
    there = set(Memory.objects.filter(pk__in=keys).values_list("pk", flat=True))
    rows = [MemoryDerivation(project_id=memory.project_id, memory_id=memory.pk, source_id=key,
                             thread_id=memory.thread_id, created_at=memory.created_at) for key in keys if key in there]
    MemoryDerivation.objects.bulk_create(rows)
    return len(rows)


def change_action(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str | None:
    """The ``CAUSE_ACTIONS`` entry a memory's change between two history snapshots is (``invalidate`` when it
    became invalid, ``update`` when its content or type changed, ``delete`` when ``after`` is None), or None for
    a change that flags nothing (metadata, event time, expiry, revalidation)."""
    if before is None:
        return None
    if after is None:
        return "delete"
    if after.get("status") == RecordStatus.INVALID.value != before.get("status"):
        return "invalidate"
    if any(before.get(name) != after.get(name) for name in ("content", "memory_type")):
        return "update"
    return None


def _versions(keys: list[str]) -> dict[str, int]:
    """The newest history version of each memory (stored ids): the version of the change just recorded."""
    return dict(MemoryVersion.objects.filter(memory_id__in=keys).values("memory_id").annotate(top=Max("version"))
                .values_list("memory_id", "top"))


def dependants_flag(source_keys: Iterable[str], *, action: str, relation_id: str | None = None,
                    exclude: Iterable[str] = ()) -> list[str]:
    """Flag every memory derived from the changed memories ``source_keys`` (stored ids), transitively; return
    the stored ids flagged. Call inside the change's transaction, after its history version.

    ``action`` is one of ``CAUSE_ACTIONS``; ``relation_id`` (stored id) the relation that drove it; ``exclude``
    memories not to flag (those the same call deletes). Each memory not flagged already gets ``needs_review``,
    its ``review_cause`` (module docstring) and, under the "invalidate" policy, the status invalid (its chunks
    too), and one ``flag`` version whose reason names the change. Bounded by ``dependants_of``
    (``MAX_DEPENDANTS``, ``MAX_DEPTH``); cycle-safe.
    """
    if action not in CAUSE_ACTIONS:
        raise ValueError(f"unknown dependant cause {action!r}")
    sources = list(dict.fromkeys(source_keys))
    if not sources:
        return []
    walk = dependants_of(sources)
    skip = set(exclude) | set(sources)
    wanted = [key for key in walk.order if key not in skip]
    if not wanted:
        return []
    rows = [row for row in lock_rows(Memory.objects.filter(pk__in=wanted, needs_review=False))
            if not row.needs_review]
    if not rows:
        return []
    versions = _versions(sorted({walk.root[row.pk] for row in rows}))
    invalidate = policy() == "invalidate"
    now = timezone.now()
    changes, invalid = [], []
    for row in rows:
        root = walk.root[row.pk]
        cause = {"memory_id": public_id(root), "action": action, "version": versions.get(root),
                 "relation_id": public_id(relation_id) if relation_id else None, "at": now.isoformat()}
        if walk.via[row.pk] != root:
            cause["via"] = public_id(walk.via[row.pk])
        before = history.snapshot(row)
        row.needs_review, row.review_cause, row.updated_at = True, cause, now
        if invalidate and row.status != RecordStatus.INVALID.value:
            row.status = RecordStatus.INVALID.value
            invalid.append(row.pk)
        changes.append((row, before, history.snapshot(row)))
    Memory.objects.bulk_update(rows, ["needs_review", "review_cause", "status", "updated_at"])
    index.reindex_state("memory", invalid, status=RecordStatus.INVALID.value)
    actor = history.current_actor()
    by_root: dict[str, list] = {}
    for change in changes:
        by_root.setdefault(walk.root[change[0].pk], []).append(change)
    for root, mine in by_root.items():
        why = f"{action} of memory {public_id(root)}, which it is derived from" + (
            f" ({actor.reason})" if actor.reason else "")
        history.record_many(mine, "flag", relation_id=relation_id, reason=why)
    return [row.pk for row in rows]
