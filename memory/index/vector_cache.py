"""Exact nearest-neighbour search for the embedded SQLite store: a process-local copy of the vectors.

Why: on SQLite the vector arm used to rank every scoped chunk with
``vec_distance_cosine`` in SQL. That reads every 1.5 KB embedding row through
the pager per query: 7.4 times an in-memory numpy scan at 100,000 chunks
(``bench/search_scale.py``, the target is at most 2 times). sqlite-vec's
``vec0`` KNN is a brute-force scan of its own pages (about 6 times numpy at
100k, measured in the same way) and its binary quantisation loses recall.
Oracle has a real vector index (HNSW/IVF, ``memory.search.backends.vector_sql``); this
module is only for SQLite.

What: :class:`VectorCache` keeps ``oam_search_chunks.embedding`` (normalised
float32, one row per chunk id) in a numpy matrix. The database stays the only
source of truth; the cache is a read-through copy that can only be *behind*:

* Chunk embeddings are immutable: the services delete a chunk and insert a new
  one (a new id) when a record is re-embedded, and SQLite's ``AUTOINCREMENT``
  never reuses a committed id. So a refresh loads ``id > max_id`` (one index
  range scan, usually empty).
* Rows deleted since they were loaded stay in the matrix until a search meets
  them; it marks them dead (:meth:`VectorCache.mark_dead`).
* A refresh first checks that ids still name the rows it holds: its newest
  row is the same (record, chunk index, creation time), or was deleted while
  the id sequence moved past it; and no row at or below its newest id was
  created after every row it holds. Otherwise (a table flushed with its
  sequence reset) it reloads everything, as it does for a database file that
  was deleted and created again (another inode). Rows put back with their old
  creation times (a fixture) can pass these checks; a search then finds a
  candidate whose true distance disagrees with the copy and drops it.
* It only refreshes outside a transaction (autocommit), so it never holds a row
  that may still be rolled back; inside one it neither loads nor marks rows
  dead (a delete may be rolled back), and rows newer than the cache are
  ranked in SQL (``memory.search``).

How search uses it (``memory.search.ranking.vector_arm``): the ``K`` chunks nearest to
the query among *all* cached rows, plus every row within twice the float32
rounding bound of the ``K``-th (:func:`rounding_bound`; ties and
near-duplicates), then one SQL statement applies the request's filters to
those ids, computes their true distances and ranks the rows newer than the
cache. When the ``limit``-th passing candidate is no farther than any chunk
left out can be (``1 - floor - bound``, :meth:`Snapshot.candidates`), the
answer is exactly the top ``limit`` filtered chunks of that statement's view
of the table, not an approximation; otherwise ``K`` grows, or a selective
filter falls back to ranking its rows in SQL. A candidate whose true distance
differs from the cached one by more than the bound means ids were reused: the
cache is dropped and that search ranks in SQL.

Projects: each row keeps its chunk's ``project_id``, and a search
takes candidates among its own project's rows only (``Snapshot.candidates``'s
``project_id``), so another tenant's chunks neither crowd out the candidates
nor reach the SQL that checks them.

Memory: 1,536 bytes per chunk (384 float32) plus 17 bytes of bookkeeping, per
process (about 154 MB at 100,000 chunks). Above ``OAM_VECTOR_CACHE_MAX_ROWS``
(default 1,000,000) the cache stays off and search ranks in SQL.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass

import numpy as np
from django.db import connections

from memory.core import conf

logger = logging.getLogger(__name__)

#: Rows fetched per round trip while loading.
FETCH_BATCH = 10_000
#: Seconds between row counts while the table is over ``max_rows``.
TOO_BIG_RECHECK_SECONDS = 60.0


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of the cache: rows ``[0, n)`` of ``ids``/``matrix``/``alive``/``projects``.

    ``max_id`` is the largest chunk id held (0 when empty): rows with a larger
    id are not in the snapshot and must be ranked another way.
    """

    ids: np.ndarray  # int64, ascending
    matrix: np.ndarray  # float32 (capacity, dim), rows normalised to unit length
    alive: np.ndarray  # bool; False once a search found the row deleted
    n: int
    max_id: int
    projects: np.ndarray | None = None  # int64, the chunk's project_id (None: not known)

    def nearest(self, query_vector, k: int) -> np.ndarray:
        """Ids of the ``k`` live rows with the highest cosine similarity to ``query_vector``, unordered.

        Returns every live id when ``k >= n``, and every row tied with the
        ``k``-th too. ``query_vector`` is any 1-D array of the cache's
        dimension; it is normalised here.
        """
        return self.candidates(query_vector, k)[0]

    def candidates(self, query_vector, k: int, margin: float = 0.0,
                   project_id: int | None = None) -> tuple[np.ndarray, np.ndarray, float]:
        """``(ids, scores, floor)``: the ``k`` most similar live rows, and every live row within ``margin``.

        With ``project_id``, only rows of that project count as live. ``scores``
        are the cached cosine similarities of ``ids`` (float32; ``inf`` for a
        zero vector, whose SQL distance is NULL and sorts first). Every live
        row *not* returned scores below ``floor`` (``-inf`` when all live rows
        are returned), which is the ``k``-th best score less ``margin``.
        """
        empty = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32), float("-inf")
        if self.n == 0:
            return empty
        q = np.asarray(query_vector, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        scores = self.matrix[: self.n] @ q
        scores[np.isnan(scores)] = np.inf  # zero rows are stored as NaN (see _append)
        alive = self.alive[: self.n]
        if project_id is not None:
            if self.projects is None:
                raise ValueError("this snapshot does not know the rows' projects")
            alive = alive & (self.projects[: self.n] == project_id)
        if not alive.all():
            scores[~alive] = -np.inf
        live = int(alive.sum())
        if k >= live:
            keep = np.flatnonzero(alive)
            return self.ids[keep], scores[keep], float("-inf")
        if k <= 0:
            return empty[0], empty[1], float("inf")
        kth = float(np.partition(scores, self.n - k)[self.n - k])
        floor = kth - margin
        keep = np.flatnonzero(scores >= floor)
        return self.ids[keep], scores[keep], floor

    @property
    def live_rows(self) -> int:
        """Rows not known to be deleted."""
        return int(self.alive[: self.n].sum())


class VectorCache:
    """A process-local, thread-safe copy of the chunk embeddings of one SQLite database.

    ``snapshot(connection)`` refreshes (outside transactions) and returns a
    :class:`Snapshot`, or None when the cache is disabled or the table has more
    than ``max_rows`` chunks. See the module docstring for the consistency rules.
    """

    def __init__(self, table: str = "oam_search_chunks", dimensions: int = 384, max_rows: int = 1_000_000):
        self.table = table
        self.dimensions = dimensions
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._reset(None)

    def _reset(self, database: str | None) -> None:
        self._database = database
        self._ids = np.empty(0, dtype=np.int64)
        self._matrix = np.empty((0, self.dimensions), dtype=np.float32)
        self._alive = np.empty(0, dtype=bool)
        self._projects = np.empty(0, dtype=np.int64)
        self._n = 0
        self._tail: tuple | None = None  # (id, record_id, chunk_index, created_at) of the newest row
        self._newest_created: str | None = None  # the latest created_at (as stored) of the rows held
        self._too_big = False
        self._too_big_since = 0.0
        self._snapshot = Snapshot(self._ids, self._matrix, self._alive, 0, 0, self._projects)

    def clear(self) -> None:
        """Drop everything held (the next snapshot reloads)."""
        with self._lock:
            self._reset(None)

    def snapshot(self, connection) -> Snapshot | None:
        """The current rows, refreshed from ``connection`` unless it is inside a transaction.

        Returns None when the table holds more than ``max_rows`` chunks.
        Raises whatever the database raises.
        """
        database = _database_identity(connection)
        # Connect before taking the lock: a new connection may wait for another's write
        # transaction (``PRAGMA optimize`` may ANALYZE), and that writer may be waiting for this lock.
        connection.ensure_connection()
        in_transaction = in_transaction_now(connection)
        with self._lock:
            if self._database != database:
                if in_transaction:
                    return None
                self._reset(database)
            with connection.cursor() as cursor:
                if not in_transaction:
                    self._refresh(cursor)
                elif self._too_big or self._stale(cursor):
                    return None  # inside a transaction the copy is never reloaded: rank in SQL
            return None if self._too_big else self._snapshot

    def forget(self, chunk_ids) -> None:
        """Drop deleted chunks for good: zero their vectors in memory and mark them dead (erasure).

        ``mark_dead`` only hides a row; an erased record's embedding must not
        stay in this process's memory either. Ids not held are ignored.
        """
        ids = np.asarray(list(chunk_ids), dtype=np.int64)
        if ids.size == 0:
            return
        with self._lock:
            rows = np.flatnonzero(np.isin(self._ids[: self._n], ids))
            self._matrix[rows] = 0.0
            self._alive[rows] = False

    def mark_dead(self, snapshot: Snapshot, chunk_ids) -> None:
        """Mark rows of ``snapshot`` whose chunks no longer exist, so later searches skip them."""
        ids = np.asarray(list(chunk_ids), dtype=np.int64)
        if ids.size == 0:
            return
        rows = np.flatnonzero(np.isin(snapshot.ids[: snapshot.n], ids))
        with self._lock:
            snapshot.alive[rows] = False

    # --- loading ---------------------------------------------------------------------

    def _tail_row(self, cursor, chunk_id: int) -> tuple | None:
        cursor.execute(f"SELECT id, record_id, chunk_index, created_at FROM {self.table} WHERE id = %s", [chunk_id])
        row = cursor.fetchone()
        return None if row is None else tuple(str(v) for v in row)

    def _stale(self, cursor) -> bool:
        """Whether an id held may now name a different chunk (then everything must be reloaded).

        The newest row held is compared with the table: the same row, or gone
        while the id sequence has passed it (a plain delete: it is marked dead
        when a search meets it), means the copy is still right. A different
        row, or a sequence that went back (a table flushed with its sequence
        reset), means ids are being reused.
        """
        if self._tail is None:
            return False
        current = self._tail_row(cursor, int(self._tail[0]))
        if current is not None:
            if current != self._tail:
                return True
        else:
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [self.table])
            row = cursor.fetchone()
            if row is None or int(row[0]) < int(self._tail[0]):
                return True
        # A row at or below the newest id held, created after every row held, reuses an id (the
        # sequence was reset and has since passed the old tail, which was deleted again). ``+id``
        # keeps SQLite on the created_at index: only rows newer than the copy are read.
        cursor.execute(f"SELECT 1 FROM {self.table} WHERE created_at > %s AND +id <= %s LIMIT 1",
                       [self._newest_created, int(self._tail[0])])
        return cursor.fetchone() is not None

    def _refresh(self, cursor) -> None:
        if self._stale(cursor):
            logger.info("vector cache: chunk ids were reused (table reset); reloading")
            self._reset(self._database)
        max_id = int(self._ids[self._n - 1]) if self._n else 0
        if self._too_big:
            if time.monotonic() - self._too_big_since < TOO_BIG_RECHECK_SECONDS:
                return
            cursor.execute(f"SELECT COUNT(*) FROM {self.table}")
            if cursor.fetchone()[0] > self.max_rows:
                self._too_big_since = time.monotonic()
                return
            self._reset(self._database)
            max_id = 0
        started = time.perf_counter()
        cursor.execute(f"SELECT id, embedding, CAST(created_at AS TEXT), project_id FROM {self.table} "
                       f"WHERE id > %s ORDER BY id", [max_id])
        loaded = 0
        while batch := cursor.fetchmany(FETCH_BATCH):
            newest = max(row[2] for row in batch)
            if self._newest_created is None or newest > self._newest_created:
                self._newest_created = newest
            if self._n + len(batch) > self.max_rows:
                logger.warning("vector cache: more than %s chunks; search ranks in SQL instead", self.max_rows)
                self._reset(self._database)
                self._too_big = True
                self._too_big_since = time.monotonic()
                return
            self._append(batch)
            loaded += len(batch)
        if loaded:
            self._tail = self._tail_row(cursor, int(self._ids[self._n - 1]))
            self._snapshot = Snapshot(self._ids, self._matrix, self._alive, self._n, int(self._ids[self._n - 1]),
                                      self._projects)
            if loaded > FETCH_BATCH:
                logger.info("vector cache: loaded %s chunks in %.2f s", loaded, time.perf_counter() - started)

    def _append(self, rows) -> None:
        count = len(rows)
        need = self._n + count
        if need > self._ids.shape[0]:
            capacity = max(need, 2 * self._ids.shape[0], 1024)
            ids = np.empty(capacity, dtype=np.int64)
            matrix = np.empty((capacity, self.dimensions), dtype=np.float32)
            alive = np.zeros(capacity, dtype=bool)
            projects = np.zeros(capacity, dtype=np.int64)
            ids[: self._n] = self._ids[: self._n]
            matrix[: self._n] = self._matrix[: self._n]
            alive[: self._n] = self._alive[: self._n]
            projects[: self._n] = self._projects[: self._n]
            self._ids, self._matrix, self._alive, self._projects = ids, matrix, alive, projects
        block = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype="<f4").reshape(count, self.dimensions)
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        # A zero vector has no direction: sqlite-vec's cosine distance to it is
        # NULL, which sorts first. NaN rows score NaN, which ``candidates`` ranks first.
        norms[(norms == 0) | ~np.isfinite(norms)] = np.nan
        self._ids[self._n : need] = [r[0] for r in rows]
        self._matrix[self._n : need] = block / norms
        self._alive[self._n : need] = True
        self._projects[self._n : need] = [r[3] for r in rows]
        self._n = need


