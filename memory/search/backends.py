"""The vendor seam of search: one backend per database, chosen in one place (``backend_for``).

A backend answers the two arms that differ by vendor:

* ``vector_rows``: the nearest filtered chunks as (source_kind, record_id,
  cosine distance). SQLite: exact KNN from this process's vector cache
  (``memory.index.vector_cache``, ``_cached_vector_rows``), or the filtered chunks
  ranked in SQL (``memory.search.query.chunk_queryset``). Oracle: the vector
  index, approximate (``vector_sql``). PostgreSQL: the pgvector HNSW index with
  an iterative scan, exact when the index returns too few rows
  (``postgres_vector_sql``).
* ``keyword_sql``: a keyword arm over the ``text`` or ``context`` column.
  SQLite: FTS5 ``MATCH`` ranked by ``bm25()``; Oracle: Oracle Text
  ``CONTAINS`` ranked by ``SCORE``; PostgreSQL: the generated ``tsvector``
  column ``@@ to_tsquery`` ranked by ``ts_rank_cd``. ``keyword_evidence`` drops
  matches that are no evidence (SQLite's clamped BM25 scores in HYBRID).

Both filter with the WHERE clause the ORM compiles for ``filtered_chunks``
(``filter_sql``), so every arm filters identically. Another vendor gets the
base ``SearchBackend``: the vector arm ranked in SQL, no keyword arm.
"""

from __future__ import annotations

import json
import math

import numpy as np
from django.db import connection as default_connection
from django.db import transaction

from memory.core import conf
from memory.fields import pgvector_text
from memory.index.vector_cache import get_vector_cache, in_transaction_now, rounding_bound
from memory.models import SearchChunk
from memory.operations import TEXT_SEARCH_CONFIG, tsvector_column
from memory.search.query import chunk_queryset, filter_sql
from memory.search.request import SearchRequest

#: Name of the keyword index (migration 0004): the FTS5 table on SQLite; the
#: Oracle Text indexes are ``<name>_1`` (text) and ``<name>_2`` (context).
KEYWORD_INDEX = "oam_search_chunks_fts"


def vector_sql(request: SearchRequest, query_vector, limit: int, *, connection=None,
               now=None) -> tuple[str, list]:
    """Oracle's vector arm: rows of (source_kind, record_id, distance), approximate, best first.

    ``ORDER BY VECTOR_DISTANCE(embedding, :q, COSINE) FETCH APPROX FIRST n ROWS
    ONLY WITH TARGET ACCURACY a`` (``settings.OAM_VECTOR_TARGET_ACCURACY``,
    default 95) lets Oracle use the HNSW/IVF index of migration 0002, whose
    metric is COSINE too (Oracle AI Vector Search User's Guide). Django can
    only emit ``FETCH FIRST``, an exact scan, hence hand-written SQL. The
    ORDER BY holds the distance expression alone, as the approximate form
    requires, and the filters are ``filter_sql``'s (the optimizer pre- or
    in-filters them on HNSW, post-filters on IVF).
    """
    connection = connection or default_connection
    if connection.vendor != "oracle":
        raise NotImplementedError("vector_sql is Oracle's approximate form; SQLite uses memory.index.vector_cache")
    where_sql, where_params = filter_sql(request, now, connection)
    quote = connection.ops.quote_name
    table = quote(SearchChunk._meta.db_table)
    kind, rid, emb = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id", "embedding"))
    field = SearchChunk._meta.get_field("embedding")
    bind = field.get_db_prep_value(query_vector, connection)
    accuracy = int(conf.get("OAM_VECTOR_TARGET_ACCURACY"))
    if not 0 < accuracy <= 100:
        raise ValueError("OAM_VECTOR_TARGET_ACCURACY must be within 1..100")
    distance = f"VECTOR_DISTANCE({emb}, %s, COSINE)"
    sql = (
        f"SELECT {kind}, {rid}, {distance} AS {quote('distance')} FROM {table} WHERE ({where_sql}) "
        f"ORDER BY {distance} FETCH APPROX FIRST {int(limit)} ROWS ONLY WITH TARGET ACCURACY {accuracy}"
    )
    return sql, [bind, *where_params, bind]


