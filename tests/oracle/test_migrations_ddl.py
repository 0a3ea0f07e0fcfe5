"""Every project migration compiled for Oracle 23.7 without a database.

What a live Oracle would reject or silently change, checked on the DDL text:
missing tables, a nullable or wrongly typed VECTOR column, identifiers Django
would hash-truncate (> 30 characters, ``django.db.backends.oracle``),
JSON columns that are not NCLOB + IS JSON, and the vector index block.
"""

import re

import pytest
from django.conf import settings
from django.db import models

from memory.fields import VectorField

EXPECTED_TABLES = {"oam_threads", "oam_messages", "oam_memories", "oam_search_chunks", "oam_history_vectors"}
QUOTED = re.compile(r'"([^"]+)"')


def create_table(statements, table):
    found = [s for s in statements if s.startswith(f'CREATE TABLE "{table.upper()}" (')]
    assert len(found) == 1, f"expected one CREATE TABLE for {table}, found {len(found)}"
    return found[0]


def project_models(compiled, project_apps):
    return [m for m in compiled.final_state.apps.get_models() if m._meta.app_label in project_apps]


def test_memory_and_threads_migrations_are_compiled(compiled, project_apps):
    assert "memory" in project_apps and "threads" in project_apps
    keys = [m.key for m in compiled.migrations]
    assert ("memory", "0001_initial") in keys
    assert any(k[0] == "memory" and k[1].startswith("0002_") for k in keys)
    # every migration file of every project app on disk is in the plan
    from django.db.migrations.loader import MigrationLoader

    on_disk = {k for k in MigrationLoader(None, ignore_no_migrations=True).disk_migrations if k[0] in project_apps}
    assert on_disk <= set(keys)
    # ... and nothing else: Django's own apps (auth, contenttypes: dependencies since memory 0008) shape the
    # state the project's migrations start from, but their DDL is Django's and is not compiled here.
    assert {k[0] for k in keys} <= set(project_apps)
    assert ("memory", "0008_project_members") in keys
    assert keys.index(("memory", "0008_project_members")) > keys.index(("memory", "0007_erasure"))


def test_core_tables_are_created(compiled, project_apps):
    statements = compiled.statements(project_apps)
    for table in EXPECTED_TABLES:
        create_table(statements, table)


def test_every_project_table_keeps_its_db_table_name(compiled, project_apps):
    statements = compiled.statements(project_apps)
    created = {m.group(1) for s in statements for m in [re.match(r'CREATE TABLE "([^"]+)"', s)] if m}
    for model in project_models(compiled, project_apps):
        db_table = model._meta.db_table
        assert len(db_table) <= 30, f"{model._meta.label}.db_table {db_table!r} would be hash-truncated"
        assert db_table.upper() in created, f"{db_table} is not created as {db_table.upper()!r}"


def test_no_identifier_is_truncated_or_longer_than_30(compiled, project_apps):
    assert compiled.truncated_names == []
    for statement in compiled.statements(project_apps):
        for name in QUOTED.findall(statement):
            assert len(name) <= 30, f"identifier {name!r} is {len(name)} characters: {statement[:120]}"


def test_named_indexes_and_constraints_keep_their_names(compiled, project_apps):
    text = "\n".join(compiled.statements(project_apps))
    names = [obj.name for model in project_models(compiled, project_apps)
             for obj in (*model._meta.indexes, *model._meta.constraints)]
    assert "oam_chunk_scope_ix" in names and "oam_chunk_record_uq" in names
    for name in names:
        assert f'"{name.upper()}"' in text, f"{name} is not in the DDL under its own name"


def test_embedding_is_a_not_null_float32_vector(compiled, project_apps):
    ddl = create_table(compiled.statements(project_apps), "oam_search_chunks")
    assert '"EMBEDDING" VECTOR(384, FLOAT32) NOT NULL,' in ddl
    assert settings.OAM_EMBEDDING_DIMENSIONS == 384  # the migration's dimension is the configured one


def test_every_vector_field_is_not_null_vector(compiled, project_apps):
    statements = compiled.statements(project_apps)
    vector_fields = [(m, f) for m in project_models(compiled, project_apps)
                     for f in m._meta.local_fields if isinstance(f, VectorField)]
    assert vector_fields
    for model, field in vector_fields:
        ddl = create_table(statements, model._meta.db_table)
        expected = f'"{field.column.upper()}" VECTOR({field.dimensions}, FLOAT32) NOT NULL'
        assert expected in ddl


def test_json_columns_are_nclob_checked_as_json(compiled, project_apps):
    statements = compiled.statements(project_apps)
    json_fields = [(m, f) for m in project_models(compiled, project_apps)
                   for f in m._meta.local_fields if isinstance(f, models.JSONField)]
    assert {(m._meta.db_table, f.column) for m, f in json_fields} >= {
        ("oam_threads", "metadata"), ("oam_threads", "config"), ("oam_messages", "parts"),
        ("oam_memories", "source_message_ids"), ("oam_search_chunks", "metadata"),
    }
    for model, field in json_fields:
        table = model._meta.db_table.upper()
        # a column of the table's first migration, or one a later migration added (memory 0015: review_cause)
        ddl = " ".join([create_table(statements, table)]
                       + [s for s in statements if s.startswith(f'ALTER TABLE "{table}" ADD ')])
        col = field.column.upper()
        null = "NULL" if field.null else "NOT NULL"
        assert f'"{col}" NCLOB {null} CHECK ("{col}" IS JSON)' in ddl


