"""Migration operations for vector indexes (docs/architecture.md, "Tables").

``CreateVectorIndex`` builds the approximate-search index of a ``VectorField``
column on Oracle Database 23ai/26ai. Django cannot express a vector index
(``db_index=True`` would give a useless B-tree on a ``VECTOR`` column), so migrations add one with this
operation.

On Oracle it emits ONE statement, a PL/SQL anonymous block that

1. tries an HNSW index (``ORGANIZATION INMEMORY NEIGHBOR GRAPH``), which lives
   in the SGA vector pool (Oracle AI Vector Search User's Guide, "In-Memory Neighbor Graph Vector Index");
2. when that fails with ORA-51962 (``vector_memory_size`` is 0 or too small,
   as on a fresh Free container), creates an IVF index instead
   (``ORGANIZATION NEIGHBOR PARTITIONS``), which is stored on disk and works
   without a vector pool (Oracle AI Vector Search User's Guide, "Neighbor Partition Vector Index");
3. re-raises any other error.

Both use the same ``DISTANCE`` metric as ``memory.fields.VectorDistance``: a
query whose metric differs from the index's is answered by an exact scan
(Oracle AI Vector Search User's Guide, "Vector Distance Metrics"). The reverse is ``DROP INDEX``.

On PostgreSQL it creates a pgvector HNSW index
(``CREATE INDEX ... USING hnsw (col vector_cosine_ops)``) with pgvector's own
graph defaults (``m`` 16, ``ef_construction`` 64: the Oracle graph parameters
below are Oracle's; pgvector's defaults build a 1M-row index in a fraction of
the time at the recall ``bench/pg_scale.py`` measures).

On SQLite it does nothing: SQLite ranks by brute force with sqlite-vec's
``vec_distance_*`` functions and this process's vector cache.

The statement goes through ``schema_editor.execute``, so ``sqlmigrate`` and
``collect_sql`` show it and it compiles without a database (``tests/oracle/offline.py``).

Notes for later migrations:

* Oracle refuses to drop a column covered by a vector index (ORA-51983): a
  migration removing or replacing the vector column must reverse this
  operation first.
* The block ends in ``END;`` followed by a newline and no ``/``. Django's
  Oracle cursor strips one trailing ``;`` or ``/`` before execution
  (``FormatStylePlaceholderCursor._fix_for_params``), which would cut the
  ``;`` off ``END;`` and break the block; the trailing newline keeps it, and
  ``collect_sql`` then adds no extra ``;`` either. To run ``sqlmigrate``
  output in SQL*Plus/SQLcl, put a ``/`` line after the block.
"""

from __future__ import annotations

import re

from django.db.migrations.operations.base import Operation, OperationCategory

from memory.fields import METRICS, PGVECTOR_METRICS, VectorField

# Oracle error raised by CREATE VECTOR INDEX ... INMEMORY NEIGHBOR GRAPH when the
# vector pool cannot hold the graph (Oracle AI Vector Search User's Guide, "Size the Vector Pool").
VECTOR_POOL_ERROR = -51962

# Django 5.2's Oracle backend hard-codes 30-character identifiers and
# hash-truncates longer ones (``django.db.backends.oracle.operations``).
MAX_NAME_LENGTH = 30
_IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]*$")


#: PostgreSQL's text search configuration of the keyword index (stemmed like SQLite's ``porter`` tokenizer).
TEXT_SEARCH_CONFIG = "english"


def tsvector_column(column: str) -> str:
    """PostgreSQL: the generated ``tsvector`` column of the keyword index over ``column``."""
    return f"{column}_tsv"


