#!/usr/bin/env python
"""Benchmark: time to compute and render the staff quality dashboard over a large project.

    .venv/bin/python bench/quality_dashboard.py [--memories 100000] [--jobs 20000] [--runs 20] [--quiet]

Uses its own fresh SQLite file, ``var/bench-quality.sqlite3`` (removed and
migrated at the start, left in place afterwards), never the development
database. Rows are written with ``bulk_create`` straight into the tables the
dashboard reads (``memory.reports.quality``: memories, extraction jobs, relations,
memory versions), spread uniformly over the last 400 days and over
``--threads`` threads of one project, a tenth of the memories pending; no
embedding is computed (the dashboard reads none). Then, after one warm-up each:

* ``memory.reports.quality.dashboard`` for the project and for one thread, for every
  range (1, 7, 30, 90, 365 days), ``--runs`` times;
* the whole page, ``GET /staff/projects/<slug>/quality/?days=30`` through
  Django's test client as a superuser, ``--runs`` times.

Prints one JSON object: p50/p95 milliseconds per case and the row counts.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import percentile, use_sqlite  # noqa: E402

DB_PATH = ROOT / "var" / "bench-quality.sqlite3"
TYPES = ("memory", "fact", "guideline", "preference")


def _fresh_database() -> None:
    """A new, empty SQLite file and no LLM; must run before ``django.setup()``."""
    use_sqlite(DB_PATH, OAM_LLM_BASE_URL="")


def _timed(call, runs: int) -> dict:
    call()  # warm-up
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(statistics.median(samples), 1), "p95_ms": round(percentile(samples, 0.95), 1)}


def _fill(args, rng: random.Random):
    import datetime as dt

    from django.utils import timezone

    from memory.core.ids import stored_id
    from memory.models import ExtractionJob, Memory, MemoryVersion, Project, RecordLink, Thread

    project = Project.objects.create(slug="bench-quality")
    now = timezone.now()

    def when():
        return now - dt.timedelta(seconds=rng.uniform(0, 400 * 86400))

    threads = Thread.objects.bulk_create([
        Thread(id=stored_id(project.pk, f"t{i}"), project=project, user_id=f"u{i % 50}", agent_id="a")
        for i in range(args.threads)])
    memories = [Memory(id=stored_id(project.pk, f"m{i}"), project=project, memory_type=TYPES[i % 4],
                       content=f"memory {i}", user_id="u", thread_id=threads[i % len(threads)].pk,
                       status="pending" if i % 10 == 0 else "valid", created_at=when())
                for i in range(args.memories)]
    Memory.objects.bulk_create(memories, batch_size=5000)
    jobs = []
    for i in range(args.jobs):
        finished = when()
        jobs.append(ExtractionJob(thread=threads[i % len(threads)], project=project, from_seq=1, to_seq=8,
                                  status="done", created_at=finished, finished_at=finished,
                                  messages_extracted=8, memories_created=rng.randint(0, 5),
                                  duplicates_skipped=rng.randint(0, 3), rejected_not_text=rng.randint(0, 1),
                                  rejected_unknown_type=0, rejected_no_source=rng.randint(0, 1),
                                  rejected_repeated=rng.randint(0, 2)))
    ExtractionJob.objects.bulk_create(jobs, batch_size=5000)
    links, versions = [], []
    for i in range(0, min(args.memories, 2 * args.relations), 2):
        a, b = memories[i], memories[i + 1]
        kind = "supersedes" if i % 4 == 0 else "contradicts"
        created = when()
        links.append(RecordLink(id=stored_id(project.pk, f"r{i}"), project=project, thread_id=a.thread_id,
                                source_id=b.pk, source_type=b.memory_type, target_id=a.pk, target_type=a.memory_type,
                                relation_type=kind, opposite_relation_type="is_superseded_by" if kind == "supersedes"
                                else kind, pair_key=f"{a.pk}|{b.pk}", created_at=created))
        if kind == "supersedes":
            versions.append(MemoryVersion(project=project, memory_id=a.pk, version=1, action="invalidate",
                                          actor_kind="client", relation_id=stored_id(project.pk, f"r{i}"),
                                          thread_id=a.thread_id, created_at=created))
    RecordLink.objects.bulk_create(links, batch_size=5000)
    MemoryVersion.objects.bulk_create(versions, batch_size=5000)
    return project, threads[0], {"memories": len(memories), "jobs": len(jobs), "relations": len(links),
                                 "versions": len(versions), "threads": len(threads)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--relations", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=500)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    _fresh_database()
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from memory.reports import quality

    call_command("migrate", interactive=False, verbosity=0)
    started = time.perf_counter()
    project, thread, counts = _fill(args, random.Random(args.seed))
    fill_seconds = round(time.perf_counter() - started, 1)
    out = {"rows": counts, "fill_seconds": fill_seconds, "dashboard": {}}
    for days in quality.RANGES:
        out["dashboard"][f"project_{days}d"] = _timed(lambda: quality.dashboard(project=project, days=days), args.runs)
        out["dashboard"][f"thread_{days}d"] = _timed(
            lambda: quality.dashboard(project=project, thread=thread, days=days), args.runs)
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    browser = Client()
    browser.force_login(get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw"))
    url = f"/staff/projects/{project.slug}/quality/?days=30"

    def page():
        response = browser.get(url)
        assert response.status_code == 200, response.status_code

    out["page_30d"] = _timed(page, args.runs)
    out["page_bytes"] = len(browser.get(url).content)
    if not args.quiet:
        print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
