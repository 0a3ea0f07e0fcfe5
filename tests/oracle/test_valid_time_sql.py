"""Valid time (issue #32) on Oracle 23.7, compiled offline: the ``valid_at`` filter of search (the ORM arm and the
WHERE clause the hand-written arms share), of graph expansion and of the memory lists, and the chunk copy of a
window, as python-oracledb would receive them.

The filter is the half-open window ``[valid_from, valid_to)`` with open NULL bounds:
``("VALID_FROM" IS NULL OR "VALID_FROM" <= :at) AND ("VALID_TO" IS NULL OR "VALID_TO" > :at)``, over the
chunks' copies in search (one table, no join) and over ``oam_memories`` in lists and graph expansion.
"""

import datetime

import numpy as np

from memory.core.types import MemorySearchConfig, SearchScope
from memory.index import writer
from memory.links.graph import linked_sql
from memory.models import Project
from memory.records import listing
from memory.records.tenancy import Tenant
from memory.search.query import chunk_queryset, filter_sql, linked_filter
from memory.search.request import build_request

C = '"OAM_SEARCH_CHUNKS"'
M = '"OAM_MEMORIES"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)
AT = datetime.datetime(2026, 7, 1, tzinfo=datetime.timezone.utc)


def window(table: str) -> str:
    return (f'({table}."VALID_FROM" IS NULL OR {table}."VALID_FROM" <= %s) AND '
            f'({table}."VALID_TO" IS NULL OR {table}."VALID_TO" > %s)')


def request(**overrides):
    scope = SearchScope(user_id="user-1", agent_id="agent-1", thread_id="t-main", exact_thread_match=True)
    return build_request("where do I live", project_id=7, scope=scope, config=MemorySearchConfig(),
                         valid_at="2026-07-01", **overrides)


def oracle_instants(params) -> list:
    """The datetime binds, as the Oracle backend hands them over (naive UTC ``Oracle_datetime``)."""
    return [p for p in params if isinstance(p, datetime.datetime)]


def test_the_search_arm_filters_the_chunks_copies_of_the_window(oracle):
    qs = chunk_queryset(request(), np.ones(384, dtype="f4"), now=NOW)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    where = sql.split(" WHERE ", 1)[1].split(" ORDER BY ")[0]
    assert window(C) in where and "JOIN" not in sql
    instants = oracle_instants(params)
    assert [type(p).__name__ for p in instants] == ["Oracle_datetime"] * 3  # expiry, valid_from, valid_to
    assert instants[1:] == [AT.replace(tzinfo=None)] * 2


def test_the_shared_where_clause_of_the_hand_written_arms_has_it_and_is_cached_with_it(oracle):
    search = request()
    sql, params = filter_sql(search, NOW, oracle)
    assert window(C) in sql and sql.count("%s") == len(params)
    assert filter_sql(search, NOW, oracle) == (sql, params)
    search.valid_at = None  # another instant (or none): compiled again, not the cached clause
    assert "VALID_FROM" not in filter_sql(search, NOW, oracle)[0]


def test_graph_expansion_passes_only_through_memories_valid_then(oracle):
    sql, params = linked_sql(["m-1"], thread_ids=["t-main"], num_hops=2, limit=7,
                             node_filter=linked_filter(request(num_hops=2), NOW), connection=oracle)
    assert window(M) in sql
    assert AT.replace(tzinfo=None) in [p.replace(tzinfo=None) for p in oracle_instants(params)]


def test_the_memory_list_filters_the_window_on_the_memories(oracle):
    tenant = Tenant(project=Project(pk=7, slug="acme"))  # offline: never saved
    qs = listing.memory_queryset(tenant=tenant, user_id="u1", valid_at=datetime.date(2026, 7, 1), now=NOW)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert window(M) in sql and sql.endswith("FETCH FIRST 100 ROWS ONLY")
    assert oracle_instants(params)[1:] == [AT.replace(tzinfo=None)] * 2


def test_a_window_change_is_one_update_of_the_chunks_copies(oracle, oracle_driver):
    writer.reindex_state("memory", ["7:m-1"], valid_from=None, valid_to=AT)
    [(kind, statement, params)] = oracle_driver.executed()
    assert kind == "execute"
    assert statement.startswith(f'UPDATE {C} SET "VALID_FROM" = NULL, "VALID_TO" = :arg0 WHERE ')
    assert params == {":arg0": AT.replace(tzinfo=None), ":arg1": "7:m-1", ":arg2": "memory"}
    assert type(params[":arg0"]).__name__ == "Oracle_datetime"
