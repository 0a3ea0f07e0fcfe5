#!/usr/bin/env python
"""Benchmark: LoCoMo evidence retrieval on SQLite and on PostgreSQL, side by side in one run.

    .venv/bin/python bench/locomo_backends.py [--samples conv-26 ...] [--modes VECTOR KEYWORD HYBRID]
        [--pgdata DIR]

Runs bench/locomo_import.py twice, one child process after the other (never at
the same time: they share the 2 cores), with the same samples, modes and
questions:

* ``sqlite``: its own fresh file ``var/bench-locomo-backends.sqlite3`` (sqlite-vec,
  the vector cache's exact KNN, FTS5 ranked by BM25);
* ``postgresql``: ``--database postgres`` on a fresh database ``locomo`` of the
  benchmark's own embedded PostgreSQL 18 + pgvector 0.8
  (``memory.dev.postgres_server.embedded_postgres`` in ``--pgdata``, default
  ``var/pgbench``; stopped afterwards): the HNSW index with its exact fallback,
  the keyword arm on the generated ``tsvector`` columns ranked by ``ts_rank_cd``.

Both import through the service layer (``manage.py import_locomo``), embed with
the same default model, and score the same category 1-4 questions. Per mode
(VECTOR, KEYWORD, HYBRID): recall@1/5/10/20 and hit@1 over the questions
(``splits.all`` of bench/locomo_import.py), search p50/p95, and the difference
postgresql - sqlite. Also each import's seconds. The keyword arm differs by
design (BM25 against ts_rank_cd, and SQLite's ``MIN_BM25_EVIDENCE`` cut applies
only on SQLite), so KEYWORD and HYBRID may differ; VECTOR differs only by what
HNSW misses. Prints one JSON object; each child's progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MODES = ("VECTOR", "KEYWORD", "HYBRID")
#: bench/locomo_import.py's key of each mode in ``retrieval``.
MODE_KEYS = {"HYBRID": "hybrid (default)", "VECTOR": "vector_only (same chunks)",
             "KEYWORD": "keyword_only_bm25 (same chunks)"}
SQLITE_FILE = ROOT / "var" / "bench-locomo-backends.sqlite3"


def run_import(extra: list[str], env: dict[str, str]) -> dict:
    """One child run of bench/locomo_import.py; its JSON."""
    command = [sys.executable, str(ROOT / "bench" / "locomo_import.py"), "--quiet", *extra]
    print("running:", " ".join(command[1:]), file=sys.stderr, flush=True)
    proc = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, check=True)
    return json.loads(proc.stdout)


def summary(report: dict, modes: list[str]) -> dict:
    """Per mode, the headline figures of one backend's report."""
    out = {"database": report["database"], "keyword_arm": report["keyword_arm"],
           "import_seconds": report["import"]["seconds"], "turns": report["import"]["turns"],
           "questions": report["retrieval"]["questions"],
           "load_average_1_5_15_min_at_start": report["load_average_1_5_15_min_at_start"]}
    for mode in modes:
        figures = report["retrieval"][MODE_KEYS[mode]]
        whole = figures["splits"]["all"]
        out[mode] = {"recall@10": whole["recall"]["@10"]["mean"], "hit@1": whole["hit@1"]["rate"],
                     "recall": {k: v for k, v in figures["recall"].items()},
                     "latency_ms": {k: figures["latency_ms"][k] for k in ("p50", "p95")}}
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", nargs="+", metavar="SAMPLE_ID", help="only these samples (default: all ten)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--pgdata", type=Path, default=ROOT / "var" / "pgbench",
                        help="the embedded PostgreSQL's data folder (the benchmark's own)")
    args = parser.parse_args(argv)
    extra = ["--modes", *args.modes] + (["--samples", *args.samples] if args.samples else [])
    env = {k: v for k, v in os.environ.items() if k not in ("OAM_DATABASE_URL", "OAM_ORACLE_DSN")}
    env.setdefault("OAM_LLM_BASE_URL", "")
    started = time.monotonic()
    from memory.dev.postgres_server import embedded_postgres

    reports = {"sqlite": run_import([*extra, "--db", str(SQLITE_FILE)], env)}
    with embedded_postgres(args.pgdata, database="locomo") as url:
        reports["postgresql"] = run_import([*extra, "--database", "postgres"], {**env, "OAM_DATABASE_URL": url})
    sides = {name: summary(report, args.modes) for name, report in reports.items()}
    difference = {
        mode: {measure: round(sides["postgresql"][mode][measure] - sides["sqlite"][mode][measure], 4)
               for measure in ("recall@10", "hit@1")}
        for mode in args.modes
    }
    return {"benchmark": "locomo_backends", "command": "bench/locomo_backends.py " + " ".join(argv or sys.argv[1:]),
            "samples": args.samples or "all ten", "cpu_count": os.cpu_count(),
            "embedder": reports["sqlite"]["embedder"], **sides, "difference_postgresql_minus_sqlite": difference,
            "total_seconds": round(time.monotonic() - started, 1)}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