#: pgvector's ``hnsw.ef_search`` ceiling (pgvector README, "Query Options": 1 to 1000).
MAX_EF_SEARCH = 1000

#: Smallest ``hnsw.ef_search`` of a search: at 1M chunks (bench/pg_scale.py, synthetic clustered vectors, m 16,
#: ef_construction 64) ef_search 100 found 0.75 of the exact top 10, 400 found 0.88 at a p50 of 6.7 ms against 3.2.
MIN_EF_SEARCH = 400


def ef_search(limit: int) -> int:
    """``hnsw.ef_search`` for a search that wants ``limit`` rows: twice that, at least ``MIN_EF_SEARCH``, at most
    pgvector's 1,000."""
    return max(MIN_EF_SEARCH, min(2 * int(limit), MAX_EF_SEARCH))


#: Chunks of the project PostgreSQL's HYBRID keyword arm reads to tell a common term (in half of them) from evidence.
EVIDENCE_SAMPLE = 2_000

#: Most filtered chunks a PostgreSQL search ranks exactly instead of through the HNSW index. bench/pg_scale.py
#: (2026-12-06, 2 cores): exact ranking of ~100 rows 1.5 ms, of 993 rows 10.6 ms, of 9,994 rows 102 ms, where the
#: HNSW index answered the 9,994-row filter in 25 ms at recall@10 1.0 and counting up to 10,001 rows cost the
#: check itself tens of milliseconds at 1M chunks; so 2,000 (a user's or a thread's store, LoCoMo's ~600-turn
#: conversations) stays exact and a larger scope goes to the index.
EXACT_ROWS = 2_000


def postgres_vector_sql(request: SearchRequest, query_vector, limit: int, *, connection=None, now=None,
                        exact: bool = False) -> tuple[str, list]:
    """PostgreSQL's vector arm: rows of (source_kind, record_id, cosine distance), best first.

    ``ORDER BY embedding <=> %s LIMIT n`` alone, the form pgvector's HNSW index
    answers (pgvector README, "Querying"), with ``filter_sql``'s WHERE. With
    ``exact`` the ORDER BY is ``(embedding <=> %s) + 0``, an expression no index
    matches, so PostgreSQL ranks every filtered row (ties by chunk id).
    """
    connection = connection or default_connection
    where_sql, where_params = filter_sql(request, now, connection)
    quote = connection.ops.quote_name
    table = quote(SearchChunk._meta.db_table)
    kind, rid, emb, pk = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id", "embedding", "id"))
    vector = pgvector_text(query_vector)
    order = f"({emb} <=> %s) + 0, {pk}" if exact else f"{emb} <=> %s"
    sql = (f"SELECT {kind}, {rid}, {emb} <=> %s AS {quote('distance')} FROM {table} WHERE ({where_sql}) "
           f"ORDER BY {order} LIMIT {int(limit)}")
    return sql, [vector, *where_params, vector]


#: First candidate count of the cached vector arm, per wanted row and at least.
CANDIDATES_PER_ROW = 2


MIN_CANDIDATES = 200


#: Largest candidate set tried before ranking the filtered rows in SQL instead.
MAX_CANDIDATES = 50_000


