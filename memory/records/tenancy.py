"""Projects: where one application's records live, and how ids stay unique within a project.

A ``memory.models.Project`` is the tenant: an application, or an environment of
one. Every stored row carries its ``project`` column, and every read and write
of the engine is made for one project: ``memory.client.AgentMemory(project=...)``
and the ``Thread`` handles it makes carry it, and the services, selectors and
search take it from the handle (or from the thread row, which has it).

Ids are the caller's (spec: thread_id, message_id, memory_id, image_id,
relation_id) and unique *within* a project: two applications may both name a
thread ``c4``. The database keeps each record under a **stored id**,
``"<project pk>:<public id>"`` (``stored_id``), so primary keys, foreign keys
and the id columns that refer to records (``Memory.thread_id``,
``SearchChunk.record_id``, ``RecordLink.source_id`` ...) are unique across
projects and a lookup by stored id can only find a row of that project. Public
ids go in and come out at the engine's edge: ``stored_id`` where a caller's id
enters a query, ``public_id`` where a row becomes a value (``memory.records.selectors``
``*_dto``, events, error messages). JSON columns that list ids
(``Message.parts``, ``Memory.source_message_ids``) keep public ids: they are
content, always read together with the row's project. ``user_id`` and
``agent_id`` are not records: they are stored as given, and filters pair them
with the project column.

The project pk is an integer and ends at the first ``:``, so ``public_id`` is
the exact inverse of ``stored_id`` for any public id (which may contain ``:``).

Staff (people, not API keys) reach projects through ``staff_projects``: a
superuser every project, another staff user the projects they are a member
of (``Project.members``); every staff door asks it (``staff_project`` for one
named in a URL or a WebSocket query, the admin's ``ProjectScopedAdmin``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.core.validators import validate_slug
from django.db import IntegrityError, transaction

from memory.core.errors import Conflict, InvalidArgument, InvalidType, NotFound, OutOfScope
from memory.core.types import NOTSET, SearchScope
from memory.models import Project

#: Slug of the project that holds everything stored before projects existed
#: (migration 0006) and that ``AgentMemory()`` uses when given none.
DEFAULT_PROJECT = "default"


def project_create(*, slug: Any, name: Any = "") -> Any:
    """Create a project (a new tenant); return the row. ``slug``: letters, digits, ``-`` and ``_``, at most 50
    characters, not taken (ValueError naming ``slug`` otherwise); ``name``: a label."""

    if not isinstance(slug, str):
        raise InvalidType("slug", "must be a string")
    if not isinstance(name, str):
        raise InvalidType("name", "must be a string")
    try:
        validate_slug(slug)
    except Exception:
        raise InvalidArgument("slug", "must be letters, digits, - or _") from None
    if len(slug) > 50 or len(name) > 200:
        raise InvalidArgument("slug" if len(slug) > 50 else "name", "is too long (slug 50, name 200 characters)")
    try:
        with transaction.atomic():
            return Project.objects.create(slug=slug, name=name)
    except IntegrityError:
        raise Conflict("slug", slug) from None


def get_project(project: Any = None):
    """The ``Project`` row for ``project``: a row (returned as is), a slug, or None for the default project.

    The default project is created on first use (the migration creates it; a
    flushed test database may not have it). Raises TypeError for another type
    and KeyError (``NotFound``) for an unknown slug.
    """
    if isinstance(project, Project):
        return project
    if project is None:
        row, _ = Project.objects.get_or_create(slug=DEFAULT_PROJECT, defaults={"name": "Default project"})
        return row
    if not isinstance(project, str):
        raise InvalidType("project", f"must be a Project, a project slug or None, not {type(project).__name__}")
    if not project.strip():
        raise InvalidArgument("project", "must not be empty")
    row = Project.objects.filter(slug=project).first()
    if row is None:
        raise NotFound("project", project)
    return row


def staff_projects(user: Any):
    """The projects ``user`` may see and change as staff: a ``QuerySet[Project]``.

    The one rule every staff door applies (the staff pages, the search
    playground and context-card preview, the staff WebSocket, the Django
    admin): an active superuser sees every project; another active staff user
    the projects they are a member of (``Project.members``); anyone else
    (anonymous, inactive, not staff) none.
    """
    if not (user is not None and user.is_authenticated and user.is_active and user.is_staff):
        return Project.objects.none()
    if user.is_superuser:
        return Project.objects.all()
    return Project.objects.filter(members=user)


def staff_project(user: Any, project: str | None) -> Any:
    """The project ``project`` (a slug; None: the default project) if ``user`` may see it (``staff_projects``).

    Raises KeyError (``NotFound`` naming ``project``) for an unknown slug and,
    alike, for a project the user is not a member of: a staff user cannot tell
    another project from one that does not exist (the staff pages answer 404,
    the WebSocket closes with 4404). The default project is created on first
    use, as ``get_project`` does.
    """
    row = get_project(project)
    if not staff_projects(user).filter(pk=row.pk).exists():
        raise NotFound("project", row.slug)
    return row


@dataclass(frozen=True)
class Tenant:
    """Who a client acts for: a project, and optionally one end user and/or one agent of it.

    ``user_id``/``agent_id`` None: any user/agent of the project; a string:
    only that one (an API key with a fixed ``user_id`` makes such a client,
    ``threads.auth``). A restricted client sees only the threads of its user
    and agent (others are "not found"), writes only records of them, and
    searches only them; a value naming another raises ``OutOfScope``
    (ValueError; HTTP 403) naming the argument.
    """

    project: Any  # memory.models.Project
    user_id: str | None = None
    agent_id: str | None = None

    @property
    def restricted(self) -> bool:
        """Whether a fixed user or agent applies."""
        return self.user_id is not None or self.agent_id is not None

    def fill(self, field: str, value: Any) -> Any:
        """An omitted ``user_id``/``agent_id`` becomes the fixed one; a given one must equal it (``OutOfScope``)."""
        fixed = getattr(self, field)
        if fixed is None:
            return value
        if value is NOTSET:
            return fixed
        if value != fixed:
            raise OutOfScope(field, f"this client acts for {field} {fixed!r} only, not {value!r}")
        return value

    def row_filter(self) -> dict[str, str]:
        """ORM filters for rows with ``user_id``/``agent_id`` columns within the restriction (``{}``: none)."""
        return {f: getattr(self, f) for f in ("user_id", "agent_id") if getattr(self, f) is not None}

    def allows(self, row: Any) -> bool:
        """Whether a stored row (a thread, or anything with ``user_id``/``agent_id``) is within the restriction."""
        return ((self.user_id is None or row.user_id == self.user_id)
                and (self.agent_id is None or row.agent_id == self.agent_id))

    def fill_scope(self, scope: Any, arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """A search's ``scope`` (a ``SearchScope`` or None) and explicit scope ``arguments`` with the fixed
        user and agent in place of unset ids, before the search's rules run (``memory.search.ranking.run_search``).

        So a user-restricted client never needs to pass ``user_id`` (the SDK's "client searches
        require explicit user scoping" was checked first, found by an attacker): its user is explicit. The
        ``exact_*`` flags stay as given, and a given id stays too (``limit_scope`` checks it). The ids go into
        ``scope`` when there is one, else into ``arguments`` (the two stay exclusive).
        """
        fixed = self.row_filter()
        if isinstance(scope, SearchScope):
            return replace(scope, **{f: v for f, v in fixed.items() if getattr(scope, f) is NOTSET}), arguments
        if scope is None:
            return scope, {**arguments, **{f: v for f, v in fixed.items() if arguments.get(f, NOTSET) is NOTSET}}
        return scope, arguments

    def limit_scope(self, scope: SearchScope) -> SearchScope:
        """A search scope within the restriction: an open dimension is pinned to the fixed id; one naming
        another id (or ``exact_*_match=False`` over it) raises ``OutOfScope``."""
        for dimension in ("user", "agent"):
            fixed = getattr(self, f"{dimension}_id")
            if fixed is None:
                continue
            field, exact = f"{dimension}_id", f"exact_{dimension}_match"
            value = getattr(scope, field)
            if value is NOTSET:
                scope = replace(scope, **{field: fixed, exact: True})
            elif value != fixed:
                raise OutOfScope(field, f"this client acts for {field} {fixed!r} only, not {value!r}")
            elif getattr(scope, exact) is False:  # unset counts as exact for a given id (memory.search.request.scope_q)
                raise OutOfScope(exact, f"this client acts for {field} {fixed!r} only: matching must be exact")
        return scope
