"""Erasure on Oracle 23.7, compiled without a database: the receipts table and the text-index upkeep."""

from memory.models import Memory, SearchChunk
from memory.services.scrub import oracle_text_optimize_sql
from tests.oracle.test_migrations_ddl import create_table


def test_receipts_table_names_the_subject_by_digest_only(compiled):
    ddl = create_table(compiled.statements(["memory"]), "oam_erasure_receipts")
    assert '"ID" VARCHAR2(32) NOT NULL PRIMARY KEY' in ddl  # a UUID
    assert '"SUBJECT_DIGEST" NVARCHAR2(64) NULL' in ddl and "USER_ID" not in ddl and "AGENT_ID" not in ddl
    # 0007's FTS5 switch is a Python step that does nothing on Oracle: no other statement
    statements = compiled.for_migration("memory", "0007").statements
    assert [s.split(" (")[0] for s in statements if not s.startswith("CREATE INDEX")] == [
        'CREATE TABLE "OAM_ERASURE_RECEIPTS"',
        'ALTER TABLE "OAM_ERASURE_RECEIPTS" ADD CONSTRAINT "OAM_ERASU_PROJECT_I_4E0F01C8_F" FOREIGN KEY']


def test_the_text_indexes_are_optimized_in_full(oracle):
    assert oracle_text_optimize_sql(oracle) == [
        """BEGIN CTX_DDL.OPTIMIZE_INDEX('"OAM_SEARCH_CHUNKS_FTS_1"', 'FULL'); END;""",
        """BEGIN CTX_DDL.OPTIMIZE_INDEX('"OAM_SEARCH_CHUNKS_FTS_2"', 'FULL'); END;""",
    ]


def test_a_subjects_records_are_found_by_project_and_id(oracle):
    for model in (Memory, SearchChunk):
        qs = model.objects.filter(project_id=7, user_id="u1").values_list("pk", flat=True)
        sql, params = qs.query.get_compiler(connection=oracle).as_sql()
        assert '."PROJECT_ID" = %s AND' in sql and '."USER_ID" = %s' in sql and list(params) == [7, "u1"]


def test_the_admins_history_of_erased_records_is_deleted_by_id(oracle):
    """``memory.services.erasure.admin_log_erase``: ``object_id`` is an NCLOB on Oracle, compared through
    ``DBMS_LOB.SUBSTR``."""
    from django.contrib.admin.models import LogEntry
    from django.db.models.sql import DeleteQuery

    qs = LogEntry.objects.filter(content_type_id=3, object_id__in=["1:m1", "1:m2"])
    sql, params = qs.query.chain(DeleteQuery).get_compiler(connection=oracle).as_sql()
    assert sql.startswith('DELETE FROM "DJANGO_ADMIN_LOG" WHERE')
    assert '"CONTENT_TYPE_ID" = %s' in sql and 'DBMS_LOB.SUBSTR("DJANGO_ADMIN_LOG"."OBJECT_ID") IN (%s, %s)' in sql
    assert list(params) == [3, "1:m1", "1:m2"]


def test_records_that_survive_a_thread_delete_are_found_and_detached_in_sql(oracle):
    """``memory.services.erasure.threads_erase`` with ``spare``: a user-restricted thread delete or an erasure leaves
    another user's memories filed in the thread, found by ``foreign_q`` and detached by plain UPDATEs."""
    from django.db.models.sql import UpdateQuery

    from memory.models import MemoryVersion
    from memory.services.erasure import detached_thread_key, foreign_q

    qs = Memory.objects.filter(thread_id__in=["7:c5"]).filter(foreign_q({"user_id": "u1"})).values_list("pk")
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert '"USER_ID" IS NOT NULL' in sql and 'NOT ("OAM_MEMORIES"."USER_ID" = %s' in sql
    assert "u1" in list(params)
    for model, by in ((Memory, "pk__in"), (SearchChunk, "record_id__in"), (MemoryVersion, "memory_id__in")):
        query = model.objects.filter(**{by: ["7:m"]}).query.chain(UpdateQuery)
        query.add_update_values({"thread_id": None})
        sql, _ = query.get_compiler(connection=oracle).as_sql()
        assert sql.startswith(f'UPDATE "{model._meta.db_table.upper()}" SET "THREAD_ID" = NULL WHERE')
    assert detached_thread_key(7) == "7:"  # not empty: Oracle stores '' as NULL, and the column is NOT NULL
