"""Dependants (issue #32), the reads: ``derived_from`` edges between memories and the memories they reach.

A ``memory.models.MemoryDerivation`` row says memory ``memory_id`` was inferred from memory ``source_id``
(stored ids of one project). ``add_memory(derived_from=[...])`` (the client, the API, MCP) and extraction
(``memory.extraction.candidates``: the KNOWN memories a candidate cites) write them
(``memory.links.dependants.derivations_insert``); a change to a source flags every memory derived from it,
transitively (``memory.links.dependants.dependants_flag``). Here: the argument's rule (``check_derived_from``),
what a caller may name (``sources_resolve``), the walk (``dependants_of``) and the reads of flagged memories
(``flagged_queryset``, ``sources_of``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from memory.core.errors import InvalidArgument, InvalidType, NotFound
from memory.core.ids import public_id, stored_id
from memory.core.types import NOTSET, NotSet
from memory.models import Memory, MemoryDerivation, Project
from memory.records.selectors import memory_live_q
from memory.records.validators import check_id, check_memory_type

logger = logging.getLogger(__name__)

#: Source memories one ``derived_from`` names at most.
MAX_DERIVED_FROM = 100
#: Dependants one change flags at most (the walk stops there: logged, and each flagged memory's ``review_cause``
#: says ``"truncated": true``), and levels it follows outwards at most (``dependants_of``). A change flags its
#: dependants in its own request and transaction, each with a history version, holding the SQLite writer lock:
#: 1,000 keeps one request's work bounded (a security review measured 24.7 s for a fan-out of 12,000 at
#: 10,000). What lies beyond stays unflagged until a change nearer to it.
MAX_DEPENDANTS = 1_000
MAX_DEPTH = 50
#: Source ids per ``IN (...)`` of the walk (Oracle allows 1,000 expressions in a list).
WALK_BATCH = 1000


def check_derived_from(value: Any, field: str = "derived_from") -> list[str]:
    """``derived_from``: omitted or None is none; else a list (or tuple) of at most ``MAX_DERIVED_FROM`` memory
    ids (strings, ``check_id``), repeats dropped, order kept. TypeError (``InvalidType``) for another type,
    ValueError (``InvalidArgument``) for too many or a bad id, each naming ``field``."""
    if value is NOTSET or value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise InvalidType(field, f"must be a list of memory ids, not {type(value).__name__}")
    if len(value) > MAX_DERIVED_FROM:
        raise InvalidArgument(field, f"names at most {MAX_DERIVED_FROM} memories, not {len(value)}")
    return list(dict.fromkeys(check_id(item, field) for item in value))


def sources_resolve(project_id: int, ids: Iterable[str], *, restrict: dict[str, str] | None = None,
                    now=None) -> list[str]:
    """The stored ids of the source memories ``ids`` (public ids, ``check_derived_from``'s) for a new memory of
    project ``project_id``: each must be a memory the caller may read, as ``get_memory`` by id reads it (the
    project's, live, not awaiting review; ``restrict``, a restricted client's ``Tenant.row_filter``: of its
    user and agent only). KeyError (``NotFound`` naming ``derived_from`` and the id) for the first that is not,
    the answer for a memory that does not exist: another tenant's or another user's memory is no different."""
    keys = {stored_id(project_id, mid): mid for mid in ids}
    if not keys:
        return []
    found = set(Memory.objects.filter(memory_live_q(now or timezone.now()), pk__in=list(keys), project_id=project_id,
                                      **(restrict or {})).values_list("pk", flat=True))
    for key, mid in keys.items():
        if key not in found:
            raise NotFound("derived_from", mid)
    return list(keys)


@dataclass
class Walk:
    """What ``dependants_of`` found: ``order`` the dependants (stored ids) in the order reached (nearest first),
    ``root`` and ``via`` for each the source of the change it was reached from and the memory it is directly
    derived from (stored ids); ``truncated`` when a bound stopped the walk."""

    order: list[str] = field(default_factory=list)
    root: dict[str, str] = field(default_factory=dict)
    via: dict[str, str] = field(default_factory=dict)
    truncated: bool = False


def dependants_of(source_keys: Iterable[str], *, limit: int | None = None, depth: int | None = None) -> Walk:
    """Every memory derived from ``source_keys`` (stored ids), transitively: a breadth-first walk over
    ``MemoryDerivation`` (``source_id`` -> ``memory_id``), one query per level and ``WALK_BATCH`` sources, at
    most ``depth`` levels and ``limit`` dependants (default ``MAX_DEPTH``, ``MAX_DEPENDANTS``; ``Walk.truncated``
    then, and a warning; the depth bound only when the last level has dependants not reached). Cycle-safe: a
    memory is reached once, and a source is never its own dependant. Edges of deleted memories are followed
    (an edge outlives a single delete: ``MemoryDerivation``), so the caller keeps the rows that still exist."""
    limit = MAX_DEPENDANTS if limit is None else limit  # read here, so a test may lower them
    depth = MAX_DEPTH if depth is None else depth
    walk = Walk()
    seen = set(source_keys)
    root = {key: key for key in seen}
    frontier = sorted(seen)
    for _level in range(depth):
        if not frontier:
            break
        reached: list[str] = []
        for start in range(0, len(frontier), WALK_BATCH):
            batch = frontier[start:start + WALK_BATCH]
            edges = (MemoryDerivation.objects.filter(source_id__in=batch).order_by("memory_id", "source_id")
                     .values_list("memory_id", "source_id"))
            for memory_id, source_id in edges:
                if memory_id in seen:
                    continue
                if len(walk.order) >= limit:
                    walk.truncated = True
                    break
                seen.add(memory_id)
                root[memory_id] = root[source_id]
                walk.order.append(memory_id)
                walk.root[memory_id], walk.via[memory_id] = root[source_id], source_id
                reached.append(memory_id)
            if walk.truncated:
                break
        if walk.truncated:
            break
        frontier = reached
    else:  # the depth bound: truncated only when the last level has dependants not reached yet
        walk.truncated = any(
            memory_id not in seen for start in range(0, len(frontier), WALK_BATCH)
            for memory_id in MemoryDerivation.objects.filter(source_id__in=frontier[start:start + WALK_BATCH])
            .values_list("memory_id", flat=True))
    if walk.truncated:
        logger.warning("dependants of %s: the walk stopped at %d memories or %d levels", sorted(set(root.values()))
                       [:5], limit, depth)
    return walk


def sources_of(memory_key: str) -> list[str]:
    """The public ids of the memories memory ``memory_key`` (stored id) is derived from, in the order stored."""
    return [public_id(key) for key in MemoryDerivation.objects.filter(memory_id=memory_key).order_by("id")
            .values_list("source_id", flat=True)]


def flagged_queryset(*, project: Project, restrict: dict[str, str] | None = None,
                     thread_id: str | None | NotSet = NOTSET, memory_type: str | NotSet = NOTSET):
    """The memories of ``project`` flagged because a memory they were derived from changed (``needs_review``),
    the most recently updated first, as a queryset: the staff review page and ``GET /api/review/dependants``.
    ``restrict`` (``Tenant.row_filter``), ``thread_id`` (public id) and ``memory_type`` narrow it. Expired and
    pending memories are left out (``memory_live_q``: they are not an agent's to read)."""
    rows = Memory.objects.filter(memory_live_q(timezone.now()), project=project, needs_review=True,
                                 **(restrict or {}))
    if thread_id is not NOTSET and thread_id is not None:
        rows = rows.filter(thread_id=stored_id(project.pk, check_id(thread_id, "thread_id")))
    if memory_type is not NOTSET and memory_type is not None:
        rows = rows.filter(memory_type=check_memory_type(memory_type))
    return rows.order_by("-updated_at", "id")


def cause_source(row: Memory) -> Memory | None:
    """The memory (row) named by ``row.review_cause`` when it still exists in ``row``'s project; else None
    (deleted, or no cause)."""
    cause = row.review_cause if isinstance(row.review_cause, dict) else {}
    mid = cause.get("memory_id")
    if not isinstance(mid, str):
        return None
    return Memory.objects.filter(pk=stored_id(row.project_id, mid)).first()
