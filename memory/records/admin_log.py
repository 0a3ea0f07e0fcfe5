"""The Django admin's history of the engine's records, deleted with them (``memory.services.erasure``,
``memory.links``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType

#: Ids per DELETE of ``admin_log_erase``: under SQLite's bound-parameter limit and Oracle's 1,000-item IN list.
ADMIN_LOG_BATCH = 500


def admin_log_erase(model: type, keys: Iterable[Any]) -> int:
    """Delete the Django admin's history (``django.contrib.admin.models.LogEntry``) of records of ``model``
    (``keys``: their primary keys, the stored ids); return how many entries went. Call before the records go
    when ``keys`` is a lazy queryset: it is read only when the admin has history for ``model`` at all.

    The admin writes a row for every change and delete it makes, with the
    record's id and its ``str()`` (``object_repr``): the records' ``__str__``
    name only their kind and id, but entries written before did not (a
    memory's first 60 characters), and the id itself may be personal
    (found by a security review). So every erase function here deletes the
    history of what it deletes, the admin's own delete entry included (its
    ``delete_model`` runs after ``log_deletions``); counted as
    ``admin_log_entries``.
    """
    if not apps.is_installed("django.contrib.admin"):
        return 0
    entries = LogEntry.objects.filter(content_type=ContentType.objects.get_for_model(model))
    if not entries.exists():
        return 0
    keys = [str(value) for value in keys]
    return sum(entries.filter(object_id__in=keys[start:start + ADMIN_LOG_BATCH]).delete()[0]
               for start in range(0, len(keys), ADMIN_LOG_BATCH))
