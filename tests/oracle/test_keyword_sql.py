"""Keyword search on Oracle, compiled offline: Oracle Text indexes and the CONTAINS/SCORE arm."""

import datetime

import pytest

from memory.core.types import MemorySearchConfig, SearchScope
from memory.search.backends import keyword_sql
from memory.search.request import build_request
from tests.oracle.offline import compile_migrations

T = '"OAM_SEARCH_CHUNKS"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)


@pytest.fixture
def request_(oracle):
    scope = SearchScope(user_id="user-1", agent_id="agent-1", thread_id="t-main", exact_thread_match=False)
    return build_request("green tea", project_id=7, scope=scope, config=MemorySearchConfig(), record_types=["message"],
                         metadata_filter={"source": "chat"}, include_invalid_results=False)


def test_keyword_arm_uses_contains_and_score(oracle, request_):
    sql, params = keyword_sql(request_, "context", ["green", "tea"], 100, connection=oracle, now=NOW)
    assert sql.startswith(f'SELECT {T}."SOURCE_KIND", {T}."RECORD_ID", SCORE(1) AS "RANK" FROM {T} ')
    assert f'WHERE CONTAINS({T}."CONTEXT", %s, 1) > 0 AND (' in sql
    assert sql.endswith("ORDER BY SCORE(1) DESC FETCH FIRST 100 ROWS ONLY")
    assert params[0] == "{green} ACCUM {tea}"
    # the same filters as the vector arm: scope, type, status, expiry, metadata
    for fragment in (f'{T}."USER_ID" = %s', f'{T}."AGENT_ID" = %s', f'{T}."RECORD_TYPE" IN (%s)',
                     f'{T}."STATUS" = %s', f'{T}."EXPIRES_AT" IS NULL', "JSON_EXISTS("):
        assert fragment in sql
    assert f'{T}."THREAD_ID"' not in sql  # exact_thread_match=False
    assert sql.count("%s") == len(params)
    assert "tea" not in sql and "chat" not in sql  # values are bound, never inlined


def test_text_arm_targets_the_text_column(oracle, request_):
    sql, _ = keyword_sql(request_, "text", ["tea"], 7, connection=oracle, now=NOW)
    assert f'CONTAINS({T}."TEXT", %s, 1) > 0' in sql and "FETCH FIRST 7 ROWS ONLY" in sql


def test_keyword_sql_rejects_unknown_columns_and_empty_terms(oracle, request_):
    with pytest.raises(ValueError):
        keyword_sql(request_, "metadata", ["tea"], 10, connection=oracle)
    with pytest.raises(ValueError):
        keyword_sql(request_, "text", [], 10, connection=oracle)


def test_migration_creates_oracle_text_indexes_on_clob_columns(oracle):
    plan = compile_migrations(oracle, ["memory"])
    assert plan.for_migration("memory", "0003_").statements == [
        f'CREATE SEARCH INDEX "OAM_SEARCH_CHUNKS_FTS_1" ON {T} ("TEXT");',
        f'CREATE SEARCH INDEX "OAM_SEARCH_CHUNKS_FTS_2" ON {T} ("CONTEXT");',
    ]
    ddl = "\n".join(plan.for_migration("memory", "0001_").statements)
    assert '"TEXT" CLOB NULL' in ddl and '"CONTEXT" CLOB NULL' in ddl  # Oracle Text does not index NCLOB
    back = compile_migrations(oracle, ["memory"], backwards=True).for_migration("memory", "0003_").statements
    assert back == ['DROP INDEX "OAM_SEARCH_CHUNKS_FTS_2";', 'DROP INDEX "OAM_SEARCH_CHUNKS_FTS_1";'] or \
        sorted(back) == sorted(['DROP INDEX "OAM_SEARCH_CHUNKS_FTS_1";', 'DROP INDEX "OAM_SEARCH_CHUNKS_FTS_2";'])
