"""``manage.py erase_user <user_id>`` / ``--agent``: erase everything a project holds about one user or agent."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from memory.client import AgentMemory
from memory.core.errors import NotFound


class Command(BaseCommand):
    """Prints the receipt as JSON (``memory.services.erasure.Erasure``)."""

    help = ("Erase everything a project holds about one end user (GDPR Art. 17), or with --agent one agent, "
            "and print the receipt.")

    def add_arguments(self, parser):
        parser.add_argument("subject_id", help="The user id (or, with --agent, the agent id).")
        parser.add_argument("--project", default=None, help="The project's slug (default: the default project).")
        parser.add_argument("--agent", action="store_true", help="Erase an agent rather than a user.")

    def handle(self, *args, subject_id: str, **options):
        try:
            client = AgentMemory(project=options["project"])
            erase = client.erase_agent if options["agent"] else client.erase_user
            receipt = erase(subject_id, requested_by="manage.py")
        except NotFound:
            raise CommandError(f"no project {options['project']!r}") from None
        except (ValueError, TypeError, TimeoutError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(json.dumps({
            "receipt_id": receipt.receipt_id, "project": receipt.project, "subject": receipt.subject,
            "subject_id": receipt.subject_id, "found": receipt.found, "counts": receipt.counts,
            "storage": receipt.storage, "completed_at": receipt.completed_at.isoformat(),
        }, indent=2))
