"""Erasure on Oracle 23.7, compiled without a database: the receipts table and the text-index upkeep."""

from memory.erasure import oracle_text_optimize_sql
from memory.models import Memory, SearchChunk
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
    """``memory.erasure.admin_log_erase``: ``object_id`` is an NCLOB on Oracle, compared through ``DBMS_LOB.SUBSTR``."""
    from django.contrib.admin.models import LogEntry
    from django.db.models.sql import DeleteQuery

    qs = LogEntry.objects.filter(content_type_id=3, object_id__in=["1:m1", "1:m2"])
    sql, params = qs.query.chain(DeleteQuery).get_compiler(connection=oracle).as_sql()
    assert sql.startswith('DELETE FROM "DJANGO_ADMIN_LOG" WHERE')
    assert '"CONTENT_TYPE_ID" = %s' in sql and 'DBMS_LOB.SUBSTR("DJANGO_ADMIN_LOG"."OBJECT_ID") IN (%s, %s)' in sql
    assert list(params) == [3, "1:m1", "1:m2"]