def _check_int(name: str, value, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an int from {low} to {high}, got {value!r}")
    return value


class CreateVectorIndex(Operation):
    """Create an Oracle vector index on a ``VectorField``: HNSW, IVF on ORA-51962.

    ``CreateVectorIndex("searchchunk", "oam_chunk_vec_ix", "embedding")`` on
    Oracle runs one PL/SQL block::

        BEGIN
          EXECUTE IMMEDIATE 'CREATE VECTOR INDEX "OAM_CHUNK_VEC_IX" ON "OAM_SEARCH_CHUNKS" ("EMBEDDING")
            ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE COSINE WITH TARGET ACCURACY 95
            PARAMETERS (TYPE HNSW, NEIGHBORS 32, EFCONSTRUCTION 200)';
        EXCEPTION WHEN OTHERS THEN
          IF SQLCODE = -51962 THEN
            EXECUTE IMMEDIATE 'CREATE VECTOR INDEX ... ORGANIZATION NEIGHBOR PARTITIONS
              DISTANCE COSINE WITH TARGET ACCURACY 95 PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS 32)';
          ELSE RAISE; END IF;
        END;

    Arguments (ranges from the Oracle AI Vector Search User's Guide, "CREATE VECTOR INDEX"):

    * ``name``: index name, a plain identifier of at most 30 characters so that
      Django keeps it as written (uppercased) instead of hash-truncating it.
    * ``metric``: ``DISTANCE`` token, one of the metrics ``VectorDistance``
      queries with (``COSINE``, ``EUCLIDEAN``).
    * ``accuracy``: ``WITH TARGET ACCURACY`` percentage, 1-100 (default 95).
    * ``neighbors``, ``efconstruction``: HNSW graph parameters, 2-2048 and
      1-65535 (defaults 32 and 200, langchain-oracledb's defaults).
    * ``partitions``: IVF ``NEIGHBOR PARTITIONS`` of the fallback, 1-10,000,000
      (default 32).
    * ``parallel``: optional ``PARALLEL`` degree for the build.

    Does nothing on other vendors and does not change the migration state (no
    model option describes a vector index, so the autodetector never sees it).
    """

    category = OperationCategory.ADDITION
    reversible = True
    reduces_to_sql = True

    def __init__(
        self,
        model_name: str,
        name: str,
        field: str,
        metric: str = "COSINE",
        *,
        accuracy: int = 95,
        neighbors: int = 32,
        efconstruction: int = 200,
        partitions: int = 32,
        parallel: int | None = None,
    ):
        if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name) > MAX_NAME_LENGTH:
            raise ValueError(
                f"vector index name must be a plain identifier of at most {MAX_NAME_LENGTH} "
                f"characters (Django truncates longer Oracle names), got {name!r}"
            )
        metric = metric.upper() if isinstance(metric, str) else metric
        if metric not in METRICS:
            raise ValueError(
                f"metric must be one of {sorted(METRICS)} (the metrics VectorDistance queries with), got {metric!r}"
            )
        self.model_name = model_name
        self.name = name
        self.field = field
        self.metric = metric
        self.accuracy = _check_int("accuracy", accuracy, 1, 100)
        self.neighbors = _check_int("neighbors", neighbors, 2, 2048)
        self.efconstruction = _check_int("efconstruction", efconstruction, 1, 65535)
        self.partitions = _check_int("partitions", partitions, 1, 10_000_000)
        self.parallel = None if parallel is None else _check_int("parallel", parallel, 1, 1024)

    @property
    def model_name_lower(self) -> str:
        return self.model_name.lower()

    def deconstruct(self):
        kwargs = {"model_name": self.model_name, "name": self.name, "field": self.field}
        defaults = {"metric": "COSINE", "accuracy": 95, "neighbors": 32, "efconstruction": 200,
                    "partitions": 32, "parallel": None}
        for key, default in defaults.items():
            if getattr(self, key) != default:
                kwargs[key] = getattr(self, key)
        return self.__class__.__qualname__, [], kwargs

    def state_forwards(self, app_label, state):
        """No state change: the index is invisible to Django's model state."""

    def describe(self) -> str:
        return (
            f"Create vector index {self.name} (HNSW, IVF fallback, {self.metric}) "
            f"on {self.model_name}.{self.field}"
        )

    @property
    def migration_name_fragment(self) -> str:
        return f"{self.model_name_lower}_{self.name.lower()}"

    # --- SQL -------------------------------------------------------------------

    def _index_ddl(self, schema_editor, model, organization: str, parameters: str) -> str:
        field = model._meta.get_field(self.field)
        if not isinstance(field, VectorField):
            raise ValueError(f"{model._meta.label}.{self.field} is not a VectorField")
        quote = schema_editor.quote_name
        ddl = (
            f"CREATE VECTOR INDEX {quote(self.name)} ON {quote(model._meta.db_table)} "
            f"({quote(field.column)}) ORGANIZATION {organization} "
            f"DISTANCE {METRICS[self.metric][0]} WITH TARGET ACCURACY {self.accuracy} "
            f"PARAMETERS ({parameters})"
        )
        if self.parallel:
            ddl += f" PARALLEL {self.parallel}"
        return ddl

    def hnsw_sql(self, schema_editor, model) -> str:
        """``CREATE VECTOR INDEX ... INMEMORY NEIGHBOR GRAPH`` (Oracle AI Vector Search User's Guide, HNSW)."""
        return self._index_ddl(
            schema_editor, model, "INMEMORY NEIGHBOR GRAPH",
            f"TYPE HNSW, NEIGHBORS {self.neighbors}, EFCONSTRUCTION {self.efconstruction}",
        )

    def ivf_sql(self, schema_editor, model) -> str:
        """``CREATE VECTOR INDEX ... NEIGHBOR PARTITIONS`` (Oracle AI Vector Search User's Guide, IVF)."""
        return self._index_ddl(
            schema_editor, model, "NEIGHBOR PARTITIONS",
            f"TYPE IVF, NEIGHBOR PARTITIONS {self.partitions}",
        )

    def create_sql(self, schema_editor, model) -> str:
        """The single PL/SQL block: HNSW, and IVF when ORA-51962 says there is no vector pool.

        Ends with ``END;`` plus a newline (see the module docstring for why).
        """

        def literal(sql: str) -> str:
            return "'" + sql.replace("'", "''") + "'"

        return (
            "BEGIN\n"
            f"  EXECUTE IMMEDIATE {literal(self.hnsw_sql(schema_editor, model))};\n"
            "EXCEPTION\n"
            "  WHEN OTHERS THEN\n"
            f"    IF SQLCODE = {VECTOR_POOL_ERROR} THEN\n"
            f"      EXECUTE IMMEDIATE {literal(self.ivf_sql(schema_editor, model))};\n"
            "    ELSE\n"
            "      RAISE;\n"
            "    END IF;\n"
            "END;\n"
        )

    def drop_sql(self, schema_editor) -> str:
        return f"DROP INDEX {schema_editor.quote_name(self.name)}"

    def postgresql_sql(self, schema_editor, model) -> str:
        """pgvector's HNSW index over the column with the metric's operator class (pgvector defaults)."""
        field = model._meta.get_field(self.field)
        if not isinstance(field, VectorField):
            raise ValueError(f"{model._meta.label}.{self.field} is not a VectorField")
        quote = schema_editor.quote_name
        return (f"CREATE INDEX {quote(self.name)} ON {quote(model._meta.db_table)} USING hnsw "
                f"({quote(field.column)} {PGVECTOR_METRICS[self.metric][1]})")

    # --- database ---------------------------------------------------------------

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor not in ("oracle", "postgresql"):
            return
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(self.postgresql_sql(schema_editor, model), params=None)
            return
        schema_editor.execute(self.create_sql(schema_editor, model), params=None)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor not in ("oracle", "postgresql"):
            return
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        schema_editor.execute(self.drop_sql(schema_editor), params=None)


