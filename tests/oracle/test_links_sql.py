"""Relations on Oracle 23.7, compiled offline: the graph-expansion query and the link queries.

``memory.links.graph.linked_sql`` is hand-written SQL around a WHERE clause the ORM
compiles; on Oracle it is recursive subquery factoring (``WITH`` plus a
column list, no ``RECURSIVE`` keyword), an ``NVARCHAR2`` path cast to the
same declared type in both members (the anchor fixes a recursive column's
type), ``CHR(31 USING NCHAR_CS)`` as the path separator and window functions
to keep one shortest path per record. The SQLite spelling of the same query
runs in tests/memory/test_links.py.
"""

import datetime
import re

import numpy as np
import pytest
from django.db import connection as sqlite_connection
from django.db.models import Q

from memory.core.types import MemorySearchConfig, SearchScope
from memory.links.autonomous import nearest_memory_chunks
from memory.links.graph import linked_sql
from memory.search.query import linked_filter
from memory.search.request import build_request

M = '"OAM_MEMORIES"'
L = '"OAM_RECORD_LINKS"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)
SEP = "CHR(31 USING NCHAR_CS)"


def node_filter(include_invalid_results=False):
    scope = SearchScope(user_id="user-1", agent_id="agent-1", thread_id="t-main", exact_thread_match=False)
    request = build_request("pie", project_id=7, scope=scope, config=MemorySearchConfig(), num_hops=2,
                            include_invalid_results=include_invalid_results)
    return linked_filter(request, NOW)


@pytest.fixture
def compiled(oracle):
    return linked_sql(["m-1", "m-2"], thread_ids=["t-main"], num_hops=3, limit=7, node_filter=node_filter(),
                      connection=oracle)


def test_graph_query_is_recursive_subquery_factoring(compiled):
    sql, _ = compiled
    assert sql.startswith("WITH edges (src, dst, rel_id, rel_type) AS (")
    assert "RECURSIVE" not in sql
    # each relation of the roots' threads, both ways, with the label read in that direction
    assert (f'SELECT {L}."SOURCE_ID", {L}."TARGET_ID", {L}."ID", {L}."RELATION_TYPE" FROM {L} '
            f'WHERE {L}."THREAD_ID" IN (%s) UNION ALL '
            f'SELECT {L}."TARGET_ID", {L}."SOURCE_ID", {L}."ID", {L}."OPPOSITE_RELATION_TYPE" FROM {L} '
            f'WHERE {L}."THREAD_ID" IN (%s)), ') in sql
    assert "walk (root_id, node_id, hops, rel_id, rel_type, from_id, walk_path) AS (" in sql
    assert sql.count("UNION ALL") == 2  # edges, and anchor/recursive member of walk


def test_anchor_and_recursive_member(compiled):
    sql, _ = compiled
    anchor, recursive = sql.split("walk (", 1)[1].split("), firsts AS", 1)[0].split(" UNION ALL ")
    assert anchor.startswith(
        "root_id, node_id, hops, rel_id, rel_type, from_id, walk_path) AS ("
        f"SELECT e.src, e.dst, 1, e.rel_id, e.rel_type, e.src, "
        f"CAST({SEP} || e.src || {SEP} || e.dst || {SEP} AS NVARCHAR2(2000)) "
        f'FROM edges e JOIN {M} ON {M}."ID" = e.dst WHERE e.src IN (%s, %s) AND ('
    )
    assert recursive.startswith(
        "SELECT w.root_id, e.dst, w.hops + 1, e.rel_id, e.rel_type, w.node_id, "
        f"CAST(w.walk_path || e.dst || {SEP} AS NVARCHAR2(2000)) "
        f'FROM walk w JOIN edges e ON e.src = w.node_id JOIN {M} ON {M}."ID" = e.dst '
        f"WHERE w.hops < %s AND INSTR(w.walk_path, {SEP} || e.dst || {SEP}) = 0 AND ("
    )
    assert len(re.findall(r"\bwalk\b", recursive)) == 1  # Oracle: one reference to the query name
    # every record entered passes the search's filters: expiry, exact user and agent, status
    for member in (anchor, recursive):
        for fragment in (f'{M}."EXPIRES_AT" IS NULL OR {M}."EXPIRES_AT" > %s', f'{M}."USER_ID" = %s',
                         f'{M}."AGENT_ID" = %s', f'{M}."STATUS" = %s', f'{M}."PENDING" = %s'):
            assert fragment in member
        assert f'{M}."THREAD_ID"' not in member  # exact_thread_match=False


