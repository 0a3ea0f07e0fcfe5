"""Recorded time ("as of", issue #32): the memories the store held at an instant, rebuilt from their history.

Every memory write appends a ``MemoryVersion`` (``memory.records.history``) stamped with the time it was recorded
(``created_at``). The state of a memory at an instant ``T`` is the snapshot (``after``) of its newest version
recorded at or before ``T``:

* none (the memory was created after ``T``): the memory is absent;
* ``after`` is None (a ``delete``, or a ``reject`` in review, by ``T``): absent;
* the snapshot says it awaited review (``pending``) or had expired by ``T`` (``expires_at`` <= ``T``): absent, as a
  live read hides it;
* else a ``MemoryRecord`` built from the snapshot: content, type, metadata, status, expiry, event time, validity
  window and the dependants' flag as they were; scope (thread, user, agent) from the version row; ``created_at``
  the time of its first version; ``source_message_ids`` are not versioned and come from the current row (empty
  once the memory is gone).

A memory edited after ``T`` answers with its old content; one deleted after ``T`` is present. A memory that
predates history (stored before migration 0010 and never written since: no version at all) is its current row when
that row was created at or before ``T``. One query answers the versioned memories of a scope (the newest version at
or before ``T`` per memory: ``ROW_NUMBER()`` over each memory's versions recorded by ``T``, on the indexes
(project, recorded time) and (memory, recorded time) of migration 0015: ``latest_versions``) and one the
unversioned ones; both compile for Oracle (``tests/oracle/test_as_of_sql.py``).

Erasure wins over history: erasing a user or agent (``memory.services.erasure.subject_erase``) deletes their
memories' history, so they never reappear in an as-of answer; ``erased_since`` tells whether the subject asked
about was erased after ``T`` (its ``ErasureReceipt``, matched by ``subject_digest``), which the answers carry
(``AsOfRecords.erased_since``; over HTTP the header ``X-OAM-Erased-Since``). History also goes with the thread it
was written in and with the expiry purge (``memory.records.history``): a memory of a thread deleted since, or purged
after expiring since, is absent from an as-of answer although it was live at ``T`` (no receipt says so).

Bounds: ``as_of`` is a datetime, date or ISO-8601 string (no zone: UTC; ``check_as_of``), at most
``FUTURE_SKEW`` ahead of the server's clock (a later instant is a ValueError naming ``as_of``: the store cannot
answer for the future, and a silent "now" would hide a client's clock error). One as-of read rebuilds at most
``MAX_AS_OF_MEMORIES`` memories of its scope; a scope that held more is a ValueError naming ``as_of`` (narrow the
scope). ``metadata_filter`` is not combined with ``as_of`` (the filter's SQL reads a column, not a snapshot:
``reject_metadata_filter``). Messages, images and relations are not versioned: only memories travel back in time.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import DateTimeField, Exists, F, Min, OuterRef, Q, Subquery, Value, Window
from django.db.models.functions import Coalesce, RowNumber
from django.utils import timezone

from memory.core.errors import InvalidArgument, InvalidType, NotFound
from memory.core.ids import public_id, stored_id
from memory.core.types import NOTSET, MemoryRecord, memory_record
from memory.core.valid_time import check_instant, holds_at
from memory.models import ErasureReceipt, Memory, MemoryVersion
from memory.records.history import snapshot_expiry
from memory.records.selectors import live_q, memory_dto

#: How far ahead of the server's clock an ``as_of`` may be (clock skew between a client and the server).
FUTURE_SKEW = dt.timedelta(minutes=5)
#: The columns of a version an as-of read uses (its snapshot ``after`` and scope copies; never ``before``).
VERSION_COLUMNS = ("memory_id", "thread_id", "user_id", "agent_id", "after")
#: Memories one as-of read rebuilds at most (a scope that held more at ``T`` is a ValueError naming ``as_of``).
MAX_AS_OF_MEMORIES = 10_000


class AsOfRecords(list):
    """The answer of an as-of list or search: a plain ``list`` of the spec's records, plus ``as_of`` (the instant,
    an aware UTC datetime) and ``erased_since`` (True when the user or agent asked about was erased after it:
    their memories are gone from history and absent here)."""

    as_of: dt.datetime | None = None
    erased_since: bool = False


def answer(items: list, at: dt.datetime, erased: bool) -> AsOfRecords:
    """``items`` as ``AsOfRecords`` carrying ``at`` and ``erased``."""
    result = AsOfRecords(items)
    result.as_of, result.erased_since = at, erased
    return result


def check_as_of(value: Any) -> dt.datetime | None:
    """A caller's ``as_of``: None, or a datetime, date or ISO-8601 string as an aware UTC datetime
    (``memory.core.valid_time.check_instant``). TypeError/ValueError naming ``as_of`` for a bad value, ValueError
    for an instant more than ``FUTURE_SKEW`` ahead of the server's clock."""
    at = check_instant(None if value is NOTSET else value, "as_of")
    if at is not None and at > timezone.now() + FUTURE_SKEW:
        raise InvalidArgument("as_of", f"is in the future ({at.isoformat()}): recorded time goes up to now")
    return at


