#!/usr/bin/env python
"""Benchmark: search latency as the store grows, against numpy brute force on the same vectors.

    .venv/bin/python bench/search_scale.py [--sizes 10000 100000 1000000] [--queries 30]

For each size N it builds a fresh SQLite file ``var/bench-scale-<N>.sqlite3``
holding N message chunks in one user's scope (the worst case: the scope filter
keeps every row). Rows are written straight into ``oam_search_chunks`` (the
FTS triggers index them) because embedding a million texts with the model would
take hours on 2 cores: the vectors are random unit vectors and the texts random
draws from a 2,000-word vocabulary. Brute-force cost does not depend on the
data distribution.

Per size it reports p50/p95 over ``--queries`` real queries (embedded once,
outside the clock, so both sides rank the same query vector):

* ``numpy``: ``X @ q`` over the in-memory float32 matrix plus ``argpartition``
  for the top 100: the in-memory brute-force baseline.
* ``vector_arm``: the vector arm search uses, ``memory.search.ranking.vector_arm``
  (top 100): exact KNN on the process's vector cache (``memory.index.vector_cache``)
  with filters and distances from SQL.
* ``sql_arm``: the same ranking done entirely in SQL,
  ``memory.search.query.chunk_queryset`` (sqlite-vec ``vec_distance_cosine`` over
  every scoped row): the path used with the cache off or over its row cap.
* ``cache_load_ms``: the first search's one-off load of the vector cache.
* ``search_vector`` / ``search_hybrid``: the whole ``search_records`` call
  (query embedding included, max_results 10) in VECTOR and HYBRID modes;
  ``numpy_search`` is the same whole search shape for numpy (query embedding +
  ranking) so the two end-to-end figures compare like with like.

Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

ROOT = Path(__file__).resolve().parent.parent
QUERIES = [
    "When did she go to the support group?", "What does he like to paint?", "Where did they travel last summer?",
    "Which book did she recommend?", "How old is the dog?", "What instrument does he play?",
    "Who came to the birthday party?", "What did they cook for dinner?", "When is the next hiking trip?",
    "What job is she applying for?",
]


def _percentiles(values: list[float]) -> dict:
    import numpy as np

    arr = np.asarray(values)
    return {"p50": round(float(np.percentile(arr, 50)), 2), "p95": round(float(np.percentile(arr, 95)), 2)}


def _build(n: int, path: Path, rng) -> "np.ndarray":
    """Fill a fresh database with ``n`` chunks; return the float32 matrix of their vectors."""
    import numpy as np
    from django.core.management import call_command
    from django.db import connection, transaction

    call_command("migrate", verbosity=0, interactive=False)
    from memory.core.ids import stored_id
    from memory.records.tenancy import get_project

    project = get_project(None).pk  # everything goes to the default project
    vocab = [f"w{i}" for i in range(2000)]
    matrix = rng.standard_normal((n, 384)).astype("<f4")
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    now = "2026-01-01 00:00:00"
    batch = 5000
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO oam_threads (id, project_id, user_id, agent_id, metadata, config, next_seq, "
                "extracted_through_seq, created_at, updated_at) VALUES (%s, %s, 'u', 'a', '{}', '{}', 1, 0, %s, %s)",
                [stored_id(project, "scale"), project, now, now])
            for start in range(0, n, batch):
                rows = []
                for i in range(start, min(n, start + batch)):
                    words = " ".join(rng.choice(vocab, 12))
                    rows.append((project, "message", stored_id(project, f"m{i}"), "message", 0, "u", "a",
                                 stored_id(project, "scale"), "valid", "{}", f"user: {words}", f"user: {words}",
                                 matrix[i].tobytes(), now))
                cursor.executemany(
                    "INSERT INTO oam_search_chunks (project_id, source_kind, record_id, record_type, chunk_index, "
                    "user_id, agent_id, thread_id, status, metadata, text, context, embedding, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", rows)
                print(f"\r  {n}: {min(n, start + batch)} rows", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return matrix


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--skip-sql-arm", action="store_true", help="skip the all-SQL ranking (slow at 1M)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")
    os.environ["OAM_ORACLE_DSN"] = os.environ["OAM_DATABASE_URL"] = ""  # SQLite: the vector cache is measured
    os.environ.setdefault("OAM_VECTOR_CACHE_MAX_ROWS", str(max(args.sizes) + 1))
    results = {"benchmark": "search_scale", "cpu_count": os.cpu_count(),
               "load_average_1_5_15_min_at_start": [round(x, 2) for x in os.getloadavg()], "sizes": {}}
    import numpy as np

    rng = np.random.default_rng(7)
    first = True
    for n in args.sizes:
        path = ROOT / "var" / f"bench-scale-{n}.sqlite3"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        os.environ["OAM_SQLITE_PATH"] = str(path)
        if first:
            import django

            django.setup()
            first = False
        from django.conf import settings
        from django.db import connection

        connection.close()
        settings.DATABASES["default"]["NAME"] = str(path)
        connection.settings_dict["NAME"] = str(path)
        from memory.core.types import MemorySearchConfig, SearchScope
        from memory.embedders import get_embedder
        from memory.search.query import chunk_queryset
        from memory.search.ranking import search_records, vector_arm
        from memory.search.request import build_request

        embedder = get_embedder()
        t0 = time.perf_counter()
        matrix = _build(n, path, rng)
        build_s = time.perf_counter() - t0
        texts = [QUERIES[i % len(QUERIES)] for i in range(args.queries)]
        qvecs = embedder.embed(texts)
        scope = SearchScope(user_id="u")
        from memory.records.tenancy import get_project

        project_id = get_project(None).pk

        def request(mode: str, query: str):
            return build_request(query, project_id=project_id, scope=scope,
                                        config=MemorySearchConfig(mode=mode), record_types=["message"],
                                        max_results=10)

        timings: dict[str, list[float]] = {k: [] for k in ("numpy", "vector_arm", "sql_arm", "numpy_search",
                                                            "search_vector", "search_hybrid")}
        from memory.index.vector_cache import get_vector_cache

        get_vector_cache().clear()
        t = time.perf_counter()
        vector_arm(request("VECTOR", texts[0]), qvecs[0], limit=100)
        cache_load_ms = (time.perf_counter() - t) * 1000
        agree: list[bool] = []
        for i, (query, qv) in enumerate(zip(texts, qvecs)):
            t = time.perf_counter()
            np.argpartition(-(matrix @ qv), 100)[:100]
            timings["numpy"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            arm = vector_arm(request("VECTOR", query), qv, limit=100)
            timings["vector_arm"].append((time.perf_counter() - t) * 1000)
            if not args.skip_sql_arm:
                t = time.perf_counter()
                exact = list(chunk_queryset(request("VECTOR", query), qv, limit=100))
                timings["sql_arm"].append((time.perf_counter() - t) * 1000)
                same = [r[1] for r in arm] == [r[1] for r in exact]
                agree.append(same)
            t = time.perf_counter()
            q2 = embedder.embed([query])[0]
            np.argpartition(-(matrix @ q2), 10)[:10]
            timings["numpy_search"].append((time.perf_counter() - t) * 1000)
            for mode, key in (("VECTOR", "search_vector"), ("HYBRID", "search_hybrid")):
                t = time.perf_counter()
                search_records(request(mode, query))
                timings[key].append((time.perf_counter() - t) * 1000)
            print(f"\r  {n}: query {i + 1}/{len(texts)}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        stats = {k: _percentiles(v) for k, v in timings.items() if v}
        stats["build_seconds"] = round(build_s, 1)
        stats["cache_load_ms"] = round(cache_load_ms, 1)
        if agree:
            stats["vector_arm_equals_sql_arm"] = f"{sum(agree)}/{len(agree)} queries"
        stats["ratio_p50_vector_arm_to_numpy"] = round(stats["vector_arm"]["p50"] / stats["numpy"]["p50"], 2)
        stats["ratio_p50_search_vector_to_numpy_search"] = round(
            stats["search_vector"]["p50"] / stats["numpy_search"]["p50"], 2)
        stats["ratio_p50_search_hybrid_to_numpy_search"] = round(
            stats["search_hybrid"]["p50"] / stats["numpy_search"]["p50"], 2)
        results["sizes"][str(n)] = stats
        connection.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