def test_shortest_path_per_record_and_limit_per_root(compiled):
    sql, _ = compiled
    assert sql.endswith(
        "firsts AS (SELECT root_id, node_id, hops, rel_id, rel_type, from_id, "
        "ROW_NUMBER() OVER (PARTITION BY root_id, node_id ORDER BY hops, rel_id, from_id) AS rn FROM walk), "
        "ranked AS (SELECT root_id, node_id, hops, rel_id, rel_type, from_id, "
        "ROW_NUMBER() OVER (PARTITION BY root_id ORDER BY hops, node_id) AS pos FROM firsts WHERE rn = 1) "
        "SELECT root_id, node_id, hops, rel_id, rel_type, from_id FROM ranked WHERE pos <= %s "
        "ORDER BY root_id, pos"
    )


def test_values_are_bound_in_order(compiled):
    sql, params = compiled
    assert sql.count("%s") == len(params)
    where = [NOW.replace(tzinfo=None), 7, "user-1", "agent-1", False, "valid"]  # the project first; not pending
    assert params == ["t-main", "t-main", "m-1", "m-2", *where, 3, *where, 7]
    assert "m-1" not in sql and "user-1" not in sql


def test_invalid_records_included_leave_no_status_filter(oracle):
    sql, params = linked_sql(["m-1"], thread_ids=["t-main"], num_hops=1, limit=100, node_filter=node_filter(True),
                             connection=oracle)
    assert '"STATUS"' not in sql and "valid" not in params


def test_graph_query_reaches_the_driver_with_named_binds(oracle, oracle_driver, compiled):
    sql, params = compiled
    with oracle.cursor() as cursor:
        cursor.execute(sql, params)
    (kind, statement, binds), = oracle_driver.executed()
    assert kind == "execute" and "%s" not in statement
    assert statement.startswith("WITH edges (src, dst, rel_id, rel_type) AS (")
    assert re.search(r'WHERE "OAM_RECORD_LINKS"\."THREAD_ID" IN \(:arg0\) UNION ALL', statement)
    assert re.search(r"WHERE e\.src IN \(:arg\d+, :arg\d+\) AND", statement)
    assert re.search(r"WHERE w\.hops < :arg\d+ AND INSTR", statement)
    assert re.search(r"WHERE pos <= :arg\d+ ORDER BY root_id, pos$", statement)
    assert binds[":arg0"] == "t-main" and {"m-1", "m-2", 3, 7} <= set(binds.values())


@pytest.mark.backend("sqlite")
def test_sqlite_spelling_differs_only_in_the_opening_separator_and_path_type(oracle, db):
    arguments = dict(thread_ids=["t-main"], num_hops=2, limit=5, node_filter=Q(status="valid"))
    oracle_sql, oracle_params = linked_sql(["m-1"], connection=oracle, **arguments)
    sqlite_sql, sqlite_params = linked_sql(["m-1"], connection=sqlite_connection, **arguments)
    assert sqlite_sql.startswith("WITH RECURSIVE edges (")
    normalised = (sqlite_sql.replace("WITH RECURSIVE", "WITH").replace("char(31)", SEP)
                  .replace("AS TEXT)", "AS NVARCHAR2(2000))"))
    # Oracle's quote_name upper-cases identifiers; otherwise the text is the same
    assert normalised == re.sub(r'"([A-Z_]+)"', lambda m: f'"{m.group(1).lower()}"', oracle_sql)
    assert sqlite_params == oracle_params == ["t-main", "t-main", "m-1", "valid", 2, "valid", 5]


def test_link_candidates_rank_by_vector_distance(oracle):
    vector = np.random.default_rng(3).standard_normal(384).astype("f4")
    qs = nearest_memory_chunks(thread_id="t-main", memory_id="m-new", vector=vector, now=NOW, limit=18)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    chunks = '"OAM_SEARCH_CHUNKS"'
    assert sql.startswith(f'SELECT {chunks}."RECORD_ID" AS "RECORD_ID" FROM {chunks} WHERE ')
    for fragment in (f'{chunks}."SOURCE_KIND" = %s', f'{chunks}."THREAD_ID" = %s', f'{chunks}."STATUS" = %s',
                     f'NOT ({chunks}."RECORD_ID" = %s AND {chunks}."RECORD_ID" IS NOT NULL)',
                     f'{chunks}."EXPIRES_AT" IS NULL'):  # the NOT as Oracle deployments build it ('' is NULL)
        assert fragment in sql
    assert sql.endswith(f'ORDER BY VECTOR_DISTANCE({chunks}."EMBEDDING", %s, COSINE) ASC, {chunks}."ID" ASC '
                        "FETCH FIRST 18 ROWS ONLY")
    assert {"memory", "t-main", "valid", "m-new"} <= set(p for p in params if isinstance(p, str))