def subject_digest(project_id: int, subject: str, value: str) -> str:
    """HMAC-SHA256 (keyed by ``SECRET_KEY``) of ``"<project pk>:<subject>:<id>"``: a receipt can be matched to
    an id later by whoever holds both, and reveals nothing by itself (``memory.services.erasure``)."""
    message = f"{project_id}:{subject}:{value}".encode("utf-8")
    return hmac.new(settings.SECRET_KEY.encode("utf-8"), message, hashlib.sha256).hexdigest()


def erased_since(*, project_id: int, at: dt.datetime, user_id: Any = None, agent_id: Any = None) -> bool:
    """Whether the user ``user_id`` or the agent ``agent_id`` (strings; anything else is not asked about) of the
    project was erased after ``at``: an ``ErasureReceipt`` requested later than ``at`` names them."""
    digests = [subject_digest(project_id, subject, value)
               for subject, value in (("user", user_id), ("agent", agent_id)) if isinstance(value, str)]
    if not digests:
        return False
    return ErasureReceipt.objects.filter(project_id=project_id, subject_digest__in=digests,
                                         requested_at__gt=at).exists()


def latest_versions(*, project_id: int, at: dt.datetime, scope: Q | None = None, key: str | None = None):
    """The newest version at or before ``at`` of each memory of the project whose versions match ``scope`` (a
    ``Q`` over ``thread_id``/``user_id``/``agent_id``; ``key``: only that memory, stored id), as dicts of
    ``VERSION_COLUMNS`` and ``first_at``, the memory's first recorded time. One statement: the versions recorded
    by ``at`` numbered per memory, newest first (``ROW_NUMBER() OVER (PARTITION BY memory_id ORDER BY version
    DESC)``), the first of each kept (one pass over the index ``oam_memver_project_time_ix`` (project, recorded
    time), or with ``key`` ``oam_memver_time_ix`` (memory, recorded time)). Unordered. A version's scope copies
    are the memory's at that version; a memory detached from its deleted thread has them rewritten on every
    version (``memory.services.erasure.memories_detach``), so its versions agree."""
    qs = MemoryVersion.objects.filter(scope or Q(), project_id=project_id, created_at__lte=at)
    if key is not None:
        qs = qs.filter(memory_id=key)
    per_memory = [F("memory_id")]
    return (qs.annotate(newest=Window(RowNumber(), partition_by=per_memory, order_by=F("version").desc()),
                        first_at=Window(Min("created_at"), partition_by=per_memory))
            .filter(newest=1).order_by().values(*VERSION_COLUMNS, "first_at"))


def unversioned_rows(*, project_id: int, at: dt.datetime, scope: Q | None = None, key: str | None = None):
    """Memory rows of the project that predate history (no version at all), created at or before ``at``, not
    expired then, not awaiting review, in ``scope`` (the same ``Q`` as ``latest_versions``, on the row).

    Every memory written since history exists has a version, so only rows created before the project's first
    version can lack one: the ``NOT EXISTS`` probe runs on those only (the first version is one probe of the index
    (project, recorded time); a project without any version has all its rows checked)."""
    first = (MemoryVersion.objects.filter(project_id=project_id).order_by("created_at").values("created_at")[:1])
    qs = Memory.objects.filter(scope or Q(), live_q(at), project_id=project_id, created_at__lte=at, pending=False,
                               created_at__lt=Coalesce(Subquery(first), Value(at + dt.timedelta(microseconds=1)),
                                                       output_field=DateTimeField()))
    if key is not None:
        qs = qs.filter(pk=key)
    return qs.filter(~Exists(MemoryVersion.objects.filter(memory_id=OuterRef("pk")))).order_by()


@dataclass(frozen=True)
class Historical:
    """One memory as it was at an instant: its record, and its stored id (the sort key after ``created_at``);
    ``event_time``: its own ``timestamp`` then (None when it had none; the record's falls back to its creation), which
    its chunks were embedded with (``memory.index.writer.embedding_text``)."""

    key: str
    record: MemoryRecord
    event_time: str | None = None


def present_then(state: Any, at: dt.datetime) -> bool:
    """Whether a snapshot (a version's ``after``) stands for a memory an agent could read at ``at``: not deleted
    (None), not awaiting review, not expired then."""
    if not isinstance(state, dict) or state.get("pending"):
        return False
    expires = snapshot_expiry(state)
    return expires is None or expires > at


