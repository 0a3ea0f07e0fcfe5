"""The multi-row writes of every ``add_messages`` as python-oracledb receives them (``memory.index.bulk``).

Django's own forms first, to show the risk: ``bulk_create`` of several chunks is an ``INSERT ... SELECT``
over a ``UNION ALL`` with bare ``VECTOR`` binds and a JSON bind that is ``CLOB`` in one branch and
``VARCHAR2`` in another; ``bulk_update`` of contexts is a ``CASE`` whose results are ``CLOB`` and
``VARCHAR2``. Then the engine's form on Oracle: one ``INSERT ... VALUES`` / ``UPDATE ... WHERE pk`` through
``executemany``, with one input size per bind position for every row.
"""

import array
import datetime as dt
import json
import re

import numpy as np
import oracledb
import pytest

from memory.index import writer
from memory.index.bulk import ORACLE_BATCH_ROWS, rows_insert, rows_update, uses_single_row_statements
from memory.models import Message, SearchChunk
from memory.services import messages as message_service
from tests.oracle.offline import RecordingDriverCursor

LONG = "é" * 2_001  # 4,002 bytes in UTF-8: over Django's 4,000-byte line between VARCHAR2 and CLOB binds
NOW = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
CHUNK_COLUMNS = ["PROJECT_ID", "SOURCE_KIND", "RECORD_ID", "RECORD_TYPE", "CHUNK_INDEX", "USER_ID", "AGENT_ID",
                 "THREAD_ID", "STATUS", "EXPIRES_AT", "METADATA", "TEXT", "CONTEXT", "EMBEDDING", "CREATED_AT"]


def chunk(i: int, *, context: str = "short", metadata=None, pk=None) -> SearchChunk:
    return SearchChunk(id=pk, project_id=7, source_kind="message", record_id=f"7:m{i}", record_type="message",
                       chunk_index=0, thread_id="7:t", status="valid", metadata=metadata or {"turn": i},
                       text=f"user: turn {i}", context=context, embedding=np.full(384, i / 10, dtype="f4"),
                       created_at=NOW)


def sizes_of(driver) -> list[dict]:
    return [entry for entry in driver.log if entry[0] == "setinputsizes"]


# --- Django's forms on Oracle: what the engine no longer sends -------------------------------------


def test_djangos_bulk_create_puts_vector_and_mixed_json_binds_in_a_union_all(oracle, oracle_driver):
    SearchChunk.objects.bulk_create([chunk(1), chunk(2, metadata={"note": LONG}), chunk(3)])
    [(kind, statement, binds)] = oracle_driver.executed()
    assert kind == "execute"
    columns = ", ".join(f'"{c}"' for c in CHUNK_COLUMNS)
    assert statement.startswith(f'INSERT INTO "OAM_SEARCH_CHUNKS" ({columns}) SELECT * FROM (SELECT TO_NUMBER(:arg0)'
                                " col_0, ")
    assert statement.count(" UNION ALL SELECT ") == 2 and statement.count("TO_NCLOB(") == 6
    branches = statement.removesuffix(")").split(" UNION ALL ")
    metadata = [re.split(r",\s*", b.split(" SELECT ", 1)[-1].removeprefix("SELECT "))[10].split()[0] for b in branches]
    vectors = [name for name, value in binds.items() if isinstance(value, array.array)]
    [sizes] = [entry[2] for entry in sizes_of(oracle_driver)]
    assert len(vectors) == 3 and all(sizes[name] is oracledb.DB_TYPE_VECTOR for name in vectors)
    # one JSON column of the set query: CLOB in the second branch, VARCHAR2 (no input size) in the others
    assert [sizes.get(name) for name in metadata] == [None, oracledb.DB_TYPE_CLOB, None]


