"""``manage.py import_memory FILE [--project P]``: load an ``export_memory`` file, all or nothing, idempotently.

Rules: ``memory.services.portability.import_lines`` (records already present are
skipped; embeddings are computed here; one transaction). A progress bar of
the embedding work goes to stderr (tqdm).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from tqdm import tqdm

from memory.core.errors import DomainError
from memory.management.commands.import_locomo import _TqdmStream
from memory.records.tenancy import get_project
from memory.services import portability


class Command(BaseCommand):
    help = "Import a JSON Lines file written by export_memory into a project (all or nothing; reruns add nothing)."

    def add_arguments(self, parser):
        parser.add_argument("path", help="the export file")
        parser.add_argument("--project", default=None, help="target project slug (default: the default project)")

    def handle(self, *args, path: str, project: str | None, **options):
        try:
            target = get_project(project)
        except (DomainError, LookupError) as exc:
            raise CommandError(f"project: {exc}") from exc
        try:
            with open(path, encoding="utf-8") as stream:
                lines = portability.read_lines(stream)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        except DomainError as exc:
            raise CommandError(f"{path}: {exc}") from exc
        bar = tqdm(total=0, unit="text", desc="embedding", file=_TqdmStream(self.stderr),
                   disable=options["verbosity"] == 0)

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            result = portability.import_lines(lines, project=target, progress=progress)
        except DomainError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from exc
        except DatabaseError as exc:
            raise CommandError(f"{path}: the database refused the import ({exc}); nothing was imported") from exc
        finally:
            bar.close()
        if options["verbosity"]:
            made = ", ".join(f"{n} {kind}" for kind, n in sorted(result["created"].items()) if n) or "nothing"
            kept = ", ".join(f"{n} {kind}" for kind, n in sorted(result["skipped"].items()) if n) or "nothing"
            self.stdout.write(f"imported into {target.slug}: {made}; already present: {kept}")