def version_record(row: dict[str, Any], sources: dict[str, list[str]]) -> MemoryRecord:
    """The record of a version (a ``latest_versions`` dict) whose snapshot is ``present_then``."""
    state = row["after"]
    created = row["first_at"].isoformat()
    return memory_record(
        id=public_id(row["memory_id"]), content=state.get("content", ""),
        memory_type=state.get("memory_type", "memory"), user_id=row["user_id"], agent_id=row["agent_id"],
        thread_id=public_id(row["thread_id"]), timestamp=state.get("timestamp") or created,
        metadata=dict(state.get("metadata") or {}), status=state.get("status", "valid"), created_at=created,
        expires_at=state.get("expires_at"), source_message_ids=list(sources.get(row["memory_id"]) or []),
        valid_from=state.get("valid_from"),
        valid_to=state.get("valid_to"), needs_review=bool(state.get("needs_review")),
        review_cause=state.get("review_cause") if state.get("needs_review") else None,
    )


def _bounded(rows: list, what: str) -> list:
    if len(rows) > MAX_AS_OF_MEMORIES:
        raise InvalidArgument("as_of", f"the scope held more than {MAX_AS_OF_MEMORIES} {what} at that instant: "
                                       "narrow it (user_id, agent_id, thread_id)")
    return rows


def memories_at(*, project_id: int, at: dt.datetime, scope: Q | None = None, memory_types: Any = None,
                valid_at: dt.datetime | None = None, include_invalid: bool = True,
                key: str | None = None) -> list[Historical]:
    """The memories of the project in ``scope`` as they were at ``at`` (module docstring), oldest first
    (first recorded time, then id). ``memory_types`` (a collection, None: all), ``valid_at`` (their window then,
    ``holds_at``) and ``include_invalid=False`` (status ``valid`` then) and ``key`` (one memory) narrow them. At most
    ``MAX_AS_OF_MEMORIES`` (ValueError naming ``as_of`` beyond)."""
    cap = MAX_AS_OF_MEMORIES + 1
    versions = _bounded(list(latest_versions(project_id=project_id, at=at, scope=scope, key=key)[:cap]), "memories")
    old = _bounded(list(unversioned_rows(project_id=project_id, at=at, scope=scope, key=key)[:cap]), "memories")
    versions = [row for row in versions if present_then(row["after"], at)]
    live = [row["memory_id"] for row in versions]
    sources = dict(Memory.objects.filter(pk__in=live).values_list("pk", "source_message_ids")) if live else {}
    found = [Historical(row.pk, memory_dto(row), row.timestamp) for row in old]
    found += [Historical(row["memory_id"], version_record(row, sources), row["after"].get("timestamp"))
              for row in versions]
    kept = []
    for item in found:
        record = item.record
        if memory_types is not None and record.memory_type not in memory_types:
            continue
        if not include_invalid and str(record.status) != "valid":
            continue
        if valid_at is not None and not holds_at(check_instant(record.valid_from, "valid_from"),
                                                 check_instant(record.valid_to, "valid_to"), valid_at):
            continue
        kept.append(item)
    kept.sort(key=lambda item: (item.record.created_at or "", item.key))
    return kept


def memory_at(*, project_id: int, memory_id: Any, at: dt.datetime, scope: Q | None = None) -> MemoryRecord:
    """One memory (public ``memory_id``) as it was at ``at`` within ``scope``; KeyError (``NotFound``) when it did
    not exist then, was deleted, awaiting review or expired by then, or is outside ``scope``."""
    if not isinstance(memory_id, str):
        raise InvalidType("memory_id", "must be a string")
    found = memories_at(project_id=project_id, at=at, scope=scope, key=stored_id(project_id, memory_id))
    if not found:
        raise NotFound("memory_id", memory_id)
    return found[0].record


def scope_q(**columns: Any) -> Q:
    """A ``Q`` over the scope columns shared by memory rows and their versions: each value given (not
    ``NOTSET``) matches exactly, None matching rows stored without one. ``thread_id`` is a stored id."""
    q = Q()
    for column, value in columns.items():
        if value is NOTSET:
            continue
        q &= Q(**{f"{column}__isnull": True}) if value is None else Q(**{column: value})
    return q


def reject_metadata_filter(metadata_filter: Any) -> None:
    """ValueError naming ``metadata_filter`` when one is given with ``as_of`` (not supported: module docstring)."""
    if metadata_filter is not NOTSET and metadata_filter is not None:
        raise InvalidArgument("metadata_filter", "cannot be combined with as_of (issue #32: recorded time reads "
                                                 "snapshots, which the metadata filter's SQL does not)")
