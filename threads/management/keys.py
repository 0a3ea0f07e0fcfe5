"""What the key commands share."""

from __future__ import annotations

from django.core.management.base import CommandError

from threads.models import ApiKey


def key_or_error(key_id: int) -> ApiKey:
    """The API key ``key_id`` (any project, revoked or not), or ``CommandError``."""
    row = ApiKey.objects.select_related("project").filter(pk=key_id).first()
    if row is None:
        raise CommandError(f"no API key {key_id}")
    return row
