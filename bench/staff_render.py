#!/usr/bin/env python
"""Benchmark: time to render the staff thread page for the largest LoCoMo session.

    .venv/bin/python bench/staff_render.py [--runs 50] [--memories 60] [--quiet]

Uses its own fresh SQLite file, ``var/bench-staff.sqlite3`` (removed and
migrated at the start, left in place afterwards), never the development
database. Steps:

1. find the LoCoMo session with the most turns (``memory.dev.locomo``) and import
   its whole conversation with ``manage.py import_locomo`` (the service layer:
   embedded, searchable);
2. give that session's thread ``--memories`` manual memories (each turn's text
   in turn, types cycling through memory/fact/guideline/preference) and a
   relation between every pair of consecutive memories (``supports``), the
   way extraction would leave a busy thread;
3. log a staff user in with Django's test client and GET
   ``/staff/projects/<project>/threads/<thread_id>/`` ``--runs`` times after two warm-up
   requests; every response must be 200 with every message and memory on it.

Timing is the whole request through Django (middleware, auth, the
``memory.reports.browse`` reads, template rendering) in this process, without a
network. Prints one JSON object on stdout: p50/p95/mean/min/max milliseconds,
the page size and the numbers of messages, memories and relations rendered.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import percentile, use_sqlite  # noqa: E402

DB_PATH = ROOT / "var" / "bench-staff.sqlite3"
TYPES = ("memory", "fact", "guideline", "preference")


def _fresh_database() -> None:
    """A new, empty SQLite file and no LLM (rendering never calls one, and memories are added by hand)."""
    use_sqlite(DB_PATH, OAM_LLM_BASE_URL="")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50, help="timed page loads (default 50)")
    parser.add_argument("--memories", type=int, default=60, help="manual memories on the thread (default 60)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    _fresh_database()
    import django

    django.setup()

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from memory.client import AgentMemory
    from memory.dev import locomo
    from memory.embedders import get_embedder

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    call_command("migrate", interactive=False, verbosity=0)
    samples = list(locomo.iter_samples(locomo.default_data_path()))
    turns, sample, session = max((len(s.turns), sample, s) for sample in samples for s in sample.sessions)
    thread_id = locomo.thread_id(sample.sample_id, session.number)
    say(f"largest session: {thread_id} ({turns} turns); importing {sample.sample_id}")
    get_embedder().embed(["warm up"])
    started = time.perf_counter()
    call_command("import_locomo", samples=[sample.sample_id], verbosity=0)
    import_seconds = time.perf_counter() - started

    thread = AgentMemory(llm=None).get_thread(thread_id)
    say(f"adding {args.memories} memories and {max(0, args.memories - 1)} relations")
    memory_ids = []
    for i in range(args.memories):
        turn = session.turns[i % len(session.turns)]
        kind = TYPES[i % len(TYPES)]
        memory_ids.append(thread.add_memory(f"{turn.speaker}: {turn.text}"[:400], memory_type=kind,
                                            metadata={"bench": "staff_render", "dia_id": turn.dia_id},
                                            autonomous_linking=False))
    for i in range(1, len(memory_ids)):
        thread.link_records(memory_ids[i], TYPES[i % len(TYPES)], memory_ids[i - 1], TYPES[(i - 1) % len(TYPES)],
                            "supports")

    # No setup_test_environment(): it would instrument template rendering and slow every request.
    user = get_user_model().objects.create_user("bench", password="bench-only", is_staff=True)
    thread.project.members.add(user)  # staff who are not superusers see their projects only
    browser = Client()
    browser.force_login(user)
    url = f"/staff/projects/{thread.project.slug}/threads/{thread_id}/"
    for _ in range(2):
        browser.get(url)
    timings, size = [], 0
    say(f"rendering {url} {args.runs} times")
    for _ in range(args.runs):
        started = time.perf_counter()
        response = browser.get(url)
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"GET {url} answered {response.status_code}")
        size = len(response.content)
    html = response.content.decode()
    messages = html.count('<li class="message')
    memories = html.count('<li class="memory')
    relations = html.count("data-relation-id=")
    if messages != turns or memories != args.memories:
        raise SystemExit(f"page shows {messages} messages and {memories} memories, expected {turns} and "
                         f"{args.memories}")
    result = {
        "benchmark": "staff thread page render (Django test client, SQLite, no network)",
        "thread_id": thread_id,
        "sample": sample.sample_id,
        "messages_rendered": messages,
        "memories_rendered": memories,
        "relations_rendered": relations,
        "runs": args.runs,
        "p50_ms": round(statistics.median(timings), 1),
        "p95_ms": round(percentile(timings, 0.95), 1),
        "mean_ms": round(statistics.fmean(timings), 1),
        "min_ms": round(min(timings), 1),
        "max_ms": round(max(timings), 1),
        "page_bytes": size,
        "import_seconds": round(import_seconds, 1),
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