class CreateKeywordIndex(Operation):
    """Full-text (keyword) index over text columns of a model: FTS5 on SQLite, Oracle Text on Oracle.

    ``CreateKeywordIndex("searchchunk", "oam_search_chunks_fts", ["text", "context"])``:

    * SQLite: an external-content FTS5 table named ``name`` over the columns,
      tokenised ``porter unicode61`` (Porter stemming: "painted" finds
      "painting"; measured on LoCoMo, BM25 recall@10 0.502 -> 0.610), kept in
      step by ``AFTER INSERT/DELETE/UPDATE OF <columns>`` triggers, and filled
      with ``'rebuild'`` for rows already there. Queries join it on
      ``rowid = <table>.id`` (``memory.search``).
    * Oracle: one ``CREATE SEARCH INDEX <name>_<n> ON <table> (<column>)`` per
      column (Oracle Text, ``SYNC ON COMMIT`` by default; Oracle Text Reference, "CREATE SEARCH INDEX"),
      queried with ``CONTAINS(column, :q, 1) > 0`` and ``SCORE(1)``. The
      columns must be ``CLOB`` (``memory.models.SearchTextField``): Oracle Text
      does not index NCLOB.
    * PostgreSQL: per column a stored generated column ``<column>_tsv`` =
      ``to_tsvector('english', coalesce(<column>, ''))`` (Snowball's English
      stemmer, Porter's successor, so "painted" finds "painting" as on SQLite;
      English stop words are dropped) and a GIN index ``<name>_<n>`` on it;
      queried with ``<column>_tsv @@ to_tsquery('english', ...)`` and ranked
      by ``ts_rank_cd`` (``memory.search.backends.PostgresBackend``). The
      generated columns are invisible to Django's model state: the ORM never
      names them, PostgreSQL fills them on every write.

    Caution for later migrations on SQLite: Django rebuilds a table for most
    ``AlterField`` operations, and the rebuild drops its triggers. A migration
    that alters ``oam_search_chunks`` must reverse this operation first and
    apply it again after (``tests/test_keyword_index.py`` checks the triggers).
    """

    category = OperationCategory.ADDITION
    reversible = True
    reduces_to_sql = True

    def __init__(self, model_name: str, name: str, fields: list[str]):
        if not isinstance(name, str) or not _IDENTIFIER.match(name) or len(name) > MAX_NAME_LENGTH - 2:
            raise ValueError(
                f"keyword index name must be a plain identifier of at most {MAX_NAME_LENGTH - 2} characters")
        if not fields:
            raise ValueError("fields must name at least one text column")
        self.model_name = model_name
        self.name = name
        self.fields = list(fields)

    @property
    def model_name_lower(self) -> str:
        return self.model_name.lower()

    def deconstruct(self):
        return self.__class__.__qualname__, [], {"model_name": self.model_name, "name": self.name,
                                                   "fields": self.fields}

    def state_forwards(self, app_label, state):
        """No state change: the index is invisible to Django's model state."""

    def describe(self) -> str:
        return f"Create keyword index {self.name} on {self.model_name}({', '.join(self.fields)})"

    @property
    def migration_name_fragment(self) -> str:
        return f"{self.model_name_lower}_{self.name.lower()}"

    def oracle_index_name(self, position: int) -> str:
        """Name of the Oracle Text index of the ``position``-th column: ``<name>_<position>``."""
        return f"{self.name}_{position}"

    def sqlite_statements(self, model) -> list[str]:
        """The FTS5 table, its three triggers and the initial rebuild."""
        table = model._meta.db_table
        columns = [model._meta.get_field(f).column for f in self.fields]
        pk = model._meta.pk.column
        fts = self.name
        return [
            f"CREATE VIRTUAL TABLE {fts} USING fts5({', '.join(columns)}, content='{table}', content_rowid='{pk}', "
            f"tokenize='porter unicode61')",
            *self.sqlite_trigger_statements(model),
            f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
        ]

    def sqlite_trigger_statements(self, model) -> list[str]:
        """The three triggers that keep the FTS5 table in step with the model's table."""
        table = model._meta.db_table
        columns = [model._meta.get_field(f).column for f in self.fields]
        pk = model._meta.pk.column
        cols = ", ".join(columns)
        new = ", ".join(f"new.{c}" for c in columns)
        old = ", ".join(f"old.{c}" for c in columns)
        fts = self.name
        return [
            f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} BEGIN "
            f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.{pk}, {new}); END",
            f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.{pk}, {old}); END",
            f"CREATE TRIGGER {fts}_au AFTER UPDATE OF {cols} ON {table} BEGIN "
            f"INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.{pk}, {old}); "
            f"INSERT INTO {fts}(rowid, {cols}) VALUES (new.{pk}, {new}); END",
        ]

    def oracle_statements(self, schema_editor, model) -> list[str]:
        """One Oracle Text search index per column."""
        quote = schema_editor.quote_name
        return [
            f"CREATE SEARCH INDEX {quote(self.oracle_index_name(i))} ON {quote(model._meta.db_table)} "
            f"({quote(model._meta.get_field(f).column)})"
            for i, f in enumerate(self.fields, 1)
        ]

    def postgresql_statements(self, schema_editor, model) -> list[str]:
        """Per column: the generated ``tsvector`` column and its GIN index."""
        quote, table = schema_editor.quote_name, schema_editor.quote_name(model._meta.db_table)
        statements = []
        for i, f in enumerate(self.fields, 1):
            column = model._meta.get_field(f).column
            statements += [
                f"ALTER TABLE {table} ADD COLUMN {quote(tsvector_column(column))} tsvector GENERATED ALWAYS AS "
                f"(to_tsvector('{TEXT_SEARCH_CONFIG}'::regconfig, coalesce({quote(column)}, ''))) STORED",
                f"CREATE INDEX {quote(self.oracle_index_name(i))} ON {table} USING gin "
                f"({quote(tsvector_column(column))})",
            ]
        return statements

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        vendor = schema_editor.connection.vendor
        if vendor == "sqlite":
            statements = self.sqlite_statements(model)
        elif vendor == "oracle":
            statements = self.oracle_statements(schema_editor, model)
        elif vendor == "postgresql":
            statements = self.postgresql_statements(schema_editor, model)
        else:
            raise NotImplementedError(f"no keyword index for {vendor}")
        for sql in statements:
            schema_editor.execute(sql, params=None)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        vendor = schema_editor.connection.vendor
        if vendor == "sqlite":
            for suffix in ("ai", "ad", "au"):
                schema_editor.execute(f"DROP TRIGGER IF EXISTS {self.name}_{suffix}", params=None)
            schema_editor.execute(f"DROP TABLE IF EXISTS {self.name}", params=None)
        elif vendor == "oracle":
            for i, _ in enumerate(self.fields, 1):
                schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(self.oracle_index_name(i))}", params=None)
        elif vendor == "postgresql":  # the GIN indexes go with their columns
            quote = schema_editor.quote_name
            for f in self.fields:
                column = tsvector_column(model._meta.get_field(f).column)
                schema_editor.execute(f"ALTER TABLE {quote(model._meta.db_table)} DROP COLUMN {quote(column)}",
                                      params=None)


