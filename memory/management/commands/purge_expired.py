"""``manage.py purge_expired``: delete every record whose time-to-live is over
(``memory.services.erasure.expired_purge``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from memory.services.erasure import expired_purge


class Command(BaseCommand):
    """Prints the rows deleted per kind (workers also run this every ``OAM_PURGE_EXPIRED_SECONDS``)."""

    help = "Delete expired messages, memories and images with their search data (they were only hidden)."

    def handle(self, *args, **options):
        counts = expired_purge()
        if options["verbosity"]:
            self.stdout.write(", ".join(f"{kind}: {n}" for kind, n in sorted(counts.items())) or "nothing expired")