def test_djangos_bulk_update_binds_clob_and_varchar2_results_in_one_case(oracle, oracle_driver):
    SearchChunk.objects.bulk_update([chunk(1, pk=11), chunk(2, context=LONG, pk=12)], ["context"])
    [(_, statement, binds)] = oracle_driver.executed()
    assert statement == ('UPDATE "OAM_SEARCH_CHUNKS" SET "CONTEXT" = CASE WHEN ("OAM_SEARCH_CHUNKS"."ID" = :arg0) '
                         'THEN :arg1 WHEN ("OAM_SEARCH_CHUNKS"."ID" = :arg2) THEN :arg3 ELSE NULL END '
                         'WHERE "OAM_SEARCH_CHUNKS"."ID" IN (:arg0, :arg2)')
    assert binds[":arg1"] == "short" and binds[":arg3"] == LONG
    [(_, _, sizes)] = sizes_of(oracle_driver)
    assert sizes == {":arg3": oracledb.DB_TYPE_CLOB}  # :arg1 goes as VARCHAR2: ORA-00932 on a server


# --- the engine's form on Oracle ---------------------------------------------------------------------


def test_the_single_row_form_is_chosen_for_oracle_only(oracle, sqlite):
    assert uses_single_row_statements(oracle) and not uses_single_row_statements(sqlite)


def test_chunks_are_inserted_row_by_row_through_executemany(oracle, oracle_driver):
    """``writer.index_rows`` (every ``add_messages``): one ``INSERT ... VALUES`` for all the rows, the
    embedding bound as VECTOR and the context as CLOB in every row, since one row's is over 4,000 bytes."""
    rows = [chunk(1), chunk(2, context=LONG, metadata={"note": LONG}), chunk(3)]
    writer.index_rows(rows)
    [(kind, statement, params)] = oracle_driver.executed()
    assert kind == "executemany"
    columns = ", ".join(f'"{c}"' for c in CHUNK_COLUMNS)
    placeholders = ", ".join(f":arg{i}" for i in range(len(CHUNK_COLUMNS)))
    assert statement == f'INSERT INTO "OAM_SEARCH_CHUNKS" ({columns}) VALUES ({placeholders})'
    assert "UNION" not in statement and "SELECT" not in statement and "TO_NCLOB" not in statement
    assert len(params) == 3 and all(len(row) == len(CHUNK_COLUMNS) for row in params)
    position = CHUNK_COLUMNS.index
    assert [row[position("RECORD_ID")] for row in params] == ["7:m1", "7:m2", "7:m3"]
    assert params[1][position("CONTEXT")] == LONG and json.loads(params[1][position("METADATA")]) == {"note": LONG}
    assert params[2][position("EMBEDDING")] == array.array("f", [np.float32(0.3)] * 384)
    [(_, sizes, _)] = sizes_of(oracle_driver)  # positional: one input size per column, for every row
    assert sizes[position("EMBEDDING")] is oracledb.DB_TYPE_VECTOR
    assert sizes[position("CONTEXT")] is oracledb.DB_TYPE_CLOB and sizes[position("METADATA")] is oracledb.DB_TYPE_CLOB
    assert sizes[position("CREATED_AT")] is oracledb.DB_TYPE_TIMESTAMP
    assert sizes[position("RECORD_ID")] is None
    assert all(row.pk is None and not row._state.adding for row in rows)  # as bulk_create on Oracle


def test_messages_keep_their_ids_and_get_updated_at(oracle, oracle_driver):
    """``messages_add`` inserts its messages through ``rows_insert``: caller-chosen ids go in the statement,
    ``auto_now`` is applied, and a long content part sits beside short ones without a set query."""
    rows = [Message(id=f"7:m{i}", project_id=7, thread_id="7:t", seq=i, role="user", content=f"turn {i}",
                    parts=[{"type": "text", "text": LONG if i == 2 else "hi"}], metadata={}, created_at=NOW)
            for i in (1, 2)]
    assert message_service.rows_insert is rows_insert
    rows_insert(Message, rows)
    [(kind, statement, params)] = oracle_driver.executed()
    assert kind == "executemany" and statement.startswith('INSERT INTO "OAM_MESSAGES" ("ID", "PROJECT_ID", ')
    assert statement.endswith(" VALUES (" + ", ".join(f":arg{i}" for i in range(14)) + ")") and "UNION" not in statement
    assert [row[0] for row in params] == ["7:m1", "7:m2"]
    assert all(isinstance(row[-1], dt.datetime) for row in params)  # updated_at (auto_now)
    [(_, sizes, _)] = sizes_of(oracle_driver)
    assert sizes[4] is None and sizes[6] is oracledb.DB_TYPE_CLOB  # role VARCHAR2; parts CLOB for both rows