class RestoreKeywordTriggers(CreateKeywordIndex):
    """Re-create the FTS5 triggers of a keyword index after a migration rebuilt its table (SQLite only).

    Django rebuilds a SQLite table for most ``AlterField``/``AddField``
    operations (copy, drop, rename), and the drop takes the table's triggers
    with it. The FTS5 index itself survives: the rebuilt table keeps every row's
    ``id`` (the FTS ``rowid``) and its text, so only the triggers are missing.
    Put this operation after the last operation that rebuilds the table, and
    once more before the first (its reverse runs after theirs), with the
    arguments of its ``CreateKeywordIndex``. Both directions drop and create
    the triggers. Nothing
    to do on Oracle, whose ``ALTER TABLE`` keeps its Oracle Text indexes.
    """

    category = OperationCategory.ALTERATION

    def describe(self) -> str:
        return f"Restore the triggers of keyword index {self.name} on {self.model_name}"

    @property
    def migration_name_fragment(self) -> str:
        return f"{self.model_name_lower}_{self.name.lower()}_triggers"

    def _restore(self, app_label, schema_editor, state) -> None:
        model = state.apps.get_model(app_label, self.model_name)
        if schema_editor.connection.vendor != "sqlite" or not self.allow_migrate_model(
                schema_editor.connection.alias, model):
            return
        for suffix in ("ai", "ad", "au"):
            schema_editor.execute(f"DROP TRIGGER IF EXISTS {self.name}_{suffix}", params=None)
        for sql in self.sqlite_trigger_statements(model):
            schema_editor.execute(sql, params=None)

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._restore(app_label, schema_editor, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._restore(app_label, schema_editor, to_state)