def in_transaction_now(connection) -> bool:
    """Whether ``connection`` may hold uncommitted writes (an atomic block, or autocommit off).

    The cache never loads rows, nor marks rows dead, from such a connection:
    what it sees may still be rolled back, and other threads do not see it.
    """
    return connection.in_atomic_block or not connection.get_autocommit()


def rounding_bound(dimensions: int) -> float:
    """Largest difference between a cached cosine distance and sqlite-vec's, for finite vectors.

    Both sides compute in float32: a ``dimensions``-term dot product and two
    norms, each off by at most ``dimensions * 2**-24`` relative to the product
    of the norms (Higham, *Accuracy and Stability of Numerical Algorithms*,
    section 3.1), plus normalisation and division. ``4 * dimensions + 16``
    units covers both sides (384 dimensions: 9.3e-5; measured: at most 3e-6).
    """
    return (4 * dimensions + 16) * 2.0**-24


def _database_identity(connection) -> str:
    """The database file's name and inode: a file deleted and created again is another database."""
    name = str(connection.settings_dict["NAME"])
    try:
        stat = os.stat(name)
    except OSError:
        return name
    return f"{name}#{stat.st_dev}:{stat.st_ino}"


_caches: dict[str, VectorCache] = {}
_caches_lock = threading.Lock()


