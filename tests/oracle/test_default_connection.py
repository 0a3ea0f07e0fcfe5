"""The offline compile is the production compile: queries here are built with the Oracle connection as Django's
default (``tests/oracle/conftest.py``, ``offline.as_default``).

Django reads ``connections["default"].features.interprets_empty_strings_as_nulls`` while it builds a query
(``Query.build_lookup``, ``Query.is_nullable``), not when it compiles it for a connection. With SQLite as the
default, every test below fails: the exclude loses its ``IS NOT NULL`` and the empty-string lookup stays
``= ''``, which is true for no row on Oracle (it stores '' as NULL).
"""

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import Q

from memory.models import Memory, SearchChunk
from tests.oracle.conftest import uses_the_test_database

CHUNKS = '"OAM_SEARCH_CHUNKS"'


def compile_on(oracle, qs) -> tuple[str, list]:
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    return sql, list(params)


def test_the_default_connection_is_the_oracle_wrapper(oracle):
    assert connections[DEFAULT_DB_ALIAS] is oracle
    assert connection.vendor == "oracle" and connection.features.interprets_empty_strings_as_nulls


def test_an_exclude_on_a_not_null_char_column_compiles_as_on_an_oracle_deployment(oracle):
    """``record_id`` is NOT NULL, but on Oracle a CharField holds NULL for '' (``is_nullable``)."""
    sql, params = compile_on(oracle, SearchChunk.objects.exclude(record_id="7:m").values_list("pk"))
    assert sql.endswith(f'WHERE NOT ({CHUNKS}."RECORD_ID" = %s AND {CHUNKS}."RECORD_ID" IS NOT NULL)')
    assert params == ["7:m"]


def test_an_empty_string_lookup_compiles_to_is_null(oracle):
    sql, params = compile_on(oracle, SearchChunk.objects.filter(context="").values_list("pk"))
    assert sql.endswith(f'WHERE {CHUNKS}."CONTEXT" IS NULL') and params == []
    sql, params = compile_on(oracle, Memory.objects.filter(Q(thread_id="") | Q(user_id="u1")).values_list("pk"))
    assert '"OAM_MEMORIES"."THREAD_ID" IS NULL OR "OAM_MEMORIES"."USER_ID" = %s' in sql and params == ["u1"]


def test_a_test_on_the_test_database_keeps_the_configured_default(db, request):
    assert uses_the_test_database(request.node)
    assert connections[DEFAULT_DB_ALIAS].settings_dict["ENGINE"] == settings.DATABASES[DEFAULT_DB_ALIAS]["ENGINE"]
    assert connections[DEFAULT_DB_ALIAS].alias == DEFAULT_DB_ALIAS
