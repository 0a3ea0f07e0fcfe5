"""``manage.py list_api_keys``: the API keys, one a line (never the keys themselves)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from memory.core.errors import NotFound
from memory.records.tenancy import get_project
from threads.auth import api_key_list


class Command(BaseCommand):
    """Tab-separated: id, project, name, prefix, permission, user, agent, state, expires, last used."""

    help = "List API keys (id, project, name, prefix, permission, fixed user and agent, state, expiry, last use)."

    def add_arguments(self, parser):
        parser.add_argument("--project", default=None, help="Only this project's keys (a slug).")
        parser.add_argument("--active", action="store_true", help="Leave revoked keys out.")

    def handle(self, *args, **options):
        project = None
        if options["project"] is not None:
            try:
                project = get_project(options["project"])
            except NotFound:
                raise CommandError(f"no project {options['project']!r}") from None
        for row in api_key_list(project=project, include_revoked=not options["active"]):
            state = "active" if row.is_active else f"revoked {row.revoked_at.isoformat()}"
            fields = [row.pk, row.project.slug, row.name, f"{row.prefix}…", row.permission, row.user_id or "-",
                      row.agent_id or "-", state, row.expires_at.isoformat() if row.expires_at else "-",
                      row.last_used_at.isoformat() if row.last_used_at else "-"]
            self.stdout.write("\t".join(str(f) for f in fields))