def test_no_native_json_and_no_sqlite_vector_type(compiled, project_apps):
    for statement in compiled.statements(project_apps):
        # Django 5.2 never emits native JSON (``django.db.backends.oracle``)
        assert not re.search(r'" JSON\b', statement)
        assert not re.search(r'" blob\b', statement)  # VectorField's SQLite type must not reach Oracle


# --- the vector index (memory 0002) ---------------------------------------------------

EXEC_LITERAL = re.compile(r"EXECUTE IMMEDIATE '((?:[^']|'')*)';")
HNSW = ('CREATE VECTOR INDEX "OAM_CHUNK_VEC_IX" ON "OAM_SEARCH_CHUNKS" ("EMBEDDING") '
        "ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE COSINE WITH TARGET ACCURACY 95 "
        "PARAMETERS (TYPE HNSW, NEIGHBORS 32, EFCONSTRUCTION 200)")
IVF = ('CREATE VECTOR INDEX "OAM_CHUNK_VEC_IX" ON "OAM_SEARCH_CHUNKS" ("EMBEDDING") '
       "ORGANIZATION NEIGHBOR PARTITIONS DISTANCE COSINE WITH TARGET ACCURACY 95 "
       "PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS 32)")


@pytest.fixture(scope="module")
def vector_index_statement(compiled):
    statements = compiled.for_migration("memory", "0002_").statements
    assert len(statements) == 1, statements
    return statements[0]


def test_vector_index_is_one_plsql_block_hnsw_then_ivf(vector_index_statement):
    block = vector_index_statement
    assert block.startswith("BEGIN\n")
    assert block.rstrip().endswith("END;")
    literals = [lit.replace("''", "'") for lit in EXEC_LITERAL.findall(block)]
    assert literals == [HNSW, IVF]
    # HNSW is tried first; IVF only in the handler, only for ORA-51962, anything else re-raised
    body, handler = block.split("\nEXCEPTION\n")
    assert "INMEMORY NEIGHBOR GRAPH" in body and "NEIGHBOR PARTITIONS" not in body
    assert re.search(r"WHEN OTHERS THEN\s+IF SQLCODE = -51962 THEN\s+EXECUTE IMMEDIATE '.*TYPE IVF", handler)
    assert re.search(r"ELSE\s+RAISE;\s+END IF;\s+END;", handler)


def test_vector_index_metric_matches_the_search_query():
    """A query metric other than the index's DISTANCE means an exact scan (Oracle AI Vector Search User's Guide,
    "Vector Distance Metrics")."""
    from importlib import import_module

    from memory.fields import VectorDistance

    op = import_module("memory.migrations.0002_searchchunk_vector_index").Migration.operations[0]
    assert op.metric == VectorDistance("embedding", [0.0] * 384).metric == "COSINE"
    assert len(op.name) <= 30


def test_vector_index_reverse_drops_it(oracle):
    from tests.oracle.offline import compile_migrations

    backwards = compile_migrations(oracle, ["memory"], backwards=True)
    assert backwards.for_migration("memory", "0002_").statements == ['DROP INDEX "OAM_CHUNK_VEC_IX";']
    drops = backwards.for_migration("memory", "0001_").statements
    assert 'DROP TABLE "OAM_SEARCH_CHUNKS" CASCADE CONSTRAINTS;' in drops


def test_vector_index_reaches_the_driver_with_its_semicolon(oracle, oracle_driver):
    """Django's Oracle cursor strips one trailing ';' or '/': the block must keep 'END;'."""
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    key = next(k for k in loader.disk_migrations if k[0] == "memory" and k[1].startswith("0002_"))
    migration = loader.graph.nodes[key]
    with oracle.schema_editor(atomic=False) as editor:
        migration.apply(loader.project_state(key, at_end=False), editor)
    executed = oracle_driver.executed()
    assert len(executed) == 1
    _, statement, params = executed[0]
    assert statement.rstrip().endswith("END;")
    assert statement.startswith("BEGIN\n") and "SQLCODE = -51962" in statement
    assert not params
    assert not [e for e in oracle_driver.log if e[0] == "setinputsizes"]

    oracle_driver.log.clear()
    with oracle.schema_editor(atomic=False) as editor:
        migration.unapply(loader.project_state(key, at_end=False), editor)
    assert [(e[0], e[1]) for e in oracle_driver.executed()] == [("execute", 'DROP INDEX "OAM_CHUNK_VEC_IX"')]


@pytest.mark.backend("sqlite")
@pytest.mark.django_db(transaction=True)  # SQLite's schema editor refuses to run inside atomic()
def test_vector_index_is_a_no_op_on_sqlite():
    from django.db import connection
    from django.db.migrations.loader import MigrationLoader

    assert connection.vendor == "sqlite"
    loader = MigrationLoader(None, ignore_no_migrations=True)
    key = next(k for k in loader.disk_migrations if k[0] == "memory" and k[1].startswith("0002_"))
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        loader.graph.nodes[key].apply(loader.project_state(key, at_end=False), editor, collect_sql=True)
    assert [s for s in editor.collected_sql if not s.startswith("--")] == []
    assert "-- (no-op)" in editor.collected_sql
