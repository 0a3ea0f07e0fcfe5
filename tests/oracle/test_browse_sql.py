"""The staff thread list (memory.reports.browse.thread_browse) compiled for Oracle 23.7 without a database.

Counts and last activity are correlated scalar subqueries (one row per thread
at most: grouped by the correlated thread id), the id search is Oracle's
case-insensitive ``UPPER(...) LIKE UPPER(...)``, the metadata filter is the
same ``JSON_EXISTS`` as search's (tests/oracle/test_metadata_filter_sql.py), and a
page is ``OFFSET ... FETCH FIRST``. The SQLite form runs in tests/staff.
"""

import datetime

from memory.models import Project
from memory.reports.browse import thread_browse

PROJECT = Project(pk=7, slug="acme")  # offline: never saved

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)
T = '"OAM_THREADS"'


def compiled(oracle, **filters):
    qs = thread_browse(project=PROJECT, now=NOW, **filters)[25:50]
    return qs.query.get_compiler(connection=oracle).as_sql()


def test_counts_are_correlated_live_counts(oracle):
    sql, params = compiled(oracle)
    for table, alias in (('"OAM_MESSAGES"', "MESSAGE_COUNT"), ('"OAM_MEMORIES"', "MEMORY_COUNT")):
        assert (f'COALESCE((SELECT COUNT(U0."ID") AS "N" FROM {table} U0 WHERE ((U0."EXPIRES_AT" IS NULL OR '
                f'U0."EXPIRES_AT" > %s) AND U0."THREAD_ID" = ({T}."ID")) GROUP BY U0."THREAD_ID"), %s) '
                f'AS "{alias}"') in sql
    assert [params[1], params[3]] == [0, 0]  # COALESCE(..., 0): a thread with no rows counts 0
    assert [type(params[0]).__name__, params[0].year, params[0].hour] == ["Oracle_datetime", 2026, 12]  # live at NOW


def test_last_activity_and_a_total_order_with_oracle_paging(oracle):
    sql, _ = compiled(oracle)
    assert (f'GREATEST({T}."UPDATED_AT", COALESCE((SELECT MAX(U0."UPDATED_AT") AS "M" FROM "OAM_MEMORIES" U0 '
            f'WHERE U0."THREAD_ID" = ({T}."ID") GROUP BY U0."THREAD_ID"), {T}."UPDATED_AT")) AS "LAST_ACTIVITY"') in sql
    order = sql.split(" ORDER BY ", 1)[1]
    assert order == f'13 DESC, {T}."ID" ASC OFFSET 25 ROWS FETCH FIRST 25 ROWS ONLY'  # column 13: LAST_ACTIVITY
    select = sql.split(f" FROM {T} ", 1)[0]
    assert select.count(f'{T}."') - select.count(f'({T}."') >= 9 and select.endswith('AS "LAST_ACTIVITY"')


def test_filters_compile_to_oracle_sql(oracle):
    sql, params = compiled(oracle, q="Conv", user_id="u1", agent_id="a1", metadata_filter={"team": "blue"})
    where = sql.split(f' FROM {T} WHERE ', 1)[1].split(" ORDER BY ")[0]
    like = "UPPER({col}) LIKE UPPER(TRANSLATE(%s USING NCHAR_CS)) ESCAPE TRANSLATE('\\' USING NCHAR_CS)"
    # the project first; ``q`` searches the public id: the stored id after "7:" (memory.records.tenancy)
    columns = (f'SUBSTR({T}."ID", %s)', f'{T}."USER_ID"', f'{T}."AGENT_ID"')
    assert where.startswith(f'({T}."PROJECT_ID" = %s AND (' + " OR ".join(like.format(col=c) for c in columns))
    assert f'{T}."USER_ID" = %s AND {T}."AGENT_ID" = %s AND ' in where
    assert (f'JSON_EXISTS({T}."METADATA", \'$?(@."team".type() == "string" && @."team" == $v0)\' PASSING %s AS "v0" '
            'FALSE ON ERROR)') in where
    assert list(params[-8:]) == [7, 3, "%Conv%", "%Conv%", "%Conv%", "u1", "a1", "blue"]


def test_the_paginator_count_is_one_statement(oracle_driver):
    """``Paginator.count`` (``QuerySet.count()``) as python-oracledb receives it: no ordering, no paging."""
    # the stand-in returns no row
    assert thread_browse(project=PROJECT, now=NOW, q="conv").using("oracle_offline").count() == 0
    [(_, statement, _)] = oracle_driver.executed()
    assert statement.startswith("SELECT COUNT(*)") and " ORDER BY " not in statement and "FETCH" not in statement
    assert 'FROM "OAM_THREADS"' in statement and "UPPER(" in statement


def test_standalone_images_compile_without_their_bytes(oracle):
    """The staff page's ``#images`` region: the thread's images outside messages, BLOB column left out."""
    from memory.models import Thread
    from memory.reports.browse import standalone_images

    sql, params = standalone_images(Thread(id="t-1")).query.get_compiler(connection=oracle).as_sql()
    where = sql.split(' FROM "OAM_IMAGES" WHERE ', 1)[1]
    assert where.startswith('("OAM_IMAGES"."MESSAGE_ID" IS NULL AND "OAM_IMAGES"."THREAD_ID" = %s)')
    assert where.endswith('ORDER BY "OAM_IMAGES"."CREATED_AT" ASC, "OAM_IMAGES"."ID" ASC')
    assert '"OAM_IMAGES"."DATA"' not in sql and '"OAM_IMAGES"."DESCRIPTION"' in sql
    assert list(params) == ["t-1"]
