"""Project-wide lists of threads, messages, memories and images (SDK: ``OracleAgentMemory.list_threads``,
``list_messages``, ``list_memories``, ``list_images``).

Each list is within a tenant (``memory.records.tenancy.Tenant``: its project, and the fixed user and agent of a
restricted client), live records only (not expired), oldest first, and bounded: ``limit`` omitted gives
at most ``DEFAULT_LIST_LIMIT`` (100, the thread-level ``list_images`` default), None none, else an int
from 1 to ``memory.core.errors.MAX_SQL_COUNT``. A scope argument omitted is no filter; ``None`` matches records
stored with no value (the SDK's rule); a string matches exactly. ``metadata_filter`` follows the search
grammar (``memory.records.metadata_filter``) on the record's metadata; None is no filter. ``valid_at`` (memories
only, issue #32): the memories whose validity window contains that instant (``selectors.filter_valid_at``). Bad
arguments:
TypeError/ValueError naming the argument; a scope beyond a restricted tenant: ``OutOfScope``.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from memory.core.errors import InvalidArgument, InvalidType, check_sql_count
from memory.core.ids import stored_id
from memory.core.types import NOTSET, ImageRecord, MemoryRecord, NotSet
from memory.core.types import Message as MessageDTO
from memory.core.valid_time import check_instant
from memory.models import Image, Memory, Message, Thread
from memory.records.as_of import AsOfRecords, answer, check_as_of, erased_since, memories_at, reject_metadata_filter
from memory.records.as_of import scope_q as as_of_scope_q
from memory.records.metadata_filter import compile_filter
from memory.records.selectors import (
    filter_valid_at,
    hydrate_images,
    image_dto,
    live_q,
    memory_dto,
    memory_live_q,
    message_dto,
)
from memory.records.tenancy import Tenant

DEFAULT_LIST_LIMIT = 100


def check_limit(limit: Any) -> int | None:
    """``limit`` of a list: omitted 100, None no limit, else an int of at least 1."""
    if limit is NOTSET:
        return DEFAULT_LIST_LIMIT
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidType("limit", "must be an int or None")
    if limit < 1:
        raise InvalidArgument("limit", "must be at least 1, or None for no limit")
    return check_sql_count(limit, "limit", ", or None for no limit")


def _check_scope_id(value: Any, field: str) -> Any:
    if value is NOTSET or value is None or isinstance(value, str):
        return value
    raise InvalidType(field, "must be a string or None")


def filter_metadata(qs: QuerySet, metadata_filter: Any, field: str = "metadata") -> QuerySet:
    """``qs`` narrowed by the spec's ``metadata_filter`` on JSON column ``field`` (``memory.records.metadata_filter``
    grammar); ``NOTSET``/None: ``qs`` unchanged; anything but a dict: ``InvalidArgument`` naming ``metadata_filter``."""
    if metadata_filter is NOTSET or metadata_filter is None:
        return qs
    if not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    return qs.filter(compile_filter(metadata_filter, field))


def _scoped(qs: QuerySet, tenant: Tenant, *, prefix: str = "", **ids: Any) -> QuerySet:
    """``qs`` within the tenant and the given scope ids (``prefix``: the path to the user/agent columns)."""
    for field in ("user_id", "agent_id"):
        if field in ids:
            ids[field] = tenant.fill(field, _check_scope_id(ids[field], field))
    for field, fixed in tenant.row_filter().items():
        qs = qs.filter(**{f"{prefix}{field}": fixed})
    for field, value in ids.items():
        if value is not NOTSET:
            qs = qs.filter(**{f"{prefix}{field}": value})
    return qs


def _bounded(qs: QuerySet, limit: Any) -> QuerySet:
    limit = check_limit(limit)
    return qs[:limit] if limit is not None else qs


def thread_queryset(*, tenant: Tenant, user_id: Any, agent_id: str | None | NotSet = NOTSET,
                    metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET) -> QuerySet:
    """The validated query behind ``thread_rows`` (also compiled for Oracle in tests/oracle)."""
    if user_id is NOTSET:
        raise InvalidArgument("user_id", "required (None lists threads with no user)")
    qs = _scoped(Thread.objects.filter(project=tenant.project), tenant, user_id=user_id, agent_id=agent_id)
    return _bounded(filter_metadata(qs, metadata_filter).order_by("created_at", "id"), limit)


def thread_rows(**arguments: Any) -> list[Thread]:
    """Threads of one user (``user_id`` required, None: threads with no user), oldest first."""
    return list(thread_queryset(**arguments))


def message_queryset(*, tenant: Tenant, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                     thread_id: str | None | NotSet = NOTSET, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                     limit: int | None | NotSet = NOTSET, now=None) -> QuerySet | None:
    """The validated query behind ``messages`` (None: nothing can match)."""
    qs = Message.objects.filter(live_q(now or timezone.now()), thread__project=tenant.project)
    thread_id = _check_scope_id(thread_id, "thread_id")
    qs = _scoped(qs, tenant, prefix="thread__", user_id=user_id, agent_id=agent_id)
    if thread_id is None:
        return None  # every message belongs to a thread
    if thread_id is not NOTSET:
        qs = qs.filter(thread_id=stored_id(tenant.project.pk, thread_id))
    return _bounded(filter_metadata(qs, metadata_filter).order_by("created_at", "thread_id", "seq"), limit)


def messages(*, include_image_bytes: bool | NotSet = NOTSET, **arguments: Any) -> list[MessageDTO]:
    """Live messages of the tenant's project (scope: their thread's user and agent, and their thread);
    image parts carry their bytes with ``include_image_bytes=True``."""
    include = False if include_image_bytes is NOTSET else include_image_bytes
    if not isinstance(include, bool):
        raise InvalidType("include_image_bytes", "must be a bool")
    qs = message_queryset(**arguments)
    result = [] if qs is None else [message_dto(row) for row in qs]
    if include and result:
        result = hydrate_images(result, None, project_id=arguments["tenant"].project.pk)
    return result


def memory_queryset(*, tenant: Tenant, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                    thread_id: str | None | NotSet = NOTSET, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET, now=None,
                    valid_at: datetime | date | str | None | NotSet = NOTSET) -> QuerySet:
    """The validated query behind ``memories`` (also compiled for Oracle in tests/oracle). ``valid_at``: omitted
    or None, no filter; else a datetime, date or ISO-8601 string (``selectors.filter_valid_at``)."""
    qs = Memory.objects.filter(memory_live_q(now or timezone.now()), project=tenant.project)
    thread_id = _check_scope_id(thread_id, "thread_id")
    qs = _scoped(qs, tenant, user_id=user_id, agent_id=agent_id)
    if thread_id is not NOTSET:
        qs = qs.filter(thread_id=None if thread_id is None else stored_id(tenant.project.pk, thread_id))
    qs = filter_valid_at(qs, None if valid_at is NOTSET else valid_at)
    return _bounded(filter_metadata(qs, metadata_filter).order_by("created_at", "id"), limit)


def memories(**arguments: Any) -> list[MemoryRecord]:
    """Live memory-like records of the tenant's project, by their own scope columns (not those awaiting review)."""
    return [memory_dto(row) for row in memory_queryset(**arguments)]


