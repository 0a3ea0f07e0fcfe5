"""Making committed deletes final in the storage: ``storage_scrub`` and what it runs.

Deleting rows is not enough for a file database: SQLite keeps deleted text in
free pages and in the WAL, and FTS5 keeps deleted terms in its segments. So
every SQLite connection sets ``PRAGMA secure_delete = ON`` (freed content is
overwritten with zeros; ``memory.backends.sqlite_vec``), the keyword index has
FTS5's ``secure-delete`` option on (migration 0007: a delete removes its
terms at once), and ``storage_scrub``, after an erasure that deleted
something, an expiry purge that did and the admin's deletes, rewrites the
keyword index into one segment
(``keyword_index_rewrite``: secure-delete leaves a deleted term that began a
leaf page in the segment's b-tree keys), then checkpoints the WAL into the
file and truncates it. On Oracle, ``storage_scrub`` optimizes the
Oracle Text indexes (``CTX_DDL.OPTIMIZE_INDEX ... 'FULL'``), which drops the
deleted rows' tokens; undo, redo and flashback retention are the DBA's. On
PostgreSQL, ``storage_scrub`` runs a plain ``VACUUM`` of the tables that hold
text (``postgres_vacuum``): the deleted rows' tuples leave the heap and every
index (GIN included), but PostgreSQL does not zero the space they leave inside a
page, and WAL segments, replicas and base backups keep the old bytes until they
are recycled or expire; ``VACUUM FULL`` (an exclusive lock) rewrites the files,
the operator's choice for a quiet hour (docs/databases.md, "PostgreSQL").

``chunk_deletes_since_scrub`` tells the expiry purge whether any path deleted a search chunk or a history
version since the last scrub (so the purge scrubs for those too). Callers: ``memory.services.erasure``
(``subject_erase``, ``expired_purge``) and the Django admin's deletes (``memory.admin``).
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.cache import cache
from django.db import connection as default_connection
from django.db import transaction

from memory.core import conf, degraded
from memory.models import MemoryVersion, SearchChunk
from memory.search.backends import KEYWORD_INDEX

logger = logging.getLogger(__name__)

#: Cache key of the chunk-delete total at the last scrub (``chunk_deletes_since_scrub``).
SCRUBBED_DELETES_KEY = "oam:erasure:chunk-deletes-at-last-scrub"


def chunk_deletes_total(connection=None) -> int | None:
    """How many search chunks and memory history versions were ever deleted: SQLite's ``AUTOINCREMENT``
    high-water marks of ``oam_search_chunks`` and ``oam_memory_versions`` (ids are never reused) minus the
    rows left. None on other databases. (History versions count since a thread's delete takes the history
    of memories deleted earlier, which may be all it deletes: found by a security review.)"""
    connection = connection or default_connection
    if connection.vendor != "sqlite":
        return None
    total = 0
    with connection.cursor() as cursor:
        for table in (SearchChunk._meta.db_table, MemoryVersion._meta.db_table):
            cursor.execute("SELECT seq FROM sqlite_sequence WHERE name = %s", [table])
            row = cursor.fetchone()
            cursor.execute(f"SELECT COUNT(*) FROM {connection.ops.quote_name(table)}")
            total += (row[0] if row else 0) - cursor.fetchone()[0]
    return total


def chunk_deletes_since_scrub(connection=None) -> bool:
    """Whether a search chunk or history version was deleted since the last ``storage_scrub`` (by any path),
    as far as the cache knows (a cold cache, e.g. a restarted worker without Redis, answers True once; an
    unreachable one answers True: ``memory.core.degraded``)."""
    total = chunk_deletes_total(connection)
    return total is not None and total != degraded.attempt("cache", lambda: cache.get(SCRUBBED_DELETES_KEY),
                                                           lambda: None)


# --- the storage -----------------------------------------------------------------------------------


def oracle_text_optimize_sql(connection=None) -> list[str]:
    """The PL/SQL blocks that remove deleted rows' tokens from the Oracle Text indexes of the keyword index.

    One anonymous block per index (``<KEYWORD_INDEX>_1`` on ``text``, ``_2`` on ``context``), each
    ``BEGIN CTX_DDL.OPTIMIZE_INDEX('"<INDEX>"', 'FULL'); END;`` followed by a newline. The newline is needed:
    Django's Oracle cursor strips one trailing ``;`` or ``/`` from every statement
    (``FormatStylePlaceholderCursor._fix_for_params``, meant for SQL pasted from SQL*Plus), so a block that
    ended in ``END;`` would reach python-oracledb as ``... END`` and fail with PLS-00103 (``storage_scrub``
    would log it and report ``"error"``, while the erased words stayed in the index's ``$I`` token table).
    With the newline last, nothing is stripped and the driver receives ``END;`` (PL/SQL ignores the
    whitespace). ``memory.operations.CreateVectorIndex`` ends its block the same way for the same reason.
    """
    connection = connection or default_connection
    quote = connection.ops.quote_name
    return [f"BEGIN CTX_DDL.OPTIMIZE_INDEX('{quote(f'{KEYWORD_INDEX}_{i}')}', 'FULL'); END;\n" for i in (1, 2)]


#: PostgreSQL: the tables whose rows carry a record's text, ids or metadata, vacuumed by ``storage_scrub``.
VACUUMED_TABLES = ("oam_search_chunks", "oam_messages", "oam_memories", "oam_memory_versions", "oam_images",
                   "oam_thread_summaries", "oam_record_links", "oam_threads")


def postgres_vacuum(connection) -> bool:
    """PostgreSQL: ``VACUUM`` each of ``VACUUMED_TABLES`` (outside a transaction, as PostgreSQL requires);
    True when every one ran."""
    with connection.cursor() as cursor:
        for table in VACUUMED_TABLES:
            cursor.execute(f"VACUUM {connection.ops.quote_name(table)}")
    return True


def _remember_scrubbed_deletes(connection) -> None:
    total = chunk_deletes_total(connection)
    degraded.attempt("cache", lambda: cache.set(SCRUBBED_DELETES_KEY, total, None), lambda: None)


def storage_scrub(connection=None) -> dict[str, Any]:
    """Make committed deletes final in the storage; return what was done.

    SQLite: ``PRAGMA secure_delete`` and FTS5 ``secure-delete`` already
    overwrote the deleted content in the pages written; ``keyword_index_rewrite``
    drops the deleted terms FTS5 kept as page keys (``keyword_index_optimized``;
    O(index size), figures there); the planner's index
    samples (``sqlite_stat4``, kept by ``ANALYZE`` and ``PRAGMA optimize``
    when SQLite has them) may still hold indexed values such as user and
    thread ids, so the rows of this service's tables go (``sqlite_stat1``'s
    counts stay; a later ``ANALYZE`` samples what is left). ``secure_delete``
    zeroes freed pages and deleted cells, but when a b-tree page is rebuilt
    (a split or merge after writes) SQLite copies its cells and leaves the
    page's unused gap as it was (``rebuildPage`` in SQLite's ``btree.c``), so
    bytes of a deleted row can survive in a live page (seen in about one
    full test-suite run in three: an erased word's FTS5 leaf cell in a page
    of the file after the rewrite and the checkpoint, never when the test ran
    alone). ``VACUUM`` rebuilds every page of the file
    from the live rows, so it runs too (``vacuumed``) when the file is at
    most ``OAM_SCRUB_VACUUM_MAX_MB`` (default 512; about 7 ms per MB
    measured on a LoCoMo database; it holds the write lock meanwhile), else
    ``vacuumed`` is False and the operator runs ``VACUUM`` in a quiet hour.
    ``wal_checkpoint(TRUNCATE)`` then copies the pages into the database
    file and empties the WAL, which still held the old page images.
    ``wal_truncated`` is False when a reader kept the checkpoint from
    finishing (a later scrub or checkpoint completes it); ``vacuumed`` and
    ``wal_truncated`` are ``"at commit"`` when the scrub ran inside the
    caller's transaction (both run when it commits). PostgreSQL: ``VACUUM`` of ``VACUUMED_TABLES``
