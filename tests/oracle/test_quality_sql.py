"""The quality dashboard (``memory.reports.quality``, migration 0011) on Oracle 23.7, compiled without a database.

Every figure's query groups in SQL by ``TRUNC`` of a timestamp (Django's ``Trunc`` in UTC: ``TRUNC(x)`` for
days, ``TRUNC(x, 'HH24')`` for hours, ``TRUNC(x, 'IW')`` for weeks starting on Monday, the unit a bound
parameter), filters by project (and thread) and by the window. The unit is bound twice (select list and
GROUP BY); Django's Oracle cursor gives equal values one bind name, so both are the same expression to
Oracle (else ORA-00979 "not a GROUP BY expression"): checked on the statement the driver receives.
"""

import datetime as dt
import re

import pytest

from memory.reports import quality

NOW = dt.datetime(2026, 11, 30, 15, 30, tzinfo=dt.UTC)
QUERIES = {
    "memories_by_type_query": '"OAM_MEMORIES"', "memories_before_query": '"OAM_MEMORIES"',
    "extraction_yield_query": '"OAM_EXTRACTION_JOBS"', "duplicates_skipped_query": '"OAM_EXTRACTION_JOBS"',
    "relations_query": '"OAM_RECORD_LINKS"', "invalidations_query": '"OAM_MEMORY_VERSIONS"',
    "review_queue_query": '"OAM_MEMORIES"', "rejected_reasons_query": '"OAM_EXTRACTION_JOBS"',
    "review_rejections_query": '"OAM_MEMORY_VERSIONS"',
}


def compile_query(oracle, name, days=7, thread_id="7:t1"):
    w = quality.window(project_id=7, thread_id=thread_id, days=days, now=NOW)
    return getattr(quality, name)(w).query.get_compiler(connection=oracle).as_sql()


def test_the_new_job_columns_and_index_compile_with_short_names(compiled):
    statements = compiled.for_migration("memory", "0011").statements
    text = "\n".join(statements)
    for column in ("MESSAGES_EXTRACTED", "DUPLICATES_SKIPPED", "REJECTED_NOT_TEXT", "REJECTED_UNKNOWN_TYPE",
                   "REJECTED_NO_SOURCE", "REJECTED_REPEATED"):
        assert f'ALTER TABLE "OAM_EXTRACTION_JOBS" ADD "{column}" NUMBER(11) NULL' in text, column
    assert 'CREATE INDEX "OAM_JOB_FINISHED_IX" ON "OAM_EXTRACTION_JOBS" ("PROJECT_ID", "FINISHED_AT")' in text
    assert all(len(name) <= 30 for s in statements for name in s.split('"')[1::2])


@pytest.mark.parametrize("name, table", QUERIES.items())
def test_every_figure_reads_one_project_and_thread(oracle, name, table):
    sql, params = compile_query(oracle, name)
    assert f"FROM {table}" in sql
    assert f'{table}."PROJECT_ID" = %s' in sql and f'{table}."THREAD_ID" = %s' in sql
    assert 7 in params and "7:t1" in params
    assert "FETCH FIRST" not in sql and "OFFSET" not in sql  # bounded by grouping, not by a row limit


@pytest.mark.parametrize("days, unit", [(1, "HH24"), (7, None), (90, "IW")])
def test_bucketed_figures_group_by_trunc_in_utc_within_the_window(oracle, days, unit):
    sql, params = compile_query(oracle, "memories_by_type_query", days=days, thread_id=None)
    trunc = 'TRUNC("OAM_MEMORIES"."CREATED_AT"' + (", %s)" if unit else ")")
    assert f'SELECT {trunc} AS "BUCKET", "OAM_MEMORIES"."MEMORY_TYPE" AS "MEMORY_TYPE", COUNT(' in sql
    assert sql.endswith(f'GROUP BY "OAM_MEMORIES"."MEMORY_TYPE", {trunc}')
    assert list(params).count(unit) == (2 if unit else 0)
    assert '"OAM_MEMORIES"."CREATED_AT" >= %s' in sql and '"OAM_MEMORIES"."CREATED_AT" < %s' in sql
    assert '"THREAD_ID"' not in sql  # the whole project
    start = quality.window(project_id=7, days=days, now=NOW).start
    bounds = sorted(p.replace(tzinfo=None) for p in params if isinstance(p, dt.datetime))
    assert bounds == [start.replace(tzinfo=None), NOW.replace(tzinfo=None)]


def test_extraction_figures_sum_the_job_counts_of_committed_jobs(oracle):
    sql, params = compile_query(oracle, "extraction_yield_query")
    assert 'SUM(COALESCE("OAM_EXTRACTION_JOBS"."MESSAGES_EXTRACTED", (("OAM_EXTRACTION_JOBS"."TO_SEQ" - ' \
           '"OAM_EXTRACTION_JOBS"."FROM_SEQ") + %s))) AS "MESSAGES"' in sql
    assert 'COUNT(CASE WHEN "OAM_EXTRACTION_JOBS"."MESSAGES_EXTRACTED" IS NULL THEN' in sql
    assert 'GROUP BY TRUNC("OAM_EXTRACTION_JOBS"."FINISHED_AT")' in sql
    assert '"OAM_EXTRACTION_JOBS"."STATUS" = %s' in sql and "done" in params
    sql, _ = compile_query(oracle, "rejected_reasons_query")
    for reason in ("NOT_TEXT", "UNKNOWN_TYPE", "NO_SOURCE", "REPEATED"):
        assert f'SUM("OAM_EXTRACTION_JOBS"."REJECTED_{reason}") AS "{reason}"' in sql


def test_relations_count_either_orientation_and_the_queue_counts_ages(oracle):
    sql, params = compile_query(oracle, "relations_query")
    assert sql.count('"OAM_RECORD_LINKS"."OPPOSITE_RELATION_TYPE" = %s') >= 2
    assert 'AS "SUPERSEDES"' in sql and 'AS "CONTRADICTS"' in sql
    sql, params = compile_query(oracle, "review_queue_query")
    assert '"OAM_MEMORIES"."PENDING"' in sql  # Memory.pending: awaiting review (memory.records.review_rules)
    assert 'MIN("OAM_MEMORIES"."CREATED_AT") AS "OLDEST"' in sql
    assert sql.count("COUNT(CASE WHEN") == len(quality.QUEUE_AGES)
    assert 'GROUP BY "OAM_MEMORIES"."MEMORY_TYPE"' in sql


def test_the_driver_gets_one_bind_for_the_unit_in_select_and_group_by(oracle, oracle_driver):
    w = quality.window(project_id=7, thread_id="7:t1", days=90, now=NOW)
    assert list(quality.memories_by_type_query(w).using("oracle_offline")) == []
    (_, statement, binds), = oracle_driver.executed()
    select, group = re.search(r"TRUNC\(\"OAM_MEMORIES\"\.\"CREATED_AT\", (:arg\d+)\) AS \"BUCKET\".*"
                              r"GROUP BY \"OAM_MEMORIES\"\.\"MEMORY_TYPE\", "
                              r"TRUNC\(\"OAM_MEMORIES\"\.\"CREATED_AT\", (:arg\d+)\)", statement).groups()
    assert select == group and binds[select] == "IW"
