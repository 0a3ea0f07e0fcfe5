"""The review queue (``memory.records.review_rules``, migration 0012) on Oracle 23.7, compiled without a database."""

import datetime

import numpy as np
from django.db.models.sql import UpdateQuery

from memory.core.types import MemorySearchConfig, SearchScope
from memory.index.writer import status_copy
from memory.models import Memory, Project, SearchChunk
from memory.records.review_rules import pending_queryset, similar_queryset
from memory.search.query import chunk_queryset
from memory.search.request import build_request

M = '"OAM_MEMORIES"'
C = '"OAM_SEARCH_CHUNKS"'
NOW = datetime.datetime(2026, 12, 2, 12, 0, tzinfo=datetime.timezone.utc)


def test_the_pending_column_and_the_queue_index_compile_with_short_names(compiled):
    statements = compiled.for_migration("memory", "0012").statements
    text = "\n".join(statements)
    assert f'ALTER TABLE {M} ADD "PENDING" NUMBER(1)' in text
    assert 'CHECK ("PENDING" IN (0,1))' in text
    assert f'CREATE INDEX "OAM_MEM_REVIEW_IX" ON {M} ("PROJECT_ID", "PENDING", "CREATED_AT")' in text
    assert all(len(name) <= 30 for s in statements for name in s.split('"')[1::2])


def test_the_queue_reads_one_projects_pending_memories_oldest_first(oracle):
    project = Project(pk=7, slug="p")
    qs = pending_queryset(project=project, thread_id="t1", memory_type="guideline", restrict={"user_id": "u1"},
                          now=NOW)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    for fragment in (f'{M}."PROJECT_ID" = %s', f'{M}."PENDING" = %s', f'{M}."USER_ID" = %s',
                     f'{M}."THREAD_ID" = %s', f'{M}."MEMORY_TYPE" = %s', f'{M}."EXPIRES_AT" IS NULL'):
        assert fragment in sql
    assert sql.endswith(f'ORDER BY {M}."CREATED_AT" ASC, {M}."ID" ASC')
    assert True in params and "7:t1" in params and "guideline" in params


def test_similar_memories_are_ranked_by_vector_distance_in_the_users_scope(oracle):
    row = Memory(id="7:m1", project_id=7, user_id="u1", agent_id=None, content="x")
    vector = np.random.default_rng(3).standard_normal(384).astype("f4")
    qs = similar_queryset(row, vector, limit=9, now=NOW)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert f'VECTOR_DISTANCE({C}."EMBEDDING", %s, COSINE) AS "DISTANCE"' in sql
    for fragment in (f'{C}."PROJECT_ID" = %s', f'{C}."SOURCE_KIND" = %s', f'{C}."USER_ID" = %s',
                     f'{C}."AGENT_ID" IS NULL', f'NOT ({C}."RECORD_ID" = %s AND {C}."RECORD_ID" IS NOT NULL)'):
        assert fragment in sql
    assert sql.endswith(f'ORDER BY 2 ASC, {C}."ID" ASC FETCH FIRST 9 ROWS ONLY')
    assert "7:m1" in params


def test_search_with_invalid_results_still_leaves_pending_chunks_out(oracle):
    request = build_request("q", project_id=7, scope=SearchScope(user_id="u1", exact_agent_match=False,
                                                                 exact_thread_match=False),
                            config=MemorySearchConfig(), include_invalid_results=True)
    vector = np.zeros(384, dtype="f4")
    sql, params = chunk_queryset(request, vector, now=NOW).query.get_compiler(connection=oracle).as_sql()
    assert f'{C}."STATUS" IN (%s, %s)' in sql
    assert "valid" in params and "invalid" in params and "pending" not in params


def test_a_status_copy_keeps_pending_chunks_pending_in_one_update(oracle):
    query = SearchChunk.objects.filter(source_kind="memory", record_id__in=["7:m1"]).query.chain(UpdateQuery)
    query.add_update_values({"status": status_copy("invalid")})
    sql, params = query.get_compiler(connection=oracle).as_sql()
    assert sql.startswith(f'UPDATE {C} SET "STATUS" = CASE WHEN ({C}."STATUS" = %s) THEN %s ELSE %s END WHERE')
    assert params[:3] == ("pending", "pending", "invalid") or list(params[:3]) == ["pending", "pending", "invalid"]
