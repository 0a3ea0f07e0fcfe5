#!/usr/bin/env python
"""Benchmark: what a recorded-time ("as of", issue #32) read costs beside a present-time one.

    .venv/bin/python bench/as_of.py [--samples conv-26 conv-30] [--queries 40] [--rounds 3] [--keep-db]

Uses its own fresh SQLite file, ``var/bench-as-of.sqlite3`` (deleted at the end unless ``--keep-db``), never the
development database. A subset of LoCoMo (``--samples``, default conv-26 and conv-30: two of the ten
conversations, as this runs on a shared 2-core machine) from ``$OAM_LOCOMO_PATH``:

1. ``manage.py import_locomo`` (threads and messages), then each session's LoCoMo ``observation`` facts as
   ``fact`` memories of its thread (``bench/locomo_import.py``'s variant; 353 memories with the defaults).
2. A scripted history, at increasing recorded times, in a seeded random order: 20 % of the memories edited twice
   (a content edit each: the memory is re-embedded), 10 % deleted. ``as_of`` is the instant halfway through the
   script: after every first edit and half the deletes, before every second edit and the other deletes (so every
   edited memory's content then differs from its content now: an as-of search needs the vectors of all of them).
   The edits and deletes keep the replaced chunks' vectors with the history (``oam_history_vectors``, migration
   0017); ``history_vectors`` counts those rows.
3. Timed (``--rounds`` rounds, each over ``--queries`` LoCoMo questions of the samples, p50/p95 in ms):
   ``client.search(q, user_id=<sample>, max_results=10)`` (every record type: messages and memories) at present
   (HYBRID, the default mode, and VECTOR, what an as-of search ranks by) and with ``as_of``; the as-of search with
   the in-process historical-vector LRU (``memory.search.as_of.HISTORICAL_VECTORS``) emptied before each query
   (``as_of_cold``: what a restarted or another worker pays, reading the kept vectors) and filled
   (``as_of_warm``); then, as before the vectors were kept (the kept-vector lookup answering nothing: versions
   written before migration 0017), cold (``as_of_cold_recomputed``: the historical texts embedded) and warm
   (``as_of_warm_recomputed``); and ``client.list_memories(user_id=<sample>, limit=None)`` with and without
   ``as_of``. The answers with kept and recomputed vectors are compared (``same_answers_kept_and_recomputed``: the
   share of questions answered with the same ids in the same order: both are the vectors of what the index
   embedded, ``memory.index.writer.embedding_text`` with the memory's event time then).

Prints one JSON object on stdout (``ratio``: as-of p50 / present p50; the issue's bound is 2); progress on stderr.
The context card's as-of figures are another benchmark's (the card log).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._database import percentile, use_sqlite  # noqa: E402

DB_PATH = ROOT / "var" / "bench-as-of.sqlite3"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def figures(seconds: list[float]) -> dict:
    """p50/p95 of ``seconds`` in milliseconds, and how many."""
    return {"p50_ms": round(percentile(seconds, 0.5) * 1000, 2), "p95_ms": round(percentile(seconds, 0.95) * 1000, 2),
            "n": len(seconds)}


def timed(call, repeat: int = 1) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def add_memories(samples) -> list[tuple[str, str, str]]:
    """Each session's observations as fact memories of its thread; ``(memory_id, user_id, content)`` of each."""
    from memory.client import AgentMemory
    from memory.dev import locomo
    from memory.dev.locomo import default_data_path

    raw = {item["sample_id"]: item for item in json.loads(default_data_path().read_text(encoding="utf-8"))}
    client = AgentMemory(llm=None)
    made = []
    for sample in samples:
        for session in sample.sessions:
            facts = (raw[sample.sample_id].get("observation") or {}).get(f"session_{session.number}_observation")
            thread = client.get_thread(locomo.thread_id(sample.sample_id, session.number))
            for n, item in enumerate(item for items in (facts or {}).values() for item in items):
                text = item[0] if isinstance(item, list) else str(item)
                memory_id = f"obs-{sample.sample_id}-{session.number}-{n}"
                thread.add_memory(str(text), memory_type="fact", memory_id=memory_id, timestamp=session.timestamp,
                                  autonomous_linking=False)
                made.append((memory_id, sample.sample_id, str(text)))
    return made


