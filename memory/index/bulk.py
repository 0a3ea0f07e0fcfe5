"""Multi-row INSERTs and UPDATEs, with the form Oracle needs chosen here and nowhere else.

``rows_insert(model, rows)`` and ``rows_update(model, objs, fields)`` are ``QuerySet.bulk_create`` and
``QuerySet.bulk_update`` on SQLite and PostgreSQL, unchanged. On Oracle, Django's multi-row forms put bind
variables where their types must agree across rows, and Django chooses a bind's type per value:
``OracleParam`` binds a string of more than 4,000 bytes (UTF-8) as ``CLOB`` and a shorter one as ``VARCHAR2``;
a ``VectorBind`` as ``DB_TYPE_VECTOR``.

* ``bulk_create`` of several rows is one ``INSERT INTO t (cols) SELECT * FROM (SELECT ... FROM DUAL UNION
  ALL SELECT ... FROM DUAL ...)`` (``DatabaseOperations.bulk_insert_sql``): every value is a select-list
  item of a set query, whose branches must agree in data type group (Oracle SQL Language Reference, "The
  Set Operators"). Django wraps text, number, timestamp and BLOB values (``TO_NCLOB(%s)``,
  ``TO_NUMBER(%s)`` ...: ``BulkInsertMapper``) but not ``JSONField`` values, so a row whose metadata is
  over 4,000 bytes (``MAX_METADATA_BYTES`` is 64 KiB) puts a ``CLOB`` under another row's ``VARCHAR2``
  (ORA-01790); nor ``VectorField`` values, so every embedding is a bare ``VECTOR`` bind in a ``UNION ALL``,
  which no offline check can show a 23ai server accepts.
* ``bulk_update`` is ``UPDATE t SET col = CASE WHEN id = %s THEN %s ... ELSE NULL END WHERE id IN (...)``:
  a ``CASE``'s results must share a data type (Oracle SQL Language Reference, "CASE Expressions"), and a
  keyword context over 4,000 bytes (four clipped neighbour turns of 100 words, or one long unspaced turn)
  is a ``CLOB`` among ``VARCHAR2`` results: ORA-00932 (inconsistent datatypes).

So on Oracle both are one single-row statement run for every row by ``cursor.executemany``
(python-oracledb's array DML: one round trip): ``INSERT INTO t (cols) VALUES (%s, ...)`` and
``UPDATE t SET col = %s WHERE pk = %s``. Django's Oracle cursor gives each bind position one input size over
all the rows (``FormatStylePlaceholderCursor._guess_input_sizes``: ``CLOB`` when any row's text is over
4,000 bytes, ``DB_TYPE_VECTOR`` for embeddings), so every row binds the same types, no value sits in a set
query or a ``CASE``, and the statement is the plain ``INSERT ... VALUES`` python-oracledb documents for
``VECTOR`` columns. Like Django's ``bulk_create`` on Oracle (``can_return_rows_from_bulk_insert`` is
False), an inserted row's identity primary key is not read back. Tests: ``tests/oracle/test_bulk_writes.py``
(what reaches the driver) and ``tests/memory/test_bulk_writes.py`` (SQLite keeps Django's forms).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections, router, transaction
from django.db.models import Model

#: Rows per ``executemany`` on Oracle (each call binds every row's values at once in the client).
ORACLE_BATCH_ROWS = 500


def _connection(model: type[Model]):
    return connections[router.db_for_write(model)]


def uses_single_row_statements(connection) -> bool:
    """Whether multi-row writes on ``connection`` run as one single-row statement per row (``executemany``):
    Oracle only (the module docstring says why)."""
    return connection.vendor == "oracle"


def batches(items: Sequence, size: int = ORACLE_BATCH_ROWS):
    """``items`` in consecutive slices of at most ``size`` (rows per Oracle statement by default; ``IN`` lists of at
    most 1,000 values, ORA-01795, for ``memory.index.writer``)."""
    for start in range(0, len(items), size):
        yield items[start:start + size]


def rows_insert(model: type[Model], rows: Sequence[Model]) -> None:
    """Insert the unsaved ``rows`` of ``model``: ``bulk_create``, or on Oracle ``INSERT ... VALUES`` through
    ``executemany``.

    The rows either all carry their primary key (a caller-chosen id) or all leave it to the database (an
    identity column); a mix raises ``ValueError``. A duplicate key raises ``IntegrityError`` on every
    database. On Oracle, default values, ``auto_now`` and ``auto_now_add`` are applied as ``bulk_create``
    does (``Field.pre_save``) and an identity key stays None on the objects. All batches commit together
    (one transaction, as ``bulk_create``).
    """
    if not rows:
        return
    connection = _connection(model)
    if not uses_single_row_statements(connection):
        model._default_manager.bulk_create(rows)
        return
    opts = model._meta
    with_pk = [row.pk is not None for row in rows]
    if any(with_pk) and not all(with_pk):
        raise ValueError(f"rows_insert({opts.label}): either every row has its primary key or none has")
    fields = [field for field in opts.concrete_fields
              if not getattr(field, "generated", False) and (all(with_pk) or not field.primary_key)]
    quote = connection.ops.quote_name
    sql = (f"INSERT INTO {quote(opts.db_table)} ({', '.join(quote(f.column) for f in fields)}) "
           f"VALUES ({', '.join(['%s'] * len(fields))})")
    with transaction.atomic(using=connection.alias, savepoint=False), connection.cursor() as cursor:
        for batch in batches(rows):
            cursor.executemany(sql, [[field.get_db_prep_save(field.pre_save(row, True), connection)
                                      for field in fields] for row in batch])
    for row in rows:
        row._state.adding, row._state.db = False, connection.alias


def rows_update(model: type[Model], objs: Sequence[Model], field_names: Sequence[str], *,
                batch_size: int | None = None) -> int:
    """Write the values ``objs`` hold in ``field_names`` to their rows: ``bulk_update(objs, field_names,
    batch_size=...)``, or on Oracle ``UPDATE ... SET col = %s ... WHERE pk = %s`` through ``executemany``.

    Returns the number of rows matched (on Oracle, the driver's ``rowcount`` after the last batch, summed).
    """
    if not objs:
        return 0
    connection = _connection(model)
    if not uses_single_row_statements(connection):
        return model._default_manager.bulk_update(objs, field_names, batch_size=batch_size)
    opts = model._meta
    fields = [opts.get_field(name) for name in field_names]
    quote = connection.ops.quote_name
    sql = (f"UPDATE {quote(opts.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
           f"WHERE {quote(opts.pk.column)} = %s")
    updated = 0
    with transaction.atomic(using=connection.alias, savepoint=False), connection.cursor() as cursor:
        for batch in batches(objs):
            cursor.executemany(sql, [[field.get_db_prep_save(getattr(obj, field.attname), connection)
                                      for field in fields] + [opts.pk.get_db_prep_value(obj.pk, connection)]
                                     for obj in batch])
            updated += cursor.rowcount or 0
    return updated
