"""Stored ids for tests that read tables directly.

Records are stored under ``"<project pk>:<public id>"`` (``memory.records.tenancy``);
these helpers give the stored form of a public id in a project (default: the
``default`` project, which ``AgentMemory()`` uses).
"""

from memory.core.ids import stored_id
from memory.records.tenancy import get_project


def default_project_id() -> int:
    """The pk of the default project (created on first use in a flushed test database)."""
    return get_project(None).pk


def key(public: str, project=None) -> str:
    """The stored id of ``public`` in ``project`` (a ``Project``, a slug, or None for the default project)."""
    return stored_id(get_project(project).pk, public)
