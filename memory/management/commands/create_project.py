"""``manage.py create_project <slug>``: a new project (tenant), for its API keys (``create_api_key --project``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from memory.records.tenancy import project_create


class Command(BaseCommand):
    """Prints the new project's slug."""

    help = "Create a project: records and API keys of one application, kept apart from every other."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="Letters, digits, - and _ (at most 50), e.g. acme-support.")
        parser.add_argument("--name", default="", help="A label.")

    def handle(self, *args, slug: str, name: str, **options):
        try:
            project = project_create(slug=slug, name=name)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(project.slug)
