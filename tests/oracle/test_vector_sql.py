"""Oracle's vector arm compiled offline: the approximate form that uses the vector index.

Django can only emit ``FETCH FIRST`` (an exact scan), so ``memory.search.backends.vector_sql``
writes ``FETCH APPROX FIRST n ROWS ONLY WITH TARGET ACCURACY a`` itself, ordered by
the distance expression alone, with the COSINE metric of the index
(Oracle AI Vector Search User's Guide).
"""

import array
import datetime
import re

import numpy as np
import oracledb
import pytest

from memory.core.types import MemorySearchConfig, SearchScope
from memory.fields import VectorBind
from memory.search.backends import vector_sql
from memory.search.request import build_request

T = '"OAM_SEARCH_CHUNKS"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)


@pytest.fixture
def query_vector():
    return np.random.default_rng(5).standard_normal(384).astype("f4")


@pytest.fixture
def request_(oracle):
    scope = SearchScope(user_id="user-1", agent_id="agent-1", thread_id="t-main", exact_thread_match=True)
    return build_request("green tea", project_id=7, scope=scope, config=MemorySearchConfig(),
                         record_types=["message", "fact"], metadata_filter={"source": "chat"},
                         include_invalid_results=False)


def test_vector_arm_is_an_approximate_top_k_with_target_accuracy(oracle, request_, query_vector):
    sql, params = vector_sql(request_, query_vector, 100, connection=oracle, now=NOW)
    distance = f'VECTOR_DISTANCE({T}."EMBEDDING", %s, COSINE)'
    assert sql.startswith(f'SELECT {T}."SOURCE_KIND", {T}."RECORD_ID", {distance} AS "DISTANCE" FROM {T} WHERE (')
    assert sql.endswith(f"ORDER BY {distance} FETCH APPROX FIRST 100 ROWS ONLY WITH TARGET ACCURACY 95")
    assert "OFFSET" not in sql  # paging an approximate result is not defined (Oracle AI Vector Search User's Guide)
    for fragment in (f'{T}."USER_ID" = %s', f'{T}."AGENT_ID" = %s', f'{T}."THREAD_ID" = %s',
                     f'{T}."RECORD_TYPE" IN (%s, %s)', f'{T}."STATUS" = %s', f'{T}."EXPIRES_AT" IS NULL',
                     "JSON_EXISTS("):
        assert fragment in sql
    assert sql.count("%s") == len(params)
    assert isinstance(params[0], VectorBind) and isinstance(params[-1], VectorBind)
    assert "chat" not in sql and "user-1" not in sql


def test_target_accuracy_comes_from_settings(oracle, request_, query_vector, settings):
    settings.OAM_VECTOR_TARGET_ACCURACY = 80
    sql, _ = vector_sql(request_, query_vector, 7, connection=oracle, now=NOW)
    assert sql.endswith("FETCH APPROX FIRST 7 ROWS ONLY WITH TARGET ACCURACY 80")
    settings.OAM_VECTOR_TARGET_ACCURACY = 0
    with pytest.raises(ValueError, match="OAM_VECTOR_TARGET_ACCURACY"):
        vector_sql(request_, query_vector, 7, connection=oracle, now=NOW)


def test_vector_sql_is_oracle_only(request_, query_vector, db):
    from django.db import connection

    with pytest.raises(NotImplementedError):
        vector_sql(request_, query_vector, 10, connection=connection)


def test_vector_arm_reaches_the_driver_with_vector_binds(oracle, oracle_driver, request_, query_vector):
    sql, params = vector_sql(request_, query_vector, 30, connection=oracle, now=NOW)
    with oracle.cursor() as cursor:
        cursor.execute(sql, params)
    (kind, statement, binds), = oracle_driver.executed()
    assert kind == "execute" and "%s" not in statement
    first, last = re.findall(r'VECTOR_DISTANCE\("OAM_SEARCH_CHUNKS"\."EMBEDDING", (:arg\d+), COSINE\)', statement)
    for name in (first, last):
        assert isinstance(binds[name], array.array) and binds[name].typecode == "f"
        assert binds[name] == array.array("f", query_vector.tolist())
    sizes = [e for e in oracle_driver.log if e[0] == "setinputsizes"]
    assert sizes[0][2][first] is oracledb.DB_TYPE_VECTOR and sizes[0][2][last] is oracledb.DB_TYPE_VECTOR
