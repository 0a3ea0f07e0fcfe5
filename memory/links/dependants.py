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
dependant reached through another, and ``"truncated": true`` when the walk stopped at a bound. A source (or
``via``) of another user or agent than the dependant is not named: None there, and its flag version's reason
names no memory, request or key (``cause_make``; a security review found another user's memory, thread and key
ids in them). An erasure takes the ids it erases out of the causes and versions that survive (``causes_scrub``),
and a new memory starts with no edges (``derivations_reset``).

The first cause is kept: a memory flagged already is left as it is (no new version), so the reviewer sees
what first made it doubtful, and a repeat change writes nothing. Editing a flagged
memory does not clear its flag (an agent's edit need not have looked at the cause): only a reviewer does.
Restoring an old version leaves it as it is (``memory.records.history.SNAPSHOT_FIELDS``).

Locks: the dependants are locked after what the change holds (their rows, ``memory.core.locking``'s step 2, in
primary-key order), not their threads: a dependant in another thread is not that thread's mutex's to guard here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Max, Q
from django.utils import timezone

from memory.core import conf
from memory.core.ids import public_id, stored_id
from memory.core.locking import lock_rows
from memory.core.types import RecordStatus
from memory.index import writer as index
from memory.models import Memory, MemoryDerivation, MemoryVersion
from memory.records import history
from memory.records.derivations import MAX_DEPENDANTS, WALK_BATCH, dependants_of

#: What ``OAM_DEPENDANTS_POLICY`` may say.
POLICIES = ("flag", "invalidate")
#: What a ``review_cause`` names as the change.
CAUSE_ACTIONS = ("supersede", "invalidate", "update", "delete")


def policy() -> str:
    """``OAM_DEPENDANTS_POLICY``: "flag" (default) or "invalidate" (``memory.core.conf``)."""
    return conf.get("OAM_DEPENDANTS_POLICY")


def derivations_reset(keys: Iterable[str]) -> int:
    """Delete the edges left with either end among ``keys`` (stored ids of memories being created now): a
    single delete keeps a memory's edges (``MemoryDerivation``), and ids are the caller's to choose, so a new
    memory reusing a deleted one's id (another user's key too) would otherwise take over its sources and its
    dependants (found by a security review). A new memory starts with no edges. Nothing else brings a deleted
    memory back (``memory_restore`` needs the row; an import skips a deleted id whose history is here), so
    nothing is lost. Call in the create's transaction, before its own edges; return how many went."""
    keys = list(dict.fromkeys(keys))
    gone = 0
    for start in range(0, len(keys), WALK_BATCH):
        batch = keys[start:start + WALK_BATCH]
        gone += MemoryDerivation.objects.filter(Q(memory_id__in=batch) | Q(source_id__in=batch)).delete()[0]
    return gone


def derivations_insert(memory: Memory, source_keys: Iterable[str]) -> int:
    """Store ``derived_from`` edges from the just-created ``memory`` to ``source_keys`` (stored ids, checked by
    ``memory.records.derivations.sources_resolve``) inside its transaction; return how many. Edges a deleted
    memory of the same id left go first (``derivations_reset``). A source deleted since the check is left out
    (the new memory was never derived from what is gone)."""
    derivations_reset([memory.pk])
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
    scopes = dict((pk, (user, agent)) for pk, user, agent in Memory.objects.filter(
        pk__in=sorted({walk.root[row.pk] for row in rows} | {walk.via[row.pk] for row in rows}))
        .values_list("pk", "user_id", "agent_id"))
    invalidate = policy() == "invalidate"
    now = timezone.now()
    changes, invalid = [], []
    for row in rows:
        root, via = walk.root[row.pk], walk.via[row.pk]
        cause = cause_make(action=action, root=root, via=via, version=versions.get(root),
                           relation_id=relation_id, at=now, truncated=walk.truncated,
                           own_root=scopes.get(root) == (row.user_id, row.agent_id),
                           own_via=scopes.get(via) == (row.user_id, row.agent_id))
        before = history.snapshot(row)
        row.needs_review, row.review_cause, row.updated_at = True, cause, now
        if invalidate and row.status != RecordStatus.INVALID.value:
            row.status = RecordStatus.INVALID.value
            invalid.append(row.pk)
        changes.append((row, before, history.snapshot(row)))
    Memory.objects.bulk_update(rows, ["needs_review", "review_cause", "status", "updated_at"])
    index.reindex_state("memory", invalid, status=RecordStatus.INVALID.value)
    actor = history.current_actor()
    by_root: dict[tuple[str, bool], list] = {}
    for change in changes:
        mine = change[0]
        by_root.setdefault((walk.root[mine.pk], mine.review_cause.get("memory_id") is not None), []).append(change)
    for (root, own), mine in by_root.items():
        if own:  # the source is of the dependant's user and agent: name it, the request and the actor
            why = f"{action} of memory {public_id(root)}, which it is derived from" + (
                f" ({actor.reason})" if actor.reason else "")
            history.record_many(mine, "flag", relation_id=relation_id, reason=why)
        else:  # another scope's change: no id, request line, relation or key of it (security review)
            with history.acting(actor.kind, "", ""):
                history.record_many(mine, "flag", reason=f"{action} of a memory it is derived from")
    return [row.pk for row in rows]


def cause_make(*, action: str, root: str, via: str, version: int | None, relation_id: str | None, at,
               truncated: bool = False, own_root: bool = True, own_via: bool = True) -> dict[str, Any]:
    """A ``review_cause`` (module docstring) for a dependant reached from changed memory ``root`` through ``via``
    (stored ids). A source of another user or agent than the dependant (``own_root``/``own_via`` False) is not
    named: ``memory_id`` (and ``version``, ``relation_id``) or ``via`` None, so no door shows a key of the
    dependant's user another scope's ids (security review; the edges still say it, for staff and admins:
    ``MemoryDerivation``). ``truncated``: the walk stopped at a bound (``MAX_DEPENDANTS``, ``MAX_DEPTH``)."""
    cause: dict[str, Any] = {
        "memory_id": public_id(root) if own_root else None, "action": action,
        "version": version if own_root else None,
        "relation_id": public_id(relation_id) if relation_id and own_root else None, "at": at.isoformat()}
    if via != root:
        cause["via"] = public_id(via) if own_via else None
    if truncated:
        cause["truncated"] = True
    return cause


#: How far ``causes_scrub`` walks from erased memories: the flags it undoes the names in were each bounded by
#: ``MAX_DEPENDANTS`` per change, and many changes may have flagged different memories.
SCRUB_LIMIT = 10 * MAX_DEPENDANTS


def _scrubbed(cause: Any, project_id: int, erased: set[str]) -> Any:
    """``cause`` (a ``review_cause``) without the ids of the memories ``erased`` (stored ids), or itself."""
    if not isinstance(cause, dict):
        return cause
    named = {name for name in ("memory_id", "via") if isinstance(cause.get(name), str)
             and stored_id(project_id, cause[name]) in erased}
    if not named:
        return cause
    cause = dict(cause)
    if "memory_id" in named:
        cause.update(memory_id=None, version=None, relation_id=None)
    if "via" in named:
        cause["via"] = None
    return cause


def causes_scrub(erased_keys: Iterable[str]) -> int:
    """Take the ids of erased memories (``erased_keys``, stored ids: a list or a subquery of them; call in the
    erasure's transaction, before their ``derived_from`` edges go, ``memory.services.erasure.derivations_erase``)
    out of what the memories derived from them keep: each ``review_cause`` that names one as its source or
    ``via`` gets None there (the action and time stay), and so do the snapshots of their history; a version's
    reason that names one becomes "<action> of a memory it is derived from" (without the relation). Found
    through the edges (``dependants_of``, at most ``SCRUB_LIMIT`` memories), so it stays bounded; return how
    many memories and versions were rewritten."""
    edges = MemoryDerivation.objects.filter(source_id__in=erased_keys).order_by()
    erased = set(edges.values_list("source_id", flat=True))
    erased -= set(Memory.objects.filter(pk__in=sorted(erased)).values_list("pk", flat=True))  # still here: not erased
    if not erased:
        return 0
    walk = dependants_of(sorted(erased), limit=SCRUB_LIMIT)
    if not walk.order:
        return 0
    done = 0
    for start in range(0, len(walk.order), WALK_BATCH):
        batch = walk.order[start:start + WALK_BATCH]
        rows = []
        for row in Memory.objects.filter(pk__in=batch, needs_review=True):
            cause = _scrubbed(row.review_cause, row.project_id, erased)
            if cause is not row.review_cause:
                row.review_cause = cause
                rows.append(row)
        Memory.objects.bulk_update(rows, ["review_cause"])
        versions = []
        for version in MemoryVersion.objects.filter(memory_id__in=batch):
            touched = False
            names = {public_id(key) for key in (walk.root.get(version.memory_id), walk.via.get(version.memory_id))
                     if key in erased}
            for side in ("before", "after"):
                state = getattr(version, side)
                if isinstance(state, dict) and "review_cause" in state:
                    cause = _scrubbed(state["review_cause"], version.project_id, erased)
                    if cause is not state["review_cause"]:
                        names |= {state["review_cause"].get(name) for name in ("memory_id", "via")} - {None}
                        setattr(version, side, {**state, "review_cause": cause})
                        touched = True
            if any(name in (version.reason or "") for name in names):
                word = (version.reason or "").split(" ", 1)[0]
                version.reason = f"{word if word in CAUSE_ACTIONS else 'change'} of a memory it is derived from"
                version.relation_id, touched = None, True
            if touched:
                versions.append(version)
        MemoryVersion.objects.bulk_update(versions, ["before", "after", "reason", "relation_id"])
        done += len(rows) + len(versions)
    return done
