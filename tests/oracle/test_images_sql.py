"""Images on Oracle 23.7, compiled offline: the oam_images DDL (BLOB bytes) and the image queries.

What a live Oracle would need, checked on the text: the bytes column is a
``BLOB`` (Django's ``BinaryField``; a ``RAW`` would stop at 2000 bytes), the
description an ``NCLOB``, metadata ``NCLOB IS JSON``; listings leave the BLOB
out of the select list; the row lock carries no row limit (ORA-02014);
metadata filters are ``JSON_EXISTS`` on the images' own column; the bytes
reach python-oracledb as ``bytes`` (bound as a BLOB).
"""

import datetime

from django.db.models.sql import InsertQuery

from memory.core.types import MemorySearchConfig, SearchScope
from memory.models import Image, Thread
from memory.records.image_rules import ImageInputLimitConfig, validate_image
from memory.records.selectors import image_list_queryset
from memory.search.query import filtered_chunks
from memory.search.request import build_request
from tests import image_samples as samples
from tests.oracle.test_migrations_ddl import create_table

T = '"OAM_IMAGES"'
NOW = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
THREAD = Thread(id="7:t-main", project_id=7, user_id="user-1", agent_id="agent-1")  # stored id (memory.records.tenancy)


def compile_qs(qs, oracle):
    return qs.query.get_compiler(connection=oracle).as_sql()


# --- DDL (memory 0005) ----------------------------------------------------------------------


def test_images_table_has_a_blob_for_the_bytes(compiled, project_apps):
    ddl = create_table(compiled.statements(project_apps), "oam_images")
    # Django's Oracle backend makes string and binary columns nullable (Oracle
    # stores '' as NULL); memory.records.image_rules refuses empty images before any write.
    assert '"DATA" BLOB NULL' in ddl
    assert '"DESCRIPTION" NCLOB NULL' in ddl
    assert '"MIME_TYPE" NVARCHAR2(32) NULL' in ddl
    assert '"METADATA" NCLOB NOT NULL CHECK ("METADATA" IS JSON)' in ddl
    assert '"SIZE_BYTES" NUMBER(19) NOT NULL' in ddl
    assert '"THREAD_ID" NVARCHAR2(255) NOT NULL' in ddl and '"MESSAGE_ID" NVARCHAR2(255) NULL' in ddl


def test_images_migration_is_0005_after_0004_and_adds_the_foreign_keys(compiled):
    from django.db.migrations.loader import MigrationLoader

    loader = MigrationLoader(None, ignore_no_migrations=True)
    migration = loader.disk_migrations[("memory", "0005_images")]
    assert migration.dependencies == [("memory", "0004_summaries_jobs_links")]
    statements = compiled.for_migration("memory", "0005_images").statements
    text = "\n".join(statements)
    assert 'REFERENCES "OAM_THREADS" ("ID") DEFERRABLE INITIALLY DEFERRED' in text
    assert 'REFERENCES "OAM_MESSAGES" ("ID") DEFERRABLE INITIALLY DEFERRED' in text
    indexed = [s for s in statements if s.startswith("CREATE INDEX")]
    assert any('("THREAD_ID")' in s for s in indexed) and any('("MESSAGE_ID")' in s for s in indexed)
    assert any('("EXPIRES_AT")' in s for s in indexed)


def test_images_migration_reverse_drops_the_table(oracle):
    from tests.oracle.offline import compile_migrations

    backwards = compile_migrations(oracle, ["memory"], backwards=True)
    statements = backwards.for_migration("memory", "0005_images").statements
    assert statements[0] == 'DROP TABLE "OAM_IMAGES" CASCADE CONSTRAINTS;'
    assert all("OAM_IMAGES" in s for s in statements)  # and the identity sequence, if any


# --- queries --------------------------------------------------------------------------------


def test_listing_leaves_the_blob_out_and_fetches_the_default_limit(oracle):
    sql, params = compile_qs(image_list_queryset(thread=THREAD, now=NOW), oracle)
    select, rest = sql.split(f" FROM {T} ", 1)
    assert f'{T}."DATA"' not in select and f'{T}."DESCRIPTION"' in select
    assert rest.startswith(f'WHERE (({T}."EXPIRES_AT" IS NULL OR {T}."EXPIRES_AT" > %s) AND {T}."THREAD_ID" = %s)')
    assert rest.endswith(f'ORDER BY {T}."CREATED_AT" ASC, {T}."ID" ASC FETCH FIRST 100 ROWS ONLY')
    assert list(params) == [NOW.replace(tzinfo=None), "7:t-main"]  # Oracle binds naive UTC


def test_bytes_are_selected_only_for_one_image(oracle):
    qs = image_list_queryset(thread=THREAD, image_id="img-1", include_bytes=True, limit=None, now=NOW)
    sql, params = compile_qs(qs, oracle)
    assert f'{T}."DATA"' in sql.split(" FROM ", 1)[0]
    assert f'{T}."ID" = %s' in sql and "FETCH FIRST" not in sql
    assert "7:img-1" in params


def test_metadata_filter_runs_on_the_images_metadata(oracle):
    qs = image_list_queryset(thread=THREAD, metadata_filter={"tags": {"$array_contains": "trip"}}, limit=5, now=NOW)
    sql, params = compile_qs(qs, oracle)
    assert f"JSON_EXISTS({T}.\"METADATA\", " in sql
    assert sql.endswith("FETCH FIRST 5 ROWS ONLY")
    assert "trip" in params


def test_the_image_row_lock_has_no_row_limit(oracle, oracle_driver):
    before, oracle.autocommit = oracle.autocommit, False  # as inside transaction.atomic()
    try:
        qs = Image.objects.filter(pk="img-1", thread_id="t-main").select_for_update().order_by()
        sql, params = compile_qs(qs, oracle)
    finally:
        oracle.autocommit = before
    assert sql.endswith("FOR UPDATE") and "FETCH FIRST" not in sql
    assert f'{T}."DATA"' not in sql  # deferred: the lock reads no BLOB


def test_bytes_are_bound_as_bytes_on_insert(oracle):
    valid = validate_image(samples.png(), limits=ImageInputLimitConfig())
    row = Image(id="img-1", thread_id="t-main", mime_type=valid.mime_type.value, data=valid.data,
                size_bytes=valid.size_bytes, width=valid.width, height=valid.height, created_at=NOW, updated_at=NOW)
    query = InsertQuery(Image)
    query.insert_values([f for f in Image._meta.concrete_fields], [row])
    [(sql, params)] = query.get_compiler(connection=oracle).as_sql()
    assert sql.startswith(f'INSERT INTO {T} (') and '"DATA"' in sql
    columns = [c.strip().strip('"') for c in sql.split("(", 1)[1].split(")", 1)[0].split(",")]
    data_param = params[columns.index("DATA")]
    assert isinstance(data_param, bytes) and data_param == samples.png()


def test_search_can_ask_for_image_chunks_only(oracle):
    scope = SearchScope(user_id="user-1", agent_id="agent-1", thread_id="t-main", exact_thread_match=False)
    request = build_request("boarding pass", project_id=7, scope=scope, config=MemorySearchConfig(),
                            record_types=["image"])
    sql, params = compile_qs(filtered_chunks(request, NOW).values_list("record_id"), oracle)
    assert '"OAM_SEARCH_CHUNKS"."RECORD_TYPE" IN (%s)' in sql
    assert "image" in params
    sql, _ = compile_qs(Image.objects.filter(pk__in=["a", "b"]), oracle)
    assert f'{T}."DATA"' not in sql.split(" FROM ", 1)[0]  # search results never load bytes