def _cached_vector_rows(cache, snapshot, request: SearchRequest, query_vector, now, limit: int) -> list[tuple] | None:
    """Exact top ``limit`` filtered chunks using the vector cache; None to fall back to SQL ranking.

    Candidates are the ``K`` nearest cached chunks of the request's project whatever the other filters, plus
    every chunk within twice the float32 rounding bound of the ``K``-th
    (``memory.index.vector_cache.rounding_bound``: ties and near-duplicates). One
    SQL statement returns, for each candidate that still exists, its true
    distance and whether it passes the filters, and ranks the filtered chunks
    newer than the snapshot (rows written since the last refresh, or inside
    this transaction). The answer is exact for that statement's view of the
    table when the ``limit``-th passing candidate is no farther than any chunk
    left out can be, or every live chunk was a candidate. Otherwise ``K`` is
    raised to what the observed pass rate needs (once); a filter that passes
    too few candidates (a single thread in a large store, say) returns None,
    and SQL ranks the filtered rows, which are then few. Also None for a zero
    query vector (every SQL distance is NULL) and when a candidate's true
    distance disagrees with the cache (reused ids: the cache is dropped; or a
    vector whose float32 norm is zero or overflows, seen differently by
    numpy and sqlite-vec).
    Distances are floats, or None for a zero chunk vector (ranked first, as in SQL).
    """
    vec = np.asarray(query_vector, dtype="<f4")
    if not np.any(vec):
        return None
    blob = vec.tobytes()
    where_sql, where_params = filter_sql(request, now)
    table = default_connection.ops.quote_name(SearchChunk._meta.db_table)
    in_transaction = in_transaction_now(default_connection)
    bound = rounding_bound(snapshot.matrix.shape[1])
    candidates = max(MIN_CANDIDATES, limit * CANDIDATES_PER_ROW)

    def key(row):  # (distance, chunk id) as SQLite orders them: NULL first
        return (row[3] is not None, row[3] if row[3] is not None else 0.0, row[0])

    for _ in range(2):
        ids, scores, floor = snapshot.candidates(vec, candidates, margin=2 * bound, project_id=request.project_id)
        with default_connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, source_kind, record_id, vec_distance_cosine(embedding, %s), "
                f"CASE WHEN ({where_sql}) THEN 1 ELSE 0 END FROM {table} "
                f"WHERE id IN (SELECT value FROM json_each(%s)) "
                f"UNION ALL SELECT * FROM (SELECT id, source_kind, record_id, "
                f"vec_distance_cosine(embedding, %s) AS distance, 2 FROM {table} "
                f"WHERE id > %s AND ({where_sql}) ORDER BY distance, id LIMIT %s)",
                [blob, *where_params, json.dumps(ids.tolist()), blob, snapshot.max_id, *where_params, limit],
            )
            rows = cursor.fetchall()
        found = [row for row in rows if row[4] != 2]
        newer = [row for row in rows if row[4] == 2]
        cached = dict(zip(ids.tolist(), (1.0 - scores.astype(np.float64)).tolist()))
        for chunk_id, _, _, distance, _ in found:
            expected = cached[chunk_id]
            if (distance is None) != (expected == -np.inf):
                return None  # a vector float32 cannot normalise (zero or overflowing norm) seen two ways
            if distance is not None and abs(distance - expected) > bound:
                cache.clear()  # the id names another vector now: reload on the next refresh
                return None
        if len(found) < ids.size and not in_transaction:
            cache.mark_dead(snapshot, set(ids.tolist()) - {row[0] for row in found})
        passed = sorted((row for row in found if row[4]), key=key)
        if floor == -np.inf:
            break  # every live cached chunk was a candidate
        if len(passed) >= limit:
            farthest = passed[limit - 1][3]
            if farthest is None or farthest <= 1.0 - floor - bound:
                break  # every chunk left out is farther (cosine distance > 1 - floor - bound)
        rate = len(passed) / max(len(found), 1)
        wanted = max(int(limit / rate * 2), 2 * candidates) if rate else MAX_CANDIDATES + 1
        if wanted > MAX_CANDIDATES:
            return None
        candidates = wanted
    else:
        return None
    rows = sorted(passed[:limit] + newer, key=key)[:limit]
    return [(kind, record_id, None if distance is None else float(distance))
            for _, kind, record_id, distance, _ in rows]


