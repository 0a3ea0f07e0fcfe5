#!/usr/bin/env python
"""Benchmark: PostgreSQL's vector arm (pgvector HNSW) against exact search and numpy brute force, by store size.

    .venv/bin/python bench/pg_scale.py [--sizes 100000 1000000] [--queries 50] [--exact-queries 20]
        [--m 16] [--ef-construction 64 32] [--maintenance-work-mem 6GB] [--shared-buffers 4GB] [--pgdata DIR]

The server is an embedded PostgreSQL 18 with pgvector 0.8 of the benchmark's own
(``memory.dev.postgres_server.embedded_postgres`` in ``--pgdata``, default
``var/pgbench``; ``--url`` uses another server, whose database it drops and
recreates). Before the run the benchmark sets ``shared_buffers`` (``ALTER
SYSTEM``, one restart) so the index can stay in PostgreSQL's own cache, as on a
tuned server; the default 128 MB would make every query read the graph through
the OS page cache.

Data (synthetic, the same for every side): N chunks of 384-d float32 unit
vectors from a two-level mixture of gaussians (``--topics`` topic centres on
the sphere, each with ``SUBTOPICS`` sub-centres at noise norm 0.8, each point a
sub-centre plus noise of norm 0.5, normalised), so neighbours are clustered as
embeddings are, not uniform. Queries are fresh draws from the same mixture.
Each chunk is a message of one of 1,000 users (``u0``..), 10 agents and
10 threads per user, assigned at random. Rows go in with one binary ``COPY``
of the table's required columns (``memory.models.SearchChunk``); the HNSW and
GIN indexes of the migrations are dropped for the load and built after it
(timed: ``build``), the HNSW one with ``--m`` / ``--ef-construction`` (pgvector's
defaults are 16 / 64; one value for every size, or one per size), under the
same name, so the engine's query uses it. Before any clock, one unrecorded pass of the queries
through the engine warms the cache (``warm_up_seconds``; pg_prewarm is not in the embedded server).

Per size and filter case (``all``: the whole project; ``agent``: one agent of
10, 10 % of rows; ``user``: one user of 1,000, 0.1 %; ``thread``: one thread
of 10,000, 0.01 %), over ``--queries`` query vectors:

* ``numpy``: ``X @ q`` + ``argpartition`` (top 100) over the float32 rows that
  pass the filter, in memory: the baseline, and the ground truth (top 10).
* ``engine``: ``PostgresBackend.vector_rows`` with the engine's own request
  (``build_request``, VECTOR mode, max_results 10), asking for 100 rows as
  VECTOR search does (``max(ARM_DEPTH, 3 * max_results)``): ``SET LOCAL
  hnsw.iterative_scan = strict_order`` and ``hnsw.ef_search``, the HNSW query,
  and the exact query when the index returned fewer rows than asked.
* ``hnsw_only``: the index query alone (same SQL and settings, no fallback):
  how many of the queries got fewer rows than asked (``short``), i.e. took the
  exact fallback in ``engine``.
* ``ef_search``: the index query again with a larger ``hnsw.ef_search`` than the engine sets
  (``--ef-search``, default 200 and 400): what recall a wider graph walk buys, and its latency.
* ``exact``: ``postgres_vector_sql(exact=True)``, every filtered row ranked
  (``--exact-queries`` of the queries; a sequential or index scan of the filter).

recall@10 is the share of numpy's top 10 found in a side's top 10. Latencies
are milliseconds, p50/p95 (nearest rank). Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import percentile, use_postgres  # noqa: E402
from memory.dev.postgres_server import connect_kwargs  # noqa: E402

DIMENSIONS = 384
USERS, AGENTS, THREADS_PER_USER = 1000, 10, 10
SUBTOPICS = 20
VOCABULARY = 2000
#: What VECTOR search asks the vector arm for with max_results 10 (memory.search.ranking: max(ARM_DEPTH, 3 * 10)).
ARM_LIMIT = 100
CASES = ("all", "agent", "user", "thread")
PG_EPOCH_US = 946_684_800 * 1_000_000  # 2000-01-01 in Unix microseconds: binary COPY's timestamptz origin


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def mixture(rng, n: int, centres, sub_noise: float = 0.8, noise: float = 0.5):
    """``n`` unit vectors from the two-level mixture around ``centres`` (topics x SUBTOPICS sub-centres)."""
    import numpy as np

    out = np.empty((n, DIMENSIONS), dtype=np.float32)
    step = 100_000
    for start in range(0, n, step):
        m = min(n, start + step) - start
        picks = rng.integers(0, centres.shape[0], m)
        block = centres[picks] + rng.standard_normal((m, DIMENSIONS), dtype=np.float32) * (noise / DIMENSIONS ** 0.5)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start:start + m] = block
    return out


def make_centres(rng, topics: int):
    """``topics * SUBTOPICS`` sub-centres: topic centres on the sphere, sub-centres around them."""
    import numpy as np

    top = rng.standard_normal((topics, DIMENSIONS), dtype=np.float32)
    top /= np.linalg.norm(top, axis=1, keepdims=True)
    sub = np.repeat(top, SUBTOPICS, axis=0)
    sub += rng.standard_normal(sub.shape, dtype=np.float32) * (0.8 / DIMENSIONS ** 0.5)
    sub /= np.linalg.norm(sub, axis=1, keepdims=True)
    return sub


def _field(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def copy_rows(conn, project_id: int, matrix, users, agents, threads, words, vocab) -> None:
    """One binary COPY of ``matrix``'s rows into ``oam_search_chunks`` (required columns only)."""
    from memory.core.ids import stored_id

    created = struct.pack(">q", 1_767_225_600 * 1_000_000 - PG_EPOCH_US)  # 2026-01-01 UTC
    fixed = {"project": _field(struct.pack(">q", project_id)), "message": _field(b"message"),
             "zero": _field(struct.pack(">i", 0)), "valid": _field(b"valid"), "meta": _field(b"\x01{}"),
             "created": _field(created), "head": struct.pack(">hh", DIMENSIONS, 0)}
    columns = ("project_id, source_kind, record_id, record_type, chunk_index, user_id, agent_id, thread_id, status, "
               "metadata, text, context, embedding, created_at")
    with conn.cursor() as cursor, cursor.copy(f"COPY oam_search_chunks ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0))
        buffer = []
        for i in range(matrix.shape[0]):
            text = ("user: " + " ".join(vocab[w] for w in words[i])).encode()
            user = f"u{users[i]}"
            buffer.append(b"".join((
                b"\x00\x0e", fixed["project"], fixed["message"], _field(stored_id(project_id, f"m{i}").encode()),
                fixed["message"], fixed["zero"], _field(user.encode()), _field(f"a{agents[i]}".encode()),
                _field(stored_id(project_id, f"t{users[i]}-{threads[i]}").encode()), fixed["valid"], fixed["meta"],
                _field(text), _field(text), _field(fixed["head"] + matrix[i].astype(">f4").tobytes()),
                fixed["created"])))
            if len(buffer) == 5000:
                copy.write(b"".join(buffer))
                buffer.clear()
                print(f"\r  copied {i + 1} rows", end="", file=sys.stderr, flush=True)
        copy.write(b"".join(buffer) + b"\xff\xff")
    print(file=sys.stderr)


def load(n: int, rng, centres, *, m: int, ef_construction: int, maintenance_work_mem: str) -> dict:
    """Empty the table, COPY ``n`` rows, rebuild the indexes; the data, its assignments and the timings."""
    from django.db import connection

    from memory.records.tenancy import get_project
    from memory.search.backends import KEYWORD_INDEX

    project_id = get_project(None).pk
    matrix = mixture(rng, n, centres)
    users = rng.integers(0, USERS, n)
    agents = rng.integers(0, AGENTS, n)
    threads = rng.integers(0, THREADS_PER_USER, n)
    words = rng.integers(0, VOCABULARY, (n, 12))
    vocab = [f"w{i}" for i in range(VOCABULARY)]
    timings = {}
    connection.ensure_connection()
    conn = connection.connection  # psycopg 3 connection under Django's wrapper
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE oam_search_chunks")
        for index in ("oam_chunk_vec_ix", f"{KEYWORD_INDEX}_1", f"{KEYWORD_INDEX}_2"):
            cursor.execute(f"DROP INDEX IF EXISTS {index}")
    t = time.perf_counter()
    with conn.transaction():
        copy_rows(conn, project_id, matrix, users, agents, threads, words, vocab)
    timings["copy_seconds"] = round(time.perf_counter() - t, 1)
    with connection.cursor() as cursor:
        t = time.perf_counter()
        cursor.execute(f"CREATE INDEX {KEYWORD_INDEX}_1 ON oam_search_chunks USING gin (text_tsv)")
        cursor.execute(f"CREATE INDEX {KEYWORD_INDEX}_2 ON oam_search_chunks USING gin (context_tsv)")
        timings["gin_build_seconds"] = round(time.perf_counter() - t, 1)
        cursor.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        cursor.execute("SET max_parallel_maintenance_workers = %s", [max(0, (os.cpu_count() or 1) - 1)])
        t = time.perf_counter()
        cursor.execute(f"CREATE INDEX oam_chunk_vec_ix ON oam_search_chunks USING hnsw (embedding vector_cosine_ops) "
                       f"WITH (m = {int(m)}, ef_construction = {int(ef_construction)})")
        timings["hnsw_build_seconds"] = round(time.perf_counter() - t, 1)
        t = time.perf_counter()
        cursor.execute("VACUUM ANALYZE oam_search_chunks")
        timings["vacuum_analyze_seconds"] = round(time.perf_counter() - t, 1)
        cursor.execute("SELECT pg_relation_size('oam_chunk_vec_ix'), pg_table_size('oam_search_chunks')")
        index_bytes, table_bytes = cursor.fetchone()
    timings.update(hnsw_index_mb=round(index_bytes / 2 ** 20), table_mb=round(table_bytes / 2 ** 20))
    return {"project_id": project_id, "matrix": matrix, "users": users, "agents": agents, "threads": threads,
            "timings": timings, "index": {"m": m, "ef_construction": ef_construction,
                                          "maintenance_work_mem": maintenance_work_mem}}


def stats(values: list[float]) -> dict:
    return {"p50": round(percentile(values, 0.5), 2), "p95": round(percentile(values, 0.95), 2), "n": len(values)}


def index_plan(request, q, now) -> list[str]:
    """The scan nodes (and their index) of ``EXPLAIN`` for the index query, as the engine runs it."""
    from django.db import connection, transaction

    from memory.search.backends import ef_search as engine_ef_search
    from memory.search.backends import postgres_vector_sql

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        cursor.execute(f"SET LOCAL hnsw.ef_search = {engine_ef_search(ARM_LIMIT)}")
        sql, params = postgres_vector_sql(request, q, ARM_LIMIT, connection=connection, now=now)
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        tree = cursor.fetchone()[0]
    tree = json.loads(tree) if isinstance(tree, str) else tree
    nodes, stack = [], [tree[0]["Plan"]]
    while stack:
        node = stack.pop()
        if "Scan" in node["Node Type"]:
            nodes.append(f"{node['Node Type']} {node.get('Index Name', '')}".strip())
        stack.extend(node.get("Plans", []))
    return nodes


def index_rows(request, q, now, ef_search: int) -> list[tuple]:
    """The engine's index query (``postgres_vector_sql``) with its ``SET LOCAL`` settings and ``ef_search``."""
    from django.db import connection, transaction

    from memory.search.backends import postgres_vector_sql

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")
        sql, params = postgres_vector_sql(request, q, ARM_LIMIT, connection=connection, now=now)
        cursor.execute(sql, params)
        return cursor.fetchall()


def measure(data: dict, queries, *, exact_queries: int, ef_search: list[int]) -> dict:
    """Every filter case over ``queries``: numpy, engine, hnsw_only and exact, with recall@10 against numpy."""
    import numpy as np
    from django.db import connection
    from django.utils import timezone

    from memory.core.ids import stored_id
    from memory.core.types import MemorySearchConfig, SearchScope
    from memory.search.backends import PostgresBackend, postgres_vector_sql
    from memory.search.backends import ef_search as engine_ef_search
    from memory.search.request import build_request

    matrix, project_id = data["matrix"], data["project_id"]
    prefix = len(stored_id(project_id, "m"))
    backend = PostgresBackend()
    out = {}
    t = time.perf_counter()  # warm-up, unrecorded: the graph's upper layers and the queries' paths into the cache
    warm = build_request("bench query", project_id=project_id, scope=SearchScope(), config=MemorySearchConfig(),
                         record_types=["message"], max_results=10)
    for q in queries:
        backend.vector_rows(warm, q, timezone.now(), ARM_LIMIT, connection)
    out["warm_up_seconds"] = round(time.perf_counter() - t, 1)
    for case in CASES:
        log(f"  case {case}")
        times = {k: [] for k in ("numpy", "engine", "hnsw_only", "exact", *(f"ef_search={e}" for e in ef_search))}
        recall = {k: [] for k in ("engine", "hnsw_only", "exact", *(f"ef_search={e}" for e in ef_search))}
        short = missed = 0
        rows_passing = []
        plan = None
        for qi, q in enumerate(queries):
            u, a, th = qi * 37 % USERS, qi % AGENTS, qi * 7 % THREADS_PER_USER
            if case == "all":
                scope, mask = SearchScope(), None
            elif case == "agent":
                scope, mask = SearchScope(agent_id=f"a{a}"), data["agents"] == a
            elif case == "user":
                scope, mask = SearchScope(user_id=f"u{u}"), data["users"] == u
            else:
                scope = SearchScope(thread_id=f"t{u}-{th}")
                mask = (data["users"] == u) & (data["threads"] == th)
            ids = np.arange(matrix.shape[0]) if mask is None else np.flatnonzero(mask)
            sub = matrix if mask is None else matrix[ids]  # outside the clock: the rows the filter keeps
            rows_passing.append(int(ids.size))
            t = time.perf_counter()
            scores = sub @ q
            k = min(ARM_LIMIT, ids.size - 1)
            top = np.argpartition(-scores, k)[:ARM_LIMIT] if ids.size > ARM_LIMIT else np.arange(ids.size)
            top = top[np.argsort(-scores[top])]
            times["numpy"].append((time.perf_counter() - t) * 1000)
            truth = set(ids[top[:10]].tolist())
            request = build_request("bench query", project_id=project_id, scope=scope,
                                    config=MemorySearchConfig(mode="VECTOR"), record_types=["message"], max_results=10)
            now = timezone.now()

            def found(rows) -> float:
                got = {int(r[1][prefix:]) for r in rows[:10]}
                if not truth:  # nothing passes the filter: right when nothing came back
                    return float(not got)
                return len(got & truth) / min(10, len(truth))

            t = time.perf_counter()
            rows = backend.vector_rows(request, q, now, ARM_LIMIT, connection)
            times["engine"].append((time.perf_counter() - t) * 1000)
            recall["engine"].append(found(rows))
            t = time.perf_counter()
            hnsw_rows = index_rows(request, q, now, engine_ef_search(ARM_LIMIT))  # the engine's value
            times["hnsw_only"].append((time.perf_counter() - t) * 1000)
            recall["hnsw_only"].append(found(hnsw_rows))
            short += len(hnsw_rows) < ARM_LIMIT  # what PostgresBackend.vector_rows checks before its exact query
            missed += len(hnsw_rows) < min(ARM_LIMIT, ids.size)  # the index lost rows the filter passes
            if plan is None:
                plan = index_plan(request, q, now)
            for ef in ef_search:
                t = time.perf_counter()
                wide = index_rows(request, q, now, ef)
                times[f"ef_search={ef}"].append((time.perf_counter() - t) * 1000)
                recall[f"ef_search={ef}"].append(found(wide))
            if qi < exact_queries:
                t = time.perf_counter()
                with connection.cursor() as cursor:
                    sql, params = postgres_vector_sql(request, q, ARM_LIMIT, connection=connection, now=now,
                                                      exact=True)
                    cursor.execute(sql, params)
                    exact_rows = cursor.fetchall()
                times["exact"].append((time.perf_counter() - t) * 1000)
                recall["exact"].append(found(exact_rows))
        out[case] = {
            "rows_passing_filter_median": int(np.median(rows_passing)),
            "latency_ms": {k: stats(v) for k, v in times.items() if v},
            "recall@10": {k: round(float(np.mean(v)), 4) for k, v in recall.items() if v},
            "plan_of_the_index_query": plan,
            "exact_fallback_taken (index query returned < 100 rows)": f"{short}/{len(queries)}",
            "index_query_returned_fewer_rows_than_the_filter_passes": f"{missed}/{len(queries)}",
        }
        lat = out[case]["latency_ms"]
        out[case]["ratio_p50_engine_to_numpy"] = round(lat["engine"]["p50"] / lat["numpy"]["p50"], 2)
        if "exact" in lat:
            out[case]["ratio_p50_engine_to_exact"] = round(lat["engine"]["p50"] / lat["exact"]["p50"], 3)
    return out


@contextlib.contextmanager
def server(args):
    """The database URL: ``--url`` as given, else the benchmark's own embedded server, with ``shared_buffers`` set."""
    if args.url:
        yield args.url
        return
    import psycopg

    from memory.dev.postgres_server import embedded_postgres

    with embedded_postgres(args.pgdata, database="bench") as url:
        with psycopg.connect(**connect_kwargs(url), autocommit=True) as conn:
            current = conn.execute("SHOW shared_buffers").fetchone()[0]
            if current != args.shared_buffers:
                conn.execute(f"ALTER SYSTEM SET shared_buffers = '{args.shared_buffers}'")
    with embedded_postgres(args.pgdata, database="bench") as url:  # restarted: the setting applies
        yield url


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--exact-queries", type=int, default=20, help="queries also run exactly in SQL")
    parser.add_argument("--ef-search", type=int, nargs="*", default=[100, 800],
                        help="also run the index query with these hnsw.ef_search values (the engine's: ef_search)")
    parser.add_argument("--topics", type=int, default=500, help="topic centres of the mixture")
    parser.add_argument("--m", type=int, nargs="+", default=[16], help="HNSW m: one for all sizes or one per size")
    parser.add_argument("--ef-construction", type=int, nargs="+", default=[64],
                        help="HNSW ef_construction: one for all sizes or one per size")
    parser.add_argument("--maintenance-work-mem", default="6GB", help="for the HNSW build (graph in memory)")
    parser.add_argument("--shared-buffers", default="4GB", help="set on the embedded server before the run")
    parser.add_argument("--pgdata", type=Path, default=ROOT / "var" / "pgbench")
    parser.add_argument("--url", help="use this server's database (dropped and recreated) instead of an embedded one")
    args = parser.parse_args(argv)

    def per_size(values: list[int], name: str) -> list[int]:
        if len(values) not in (1, len(args.sizes)):
            parser.error(f"{name}: one value, or one per size")
        return values * len(args.sizes) if len(values) == 1 else values

    ms, efs = per_size(args.m, "--m"), per_size(args.ef_construction, "--ef-construction")
    import numpy as np

    started = time.monotonic()
    results = {"benchmark": "pg_scale", "command": "bench/pg_scale.py " + " ".join(argv or sys.argv[1:]),
               "cpu_count": os.cpu_count(),
               "load_average_1_5_15_min_at_start": [round(x, 2) for x in os.getloadavg()],
               "data": f"synthetic: 384-d float32 unit vectors, two-level gaussian mixture ({args.topics} topics x "
                       f"{SUBTOPICS} subtopics), queries from the same mixture; {USERS} users, {AGENTS} agents, "
                       f"{THREADS_PER_USER} threads per user, assigned at random",
               "arm_limit": ARM_LIMIT, "sizes": {}}
    with server(args) as url:
        use_postgres(url, fresh=True, OAM_LLM_BASE_URL="", OAM_EMBEDDED_WORKER="false")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0, interactive=False)
        with connection.cursor() as cursor:
            cursor.execute("SELECT version(), (SELECT extversion FROM pg_extension WHERE extname = 'vector')")
            version, vector_version = cursor.fetchone()
            cursor.execute("SHOW shared_buffers")
            results["server"] = {"version": version.split(" on ")[0], "pgvector": vector_version,
                                 "shared_buffers": cursor.fetchone()[0]}
        rng = np.random.default_rng(7)
        centres = make_centres(rng, args.topics)
        queries = mixture(np.random.default_rng(11), args.queries, centres)
        for n, m, ef in zip(args.sizes, ms, efs):
            log(f"size {n}: loading (m={m}, ef_construction={ef})")
            t = time.perf_counter()
            data = load(n, rng, centres, m=m, ef_construction=ef, maintenance_work_mem=args.maintenance_work_mem)
            log(f"size {n}: loaded in {time.perf_counter() - t:.0f} s {data['timings']}")
            results["sizes"][str(n)] = {"index": data["index"], "build": data["timings"],
                                        "cases": measure(data, queries, exact_queries=args.exact_queries,
                                                                 ef_search=args.ef_search)}
            del data
        connection.close()
    results["total_seconds"] = round(time.monotonic() - started, 1)
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
