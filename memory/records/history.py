"""The history of every memory-like record: who changed it, when, from what to what, and why.

Every write of a memory appends a ``memory.models.MemoryVersion`` row in its
own transaction, whichever door it came through, because the services record
it themselves (``memory.services.memories``: create, update, state edits,
restore; ``memory.links.rules.set_memory_status``: relation-driven
(in)validation; ``memory.services.erasure.memories_erase``: every delete, the expiry
purge's too; ``memory.records.provenance``: memories that follow a deleted source
message; ``memory.links.dependants``: a ``flag`` when a memory it was derived from changed, issue #32, and
``memory.services.review.dependant_clear`` the ``unflag``). Versions count from 1 per memory.

Who acted is not an argument of the services (their signatures are the
spec's): the edges name themselves for the duration of a call with
``acting(kind, id, reason)``, a context variable, so it follows the call into
``memory.core.aio.in_worker`` threads (``asgiref`` copies the context). The kinds
are ``ACTOR_KINDS``: ``api_key`` (``threads.auth.ApiKeyAuth``, id the key's
pk, reason the request line), ``staff`` (``staff.views.common.staff_required``, the
username), ``admin`` (``memory.admin``), ``extraction`` (the job id; reason
the extraction decision, ``because``), ``ttl`` (the expiry purge), ``import``
(``manage.py import_memory``) and ``client``, the default when no edge named
itself (Python code calling ``memory.client`` directly). A change a relation
drove keeps the actor that made or removed the relation and names the
relation in ``relation_id``; its ``actor`` in the public record is then
``{"kind": "relation", "id": <relation id>, "via": <the actor>}``.

History outlives a single delete: deleting one memory (the API, the client,
the staff pages, the admin's single and bulk deletes, which go through the
same service) appends a ``delete`` version and keeps the rest, so the delete can be undone
(``memory.services.memories.memory_restore``).
It goes when nothing could read it any more (``history_erase``, from
``memory.services.erasure``; a security review found that keeping it leaked erased text): with the user or agent
(``subject_erase``), with the thread it was written in (``threads_erase``:
reads go through the thread, and a thread created later under the same id
must not see it), and with an expired memory (``expired_purge``). A memory
of another user that survives its thread's delete detached keeps its
history, detached too (``thread_id`` NULL). The chunk vectors kept with the
history (``HistoryVector``, issue #32) go with it, in ``history_erase``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db.models import Max
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.core.errors import NotFound
from memory.core.ids import public_id, stored_id
from memory.core.locking import lock_rows
from memory.core.valid_time import WINDOW_FIELDS
from memory.models import HistoryVector, Memory, MemoryVersion
from memory.records.validators import check_bounded_int, check_id

#: Who may appear as the actor of a version (see the module docstring).
ACTOR_KINDS = ("client", "api_key", "staff", "admin", "extraction", "ttl", "import")
#: What a version records. ``approve`` and ``reject`` are the review queue's (``memory.services.review``):
#: an approval (its ``after`` may carry an edited content: edit-then-approve) and a rejection, which deletes
#: the memory (its ``after`` is None, like a ``delete``'s). ``flag`` and ``unflag`` are the dependants' (issue #32,
#: ``memory.links.dependants``): a memory it was derived from changed, and a reviewer cleared that.
ACTIONS = ("create", "update", "invalidate", "revalidate", "restore", "delete", "approve", "reject", "flag",
           "unflag")
#: The fields a snapshot holds, and a restore puts back (all but the last two). ``pending`` is in a snapshot
#: only while the memory awaits review (then True): snapshots taken before the review queue existed stay as
#: they were. Likewise the validity window (issue #32): ``valid_from``/``valid_to`` (ISO 8601) only when set, so
#: a snapshot of a memory without a window, and every snapshot taken before valid time existed, has neither key
#: (read as None: open). ``needs_review`` and ``review_cause`` likewise only while the memory is flagged (issue
#: #32); a restore leaves the flag as it is (it says the world changed under the memory, which no undo changes
#: back).
SNAPSHOT_FIELDS = ("content", "memory_type", "metadata", "status", "expires_at", "timestamp", "pending",
                   "valid_from", "valid_to", "needs_review", "review_cause")
#: Versions one history read answers at most (the newest ones).
MAX_VERSIONS = 1000
#: Length of ``MemoryVersion.reason`` and ``actor_id``.
REASON_LENGTH = 500
ACTOR_ID_LENGTH = 200


@dataclass(frozen=True)
class Actor:
    """Who is writing: ``kind`` (one of ``ACTOR_KINDS``), ``id`` (key pk, username, job id ...), ``reason`` (why)."""

    kind: str = "client"
    id: str = ""
    reason: str = ""


_actor: ContextVar[Actor | None] = ContextVar("oam_history_actor", default=None)


def current_actor() -> Actor:
    """The actor named by the innermost ``acting`` (or ``set_actor``) of this context; ``Actor()`` (client) else."""
    return _actor.get() or Actor()


def set_actor(kind: str, actor_id: Any = "", reason: str = "") -> Token:
    """Name the actor of this context until ``reset_actor(token)``; ValueError for an unknown kind."""
    if kind not in ACTOR_KINDS:
        raise ValueError(f"unknown actor kind {kind!r}")
    return _actor.set(Actor(kind, str(actor_id)[:ACTOR_ID_LENGTH], str(reason)[:REASON_LENGTH]))


def reset_actor(token: Token) -> None:
    """Undo the ``set_actor`` that returned ``token``."""
    _actor.reset(token)


@contextlib.contextmanager
def acting(kind: str, actor_id: Any = "", reason: str = "") -> Iterator[Actor]:
    """``with acting("staff", "alice"):`` every version written inside names that actor."""
    token = set_actor(kind, actor_id, reason)
    try:
        yield current_actor()
    finally:
        reset_actor(token)


@contextlib.contextmanager
def because(reason: str) -> Iterator[Actor]:
    """Keep the current actor, with ``reason`` as the why of the versions written inside."""
    token = _actor.set(replace(current_actor(), reason=str(reason)[:REASON_LENGTH]))
    try:
        yield current_actor()
    finally:
        _actor.reset(token)


def snapshot(row: Memory) -> dict[str, Any]:
    """The ``SNAPSHOT_FIELDS`` of a memory row as JSON values (``expires_at``: ISO 8601 or None; ``pending``
    only when the memory awaits review; ``valid_from``/``valid_to``, ISO 8601, each only when set;
    ``needs_review`` and ``review_cause`` only when it is flagged)."""
    state = {
        "content": row.content, "memory_type": row.memory_type, "metadata": dict(row.metadata or {}),
        "status": row.status, "expires_at": row.expires_at.isoformat() if row.expires_at else None,
        "timestamp": row.timestamp,
    }
    if row.pending:
        state["pending"] = True
    for name in WINDOW_FIELDS:
        if getattr(row, name) is not None:
            state[name] = getattr(row, name).isoformat()
    if row.needs_review:
        state["needs_review"], state["review_cause"] = True, row.review_cause
    return state


def snapshot_expiry(state: dict[str, Any], name: str = "expires_at") -> datetime | None:
    """``expires_at`` (or another instant ``name``: ``valid_from``, ``valid_to``) of a snapshot as an aware
    datetime (None when it has none: also a snapshot older than the key)."""
    value = state.get(name)
    return parse_datetime(value) if value else None


def _next_versions(keys: Iterable[str]) -> dict[str, int]:
    """The next version number of each memory (stored ids): MAX + 1, read under the memories' row locks.

    MAX + 1 is right only while one writer numbers a memory at a time: two concurrent writers would both
    read N and one would fail on the unique constraint ``oam_memver_uq`` (memory_id, version). Locking the
    memory rows first (``lock_rows``, primary-key order: step 2 of ``memory.core.locking``'s order; a no-op for
    a writer that holds them) queues the second writer until the first commits, and its MAX then reads N + 1
    (READ COMMITTED: each statement sees what committed before it). ``tests/concurrency`` shows the race.
    """
    keys = list(set(keys))
    lock_rows(Memory.objects.filter(pk__in=keys))
    top = dict(MemoryVersion.objects.filter(memory_id__in=keys).values("memory_id")
               .annotate(top=Max("version")).values_list("memory_id", "top"))
    return {key: (top.get(key) or 0) + 1 for key in keys}


def record_many(changes: Iterable[tuple[Memory, dict[str, Any] | None, dict[str, Any] | None]], action: str, *,
                relation_id: str | None = None, reason: str | None = None) -> int:
    """Append one version per ``(row, before, after)``; return how many. Call inside the writing transaction.

    ``row`` gives the scope copies; ``before``/``after`` are snapshots (None
    before a create, after a delete). The actor is ``current_actor()``;
    ``reason`` (default: the actor's) is the why; ``relation_id`` (stored id)
    the relation that drove it. Raises ValueError for an unknown action.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown history action {action!r}")
    changes = list(changes)
    if not changes:
        return 0
    actor = current_actor()
    why = (actor.reason if reason is None else reason)[:REASON_LENGTH]
    versions = _next_versions(row.pk for row, _, _ in changes)
    now = timezone.now()
    rows = []
    for row, before, after in changes:
        rows.append(MemoryVersion(
            project_id=row.project_id, memory_id=row.pk, version=versions[row.pk], action=action,
            actor_kind=actor.kind, actor_id=actor.id, reason=why, relation_id=relation_id,
            thread_id=row.thread_id, user_id=row.user_id, agent_id=row.agent_id,
            before=before, after=after, created_at=now))
        versions[row.pk] += 1
    MemoryVersion.objects.bulk_create(rows)
    return len(rows)


def record(row: Memory, action: str, before: dict[str, Any] | None, after: dict[str, Any] | None, **kwargs) -> int:
    """``record_many`` for one memory."""
    return record_many([(row, before, after)], action, **kwargs)


@dataclass(frozen=True)
class MemoryVersionRecord:
    """One history entry as callers see it (``thread.get_memory_history``, the API, the staff timeline).

    ``actor``: ``{"kind", "id"}``, or for a change a relation drove
    ``{"kind": "relation", "id": <relation id>, "via": {"kind", "id"}}``;
    ``before``/``after``: snapshots (``SNAPSHOT_FIELDS``) or None;
    ``changed``: the snapshot fields that differ; ``created_at``: ISO 8601.
    """

    memory_id: str
    version: int
    action: str
    actor: dict[str, Any]
    reason: str
    relation_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    changed: list[str]
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (the API's answer)."""
        return dict(self.__dict__)


def version_dto(row: MemoryVersion) -> MemoryVersionRecord:
    """A ``MemoryVersionRecord`` from a stored row."""
    actor: dict[str, Any] = {"kind": row.actor_kind, "id": row.actor_id}
    if row.relation_id:
        actor = {"kind": "relation", "id": public_id(row.relation_id), "via": actor}
    before, after = row.before, row.after
    changed = [f for f in SNAPSHOT_FIELDS if (before or {}).get(f) != (after or {}).get(f)]
    return MemoryVersionRecord(
        memory_id=public_id(row.memory_id), version=row.version, action=row.action, actor=actor,
        reason=row.reason, relation_id=public_id(row.relation_id) if row.relation_id else None,
        before=before, after=after, changed=changed, created_at=row.created_at.isoformat())


def history_rows(*, project_id: int, memory_id: Any, thread_id: str | None = None,
                 restrict: dict[str, str] | None = None):
    """The stored versions of one memory (public ``memory_id``) of a project, oldest first, as a queryset.

    ``thread_id`` (stored id): only versions written while the memory was this
    thread's; ``restrict`` (``Tenant.row_filter``): only versions whose scope
    copies match (a restricted client's). ValueError/TypeError for a bad id.
    """
    key = stored_id(project_id, check_id(memory_id, "memory_id"))
    rows = MemoryVersion.objects.filter(project_id=project_id, memory_id=key)
    if thread_id is not None:
        rows = rows.filter(thread_id=thread_id)
    if restrict:
        rows = rows.filter(**restrict)
    return rows.order_by("version")


def history_list(*, project_id: int, memory_id: Any, thread_id: str | None = None,
                 restrict: dict[str, str] | None = None, limit: Any = MAX_VERSIONS,
                 unreviewed: bool = True) -> list[MemoryVersionRecord]:
    """The history of one memory, oldest first: at most ``limit`` (1 through ``MAX_VERSIONS``) newest versions.

    ``unreviewed=False`` (an API read key: ``threads.api.history.memory_history``): none (KeyError, as for no history)
    for a memory awaiting review or rejected in review, whose text is its reviewers' (write keys, staff).

    Answers for a deleted memory too (its history is kept until its user is erased or its thread deleted).
    Raises KeyError (``NotFound``) when there is no version in the given
    scope (see ``history_rows``); ValueError/TypeError for a bad id or limit.
    """
    limit = check_bounded_int(limit, "limit", low=1, high=MAX_VERSIONS)
    rows = history_rows(project_id=project_id, memory_id=memory_id, thread_id=thread_id, restrict=restrict)
    found = list(rows.order_by("-version")[:limit])
    if not found or (not unreviewed and unreviewed_version(found[0])):
        raise NotFound("memory_id", memory_id)
    return [version_dto(row) for row in reversed(found)]


def unreviewed_version(newest: MemoryVersion) -> bool:
    """True when a memory's newest version leaves it awaiting review, or rejected in review: its text was never
    an agent's to read (``memory.records.review_rules``)."""
    return newest.action == "reject" or bool(isinstance(newest.after, dict) and newest.after.get("pending"))


def history_erase(rows) -> int:
    """Delete the given ``MemoryVersion`` queryset (erasure, a thread's delete, the expiry purge: see the
    module docstring); return how many rows went. The kept vectors of every memory among them
    (``HistoryVector``, issue #32) go first: no vector of an erased memory is left."""
    HistoryVector.objects.filter(memory_id__in=rows.values("memory_id")).delete()
    return rows.delete()[0]
