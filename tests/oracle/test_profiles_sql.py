"""Profiles and the client-level lists (the SDK's add_user/list_users, list_threads/list_messages/list_memories/
list_images) on Oracle 23.7, compiled offline: the ``oam_profiles`` DDL (migration 0009) and the list queries,
each filtered by the project, bounded, and with metadata filters as ``JSON_EXISTS`` on the row's own column."""

import datetime

from memory.models import Project
from memory.records.listing import image_queryset, memory_queryset, message_queryset, thread_queryset
from memory.records.tenancy import Tenant
from memory.services.profiles import profile_queryset
from tests.oracle.test_migrations_ddl import create_table

NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
TENANT = Tenant(project=Project(pk=7, slug="p7"))
RESTRICTED = Tenant(project=Project(pk=7, slug="p7"), user_id="u1")


def compile_qs(qs, oracle):
    return qs.query.get_compiler(connection=oracle).as_sql()


def test_profiles_table_and_its_unique_subject(compiled, project_apps):
    ddl = create_table(compiled.statements(project_apps), "oam_profiles")
    assert '"INFORMATION" NCLOB NULL' in ddl and '"METADATA" NCLOB NOT NULL CHECK ("METADATA" IS JSON)' in ddl
    assert '"SUBJECT_ID" NVARCHAR2(255) NULL' in ddl and '"KIND" NVARCHAR2(8) NULL' in ddl
    text = "\n".join(compiled.for_migration("memory", "0009_profiles").statements)
    assert 'CONSTRAINT "OAM_PROFILE_SUBJECT_UQ" UNIQUE ("PROJECT_ID", "KIND", "SUBJECT_ID")' in text
    assert 'REFERENCES "OAM_PROJECTS" ("ID")' in text


def test_profile_list_is_by_project_bounded_and_filters_metadata(oracle):
    sql, params = compile_qs(profile_queryset(tenant=TENANT, kind="user", metadata_filter={"source": "crm"}), oracle)
    assert '"OAM_PROFILES"."PROJECT_ID" = %s' in sql and '"OAM_PROFILES"."KIND" = %s' in sql
    assert "JSON_EXISTS" in sql and sql.endswith("FETCH FIRST 100 ROWS ONLY")
    assert 7 in params and "user" in params
    sql, params = compile_qs(profile_queryset(tenant=RESTRICTED, kind="user"), oracle)
    assert '"OAM_PROFILES"."SUBJECT_ID" = %s' in sql and "u1" in params


def test_client_level_lists_compile(oracle):
    queries = {
        "OAM_THREADS": thread_queryset(tenant=TENANT, user_id="u1", metadata_filter={"team": "x"}),
        "OAM_MESSAGES": message_queryset(tenant=RESTRICTED, thread_id="t-1", now=NOW, metadata_filter={"k": 1}),
        "OAM_MEMORIES": memory_queryset(tenant=TENANT, thread_id=None, agent_id="a1", now=NOW, limit=5),
        "OAM_IMAGES": image_queryset(tenant=TENANT, image_id="i-1", now=NOW),
    }
    for table, qs in queries.items():
        sql, params = compile_qs(qs, oracle)
        assert f'FROM "{table}"' in sql and 7 in params, table
        assert "FETCH FIRST" in sql, table
    sql, _ = compile_qs(queries["OAM_MESSAGES"], oracle)
    assert '"OAM_THREADS"."USER_ID" = %s' in sql and "JSON_EXISTS" in sql
    sql, params = compile_qs(queries["OAM_IMAGES"], oracle)
    assert '"OAM_IMAGES"."MESSAGE_ID" IS NULL' in sql and '"OAM_IMAGES"."DATA"' not in sql.split(" FROM ")[0]
    assert "7:i-1" in params
    sql, _ = compile_qs(queries["OAM_MEMORIES"], oracle)
    assert '"OAM_MEMORIES"."THREAD_ID" IS NULL' in sql and "FETCH FIRST 5 ROWS ONLY" in sql
