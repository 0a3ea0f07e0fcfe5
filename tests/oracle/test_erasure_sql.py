"""Erasure on Oracle 23.7, compiled without a database: the receipts table and the text-index upkeep (the
optimise blocks as the python-oracledb cursor receives them)."""

import logging

import oracledb
import pytest

from memory.models import Memory, SearchChunk
from memory.services import scrub
from memory.services.scrub import oracle_text_optimize_sql, storage_scrub
from tests.oracle.offline import RecordingDriverCursor
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


OPTIMIZE_BLOCKS = [
    """BEGIN CTX_DDL.OPTIMIZE_INDEX('"OAM_SEARCH_CHUNKS_FTS_1"', 'FULL'); END;\n""",
    """BEGIN CTX_DDL.OPTIMIZE_INDEX('"OAM_SEARCH_CHUNKS_FTS_2"', 'FULL'); END;\n""",
]


def test_the_text_indexes_are_optimized_in_full(oracle):
    assert oracle_text_optimize_sql(oracle) == OPTIMIZE_BLOCKS


def test_the_optimize_blocks_reach_the_driver_ending_in_end_semicolon(oracle, oracle_driver):
    """``storage_scrub`` on Oracle, through Django's real Oracle cursor (``FormatStylePlaceholderCursor``, which
    strips one trailing ``;``) onto the recording driver: both blocks arrive whole, and nothing is reported."""
    done = storage_scrub(oracle)
    assert done == {"vendor": "oracle", "text_index_optimized": True}  # no "error"
    assert oracle_driver.executed() == [("execute", block, []) for block in OPTIMIZE_BLOCKS]
    for _, statement, _ in oracle_driver.executed():
        assert statement.rstrip().endswith("'FULL'); END;")
    assert not [e for e in oracle_driver.log if e[0] == "setinputsizes"]


class PlsqlParsingCursor(RecordingDriverCursor):
    """A driver cursor that parses like the server: an anonymous block that does not end in ``END;`` fails with
    PLS-00103 (what ``BEGIN ... END`` gets from Oracle: "Encountered the symbol end-of-file")."""

    def execute(self, statement, parameters=None):
        super().execute(statement, parameters)
        if statement.lstrip().startswith("BEGIN") and not statement.rstrip().endswith("END;"):
            raise oracledb.DatabaseError("ORA-06550: line 1, column 62:\nPLS-00103: Encountered the symbol "
                                         '"end-of-file" when expecting one of the following: ;')


@pytest.fixture
def parsing_driver(oracle_driver, monkeypatch):
    monkeypatch.setattr(oracle_driver, "cursor", lambda: PlsqlParsingCursor(oracle_driver.log))
    return oracle_driver


def test_the_scrub_runs_both_blocks_where_the_server_parses_them(oracle, parsing_driver, caplog):
    """Before the trailing newline, the driver got ``... 'FULL'); END`` and the scrub reported ``"error"``."""
    with caplog.at_level(logging.WARNING, logger="memory.services.scrub"):
        done = storage_scrub(oracle)
    assert "error" not in done and done["text_index_optimized"] is True
    assert len(parsing_driver.executed()) == 2 and not caplog.records


def test_a_failing_optimize_is_logged_and_reported(oracle, parsing_driver, monkeypatch, caplog):
    """The scrub stays best effort (the rows are deleted already), but a failure shows: a warning with the
    driver's error, ``"error"`` in the result and no ``text_index_optimized``; the second block is not tried."""
    monkeypatch.setattr(scrub, "oracle_text_optimize_sql",
                        lambda connection=None: [block.rstrip("\n") for block in OPTIMIZE_BLOCKS])
    with caplog.at_level(logging.WARNING, logger="memory.services.scrub"):
        done = storage_scrub(oracle)
    assert done == {"vendor": "oracle", "error": True}
    [(_, statement, _)] = parsing_driver.executed()
    assert statement.endswith("'FULL'); END")  # Django's cursor took the ';'
    [record] = caplog.records
    assert record.levelno == logging.WARNING and "PLS-00103" in record.exc_text


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
