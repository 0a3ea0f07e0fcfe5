"""The search query compiled for Oracle 23.7 without a database.

``memory.search.query.chunk_queryset`` is the one SQL statement behind search; this
checks its Oracle text (VECTOR_DISTANCE with the index's metric, filters, row
limit, JSON paths) and how its query vector is bound: a ``VectorBind`` that
Django's ``OracleParam`` passes to python-oracledb as ``array.array('f')``
with input size ``DB_TYPE_VECTOR`` (``memory.fields.VectorBind``).
"""

import array
import datetime
import re
import types

import numpy as np
import oracledb
import pytest
from django.db.backends.oracle.base import OracleParam

from memory.core.types import MemorySearchConfig, SearchScope
from memory.fields import VectorBind
from memory.search.query import CHUNK_OVERFETCH, chunk_queryset
from memory.search.request import build_request

T = '"OAM_SEARCH_CHUNKS"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.UTC)


@pytest.fixture
def query_vector():
    return np.random.default_rng(7).standard_normal(384).astype("f4")


def make_request(**overrides):
    arguments = dict(
        scope=SearchScope(user_id="user-1", agent_id="agent-1", thread_id="t-main", exact_thread_match=True),
        config=MemorySearchConfig(),
        max_results=4,
        record_types=["message", "fact"],
        metadata_filter={"topic": "billing", "extra": {}},
        include_invalid_results=False,
    )
    arguments.update(overrides)
    return build_request("refund policy", project_id=7, **arguments)


@pytest.fixture
def compiled_search(oracle, query_vector):
    qs = chunk_queryset(make_request(), query_vector, now=NOW)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    return sql, params


def test_ranks_by_vector_distance_with_the_index_metric(compiled_search):
    sql, _ = compiled_search
    assert sql.startswith(
        f'SELECT {T}."SOURCE_KIND" AS "SOURCE_KIND", {T}."RECORD_ID" AS "RECORD_ID", '
        f'VECTOR_DISTANCE({T}."EMBEDDING", %s, COSINE) AS "DISTANCE" FROM {T} WHERE '
    )
    # ORDER BY the third select item (the distance), ties broken by id, best first
    assert sql.endswith(f'ORDER BY 3 ASC, {T}."ID" ASC FETCH FIRST {4 * CHUNK_OVERFETCH} ROWS ONLY')


def test_scope_status_expiry_and_record_type_filters(compiled_search):
    sql, params = compiled_search
    where = sql.split(" WHERE ", 1)[1].split(" ORDER BY ")[0]
    for fragment in (
        f'({T}."EXPIRES_AT" IS NULL OR {T}."EXPIRES_AT" > %s)',
        f'{T}."PROJECT_ID" = %s',
        f'{T}."USER_ID" = %s',
        f'{T}."AGENT_ID" = %s',
        f'{T}."THREAD_ID" = %s',
        f'{T}."RECORD_TYPE" IN (%s, %s)',
        f'{T}."STATUS" = %s',
    ):
        assert fragment in where
    assert where.count("%s") + 1 == len(params)  # + the vector in the select list
    # the thread id compared with stored ids: "<project>:<id>" (memory.records.tenancy)
    assert list(params[1:8]) == [NOW.replace(tzinfo=None), 7, "user-1", "agent-1", "7:t-main", "message", "fact"]
    assert params[-1] == "valid"


def test_unconstrained_scope_and_invalid_results_leave_no_filter(oracle, query_vector):
    request = make_request(
        scope=SearchScope(user_id="user-1", exact_agent_match=False, exact_thread_match=False),
        metadata_filter=None, include_invalid_results=True, record_types=None,
    )
    sql, params = chunk_queryset(request, query_vector, now=NOW).query.get_compiler(connection=oracle).as_sql()
    assert f'{T}."USER_ID" = %s' in sql
    assert '"AGENT_ID"' not in sql and '"THREAD_ID"' not in sql
    # valid and invalid, never a pending memory's (memory.records.review_rules)
    assert f'{T}."STATUS" IN (%s, %s)' in sql
    assert "JSON_" not in sql
    assert f'{T}."RECORD_TYPE" IN (%s, %s, %s, %s, %s, %s)' in sql


def test_none_scope_value_compiles_to_is_null(oracle, query_vector):
    request = make_request(scope=SearchScope(user_id="user-1", agent_id=None, exact_thread_match=False))
    sql, _ = chunk_queryset(request, query_vector, now=NOW).query.get_compiler(connection=oracle).as_sql()
    assert f'{T}."AGENT_ID" IS NULL' in sql


