"""``manage.py rotate_api_key <id>``: give a key a new secret and print it once; the old one stops working."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from threads.auth import api_key_rotate
from threads.management.keys import key_or_error


class Command(BaseCommand):
    """The new raw key goes to stdout alone; the key keeps its id, project, permission and restriction."""

    help = "Rotate an API key: a new secret (printed once), the old one refused at once."

    def add_arguments(self, parser):
        parser.add_argument("key_id", type=int, help="The key's id (list_api_keys).")

    def handle(self, *args, key_id: int, **options):
        row = key_or_error(key_id)
        try:
            row, raw = api_key_rotate(key=row)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["verbosity"]:
            self.stderr.write(self.style.SUCCESS(f"Rotated API key {row.pk} {row.name!r} ({row.prefix}…). "
                                                 "Store it now: it is not shown again."))
        self.stdout.write(raw)
