"""``manage.py create_api_key <name>``: create an API key and print it once."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from threads.auth import api_key_create


class Command(BaseCommand):
    """Create an active API key; the raw key goes to stdout alone, so scripts can capture it."""

    help = "Create an API key for the JSON API and print it (it is stored hashed and cannot be shown again)."

    def add_arguments(self, parser):
        parser.add_argument("name", help="A label for the key, e.g. the agent application using it.")

    def handle(self, *args, name: str, **options):
        if not name.strip():
            raise CommandError("name must not be empty")
        try:
            row, raw = api_key_create(name=name)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from None
        if options["verbosity"]:
            self.stderr.write(self.style.SUCCESS(
                f"Created API key {row.name!r} ({row.prefix}…). Store it now: it is not shown again."
            ))
        self.stdout.write(raw)
