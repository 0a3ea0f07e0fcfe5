"""``manage.py import_locomo [path] [--samples conv-26 ...]``: import LoCoMo conversations.

Writes through ``memory.client.AgentMemory`` (the service layer), so the
imported turns are stored, embedded and searchable exactly as an agent's own
messages are. One user per sample (``user_id`` = sample id, ``agent_id`` =
"locomo"), one thread per session ("conv-26-s1"), one ``add_messages`` call,
hence one transaction, per session. Message ids are deterministic
("conv-26:D1:3"), so a rerun adds only what is missing and a complete import
adds nothing. ``--sessions N`` imports only the first N sessions of each
sample (a small sample for smoke runs, e.g. ``bench/locomo_qa.py --sessions 2``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, OutputWrapper
from django.db import connection
from tqdm import tqdm

from memory.client import AgentMemory, Thread
from memory.dev import locomo
from memory.embedders import get_embedder


class _TqdmStream:
    """Lets tqdm draw on a command's stderr.

    ``OutputWrapper.write`` appends a newline and styles stderr as an error on
    a terminal; tqdm needs its bytes written as they are.
    """

    def __init__(self, wrapper: OutputWrapper):
        self._wrapper = wrapper

    def write(self, text: str) -> None:
        self._wrapper.write(text, style_func=lambda s: s, ending="")

    def flush(self) -> None:
        self._wrapper.flush()


class Command(BaseCommand):
    """The importer; ``corpus`` is the module that reads the data (``memory.dev.locomo``; ``import_realtalk``
    sets ``memory.dev.realtalk``, which yields the same ``Sample`` shapes)."""

    corpus = locomo
    corpus_name = "LoCoMo"
    path_help = ("LoCoMo JSON file (default: $OAM_LOCOMO_PATH, else ../shared/data/locomo/locomo10.json "
                 "next to the repository)")
    help = (
        "Import LoCoMo conversations (locomo10.json) as threads and messages: one user per sample, "
        "one thread per session. Reruns add only what is missing."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "path", nargs="?", default=None,
            help=self.path_help,
        )
        parser.add_argument(
            "--samples", nargs="+", metavar="SAMPLE_ID", default=None,
            help="import only these samples, e.g. --samples conv-26 conv-30 (default: all)",
        )
        parser.add_argument(
            "--sessions", type=int, metavar="N", default=None,
            help="import only the first N sessions of each sample (default: all; N >= 1)",
        )

    def handle(self, *args, path: str | None = None, samples: list[str] | None = None,
               sessions: int | None = None, **options):
        verbosity = options["verbosity"]
        if sessions is not None and (isinstance(sessions, bool) or not isinstance(sessions, int) or sessions < 1):
            raise CommandError(f"--sessions must be a whole number >= 1, got {sessions!r}")
        source = Path(path) if path else self.corpus.default_data_path()
        if not source.exists():
            raise CommandError(f"{self.corpus_name} data not found: {source} (pass a path or set "
                               f"OAM_{self.corpus.AGENT_ID.upper()}_PATH)")
        try:
            parsed = list(self.corpus.iter_samples(source))
        except OSError as exc:
            raise CommandError(f"cannot read {source}: {exc}") from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"{source}: not {self.corpus_name} data ({exc!r})") from exc
        if samples:
            known = {s.sample_id for s in parsed}
            unknown = sorted(set(samples) - known)
            if unknown:
                raise CommandError(f"unknown sample id(s) {', '.join(unknown)}; "
                                   f"the file has {', '.join(sorted(known))}")
            parsed = [s for s in parsed if s.sample_id in set(samples)]
        if sessions is not None:
            parsed = [dataclasses.replace(s, sessions=s.sessions[:sessions]) for s in parsed]

        client = AgentMemory()
        # Load the model before the clock starts; its loader draws its own
        # progress bar on stderr, which -v0 must not show.
        with contextlib.redirect_stderr(io.StringIO()) if verbosity == 0 else contextlib.nullcontext():
            get_embedder()
        created = up_to_date = added = 0
        started = time.perf_counter()
        with tqdm(total=sum(s.turn_count for s in parsed), unit="turn", disable=verbosity == 0,
                  file=_TqdmStream(self.stderr), dynamic_ncols=False, ncols=100) as bar:
            for sample in parsed:
                for session in sample.sessions:
                    bar.set_description(self.corpus.thread_id(sample.sample_id, session.number))
                    new_thread, count = self._import_session(client, sample, session)
                    created += new_thread
                    up_to_date += not new_thread and count == 0
                    added += count
                    bar.update(len(session.turns))
        elapsed = time.perf_counter() - started
        if added and connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA optimize")  # planner statistics for the new rows
        if verbosity:
            rate = added / elapsed if elapsed > 0 else 0.0
            self.stdout.write(self.style.SUCCESS(
                f"{self.corpus_name} import: {len(parsed)} sample(s), {created} thread(s) created, {up_to_date} "
                f"already complete, {added} message(s) added in {elapsed:.1f} s ({rate:.1f} turns/s)"
            ))

    def _import_session(self, client: AgentMemory, sample: locomo.Sample,
                        session: locomo.Session) -> tuple[bool, int]:
        """Import one session as one thread; return (thread created, messages added).

        Thread creation and the ``add_messages`` batch are separate
        transactions, so a run stopped between them leaves an empty thread:
        the next run finds it and adds the batch. The batch itself is atomic.
        """
        tid = self.corpus.thread_id(sample.sample_id, session.number)
        messages = self.corpus.session_messages(sample.sample_id, session)
        try:
            thread, created = client.get_thread(tid), False
        except KeyError:
            thread, created = self._create_thread(client, sample, session, tid)
        if thread.user_id != sample.sample_id or thread.agent_id != self.corpus.AGENT_ID:
            raise CommandError(
                f"thread {tid} exists with user_id={thread.user_id!r}, agent_id={thread.agent_id!r}; "
                f"expected {sample.sample_id!r}, {self.corpus.AGENT_ID!r}"
            )
        if not created:
            present = {m.id for m in thread.get_messages(start=0, end=None)}
            messages = [m for m in messages if m["id"] not in present]
        if messages:
            try:
                thread.add_messages(messages)
            except ValueError as exc:  # e.g. a message id taken by another thread
                raise CommandError(f"{tid}: {exc}") from exc
        return created, len(messages)

    def _create_thread(self, client: AgentMemory, sample: locomo.Sample, session: locomo.Session,
                       tid: str) -> tuple[Thread, bool]:
        """Create the session's thread; return (thread, True), or (thread, False) if a concurrent run won."""
        try:
            thread = client.create_thread(
                thread_id=tid, user_id=sample.sample_id, agent_id=self.corpus.AGENT_ID,
                metadata={"source": self.corpus.AGENT_ID, "sample_id": sample.sample_id, "session": session.number,
                          "date_time": session.date_time, "speakers": list(sample.speakers)},
            )
        except ValueError:  # the id was taken between get_thread and create_thread
            return client.get_thread(tid), False
        return thread, True