def test_a_mix_of_rows_with_and_without_ids_is_refused(oracle, oracle_driver):
    with pytest.raises(ValueError, match="every row has its primary key or none"):
        rows_insert(SearchChunk, [chunk(1, pk=5), chunk(2)])
    assert oracle_driver.executed() == []


def test_many_rows_go_in_batches_in_one_transaction(oracle, oracle_driver, monkeypatch):
    monkeypatch.setattr(oracle, "autocommit", True)  # outside any transaction, as a connection starts
    rows_insert(SearchChunk, [chunk(i) for i in range(ORACLE_BATCH_ROWS + 1)])
    assert [(e[0], len(e[2])) if e[0] == "executemany" else e for e in oracle_driver.log if e[0] != "setinputsizes"] \
        == [("executemany", ORACLE_BATCH_ROWS), ("executemany", 1), ("commit",)]


def test_contexts_are_updated_row_by_row_through_executemany(oracle, oracle_driver):
    rows_update(SearchChunk, [chunk(1, pk=11), chunk(2, context=LONG, pk=12)], ["context"])
    [(kind, statement, params)] = oracle_driver.executed()
    assert (kind, statement) == ("executemany", 'UPDATE "OAM_SEARCH_CHUNKS" SET "CONTEXT" = :arg0 WHERE "ID" = :arg1')
    assert params == [["short", 11], [LONG, 12]]
    [(_, sizes, _)] = sizes_of(oracle_driver)
    assert list(sizes) == [oracledb.DB_TYPE_CLOB, None]  # the same CLOB bind for both rows


class ScriptedCursor(RecordingDriverCursor):
    """Records like its parent and answers a SELECT with the rows of the first script entry whose text it
    contains (then nothing)."""

    def __init__(self, log, script):
        super().__init__(log)
        self.script, self.pending = script, []

    def execute(self, statement, parameters=None):
        super().execute(statement, parameters)
        self.pending = next((list(rows) for needle, rows in self.script if needle in statement), [])

    def fetchmany(self, size=None):
        rows, self.pending = self.pending, []
        return rows


def test_refreshing_message_contexts_updates_row_by_row(oracle, oracle_driver, monkeypatch):
    """``writer.refresh_message_contexts`` (after ``add_messages``, an edit, a delete) on Oracle: the messages
    and their chunks are read, then one ``UPDATE ... WHERE "ID" = :arg1`` through ``executemany``."""
    turns = [("7:m1", 1, "user", "hi"), ("7:m2", 2, "assistant", "w" * 5_000)]  # one turn, 5,011 bytes
    chunk_rows = [(101, 7, "message", "7:m1", "message", 0, None, None, "7:t", "valid", None, "{}", "user: hi",
                   "user: hi", array.array("f", [0.0] * 384), NOW.replace(tzinfo=None)),
                  (102, 7, "message", "7:m2", "message", 0, None, None, "7:t", "valid", None, "{}",
                   "assistant: " + "w" * 5_000, "", array.array("f", [0.0] * 384), NOW.replace(tzinfo=None))]
    script = [('"OAM_MESSAGES"."SEQ" >= ', turns), ('FROM "OAM_SEARCH_CHUNKS"', chunk_rows)]
    monkeypatch.setattr(oracle_driver, "cursor", lambda: ScriptedCursor(oracle_driver.log, script))
    assert writer.refresh_message_contexts("7:t", 1, 2) == 2
    kind, statement, params = oracle_driver.executed()[-1]
    assert (kind, statement) == ("executemany", 'UPDATE "OAM_SEARCH_CHUNKS" SET "CONTEXT" = :arg0 WHERE "ID" = :arg1')
    assert [row[1] for row in params] == [101, 102]
    assert params[0][0].startswith("user: hi\nassistant: w") and len(params[1][0].encode()) > 4_000
    assert not [s for _, s, _ in oracle_driver.executed() if "CASE WHEN" in s]
    assert sizes_of(oracle_driver)[-1][1] == (oracledb.DB_TYPE_CLOB, None)
