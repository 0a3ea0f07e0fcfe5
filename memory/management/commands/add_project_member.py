"""``manage.py add_project_member <slug> <username> [--remove]``: who may see a project as staff.

Staff by project: superusers see every project, other
staff users the projects they are members of (``Project.members``,
``memory.records.tenancy.staff_projects``). This grants (or, with ``--remove``,
withdraws) one membership; the admin's project page does the same for
superusers.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memory.core.errors import NotFound
from memory.records.tenancy import get_project


class Command(BaseCommand):
    """Prints what the membership is now."""

    help = "Let a staff user see a project on the staff pages, the admin and the staff WebSocket (or stop, --remove)."

    def add_arguments(self, parser):
        parser.add_argument("slug", help="The project, e.g. acme-support.")
        parser.add_argument("username", help="A staff user (manage.py createsuperuser, or the admin).")
        parser.add_argument("--remove", action="store_true", help="Withdraw the membership instead.")

    def handle(self, *args, slug: str, username: str, remove: bool, **options):
        try:
            project = get_project(slug)
        except NotFound:
            raise CommandError(f"no project {slug!r} (manage.py create_project)") from None
        users = get_user_model()
        user = users._default_manager.filter(**{users.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if remove:
            project.members.remove(user)
            self.stdout.write(f"{username} is not a member of {project.slug}")
        else:
            project.members.add(user)
            self.stdout.write(f"{username} is a member of {project.slug}")
        if user.is_superuser:
            self.stderr.write(f"note: {username} is a superuser and sees every project whatever the membership")
        elif not (user.is_staff and user.is_active):
            self.stderr.write(f"note: {username} is not active staff: the staff pages and the admin refuse them")
