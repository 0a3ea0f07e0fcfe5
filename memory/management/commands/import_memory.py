"""``manage.py import_memory FILE [--project P] [--merge] [--trust-review-state]``: load an ``export_memory``
file, all or nothing.

Rules: ``memory.services.portability`` (the module docstring): a file is untrusted input, checked line by
line with the API's validators and limits, held to its header's user, never changing a record the project
holds; ``--merge`` adds to that user's existing threads, ``--trust-review-state`` keeps the file's
``pending`` and its history as it is (snapshots, actors). Any refusal is a ``CommandError`` naming the
line, the field and the rule, and nothing is written. Embeddings are computed here, with a progress bar
on stderr (tqdm); then one transaction.
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
    help = ("Import a JSON Lines file written by export_memory into a project: one user's records, all or nothing, "
            "never changing a record the project holds (reruns add nothing).")

    def add_arguments(self, parser):
        parser.add_argument("path", help="the export file")
        parser.add_argument("--project", default=None, help="target project slug (default: the default project)")
        parser.add_argument("--merge", action="store_true",
                            help="also add new records to threads (and relations to memories) that the file's user "
                                 "has in the project already; never another user's, never changing a record")
        parser.add_argument("--trust-review-state", action="store_true",
                            help="keep the file's pending flags and history: by default every imported memory "
                                 "and history snapshot of a type that waits for review (guideline, preference) is "
                                 "pending, and every imported history entry names the import as its actor")

    def handle(self, *args, path: str, project: str | None, merge: bool = False, trust_review_state: bool = False,
               **options):
        try:
            target = get_project(project)
        except (DomainError, LookupError) as exc:
            raise CommandError(f"project: {exc}") from exc
        try:
            with open(path, encoding="utf-8") as stream:
                lines = portability.read_lines(stream)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        except UnicodeDecodeError as exc:
            raise CommandError(f"{path}: is not UTF-8 text ({exc.reason} at byte {exc.start}); nothing was "
                               "imported") from exc
        except DomainError as exc:
            raise CommandError(f"{path}: {exc}; nothing was imported") from exc
        bar = tqdm(total=0, unit="text", desc="embedding", file=_TqdmStream(self.stderr),
                   disable=options["verbosity"] == 0)

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            result = portability.import_lines(lines, project=target, merge=merge,
                                              trust_review_state=trust_review_state, progress=progress)
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
            changed = ", ".join(f"{n} {what}" for what, n in sorted(result["adjusted"].items()) if n)
            if changed:
                self.stdout.write(f"changed on the way in: {changed}")
