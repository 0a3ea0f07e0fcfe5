"""Dependants (issue #32 part 4: ``memory.records.derivations``, ``memory.links.dependants``,
``memory.services.erasure.derivations_erase``) on Oracle 23.7, compiled without a database: what reaches the
driver for the walk, and the SQL of the other new queries."""

import datetime
import re

from memory.extraction.candidates import known_memories
from memory.links.dependants import _versions
from memory.models import MemoryVersion, Project, Thread
from memory.records.derivations import WALK_BATCH, dependants_of, flagged_queryset
from memory.services.erasure import derivations_erase
from tests.oracle.test_migrations_ddl import create_table

D = '"OAM_MEMORY_DERIVATIONS"'
M = '"OAM_MEMORIES"'
NOW = datetime.datetime(2026, 12, 7, 12, 0, 0, tzinfo=datetime.UTC)


def test_the_edges_table_has_short_names_and_its_unique_pair(compiled):
    ddl = create_table(compiled.statements(["memory"]), "oam_memory_derivations")
    for column in ("MEMORY_ID", "SOURCE_ID", "THREAD_ID"):
        assert f'"{column}" NVARCHAR2(300) NULL' in ddl
    text = "\n".join(compiled.for_migration("memory", "0015").statements)
    assert 'CONSTRAINT "OAM_MEMDERIV_UQ" UNIQUE ("MEMORY_ID", "SOURCE_ID")' in text
    assert all(len(name) <= 30 for s in compiled.for_migration("memory", "0015").statements
               for name in s.split('"')[1::2])


def test_the_walk_reaches_the_driver_one_level_at_a_time_with_named_binds(oracle, oracle_driver):
    walk = dependants_of(["7:a", "7:b"])  # the recording driver answers no rows: one level, no dependant
    assert walk.order == [] and not walk.truncated
    [(kind, statement, binds)] = oracle_driver.executed()
    assert kind == "execute" and "%s" not in statement
    assert statement == (f'SELECT {D}."MEMORY_ID" AS "MEMORY_ID", {D}."SOURCE_ID" AS "SOURCE_ID" FROM {D} '
                         f'WHERE {D}."SOURCE_ID" IN (:arg0, :arg1) ORDER BY 1 ASC, 2 ASC')
    assert "FETCH FIRST" not in statement and sorted(binds.values()) == ["7:a", "7:b"]


def test_a_wide_level_is_asked_in_batches_oracle_takes(oracle, oracle_driver):
    dependants_of([f"7:m{i}" for i in range(WALK_BATCH + 1)])
    statements = [statement for _, statement, _ in oracle_driver.executed()]
    assert len(statements) == 2
    assert [len(re.findall(r":arg\d+", s)) for s in statements] == [WALK_BATCH, 1]  # Oracle: 1,000 per IN list


def test_flagged_memories_are_read_by_project_flag_scope_and_liveness(oracle):
    project = Project(pk=7, slug="p")
    qs = flagged_queryset(project=project, restrict={"user_id": "u1"}, thread_id="t1", memory_type="fact")
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    for fragment in (f'{M}."PROJECT_ID" = %s', f'{M}."NEEDS_REVIEW"', f'{M}."USER_ID" = %s',
                     f'{M}."THREAD_ID" = %s', f'{M}."MEMORY_TYPE" = %s', f'{M}."PENDING"',
                     f'({M}."EXPIRES_AT" IS NULL OR {M}."EXPIRES_AT" > %s)'):
        assert fragment in sql
    assert sql.endswith(f'ORDER BY {M}."UPDATED_AT" DESC, {M}."ID" ASC')
    assert {"u1", "7:t1", "fact"} <= {p for p in params if isinstance(p, str)}


def test_the_causes_versions_are_one_grouped_query(oracle, oracle_driver):
    assert _versions(["7:a"]) == {}
    [(_, statement, binds)] = oracle_driver.executed()
    assert 'MAX("OAM_MEMORY_VERSIONS"."VERSION") AS "TOP"' in statement
    assert 'GROUP BY "OAM_MEMORY_VERSIONS"."MEMORY_ID"' in statement and list(binds.values()) == ["7:a"]


def test_an_erasure_deletes_the_edges_of_erased_history_in_one_statement(oracle, oracle_driver):
    derivations_erase(MemoryVersion.objects.filter(thread_id__in=["7:t1"]).values("memory_id"), thread_keys=["7:t1"])
    [(_, scrub, _), (kind, statement, binds)] = oracle_driver.executed()
    history = 'SELECT U0."MEMORY_ID" AS "MEMORY_ID" FROM "OAM_MEMORY_VERSIONS" U0 WHERE U0."THREAD_ID" IN (:arg'
    # first the erased sources whose dependants keep a cause naming them (dependants.causes_scrub): none here
    assert scrub.startswith(f'SELECT {D}."SOURCE_ID" AS "SOURCE_ID" FROM {D} WHERE') and scrub.count(history) == 1
    assert "ORDER BY" not in scrub
    assert statement.startswith(f"DELETE FROM {D} WHERE") and statement.count(history) == 2
    assert f'{D}."THREAD_ID" IN (:arg0)' in statement and binds == {":arg0": "7:t1"}  # one bind, reused


def test_known_memories_for_an_extraction_prompt_take_the_newest_n(oracle, oracle_driver, settings):
    thread = Thread(pk="7:t1", project_id=7, user_id="u1", agent_id=None)
    assert known_memories(thread, now=NOW, limit=5) == []
    [(_, statement, binds)] = oracle_driver.executed()
    assert f'{M}."USER_ID" = :arg' in statement and f'{M}."AGENT_ID" IS NULL' in statement
    assert f'{M}."STATUS" = :arg' in statement and f'{M}."PENDING"' in statement
    assert statement.endswith(f'ORDER BY {M}."CREATED_AT" DESC, {M}."ID" DESC FETCH FIRST 5 ROWS ONLY')
    assert {"u1", "valid"} <= set(binds.values())