(``vacuumed``; ``"at commit"`` inside a transaction). Oracle: ``CTX_DDL.OPTIMIZE_INDEX(..., 'FULL')`` on both keyword
    indexes. Errors are logged, not raised: the rows are deleted already.
    """
    connection = connection or default_connection
    done: dict[str, Any] = {"vendor": connection.vendor}
    try:
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute("PRAGMA secure_delete")
                done["secure_delete"] = bool(cursor.fetchone()[0])
                keyword_index_rewrite(connection)  # before the checkpoint, which copies its pages into the file
                done["keyword_index_optimized"] = True
                _remember_scrubbed_deletes(connection)
                cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat4'")
                if cursor.fetchone():  # ANALYZE's samples of index keys: ids, user ids
                    cursor.execute("DELETE FROM sqlite_stat4 WHERE tbl LIKE 'oam\\_%' ESCAPE '\\'")
                    done["index_samples_cleared"] = True
                if connection.in_atomic_block:  # VACUUM and a checkpoint cannot run inside a transaction
                    transaction.on_commit(lambda: _vacuum_and_checkpoint(connection), using=connection.alias)
                    done["vacuumed"] = done["wal_truncated"] = "at commit"
                else:
                    done["vacuumed"], done["wal_truncated"] = _vacuum_and_checkpoint(connection)
            elif connection.vendor == "postgresql":
                if connection.in_atomic_block:  # VACUUM cannot run inside a transaction block
                    transaction.on_commit(lambda: postgres_vacuum(connection), using=connection.alias)
                    done["vacuumed"] = "at commit"
                else:
                    done["vacuumed"] = postgres_vacuum(connection)
            elif connection.vendor == "oracle":
                for statement in oracle_text_optimize_sql(connection):
                    cursor.execute(statement)
                done["text_index_optimized"] = True
    except Exception:  # noqa: BLE001 - the delete committed; the scrub is best effort and reported
        logger.warning("storage scrub after an erasure failed", exc_info=True)
        done["error"] = True
    return done


#: Row and word of the marker ``keyword_index_rewrite`` indexes for a moment (no chunk has rowid -1).
REWRITE_MARKER = (-1, "oamkeywordindexrewrite")


def keyword_index_rewrite(connection=None) -> None:
    """SQLite: rewrite the FTS5 keyword index into one new segment, dropping what deleted rows left in it.

    FTS5's ``secure-delete`` removes a deleted row's postings from the
    segments, but not the b-tree separator keys of a segment (``<fts>_idx``:
    the first term of each leaf page, or a prefix of it), so an erased word
    that began a leaf page stayed in the file (found by a security review).
    FTS5's ``optimize`` merges every segment into a new one, with new keys,
    and frees the old pages (zeroed: ``secure_delete``). It does nothing when
    the index is one segment already (as after the previous scrub), so a
    marker row is indexed first (a second segment), and its entries are
    deleted again after the merge; all in one transaction.

    Cost: O(index size), every segment is read and written once, under the
    write lock. Measured on a scratch database (25-word chunks with 125 words
    of context, 2 shared cores): 76-87 ms at 2,940 chunks, about 210 ms at
    9,800, about 430 ms at 29,400 (FTS5 ``rebuild``, which re-reads every
    chunk, took 383 ms, 1.0 s and 3.4 s). ``subject_erase``,
    ``expired_purge`` (when it deleted anything) and the admin's deletes pay
    it once per call; the API's single deletes do not (their postings go at
    once; a separator key of theirs goes at the next rewrite). Oracle:
    nothing here; Oracle Text has its own sync and optimize
    (``oracle_text_optimize_sql``).
    """
    connection = connection or default_connection
    if connection.vendor != "sqlite":
        return
    fts, (rowid, word) = KEYWORD_INDEX, REWRITE_MARKER
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        cursor.execute(f"INSERT INTO {fts}(rowid, text, context) VALUES (%s, %s, '')", [rowid, word])
        cursor.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
        cursor.execute(f"INSERT INTO {fts}({fts}, rowid, text, context) VALUES ('delete', %s, %s, '')", [rowid, word])


def _vacuum_and_checkpoint(connection) -> tuple[bool, bool]:
    """SQLite: ``VACUUM`` when the file is at most ``OAM_SCRUB_VACUUM_MAX_MB``, then ``_wal_checkpoint``;
    returns (vacuumed, wal truncated). A failed ``VACUUM`` (e.g. another writer held the lock past the
    busy timeout) is logged and reported as not vacuumed; the checkpoint still runs."""
    limit_mb = conf.get("OAM_SCRUB_VACUUM_MAX_MB")
    vacuumed = False
    with connection.cursor() as cursor:
        cursor.execute("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()")
        size_mb = cursor.fetchone()[0] / 2**20
        if 0 < size_mb <= limit_mb:
            try:
                cursor.execute("VACUUM")
                vacuumed = True
            except Exception:  # noqa: BLE001 - reported as not vacuumed; the rows are deleted already
                logger.warning("VACUUM after a storage scrub failed", exc_info=True)
    return vacuumed, _wal_checkpoint(connection)


def _wal_checkpoint(connection) -> bool:
    """``PRAGMA wal_checkpoint(TRUNCATE)``: True when the WAL was copied into the file and emptied."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, _, _ = cursor.fetchone()
    return busy == 0
