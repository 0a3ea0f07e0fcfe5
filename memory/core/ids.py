"""Stored and public ids: a record of project ``P`` with the caller's id ``x`` is stored under ``"P:x"``.

The string rules only, with no model: ``memory.models`` and every module use
them; ``memory.records.tenancy`` holds the project rules.
"""

from __future__ import annotations

from collections.abc import Iterable

SEPARATOR = ":"


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
