"""``manage.py export_memory --user U [--project P] --output FILE``: one user's memory as JSON Lines.

The format and what it holds: ``memory.services.portability`` (threads, messages,
memories with their history, relations, images base64, summaries; never
vectors). ``--output -`` writes to stdout.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from memory.core.errors import DomainError
from memory.records.tenancy import get_project
from memory.services import portability


class Command(BaseCommand):
    help = ("Export one user's threads, messages, memories (with history), relations, images and summaries "
            "as JSON Lines.")

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True, help="the user id whose memory is exported")
        parser.add_argument("--project", default=None, help="project slug (default: the default project)")
        parser.add_argument("--output", required=True, help="file to write, or - for stdout")

    def handle(self, *args, user: str, project: str | None, output: str, **options):
        try:
            target = get_project(project)
        except (DomainError, LookupError) as exc:
            raise CommandError(f"project: {exc}") from exc
        try:
            if output == "-":
                counts = portability.export_to(sys.stdout, project=target, user_id=user)
            else:
                with open(output, "w", encoding="utf-8") as stream:
                    counts = portability.export_to(stream, project=target, user_id=user)
        except DomainError as exc:
            raise CommandError(str(exc)) from exc
        except OSError as exc:
            raise CommandError(f"cannot write {output}: {exc}") from exc
        if options["verbosity"] and output != "-":
            parts = ", ".join(f"{n} {kind}" for kind, n in counts.items() if kind != "header")
            self.stdout.write(f"exported to {output}: {parts}")
