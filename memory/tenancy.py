"""Projects: where one application's records live, and how ids stay unique within a project (issue #12).

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
enters a query, ``public_id`` where a row becomes a value (``memory.selectors``
``*_dto``, events, error messages). JSON columns that list ids
(``Message.parts``, ``Memory.source_message_ids``) keep public ids: they are
content, always read together with the row's project. ``user_id`` and
``agent_id`` are not records: they are stored as given, and filters pair them
with the project column.

The project pk is an integer and ends at the first ``:``, so ``public_id`` is
the exact inverse of ``stored_id`` for any public id (which may contain ``:``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory.errors import InvalidArgument, InvalidType

SEPARATOR = ":"
#: Slug of the project that holds everything stored before projects existed
#: (migration 0006) and that ``AgentMemory()`` uses when given none.
DEFAULT_PROJECT = "default"


def stored_id(project_id: int, public: str) -> str:
    """The id a record of project ``project_id`` is stored under: ``"<project_id>:<public>"``."""
    return f"{int(project_id)}{SEPARATOR}{public}"


def stored_ids(project_id: int, public: Iterable[str]) -> list[str]:
    """``stored_id`` of each id, in order."""
    return [stored_id(project_id, value) for value in public]


def public_id(stored: str | None) -> str | None:
    """The caller's id of a stored id (None stays None). Raises ValueError for a value with no project part."""
    if stored is None:
        return None
    project, separator, public = stored.partition(SEPARATOR)
    if not separator or not project.isdigit():
        raise ValueError(f"{stored!r} is not a stored id (<project pk>:<id>)")
    return public


def public_ids(stored: Iterable[str]) -> list[str]:
    """``public_id`` of each stored id, in order."""
    return [public_id(value) for value in stored]


def project_of(stored: str) -> int:
    """The project pk a stored id belongs to."""
    return int(stored.partition(SEPARATOR)[0])


def get_project(project: Any = None):
    """The ``Project`` row for ``project``: a row (returned as is), a slug, or None for the default project.

    The default project is created on first use (the migration creates it; a
    flushed test database may not have it). Raises TypeError for another type
    and KeyError (``NotFound``) for an unknown slug.
    """
    from memory.errors import NotFound
    from memory.models import Project

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
