"""``manage.py revoke_api_key <id>``: refuse a key from now on (its row stays, for the audit trail)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from threads.auth import api_key_revoke
from threads.management.keys import key_or_error


class Command(BaseCommand):
    """Revoking twice is harmless."""

    help = "Revoke an API key for good."

    def add_arguments(self, parser):
        parser.add_argument("key_id", type=int, help="The key's id (list_api_keys).")

    def handle(self, *args, key_id: int, **options):
        row = key_or_error(key_id)
        row = api_key_revoke(key=row)
        if options["verbosity"]:
            self.stdout.write(self.style.SUCCESS(f"Revoked API key {row.pk} {row.name!r} ({row.prefix}…) at "
                                                 f"{row.revoked_at.isoformat()}."))