def script_history(made: list[tuple[str, str, str]], seed: int = 7):
    """20 % of the memories edited twice, 10 % deleted, in a seeded random order; returns the instant halfway
    through and the counts."""
    from django.utils import timezone

    from memory.client import AgentMemory

    client = AgentMemory(llm=None)
    rng = random.Random(seed)
    ids = [memory_id for memory_id, _, _ in made]
    contents = {memory_id: text for memory_id, _, text in made}
    rng.shuffle(ids)
    edited, deleted = ids[: len(ids) // 5], ids[len(ids) // 5: len(ids) // 5 + len(ids) // 10]
    first = [("edit", m, 1) for m in edited] + [("delete", m, 0) for m in deleted[: len(deleted) // 2]]
    second = [("edit", m, 2) for m in edited] + [("delete", m, 0) for m in deleted[len(deleted) // 2:]]
    rng.shuffle(first)
    rng.shuffle(second)
    steps = first + second  # a memory's second edit after its first; as_of falls between the two halves
    for i, (action, memory_id, n) in enumerate(steps):
        if i == len(first):
            middle = timezone.now()
            time.sleep(0.01)
        if action == "delete":
            client.delete_memory(memory_id)
        else:
            client.update_memory(memory_id, content=f"{contents[memory_id]} (revised {n})")
    return middle, {"memories": len(ids), "edited_twice": len(edited), "deleted": len(deleted), "steps": len(steps)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", nargs="+", default=["conv-26", "conv-30"])
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args(argv)

    use_sqlite(DB_PATH, fresh=True, OAM_LLM_BASE_URL="")
    import django

    django.setup()
    from django.core.management import call_command

    from memory.client import AgentMemory
    from memory.core.types import MemorySearchConfig
    from memory.dev import locomo
    from memory.embedders import embed_query
    from memory.search import as_of as search_as_of

    call_command("migrate", verbosity=0)
    log("importing LoCoMo " + " ".join(args.samples))
    started = time.perf_counter()
    call_command("import_locomo", samples=args.samples, verbosity=0)
    samples = list(locomo.iter_samples(sample_ids=args.samples))
    embed_query("warm up")
    made = add_memories(samples)
    log(f"{len(made)} memories; scripting the history")
    at, history = script_history(made)
    setup_seconds = round(time.perf_counter() - started, 1)

    questions = [(q.question, s.sample_id) for s in samples for q in s.questions if q.category in (1, 2, 3, 4)]
    random.Random(11).shuffle(questions)
    questions = questions[: args.queries]
    hybrid, vector = AgentMemory(llm=None), AgentMemory(llm=None, search_config=MemorySearchConfig(mode="VECTOR"))
    for text, user in questions:  # the query embeddings and the vector cache, warm for every variant alike
        hybrid.search(text, user_id=user, max_results=10)
    searches = ("present_hybrid", "present_vector", "as_of_cold", "as_of_warm", "as_of_cold_recomputed",
                "as_of_warm_recomputed")
    times: dict[str, list[float]] = {k: [] for k in (*searches, "list_present", "list_as_of")}
    cold_misses = recomputed_misses = 0
    kept_lookup = search_as_of.history_vectors
    answers: dict[str, set[tuple]] = {"kept": set(), "recomputed": set()}

    def as_of_search(text, user, recomputed: bool):
        search_as_of.history_vectors = (lambda project_id, pairs: {}) if recomputed else kept_lookup
        try:
            found = hybrid.search(text, user_id=user, max_results=10, as_of=at)
        finally:
            search_as_of.history_vectors = kept_lookup
        answers["recomputed" if recomputed else "kept"].add((text, tuple(r.record.id for r in found)))

    for round_number in range(args.rounds):
        log(f"round {round_number + 1}/{args.rounds}")
        for text, user in questions:
            times["present_hybrid"] += timed(lambda: hybrid.search(text, user_id=user, max_results=10))
            times["present_vector"] += timed(lambda: vector.search(text, user_id=user, max_results=10))
            search_as_of.HISTORICAL_VECTORS.clear()
            times["as_of_cold"] += timed(lambda: as_of_search(text, user, False))
            cold_misses += search_as_of.HISTORICAL_VECTORS.misses
            times["as_of_warm"] += timed(lambda: as_of_search(text, user, False))
            search_as_of.HISTORICAL_VECTORS.clear()
            times["as_of_cold_recomputed"] += timed(lambda: as_of_search(text, user, True))
            recomputed_misses += search_as_of.HISTORICAL_VECTORS.misses
            times["as_of_warm_recomputed"] += timed(lambda: as_of_search(text, user, True))
        for sample in samples:
            for _ in range(5):
                times["list_present"] += timed(lambda: hybrid.list_memories(user_id=sample.sample_id, limit=None))
                times["list_as_of"] += timed(lambda: hybrid.list_memories(user_id=sample.sample_id, limit=None,
                                                                          as_of=at))
    out = {k: figures(v) for k, v in times.items()}
    p50 = {k: v["p50_ms"] for k, v in out.items()}
    present_list = len(hybrid.list_memories(limit=None))
    then_list = len(hybrid.list_memories(limit=None, as_of=at))
    from memory.models import HistoryVector

    searched = max(1, args.rounds * len(questions))
    result = {
        "benchmark": "as_of", "samples": args.samples, "queries": len(questions), "rounds": args.rounds,
        "setup_seconds": setup_seconds, "history": history, "as_of": at.isoformat(),
        "memories_present": present_list, "memories_as_of": then_list,
        "history_vectors": HistoryVector.objects.count(),
        "historical_chunks_embedded_per_cold_search": round(cold_misses / searched, 1),
        "historical_chunks_embedded_per_cold_search_recomputed": round(recomputed_misses / searched, 1),
        "same_answers_kept_and_recomputed": round(len(answers["kept"] & answers["recomputed"])
                                                  / max(1, len(answers["kept"])), 3),
        "search": {k: out[k] for k in searches},
        "list_memories": {k: out[k] for k in ("list_present", "list_as_of")},
        "ratio": {
            "search_as_of_warm_over_present_hybrid": round(p50["as_of_warm"] / p50["present_hybrid"], 2),
            "search_as_of_cold_over_present_hybrid": round(p50["as_of_cold"] / p50["present_hybrid"], 2),
            "search_as_of_cold_recomputed_over_present_hybrid": round(
                p50["as_of_cold_recomputed"] / p50["present_hybrid"], 2),
            "search_as_of_warm_recomputed_over_present_hybrid": round(
                p50["as_of_warm_recomputed"] / p50["present_hybrid"], 2),
            "search_as_of_cold_over_present_vector": round(p50["as_of_cold"] / p50["present_vector"], 2),
            "search_as_of_warm_over_present_vector": round(p50["as_of_warm"] / p50["present_vector"], 2),
            "list_as_of_over_present": round(p50["list_as_of"] / p50["list_present"], 2),
        },
        "bound": 2.0,
    }
    result["within_bound"] = (result["ratio"]["search_as_of_cold_over_present_hybrid"] <= 2.0
                              and result["ratio"]["search_as_of_warm_over_present_hybrid"] <= 2.0
                              and result["ratio"]["list_as_of_over_present"] <= 2.0)
    if not args.keep_db:
        from django.db import connections

        connections.close_all()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{DB_PATH}{suffix}").unlink(missing_ok=True)
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