def keyword_sql(request: SearchRequest, column: str, terms: list[str], limit: int, *, connection=None,
                now=None) -> tuple[str, list]:
    """SQL for a keyword arm over ``column`` ("text" or "context"): rows of (source_kind, record_id, rank).

    The WHERE clause is the one the ORM compiles for ``filtered_chunks`` on the
    same connection, so both arms filter identically; only the match differs,
    by ``connection``'s backend (``SqliteBackend.keyword_sql``,
    ``OracleBackend.keyword_sql``). Raises ``NotImplementedError`` on another vendor.
    """
    if column not in ("text", "context"):
        raise ValueError("column must be 'text' or 'context'")
    if not terms:
        raise ValueError("terms must not be empty")
    connection = connection or default_connection
    where_sql, where_params = filter_sql(request, now, connection)
    quote = connection.ops.quote_name
    table = quote(SearchChunk._meta.db_table)
    backend = backend_for(connection)
    sql, match = backend.keyword_sql(column=column, terms=terms, limit=int(limit), quote=quote, table=table,
                                     where_sql=where_sql, vendor=connection.vendor,
                                     evidence=request.mode == "HYBRID", project_id=request.project_id)
    return sql, backend.keyword_params(match, where_params)


#: Smallest BM25 score (its magnitude; FTS5's ``bm25()`` is negative) that counts as keyword evidence on
#: SQLite. FTS5 clamps the IDF of a term found in half the indexed chunks or more to 1e-6, so a chunk that
#: matches only such terms (the role "user" in a store of user turns) scores about 1e-6 per term: no evidence,
#: and reciprocal rank fusion must not give it a rank's credit ("My receipt" ranked first for
#: "what food does the user like?" on a fresh two-turn thread, on the length of a clamped "user" match).
#: Applied in HYBRID only, where the vector arm still ranks every record: KEYWORD mode keeps such matches (in
#: a store of one or two records every term is that common). Not tuned on LoCoMo (no split): a constant of
#: FTS5's clamp, far below the score of any term found in fewer than half the chunks.
MIN_BM25_EVIDENCE = 1e-3


class SearchBackend:
    """What every vendor does the same way; the base for a database without vector index or keyword index."""

    def vector_rows(self, request: SearchRequest, query_vector, now, limit: int, connection) -> list[tuple]:
        """Up to ``limit`` rows of (source_kind, record_id, cosine distance), best first: every filtered chunk
        ranked in SQL (``chunk_queryset``)."""
        return list(chunk_queryset(request, query_vector, now, limit=limit))

    def keyword_sql(self, *, column: str, terms: list[str], limit: int, quote, table: str, where_sql: str,
                    vendor: str, evidence: bool = False, project_id: int | None = None) -> tuple[str, str]:
        """(SQL with two placeholders groups: the match, then ``where_sql``'s params; the match string).
        ``evidence``: HYBRID's rule that a term found in half the indexed texts or more is no evidence (SQLite
        applies it after the query, ``keyword_evidence``; PostgreSQL inside it, over ``project_id``'s chunks)."""
        raise NotImplementedError(f"keyword search is not available on {vendor}")

    def keyword_params(self, match, where_params: list) -> list:
        """The parameters of ``keyword_sql``'s statement: the match, then the WHERE clause's."""
        return [match, *where_params]

    def keyword_evidence(self, request: SearchRequest, rows: list[tuple]) -> list[tuple]:
        """The keyword rows that count as evidence (all of them here)."""
        return rows

    def keyword_strength(self, rank) -> float:
        """A keyword row's rank column as a strength: higher is better, >= 0 (0 for NULL)."""
        return max(0.0, float(rank)) if rank is not None else 0.0


