"""Recorded time ("as of", issue #32) on Oracle 23.7, compiled offline: the newest version of each memory at an
instant (``ROW_NUMBER()`` over each memory's versions recorded by then, Django's QUALIFY emulation), the memories
that predate history (``NOT EXISTS`` a version), the erasure receipts asked about, and the message and image chunks
of an as-of search."""

import datetime

import numpy as np

from memory.core.types import MemorySearchConfig, SearchScope
from memory.models import ErasureReceipt
from memory.records.as_of import latest_versions, scope_q, subject_digest, unversioned_rows
from memory.search.as_of import as_of_chunk_queryset
from memory.search.request import build_request

V = '"OAM_MEMORY_VERSIONS"'
AT = datetime.datetime(2026, 7, 1, tzinfo=datetime.timezone.utc)
NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.timezone.utc)


def sql_of(qs, oracle):
    return qs.query.get_compiler(connection=oracle).as_sql()


def test_the_newest_version_at_an_instant_is_one_statement_numbering_each_memorys_versions(oracle):
    qs = latest_versions(project_id=7, at=AT, scope=scope_q(thread_id="7:t1", user_id="u1", agent_id=None),
                         key="7:m1")[:10_001]
    sql, params = sql_of(qs, oracle)
    assert sql.count(f"FROM {V}") == 1  # one pass over the versions recorded by the instant
    assert (f'ROW_NUMBER() OVER (PARTITION BY {V}."MEMORY_ID" ORDER BY {V}."VERSION" DESC) AS "QUAL0"') in sql
    assert f'MIN({V}."CREATED_AT") OVER (PARTITION BY {V}."MEMORY_ID") AS "FIRST_AT"' in sql
    assert 'WHERE "QUAL0" = %s' in sql and params[-1] == 1  # the newest of each memory
    assert f'{V}."CREATED_AT" <= %s' in sql and f'{V}."PROJECT_ID" = %s' in sql and f'{V}."AGENT_ID" IS NULL' in sql
    assert '"BEFORE"' not in sql  # the before-snapshots are never read
    assert "FETCH FIRST 10001 ROWS ONLY" in sql and "LIMIT" not in sql
    assert {"7:t1", "u1", "7:m1"} <= set(map(str, params))


def test_memories_that_predate_history_are_rows_without_a_version(oracle):
    sql, params = sql_of(unversioned_rows(project_id=7, at=AT, scope=scope_q(user_id="u1")), oracle)
    assert 'FROM "OAM_MEMORY_VERSIONS" U0 WHERE U0."MEMORY_ID" = ("OAM_MEMORIES"."ID") FETCH FIRST 1 ROWS ONLY' in sql
    assert "NOT EXISTS(" in sql
    # only rows older than the project's first version are probed
    assert ('"OAM_MEMORIES"."CREATED_AT" < (COALESCE((SELECT U0."CREATED_AT" AS "CREATED_AT" FROM '
            '"OAM_MEMORY_VERSIONS" U0 WHERE U0."PROJECT_ID" = %s ORDER BY 1 ASC FETCH FIRST 1 ROWS ONLY), %s))') in sql
    assert '"OAM_MEMORIES"."CREATED_AT" <= %s' in sql and '"OAM_MEMORIES"."PENDING"' in sql
    assert '"OAM_MEMORIES"."EXPIRES_AT" > %s' in sql  # not expired at the instant


def test_the_erasure_receipts_asked_about_are_matched_by_digest_and_time(oracle):
    digest = subject_digest(7, "user", "u1")
    qs = ErasureReceipt.objects.filter(project_id=7, subject_digest__in=[digest], requested_at__gt=AT)
    sql, params = sql_of(qs, oracle)
    assert '"OAM_ERASURE_RECEIPTS"."SUBJECT_DIGEST" IN (%s)' in sql
    assert '"OAM_ERASURE_RECEIPTS"."REQUESTED_AT" > %s' in sql and digest in params


def test_an_as_of_search_ranks_the_messages_and_images_created_by_then_in_sql(oracle):
    scope = SearchScope(user_id="u1", agent_id="a1", thread_id="t1", exact_thread_match=True)
    request = build_request("where", project_id=7, scope=scope, config=MemorySearchConfig(),
                            record_types=["message", "image"])
    sql, params = sql_of(as_of_chunk_queryset(request, AT, np.ones(384, dtype="f4"), NOW, 30), oracle)
    assert 'VECTOR_DISTANCE("OAM_SEARCH_CHUNKS"."EMBEDDING"' in sql and "FETCH FIRST 30 ROWS ONLY" in sql
    assert '"OAM_SEARCH_CHUNKS"."RECORD_ID" IN (SELECT U0."ID" AS "PK" FROM "OAM_MESSAGES" U0' in sql
    assert 'U0."CREATED_AT" <= %s' in sql and '"OAM_IMAGES"' in sql
