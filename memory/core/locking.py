"""Row locks that work on SQLite and Oracle.

``queryset.select_for_update().first()`` adds a row limit, and Oracle cannot
combine ``FOR UPDATE`` with one (ORA-02014; Django's
``supports_select_for_update_with_limit`` is False there and raises
``NotSupportedError``). Every lookup here is by primary key, so it reads at
most one row without a limit.
"""

from __future__ import annotations

from django.db.models import QuerySet


def lock_first(queryset: QuerySet):
    """Return the first row of ``queryset`` locked ``FOR UPDATE``, or None; no LIMIT, no ORDER BY.

    Meant for primary-key lookups (one row at most); SQLite ignores the lock
    clause (its IMMEDIATE transactions already hold the write lock).
    """
    for row in queryset.select_for_update().order_by():
        return row
    return None