class SqliteBackend(SearchBackend):
    """SQLite with sqlite-vec: the vector cache for exact KNN, FTS5 for keywords."""

    def vector_rows(self, request, query_vector, now, limit, connection):
        cache = get_vector_cache()
        snapshot = cache.snapshot(connection) if cache is not None else None
        if snapshot is not None:
            rows = _cached_vector_rows(cache, snapshot, request, query_vector, now, limit)
            if rows is not None:
                return rows
        return super().vector_rows(request, query_vector, now, limit, connection)

    def keyword_sql(self, *, column, terms, limit, quote, table, where_sql, vendor, evidence=False, project_id=None):
        """``<fts> MATCH '<column> : ("t1" OR "t2")'`` cross-joined on rowid (FTS first), ranked by ``bm25()``
        (smaller is better)."""
        fts = KEYWORD_INDEX
        kind, rid = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id"))
        match = f"{column} : (" + " OR ".join(f'"{t}"' for t in terms) + ")"
        weights = "1.0, 0.0" if column == "text" else "0.0, 1.0"
        sql = (
            # CROSS JOIN makes SQLite drive from the FTS matches; with a plain
            # JOIN it may scan the scoped chunks and probe the FTS index once
            # per row (1.7 s instead of a few ms per query on LoCoMo).
            f"SELECT {kind}, {rid}, bm25({fts}, {weights}) AS rank FROM {fts} "
            f"CROSS JOIN {table} ON {table}.{quote('id')} = {fts}.rowid "
            f"WHERE {fts} MATCH %s AND ({where_sql}) ORDER BY rank LIMIT {limit}"
        )
        return sql, match

    def keyword_evidence(self, request, rows):
        """In HYBRID, only matches whose BM25 magnitude reaches ``MIN_BM25_EVIDENCE``."""
        if request.mode != "HYBRID":
            return rows
        return [row for row in rows if row[2] is not None and -row[2] >= MIN_BM25_EVIDENCE]

    def keyword_strength(self, rank) -> float:
        """FTS5's ``bm25()`` is negative, smaller better: its magnitude."""
        return max(0.0, -float(rank)) if rank is not None else 0.0


class OracleBackend(SearchBackend):
    """Oracle Database 23ai/26ai: the vector index (approximate fetch) and Oracle Text."""

    def vector_rows(self, request, query_vector, now, limit, connection):
        sql, params = vector_sql(request, query_vector, limit, connection=connection, now=now)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [(k, r, float(d)) for k, r, d in cursor.fetchall()]

    def keyword_sql(self, *, column, terms, limit, quote, table, where_sql, vendor, evidence=False, project_id=None):
        """``CONTAINS(<column>, '{t1} ACCUM {t2}', 1) > 0`` ranked by ``SCORE(1)`` descending, ``FETCH FIRST n
        ROWS ONLY``. Terms are word characters only and wrapped in braces, Oracle Text's escape for reserved
        words, so a query cannot inject operators."""
        kind, rid, col = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id", column))
        match = " ACCUM ".join("{" + t + "}" for t in terms)
        sql = (
            f"SELECT {kind}, {rid}, SCORE(1) AS {quote('rank')} FROM {table} "
            f"WHERE CONTAINS({col}, %s, 1) > 0 AND ({where_sql}) "
            f"ORDER BY SCORE(1) DESC FETCH FIRST {limit} ROWS ONLY"
        )
        return sql, match


