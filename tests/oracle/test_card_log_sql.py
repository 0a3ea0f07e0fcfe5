"""The context-card log (issue #32, part 3: ``memory.context.card_log``, ``memory.services.cards``) on Oracle 23.7,
compiled without a database: the table and its index, the replay lookup and the newest-card read as they reach
the driver, the insert, the run's update and the retention purge."""

import datetime
import re

from django.db.models.sql import InsertQuery

from memory.context.card_log import card_logged, card_newest
from memory.models import ContextCardLog, Project, Thread
from tests.oracle.test_migrations_ddl import create_table

C = '"OAM_CONTEXT_CARDS"'
NOW = datetime.datetime(2026, 12, 7, 12, 0, 0, tzinfo=datetime.UTC)
THREAD = Thread(pk="7:t1", project=Project(pk=7, slug="p"))


def test_the_table_its_columns_and_its_index(compiled):
    ddl = create_table(compiled.statements(["memory"]), "oam_context_cards")
    # Oracle stores '' as NULL: Django makes text columns NULL there
    for column in ('"THREAD_ID" NVARCHAR2(300) NULL', '"USER_ID" NVARCHAR2(300) NULL',
                   '"PARAMETERS_DIGEST" NVARCHAR2(64) NULL', '"CONTENT" NCLOB NULL', '"PARTS" NCLOB NULL',
                   '"SERVED_AT" TIMESTAMP NOT NULL', '"PARAMETERS" NCLOB NOT NULL CHECK ("PARAMETERS" IS JSON)'):
        assert column in ddl, column
    text = "\n".join(compiled.for_migration("memory", "0016").statements)
    assert 'CREATE INDEX "OAM_CARD_THREAD_TIME_IX" ON "OAM_CONTEXT_CARDS" ("THREAD_ID", "SERVED_AT")' in text
    assert all(len(name) <= 30 for s in compiled.for_migration("memory", "0016").statements
               for name in s.split('"')[1::2])


def test_the_replay_lookup_is_one_indexed_query_with_named_binds(oracle, oracle_driver):
    assert card_logged(thread=THREAD, digest="d" * 64, at=NOW) is None  # the recording driver answers no rows
    [(kind, statement, binds)] = oracle_driver.executed()
    assert kind == "execute" and "%s" not in statement
    for column in ("PROJECT_ID", "THREAD_ID", "PARAMETERS_DIGEST"):
        assert re.search(rf'{C}\."{column}" = :arg\d', statement), (column, statement)
    assert re.search(rf'{C}\."SERVED_AT" <= :arg\d', statement)
    assert statement.endswith(f'ORDER BY {C}."SERVED_AT" DESC, {C}."ID" DESC FETCH FIRST 1 ROWS ONLY')
    assert {7, "7:t1", "d" * 64} <= set(binds.values())
    assert card_newest(thread=THREAD, digest="d" * 64) is None


def test_the_insert_and_the_runs_update_compile(oracle, oracle_driver):
    row = ContextCardLog(project_id=7, thread_id="7:t1", user_id="7:u", agent_id=None, parameters_digest="d" * 64,
                         parameters={"max_relevant_results": 5}, content="<context_card>…</context_card>",
                         parts='{"__type__":"ContextCard"}', served_at=NOW, last_served_at=NOW)
    query = InsertQuery(ContextCardLog)
    query.insert_values([f for f in ContextCardLog._meta.concrete_fields if f.name != "id"], [row])
    [(statement, params)] = query.get_compiler(connection=oracle).as_sql()
    assert statement.startswith(f'INSERT INTO {C} ("PROJECT_ID", "THREAD_ID", "USER_ID", "AGENT_ID", '
                                '"PARAMETERS_DIGEST", "PARAMETERS", "CONTENT", "PARTS", "SIZE", "SERVED_AT", '
                                '"LAST_SERVED_AT")')
    assert "7:t1" in params and "d" * 64 in params
    ContextCardLog.objects.filter(pk=3).update(last_served_at=NOW)
    update = [s for _, s, _ in oracle_driver.executed() if s.startswith("UPDATE")]
    assert update == [f'UPDATE {C} SET "LAST_SERVED_AT" = :arg0 WHERE {C}."ID" = :arg1']


def test_the_per_thread_bound_reads_the_newest_and_deletes_the_rest(oracle):
    """``memory.services.cards.card_log_bound`` on Oracle: the newest rows' (id, size, served_at), then one delete."""
    from django.db.models import Q

    rows = ContextCardLog.objects.filter(project_id=7, thread_id="7:t1")
    sql, params = (rows.order_by("-served_at", "-id").values_list("pk", "size", "served_at")[:501]
                   .query.get_compiler(connection=oracle).as_sql())
    assert sql.startswith(f'SELECT {C}."ID" AS "PK", {C}."SIZE" AS "SIZE", {C}."SERVED_AT" AS ')
    assert sql.endswith(f'ORDER BY 3 DESC, {C}."ID" DESC FETCH FIRST 501 ROWS ONLY')
    doomed = rows.filter(Q(pk__in=[1, 2]) | Q(served_at__lt=NOW)).exclude(pk__in=[3])
    sql, params = doomed.query.get_compiler(connection=oracle).as_sql()
    assert f'{C}."SERVED_AT" < %s' in sql and f'NOT ({C}."ID" IN (%s))' in sql and params[-1] == 3


def test_the_retention_purge_selects_by_last_serve(oracle):
    qs = ContextCardLog.objects.filter(last_served_at__lt=NOW - datetime.timedelta(days=90))
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert f'{C}."LAST_SERVED_AT" < %s' in sql and len(params) == 1
