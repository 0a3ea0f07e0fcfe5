"""Extraction's own queries compiled for Oracle 23.7 without a database (``tests/oracle/offline.py``)."""

import datetime

import numpy as np

from memory.extraction.dedup import nearest_memories_queryset, nearest_waiting_queryset
from memory.extraction.jobs import lock_queryset
from memory.extraction.recovery import orphan_threads_queryset

C = '"OAM_SEARCH_CHUNKS"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.UTC)


def test_nearest_memories_rank_by_vector_distance_in_the_users_scope(oracle):
    vector = np.random.default_rng(3).standard_normal(384).astype("f4")
    qs = nearest_memories_queryset(vector=vector, project_id=7, user_id="u1", agent_id=None, now=NOW, limit=5)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert f'VECTOR_DISTANCE({C}."EMBEDDING", %s, COSINE) AS "DISTANCE"' in sql
    where = sql.split(" WHERE ", 1)[1]
    for fragment in (f'{C}."PROJECT_ID" = %s', f'{C}."USER_ID" = %s', f'{C}."AGENT_ID" IS NULL',
                     f'{C}."SOURCE_KIND" = %s', f'{C}."STATUS" = %s',
                     f'({C}."EXPIRES_AT" IS NULL OR {C}."EXPIRES_AT" > %s)'):
        assert fragment in where
    assert '"THREAD_ID"' not in where  # any thread of the user and agent
    assert sql.endswith(f'ORDER BY 2 ASC, {C}."ID" ASC FETCH FIRST 5 ROWS ONLY')
    assert {"u1", "memory", "valid"} <= {p for p in params if isinstance(p, str)}


def test_waiting_memories_of_one_thread_rank_by_vector_distance(oracle):
    vector = np.random.default_rng(4).standard_normal(384).astype("f4")
    qs = nearest_waiting_queryset(vector=vector, thread_id="7:t-x", now=NOW)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert f'VECTOR_DISTANCE({C}."EMBEDDING", %s, COSINE) AS "DISTANCE"' in sql
    where = sql.split(" WHERE ", 1)[1]
    for fragment in (f'{C}."THREAD_ID" = %s', f'{C}."SOURCE_KIND" = %s', f'{C}."STATUS" = %s'):
        assert fragment in where
    assert sql.endswith(f'ORDER BY 2 ASC, {C}."ID" ASC FETCH FIRST 1 ROWS ONLY')
    assert {"7:t-x", "memory", "pending"} <= {p for p in params if isinstance(p, str)}


def test_orphan_threads_compare_the_watermark_in_sql(oracle):
    sql, params = orphan_threads_queryset().query.get_compiler(connection=oracle).as_sql()
    assert '"OAM_THREADS"."NEXT_SEQ" > ("OAM_THREADS"."EXTRACTED_THROUGH_SEQ" + %s)' in sql
    assert '"OAM_EXTRACTION_JOBS"' in sql and "NOT" in sql
    assert "queued" in params and "running" in params


def test_row_locks_carry_no_row_limit(oracle, oracle_driver):
    """``FOR UPDATE`` with ``FETCH FIRST`` is ORA-02014; ``lock_row`` locks by primary key alone."""
    from memory.models import ExtractionJob

    before, oracle.autocommit = oracle.autocommit, False  # as inside transaction.atomic()
    try:
        sql, params = lock_queryset(ExtractionJob, 7).query.get_compiler(connection=oracle).as_sql()
    finally:
        oracle.autocommit = before
    assert sql.endswith(' WHERE "OAM_EXTRACTION_JOBS"."ID" = %s FOR UPDATE') and params == (7,)
    assert "FETCH FIRST" not in sql


def test_repairs_are_found_by_a_prefix_of_the_error_text(oracle):
    """``error`` is an NCLOB on Oracle: Django compares its first 4000 characters (``DBMS_LOB.SUBSTR``)
    with LIKE; the prefix is a bound parameter."""
    from memory.extraction.recovery import REPAIRED, repairs_queryset

    sql, params = repairs_queryset("t1").values_list("pk", "error")[:1].query.get_compiler(connection=oracle).as_sql()
    assert 'DBMS_LOB.SUBSTR("OAM_EXTRACTION_JOBS"."ERROR") LIKE TRANSLATE(%s USING NCHAR_CS)' in sql
    assert f"{REPAIRED}%" in params and "t1" in params
    assert sql.endswith('ORDER BY "OAM_EXTRACTION_JOBS"."ID" DESC FETCH FIRST 1 ROWS ONLY')