class PostgresBackend(SearchBackend):
    """PostgreSQL with pgvector: the HNSW index with an iterative scan, and full-text search on ``tsvector``."""

    def vector_rows(self, request, query_vector, now, limit, connection):
        """Exact while the search's filtered chunks are few, the HNSW index beyond.

        At most ``EXACT_ROWS`` filtered chunks (counted with a bounded ``LIMIT``, through the scope's B-tree
        index): every one is ranked exactly, as on SQLite (about 10 ms at 1,000 rows; an export imported
        elsewhere answers the same). More: the HNSW index, with ``hnsw.iterative_scan = strict_order`` (pgvector 0.8),
        which keeps scanning the graph while the WHERE clause rejects what it finds (up to
        ``hnsw.max_scan_tuples``), and ``hnsw.ef_search`` from ``ef_search(limit)``. An approximate index
        can still return fewer than ``limit`` rows (a filter that rejects nearly everything the scan meets):
        then the filtered rows are ranked exactly (``postgres_vector_sql(exact=True)``). Recall against exact
        search at 100k and 1M chunks: ``bench/pg_scale.py``. A zero vector has no cosine distance (pgvector
        answers NaN): it is reported as None, as SQLite's NULL is."""
        where_sql, where_params = filter_sql(request, now, connection)
        table = connection.ops.quote_name(SearchChunk._meta.db_table)
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE ({where_sql}) LIMIT {EXACT_ROWS + 1}) "
                           "AS _few", where_params)
            exact = cursor.fetchone()[0] <= EXACT_ROWS
            cursor.execute("SET LOCAL hnsw.iterative_scan = strict_order")
            cursor.execute(f"SET LOCAL hnsw.ef_search = {ef_search(limit)}")
            sql, params = postgres_vector_sql(request, query_vector, limit, connection=connection, now=now,
                                              exact=exact)
            cursor.execute(sql, params)
            rows = cursor.fetchall()
            if len(rows) < limit and not exact:
                sql, params = postgres_vector_sql(request, query_vector, limit, connection=connection, now=now,
                                                  exact=True)
                cursor.execute(sql, params)
                rows = cursor.fetchall()
        return [(k, r, None if d is None or math.isnan(d) else float(d)) for k, r, d in rows]

    def keyword_sql(self, *, column, terms, limit, quote, table, where_sql, vendor, evidence=False, project_id=None):
        """``<column>_tsv @@ to_tsquery('english', 't1' | 't2')`` ranked by ``ts_rank_cd(..., 1)`` descending (cover
        density divided by 1 + log of the text's length, as BM25 weighs long texts down), then by record id and
        chunk: ``ts_rank_cd`` ties often (no IDF), and a record id breaks them the same way in every copy of a
        store (an export imported elsewhere gets new row ids). Terms are word characters only
        (``memory.search.request``), each quoted as a lexeme (``quote_literal``), so a query cannot inject
        operators; a stop word becomes an empty lexeme and matches nothing.

        With ``evidence`` (HYBRID), a term found in half or more of the project's chunks is left out of the
        query, as FTS5 clamps such a term's IDF to nothing on SQLite (``MIN_BM25_EVIDENCE``; FTS5 counts over
        its whole table, here one tenant's rows count, so one project's words never weigh another's search):
        "bicycle" in every chunk of a store is no reason to rank a chunk. ``ts_rank_cd`` has no IDF of its own.
        The shares are counted on at most ``EVIDENCE_SAMPLE`` chunks of the project (bounded work per search),
        each term's ``tsquery`` parsed once.
        The match is (project id, the terms as a text array), bound before the WHERE clause's parameters."""
        kind, rid, part = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id", "chunk_index"))
        vector = f"{table}.{quote(tsvector_column(column))}"
        config = f"'{TEXT_SEARCH_CONFIG}'"
        common = ("(SELECT count(*) FILTER (WHERE _s.v @@ _t.tq) * 2 >= greatest(count(*), 1) FROM _sample AS _s)"
                  if evidence else "false")
        sql = (
            f"WITH _sample AS (SELECT {vector} AS v FROM {table} WHERE {table}.{quote('project_id')} = %s "
            f"LIMIT {EVIDENCE_SAMPLE}), "
            f"_terms AS (SELECT term, to_tsquery({config}, quote_literal(term)) AS tq "
            f"FROM unnest(%s::text[]) AS term), "
            f"_query AS (SELECT to_tsquery({config}, string_agg(quote_literal(_t.term), ' | ')) AS q "
            f"FROM _terms AS _t WHERE NOT {common}) "
            f"SELECT {kind}, {rid}, ts_rank_cd({vector}, _query.q, 1) AS {quote('rank')} "
            f"FROM {table} CROSS JOIN _query "
            f"WHERE {vector} @@ _query.q AND ({where_sql}) ORDER BY {quote('rank')} DESC, {rid}, {part} LIMIT {limit}"
        )
        return sql, (project_id, list(terms))

    def keyword_params(self, match, where_params):
        project_id, terms = match
        return [project_id, terms, *where_params]


#: The backend of each vendor; ``backend_for`` is the one place a vendor is chosen.
BACKENDS: dict[str, SearchBackend] = {"sqlite": SqliteBackend(), "oracle": OracleBackend(),
                                      "postgresql": PostgresBackend()}


def backend_for(connection=None) -> SearchBackend:
    """The search backend of ``connection`` (default: the default database)."""
    return BACKENDS.get((connection or default_connection).vendor, SearchBackend())