def image_queryset(*, tenant: Tenant, image_id: str | None | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                   agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                   metadata_filter: dict[str, Any] | None | NotSet = NOTSET, include_bytes: bool = False,
                   limit: int | None | NotSet = NOTSET, now=None) -> QuerySet | None:
    """The validated query behind ``images`` (None: nothing can match); bytes selected only with
    ``include_bytes``."""
    qs = Image.objects.filter(live_q(now or timezone.now()), project=tenant.project, message__isnull=True)
    thread_id = _check_scope_id(thread_id, "thread_id")
    qs = _scoped(qs, tenant, user_id=user_id, agent_id=agent_id)
    if thread_id is None:
        return None  # every image belongs to a thread
    if thread_id is not NOTSET:
        qs = qs.filter(thread_id=stored_id(tenant.project.pk, thread_id))
    if image_id is not NOTSET and image_id is not None:
        if not isinstance(image_id, str):
            raise InvalidType("image_id", "must be a string")
        qs = qs.filter(pk=stored_id(tenant.project.pk, image_id))
    qs = filter_metadata(qs, metadata_filter).order_by("created_at", "id")
    if include_bytes:
        qs = qs.with_bytes()
    return _bounded(qs, limit)


def images(*, include_bytes: bool | NotSet = NOTSET, image_id: str | None | NotSet = NOTSET,
           **arguments: Any) -> list[ImageRecord]:
    """Live standalone images (not message parts, as the SDK's client-level list) of the tenant's project.

    Bytes are loaded only with ``include_bytes=True`` and an ``image_id`` (ValueError otherwise).
    """
    include = False if include_bytes is NOTSET else include_bytes
    if not isinstance(include, bool):
        raise InvalidType("include_bytes", "must be a bool")
    if include and (image_id is NOTSET or image_id is None):
        raise InvalidArgument("include_bytes", "loading bytes requires an image_id")
    qs = image_queryset(image_id=image_id, include_bytes=include, **arguments)
    return [] if qs is None else [image_dto(row, bytes(row.data) if include else None) for row in qs]


def memories_as_of(*, tenant: Tenant, as_of: Any, user_id: str | None | NotSet = NOTSET,
                   agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                   metadata_filter: dict[str, Any] | None | NotSet = NOTSET, limit: int | None | NotSet = NOTSET,
                   valid_at: datetime | date | str | None | NotSet = NOTSET) -> AsOfRecords:
    """``memories`` as the store held them at ``as_of`` (issue #32, ``memory.records.as_of``): the same scope,
    tenancy, ``valid_at`` (on the windows they had then) and ``limit`` rules, oldest first; ``erased_since`` set
    when the user or agent asked about (given, or the restricted tenant's) was erased after it. ``metadata_filter``
    with ``as_of``: ValueError naming it."""
    at = check_as_of(as_of)
    reject_metadata_filter(metadata_filter)
    when = check_instant(None if valid_at is NOTSET else valid_at, "valid_at")
    limit = check_limit(limit)
    thread_id = _check_scope_id(thread_id, "thread_id")
    ids = {field: tenant.fill(field, _check_scope_id(value, field))
           for field, value in (("user_id", user_id), ("agent_id", agent_id))}
    fixed = tenant.row_filter()
    scope = as_of_scope_q(**{**ids, **fixed})
    if thread_id is not NOTSET:
        scope &= as_of_scope_q(thread_id=None if thread_id is None else stored_id(tenant.project.pk, thread_id))
    found = [item.record for item in memories_at(project_id=tenant.project.pk, at=at, scope=scope, valid_at=when)]
    subjects = {**ids, **fixed}
    erased = erased_since(project_id=tenant.project.pk, at=at, user_id=subjects.get("user_id"),
                          agent_id=subjects.get("agent_id"))
    return answer(found[:limit] if limit is not None else found, at, erased)
