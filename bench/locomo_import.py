#!/usr/bin/env python
"""Benchmark: import LoCoMo through the service layer, then measure evidence retrieval.

    .venv/bin/python bench/locomo_import.py [--samples conv-26 ...] [--quiet]

Uses its own fresh SQLite file, ``var/bench-locomo.sqlite3`` (removed and
migrated at the start, left in place afterwards), never the development
database. Steps:

1. ``manage.py import_locomo`` (``memory.client.AgentMemory``: one user per
   sample, one thread per session, one ``add_messages`` per session): import
   seconds and turns/s. The embedding model is loaded before the clock starts.
2. In each search mode (HYBRID, the default; VECTOR; KEYWORD), every category 1-4 question with evidence that names turns of its
   conversation: ``client.search(question, user_id=<sample>,
   record_types=["message"], max_results=20)``; evidence recall@1/5/10/20
   (the fraction of a question's evidence turns found in the top k, averaged;
   the measure of ``shared/data/locomo/SOURCE.md``) overall and per category,
   and search latency percentiles.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_PATH = ROOT / "var" / "bench-locomo.sqlite3"
KS = (1, 5, 10, 20)
# SOURCE.md, each turn indexed as "<speaker>: <text> [shares a photo: <caption>]".
BASELINES_SOURCE_MD = {
    "vector all-MiniLM-L6-v2": {"@1": 0.156, "@5": 0.353, "@10": 0.444, "@20": 0.542},
    "bm25": {"@1": 0.229, "@5": 0.431, "@10": 0.502, "@20": 0.585},
    "rrf k=60": {"@1": 0.212, "@5": 0.446, "@10": 0.532, "@20": 0.626},
}


def _fresh_database() -> None:
    """Point Django at a new, empty SQLite file; must run before ``django.setup()``."""
    DB_PATH.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{DB_PATH}{suffix}").unlink(missing_ok=True)
    os.environ["OAM_SQLITE_PATH"] = str(DB_PATH)
    os.environ["OAM_ORACLE_DSN"] = ""  # SQLite even when the shell or .env names an Oracle database
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", nargs="+", metavar="SAMPLE_ID", help="only these samples (default: all ten)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    _fresh_database()
    import django

    django.setup()

    import numpy as np
    import torch
    from django.conf import settings
    from django.core.management import call_command
    from tqdm import tqdm

    from memory import locomo
    from memory.client import AgentMemory
    from memory.types import MemorySearchConfig
    from memory.embedders import get_embedder
    from memory.models import Message, Thread

    verbosity = 0 if args.quiet else 1
    data_path = locomo.default_data_path()
    samples = list(locomo.iter_samples(data_path, sample_ids=args.samples))

    call_command("migrate", verbosity=0, interactive=False)
    load_average = [round(x, 2) for x in os.getloadavg()]
    started = time.perf_counter()
    # The model loader draws its own progress bar on stderr; --quiet hides it.
    with contextlib.redirect_stderr(io.StringIO()) if args.quiet else contextlib.nullcontext():
        get_embedder()
    model_load_s = time.perf_counter() - started

    started = time.perf_counter()
    call_command("import_locomo", str(data_path), samples=[s.sample_id for s in samples], verbosity=verbosity,
                 stdout=sys.stderr, stderr=sys.stderr)
    import_s = time.perf_counter() - started
    turns = sum(s.turn_count for s in samples)

    jobs = []
    partial = unresolved = 0
    for sample in samples:
        dia_ids = sample.dia_ids
        for question in sample.questions:
            if question.category > 4:
                continue
            evidence = question.known_evidence(dia_ids)
            if not evidence:
                unresolved += 1
                continue
            partial += len(evidence) < len(question.evidence)
            jobs.append((sample.sample_id, question, evidence))

    def run(mode: str) -> dict:
        """Every question through ``client.search`` in one search mode, on the same stored chunks."""
        client = AgentMemory(search_config=MemorySearchConfig(mode=mode))
        client.search("warm-up", user_id=samples[0].sample_id, record_types=["message"], max_results=20)
        per_cat: dict[int, dict[int, list[float]]] = {}
        overall: dict[int, list[float]] = {k: [] for k in KS}
        latencies: list[float] = []
        for sample_id, question, evidence in tqdm(jobs, unit="q", disable=args.quiet, file=sys.stderr, ncols=100,
                                                  desc=f"search {mode}"):
            t0 = time.perf_counter()
            results = client.search(question.question, user_id=sample_id, record_types=["message"], max_results=20)
            latencies.append((time.perf_counter() - t0) * 1000)
            ranked = [r.record.metadata.get("dia_id") for r in results]
            cat = per_cat.setdefault(question.category, {k: [] for k in KS})
            for k in KS:
                score = locomo.evidence_recall(ranked, evidence, k)
                overall[k].append(score)
                cat[k].append(score)
        lat = np.asarray(latencies)
        return {
            "recall": {f"@{k}": _mean(overall[k]) for k in KS},
            "per_category": {
                f"{c} {locomo.CATEGORIES[c]}": {"questions": len(per_cat[c][1]),
                                                 **{f"@{k}": _mean(per_cat[c][k]) for k in KS}}
                for c in sorted(per_cat)
            },
            "latency_ms": {"n": int(lat.size), "p50": round(float(np.percentile(lat, 50)), 1),
                           "p95": round(float(np.percentile(lat, 95)), 1), "mean": round(float(lat.mean()), 1)},
        }

    modes = {mode: run(mode) for mode in ("HYBRID", "VECTOR", "KEYWORD")}

    return {
        "benchmark": "locomo_import",
        "database": f"sqlite + sqlite-vec + FTS5, fresh file {DB_PATH.relative_to(ROOT)}",
        "embedder": settings.OAM_EMBEDDER,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1_5_15_min_at_start": load_average,  # the CPUs may be shared
        "import": {
            "samples": len(samples),
            "sessions": sum(len(s.sessions) for s in samples),
            "turns": turns,
            "threads_stored": Thread.objects.filter(agent_id=locomo.AGENT_ID).count(),
            "messages_stored": Message.objects.filter(thread__agent_id=locomo.AGENT_ID).count(),
            "model_load_seconds": round(model_load_s, 2),
            "seconds": round(import_s, 2),
            "turns_per_s": round(turns / import_s, 1),
        },
        "retrieval": {
            "search": 'client.search(q, user_id=<sample_id>, record_types=["message"], max_results=20)',
            "questions": len(jobs),
            "questions_scored_on_partial_evidence": partial,
            "questions_skipped_no_resolvable_evidence": unresolved,
            "hybrid (default)": modes["HYBRID"],
            "vector_only (same chunks)": modes["VECTOR"],
            "keyword_only_bm25 (same chunks)": modes["KEYWORD"],
            "baselines_source_md": BASELINES_SOURCE_MD,
        },
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
