"""``manage.py create_api_key <name>``: create an API key and print it once (scoped keys)."""

from __future__ import annotations

import datetime as dt

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from memory.core.errors import NotFound
from memory.records.tenancy import get_project
from threads.auth import api_key_create
from threads.models import PERMISSIONS


class Command(BaseCommand):
    """Create an active API key; the raw key goes to stdout alone, so scripts can capture it."""

    help = ("Create an API key for the JSON API and print it (it is stored hashed and cannot be shown again). "
            "It works in one project, with one permission, and optionally for one end user and agent only.")

    def add_arguments(self, parser):
        parser.add_argument("name", help="A label for the key, e.g. the agent application using it.")
        parser.add_argument("--project", default=None, help="The project's slug (default: the default project).")
        parser.add_argument("--permission", choices=PERMISSIONS, default="write",
                            help="read: reads and searches; write (default): also writes and deletes; "
                                 "admin: also manages the project's keys and erases users and agents.")
        parser.add_argument("--user-id", default=None, help="Act for this end user only.")
        parser.add_argument("--agent-id", default=None, help="Act for this agent only.")
        parser.add_argument("--expires-in-days", type=int, default=None, help="Refuse the key after this many days.")

    def handle(self, *args, name: str, **options):
        days = options["expires_in_days"]
        if days is not None and days < 1:
            raise CommandError("--expires-in-days must be at least 1")
        try:
            project = get_project(options["project"])
            row, raw = api_key_create(
                name=name, project=project, permission=options["permission"], user_id=options["user_id"],
                agent_id=options["agent_id"],
                expires_at=timezone.now() + dt.timedelta(days=days) if days is not None else None,
                created_by="manage.py",
            )
        except NotFound:
            raise CommandError(f"no project {options['project']!r} (create it in the admin or with create_project)")
        except (ValueError, TypeError, ValidationError) as exc:  # the engine's errors name the field
            raise CommandError(str(exc)) from None
        if options["verbosity"]:
            scope = ", ".join(f"{k} {v!r}" for k, v in (("user", row.user_id), ("agent", row.agent_id)) if v)
            self.stderr.write(self.style.SUCCESS(
                f"Created API key {row.pk} {row.name!r} ({row.prefix}…) in project {project.slug!r}, "
                f"permission {row.permission}{', for ' + scope if scope else ''}"
                f"{', expires ' + row.expires_at.isoformat() if row.expires_at else ''}. "
                "Store it now: it is not shown again."
            ))
        self.stdout.write(raw)