def get_vector_cache(alias: str = "default") -> VectorCache | None:
    """The process's cache for database ``alias``, or None when ``settings.OAM_VECTOR_CACHE`` is off or the database
    is not SQLite (PostgreSQL and Oracle rank through their vector indexes: ``memory.search.backends``)."""
    if not conf.get("OAM_VECTOR_CACHE") or connections[alias].vendor != "sqlite":
        return None
    with _caches_lock:
        cache = _caches.get(alias)
        if cache is None:
            cache = _caches[alias] = VectorCache(
                dimensions=conf.get("OAM_EMBEDDING_DIMENSIONS"),
                max_rows=conf.get("OAM_VECTOR_CACHE_MAX_ROWS"),
            )
        return cache


def warm(alias: str = "default") -> int:
    """Load the cache for database ``alias`` now, on this thread's connection; the rows held (0 if none).

    A no-op (0) off SQLite, with the cache off, or over its row cap. Closes
    the connection it opened, so it is safe on a fresh thread.
    """
    connection = connections[alias]
    try:
        cache = get_vector_cache(alias)  # None off SQLite
        if cache is None:
            return 0
        snapshot = cache.snapshot(connection)
        return 0 if snapshot is None else snapshot.n
    finally:
        connection.close()


def warm_in_background(alias: str = "default") -> threading.Thread:
    """Start ``warm`` on a daemon thread (the server does this on its first request, so the
    one-off load, about 0.8 s per 100,000 chunks, rarely falls on a search). Errors are logged."""

    def run():
        try:
            rows = warm(alias)
            if rows:
                logger.info("vector cache: %s chunks held", rows)
        except Exception:  # a warm-up must never take the server down
            logger.exception("vector cache: warm-up failed; the first search will load it")

    thread = threading.Thread(target=run, name="oam-vector-cache-warm", daemon=True)
    thread.start()
    return thread
