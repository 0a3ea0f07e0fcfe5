"""Compile a spec ``metadata_filter`` mapping into a Django ``Q`` that runs in SQL.

Spec (search, get_context_card: ``metadata_filter``): entries are ANDed; a
value that is not an operator dict matches exactly (the key must exist);
nested dicts match nested objects recursively; scalars and lists match
exactly (list order and length too).

This module compiles the exact-match part of the grammar with Django JSON key
transforms, which the SQLite and Oracle backends both translate to their JSON
functions. The operators (``$array_contains``, ``$array_contains_any``,
``$not``) are rejected with a ValueError until the search issue adds them.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from memory.errors import InvalidArgument

OPERATORS = ("$array_contains", "$array_contains_any", "$not")


def compile_filter(metadata_filter: Any, field: str = "metadata") -> Q:
    """Return a ``Q`` over JSON column ``field`` for ``metadata_filter``.

    ``None`` gives an empty ``Q`` (no filtering). Raises ValueError when the
    filter is not a dict, a key is not a non-empty string, or an operator is
    used that is not supported.
    """
    if metadata_filter is None:
        return Q()
    if not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    return _compile(metadata_filter, [field], "metadata_filter")


def _compile(spec: dict, path: list[str], where: str) -> Q:
    q = Q()
    for key, value in spec.items():
        if not isinstance(key, str) or not key:
            raise InvalidArgument(where, "keys must be non-empty strings")
        if key.startswith("$"):
            raise InvalidArgument(where, f"operator {key!r} is only allowed as a field-level operator dict")
        here = f"{where}.{key}"
        if isinstance(value, dict) and any(k.startswith("$") for k in value if isinstance(k, str)):
            unknown = [k for k in value if k not in OPERATORS]
            if unknown:
                raise InvalidArgument(here, f"unknown operator(s) {unknown}; allowed: {list(OPERATORS)}")
            raise InvalidArgument(here, f"operators {list(value)} are not supported yet")
        if isinstance(value, dict):
            if not value:
                q &= Q(**{"__".join([*path, key]) + "__isnull": False})
            q &= _compile(value, [*path, key], here)
        else:
            q &= Q(**{"__".join([*path, key]): value})
    return q
