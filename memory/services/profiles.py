"""User and agent profiles (SDK: ``OracleAgentMemory.add_user``/``add_agent``/``list_users``/``list_agents``,
and the profile row ``delete_user``/``delete_agent`` remove): ``memory.models.Profile``.

A profile is free-form ``information`` about one user or agent of a project, with ``metadata``; its id
is the user or agent id itself (the SDK: "the returned record identifier is the same public identifier
the application uses as ``user_id``"). Adding a profile that exists replaces its information and
metadata. Within a restricted tenant (``memory.records.tenancy.Tenant``) a user-restricted client reads and
writes only its own user's profile, an agent-restricted one only its own agent's; a client restricted
to a user reads the profiles of the agents it shares a thread with (and an agent-restricted one those of
its threads' users) but does not write them (``OutOfScope``): a key of one agent reads nothing about
users it never talked to. An erasure of a user or agent
deletes the profile in the same transaction (``erase_profiles``, a ``memory.signals.subject_erased``
receiver). Bad input: TypeError/ValueError naming the argument.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from memory.core.errors import InvalidArgument, NotFound, OutOfScope
from memory.core.types import NOTSET, AgentProfileRecord, NotSet, UserProfileRecord
from memory.models import Profile, Thread
from memory.records.listing import check_limit, filter_metadata
from memory.records.tenancy import Tenant
from memory.records.validators import check_content, check_id, check_metadata

KINDS = ("user", "agent")


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InvalidArgument("kind", f"must be one of: {', '.join(KINDS)}")
    return kind


def _subject(tenant: Tenant, kind: str, value: Any, *, write: bool) -> str:
    field = f"{kind}_id"
    value = check_id(value, field)
    fixed = getattr(tenant, field)
    if fixed is not None and value != fixed:
        raise OutOfScope(field, f"this client acts for {field} {fixed!r} only, not {value!r}")
    if write and fixed is None and tenant.restricted:
        raise OutOfScope(field, f"a client restricted to one {'agent' if kind == 'user' else 'user'} cannot "
                                f"write {kind} profiles")
    return value


def _within(qs, tenant: Tenant, kind: str):
    """Profiles of ``kind`` a restricted tenant may read: its own subject's, and those of the other kind
    that share one of its threads (the ids in the ``user_id``/``agent_id`` columns of those threads)."""
    fixed = getattr(tenant, f"{kind}_id")
    if fixed is not None:
        return qs.filter(subject_id=fixed)
    if tenant.restricted:
        threads = Thread.objects.filter(project=tenant.project, **tenant.row_filter())
        return qs.filter(subject_id__in=threads.exclude(**{f"{kind}_id": None}).values(f"{kind}_id"))
    return qs


def profile_record(row: Profile) -> UserProfileRecord | AgentProfileRecord:
    """The SDK's record of a profile row: ``id`` the subject id, ``content`` its information."""
    cls = UserProfileRecord if row.kind == "user" else AgentProfileRecord
    return cls(id=row.subject_id, content=row.information, metadata=dict(row.metadata or {}),
               timestamp=row.updated_at.isoformat() if row.updated_at else None)


def profile_add(*, tenant: Tenant, kind: str, subject_id: Any, information: Any,
                metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
    """Store (or replace) the profile of one user or agent; return its id, the subject id."""
    kind = _check_kind(kind)
    subject = _subject(tenant, kind, subject_id, write=True)
    check_content(information, "information")
    meta = check_metadata(None if metadata is NOTSET else metadata)
    for _attempt in range(2):  # a concurrent first add of the same id: the second one updates
        try:
            with transaction.atomic():
                updated = Profile.objects.filter(project=tenant.project, kind=kind, subject_id=subject).update(
                    information=information, metadata=meta)
                if not updated:
                    Profile.objects.create(project=tenant.project, kind=kind, subject_id=subject,
                                           information=information, metadata=meta)
            return subject
        except IntegrityError:
            continue
    raise InvalidArgument(f"{kind}_id", "the profile changed concurrently; try again")


def profile_queryset(*, tenant: Tenant, kind: str, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                     limit: int | None | NotSet = NOTSET):
    """The validated query behind ``profile_list`` (also compiled for Oracle in tests/oracle)."""
    kind = _check_kind(kind)
    qs = Profile.objects.filter(project=tenant.project, kind=kind)
    qs = _within(qs, tenant, kind)
    qs = filter_metadata(qs, metadata_filter).order_by("created_at", "id")
    limit = check_limit(limit)
    return qs[:limit] if limit is not None else qs


def profile_list(**arguments: Any) -> list[UserProfileRecord | AgentProfileRecord]:
    """Profiles of one kind in the tenant's project, oldest first; ``metadata_filter`` (search grammar) and
    ``limit`` (omitted: 100, None: all) as ``memory.records.listing``."""
    return [profile_record(row) for row in profile_queryset(**arguments)]


def profile_get(*, tenant: Tenant, kind: str, subject_id: Any) -> UserProfileRecord | AgentProfileRecord:
    """One profile of the tenant's project; KeyError (``NotFound``) when there is none or it is outside a
    restricted tenant."""
    kind = _check_kind(kind)
    subject = _subject(tenant, kind, subject_id, write=False)
    row = _within(Profile.objects.filter(project=tenant.project, kind=kind, subject_id=subject), tenant,
                  kind).first()
    if row is None:
        raise NotFound(f"{kind}_id", subject)
    return profile_record(row)


def profile_delete(*, tenant: Tenant, kind: str, subject_id: Any) -> int:
    """Delete the profile of one user or agent; return 1, or 0 when there is none."""
    kind = _check_kind(kind)
    subject = _subject(tenant, kind, subject_id, write=True)
    deleted, _ = Profile.objects.filter(project=tenant.project, kind=kind, subject_id=subject).delete()
    return min(deleted, 1)


def erase_profiles(sender, *, project, subject: str, subject_id: str, **kwargs) -> dict[str, int]:
    """``subject_erased`` receiver: delete the erased user's or agent's profile (in the erasure's transaction)."""
    deleted, _ = Profile.objects.filter(project=project, kind=subject, subject_id=subject_id).delete()
    return {"profiles": deleted}