def test_metadata_filter_compiles_to_json_exists_with_literal_paths(compiled_search):
    sql, params = compiled_search
    # type-exact match on a key: JSON_EXISTS over a literal path, value bound through PASSING
    assert (
        f"JSON_EXISTS({T}.\"METADATA\", '$?(@.\"topic\".type() == \"string\" && @.\"topic\" == $v0)' "
        "PASSING %s AS \"v0\" FALSE ON ERROR)"
    ) in sql
    assert "billing" in params
    assert "billing" not in sql  # the value never reaches the SQL text


def test_query_vector_is_bound_as_a_float32_vector(compiled_search, query_vector):
    sql, params = compiled_search
    assert sql.count("%s") == len(params)
    vector = params[0]
    assert isinstance(vector, VectorBind)
    assert vector.input_size is oracledb.DB_TYPE_VECTOR
    bound = vector.bind_parameter(cursor=None)
    assert isinstance(bound, array.array) and bound.typecode == "f" and len(bound) == 384
    np.testing.assert_array_equal(np.frombuffer(bound, dtype="f4"), query_vector)


def stand_in_cursor(supports_boolean=True):
    """What OracleParam reads from a cursor: ``charset`` and the database's features."""
    features = types.SimpleNamespace(supports_boolean_expr_in_select_clause=supports_boolean)
    return types.SimpleNamespace(charset="utf-8", database=types.SimpleNamespace(features=features))


def test_oracle_param_passes_the_vector_through(compiled_search, query_vector):
    vector = compiled_search[1][0]
    param = OracleParam(vector, stand_in_cursor(), True)
    assert param.input_size is oracledb.DB_TYPE_VECTOR
    assert isinstance(param.force_bytes, array.array) and param.force_bytes.typecode == "f"
    assert param.force_bytes == array.array("f", query_vector.tolist())


def test_oracle_param_would_stringify_a_bare_array():
    """Why VectorBind exists: a plain array.array is sent as its repr text (Django's ``OracleParam``)."""
    param = OracleParam(array.array("f", [1.0, 2.0]), stand_in_cursor(), True)
    assert param.force_bytes == "array('f', [1.0, 2.0])"
    assert param.input_size is None


def test_search_reaches_the_driver_with_named_binds(oracle, oracle_driver, query_vector):
    """Run the queryset through Django's real Oracle cursor onto a recording driver."""
    qs = chunk_queryset(make_request(), query_vector, now=NOW).using("oracle_offline")
    assert list(qs) == []
    (kind, statement, binds), = oracle_driver.executed()
    assert kind == "execute"
    assert "%s" not in statement
    assert re.search(r'VECTOR_DISTANCE\("OAM_SEARCH_CHUNKS"\."EMBEDDING", :arg0, COSINE\)', statement)
    assert isinstance(binds[":arg0"], array.array) and binds[":arg0"].typecode == "f"
    assert binds[":arg0"] == array.array("f", query_vector.tolist())
    sizes = [e for e in oracle_driver.log if e[0] == "setinputsizes"]
    assert len(sizes) == 1
    assert sizes[0][2][":arg0"] is oracledb.DB_TYPE_VECTOR
    assert sizes[0][2][":arg1"] is oracledb.DB_TYPE_TIMESTAMP


def test_chunk_insert_binds_the_embedding_as_a_vector(oracle, oracle_driver):
    """The write path: an INSERT of a chunk binds its embedding as DB_TYPE_VECTOR too."""
    from django.db.models.sql import InsertQuery

    from memory.models import SearchChunk

    chunk = SearchChunk(project_id=7, source_kind="memory", record_id="7:m-1", record_type="fact", text="likes tea",
                        embedding=np.full(384, 0.5, dtype="f4"), metadata={"topic": "drinks"})
    fields = [f for f in SearchChunk._meta.concrete_fields if not f.primary_key]
    query = InsertQuery(SearchChunk)
    query.insert_values(fields, [chunk])
    (sql, params), = query.get_compiler(connection=oracle).as_sql()
    assert sql.startswith('INSERT INTO "OAM_SEARCH_CHUNKS" (')
    position = [f.name for f in fields].index("embedding")
    assert isinstance(params[position], VectorBind)
    with oracle.cursor() as cursor:
        cursor.execute(sql, params)
    (_, statement, binds), = oracle_driver.executed()
    vector_binds = [name for name, value in binds.items() if isinstance(value, array.array)]
    assert len(vector_binds) == 1
    sizes = next(e for e in oracle_driver.log if e[0] == "setinputsizes")[2]
    assert sizes[vector_binds[0]] is oracledb.DB_TYPE_VECTOR
    assert binds[vector_binds[0]] == array.array("f", [0.5] * 384)
