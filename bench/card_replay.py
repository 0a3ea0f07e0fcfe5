#!/usr/bin/env python
"""Benchmark: the cost of the context-card log (issue #32, part 3) and of replaying a card with ``as_of``.

    .venv/bin/python bench/card_replay.py [--samples conv-26] [--repeats 5] [--reuse]

Imports LoCoMo conversations (``$OAM_LOCOMO_PATH``, ``manage.py import_locomo``: one thread per session) into its
own SQLite file, ``var/bench-card-replay.sqlite3`` (removed and migrated first unless ``--reuse``), without an LLM
(transcript summaries), with LoCoMo's per-session observations as ``fact`` memories (``bench/locomo_import.py``'s
``_add_observations``: what extraction would store), so that cards hold relevant results. Then for each session
thread, ``--repeats`` rounds, interleaved per thread:

* ``present_unlogged``: ``get_context_card(max_recent_messages=2)`` with ``OAM_CONTEXT_CARD_LOG_DAYS = 0`` (today's
  cost before the log);
* ``present_logged``: the same call with the log on (90 days): the card is built, then logged under the thread's
  lock (an identical card moves its row's ``last_served_at``; the first call of a thread inserts);
* ``as_of``: ``get_context_card(max_recent_messages=2, as_of=now)``: one indexed lookup and a decode, no search.

Prints one JSON object: p50/p95 milliseconds of each, ``ratio_as_of_to_present`` (target <= 2) and
``ratio_logged_to_unlogged`` (what the logging costs a present-time card). The first pass over the threads (model
load, caches) is not measured. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import percentile, use_sqlite  # noqa: E402

DB_PATH = ROOT / "var" / "bench-card-replay.sqlite3"
CARD = {"max_recent_messages": 2}


def _figures(seconds: list[float]) -> dict:
    return {"p50_ms": round(percentile(seconds, 0.5) * 1000, 3), "p95_ms": round(percentile(seconds, 0.95) * 1000, 3),
            "n": len(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", nargs="+", default=["conv-26"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    use_sqlite(DB_PATH, fresh=not args.reuse, OAM_LLM_BASE_URL="")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.utils import timezone

    from memory.client import AgentMemory
    from memory.core.ids import public_id
    from memory.models import ContextCardLog, Memory, Thread

    if not args.reuse:
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        call_command("import_locomo", samples=args.samples, verbosity=0)
        print(f"imported {args.samples} in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        from bench.locomo_import import _add_observations
        from memory.dev import locomo

        added = _add_observations(locomo.default_data_path(),
                                  list(locomo.iter_samples(locomo.default_data_path(), sample_ids=args.samples)))
        print(f"observations as fact memories: {added}", file=sys.stderr)
    client = AgentMemory(llm=None)
    threads = [client.get_thread(public_id(key)) for key in sorted(Thread.objects.values_list("pk", flat=True))]
    settings.OAM_CONTEXT_CARD_LOG_DAYS = 0
    for thread in threads:  # warm-up: the embedder, the vector cache
        thread.get_context_card(**CARD)
    timings: dict[str, list[float]] = {"present_unlogged": [], "present_logged": [], "as_of": []}
    equal, sizes = True, []
    for round_no in range(args.repeats):
        for thread in threads:
            settings.OAM_CONTEXT_CARD_LOG_DAYS = 0
            started = time.perf_counter()
            thread.get_context_card(**CARD)
            timings["present_unlogged"].append(time.perf_counter() - started)
            settings.OAM_CONTEXT_CARD_LOG_DAYS = 90
            started = time.perf_counter()
            served = thread.get_context_card(**CARD)
            timings["present_logged"].append(time.perf_counter() - started)
            started = time.perf_counter()
            replayed = thread.get_context_card(**CARD, as_of=timezone.now())
            timings["as_of"].append(time.perf_counter() - started)
            equal = equal and replayed == served and replayed.content == served.content
            sizes.append(len(served.relevant_results or []))
        print(f"round {round_no + 1}/{args.repeats} done", file=sys.stderr)
    figures = {name: _figures(values) for name, values in timings.items()}
    present, unlogged, as_of = figures["present_logged"], figures["present_unlogged"], figures["as_of"]
    print(json.dumps({
        "samples": args.samples, "threads": len(threads), "repeats": args.repeats,
        "messages": sum(len(t.get_messages()) for t in threads),
        "memories": Memory.objects.count(),
        "relevant_results_per_card_p50": percentile(sizes, 0.5),
        **figures,
        "ratio_as_of_to_present": {"p50": round(as_of["p50_ms"] / present["p50_ms"], 4),
                                   "p95": round(as_of["p95_ms"] / present["p95_ms"], 4)},
        "ratio_logged_to_unlogged": {"p50": round(present["p50_ms"] / unlogged["p50_ms"], 4),
                                     "p95": round(present["p95_ms"] / unlogged["p95_ms"], 4)},
        "target_as_of_ratio_at_most": 2, "replays_equal": equal,
        "logged_rows": ContextCardLog.objects.count(),
    }, indent=2))


if __name__ == "__main__":
    main()
