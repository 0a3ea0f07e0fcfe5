"""Helpers that compile Oracle SQL without an Oracle server.

An Oracle ``DatabaseWrapper`` compiles queries and DDL offline
once ``oracle_version``, ``operators`` and ``pattern_ops`` are set on the
instance (each would otherwise open a connection the first time it is read).
Every wrapper made here refuses to connect: ``get_new_connection`` raises
``AssertionError`` and records the attempt in ``connect_attempts``.

``as_default`` puts such a wrapper in ``connections["default"]`` for a block:
Django reads the default connection's features while it *builds* a query
(``Query.build_lookup`` and ``Query.is_nullable`` read
``connections[DEFAULT_DB_ALIAS].features.interprets_empty_strings_as_nulls``:
an exact lookup on ``""`` becomes ``IS NULL``, a negated lookup on a
``CharField`` adds ``AND ... IS NOT NULL``), so a query built while SQLite is
the default compiles for Oracle into SQL an Oracle deployment never emits.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.loader import MigrationLoader
from django.db.utils import load_backend

ORACLE_ALIAS = "oracle_offline"
ORACLE_VERSION = (23, 7)

# Mirrors oam_site.settings' Oracle branch (Easy Connect NAME, empty HOST/PORT,
# CONN_MAX_AGE=0) except OPTIONS: with {"pool": {...}} the wrapper would build a
# python-oracledb pool (and so connect) the first time a cursor is asked for.
ORACLE_SETTINGS = {
    "ENGINE": "django.db.backends.oracle",
    "NAME": "localhost:1521/FREEPDB1",
    "USER": "oam",
    "PASSWORD": "offline-never-used",
    "HOST": "",
    "PORT": "",
    "OPTIONS": {},
    "TIME_ZONE": None,
    "CONN_MAX_AGE": 0,
    "CONN_HEALTH_CHECKS": False,
    "AUTOCOMMIT": True,
    "ATOMIC_REQUESTS": False,
    "TEST": {"CHARSET": None, "COLLATION": None, "MIGRATE": True, "MIRROR": None, "NAME": None},
}


def make_offline_oracle(alias: str = ORACLE_ALIAS):
    """An Oracle ``DatabaseWrapper`` for 23.7 that compiles SQL and never connects."""
    backend = load_backend("django.db.backends.oracle")
    connection = backend.DatabaseWrapper(dict(ORACLE_SETTINGS), alias=alias)
    connection.oracle_version = ORACLE_VERSION
    connection.operators = connection._standard_operators
    connection.pattern_ops = connection._standard_pattern_ops
    attempts: list = []

    def refuse_to_connect(conn_params):
        attempts.append(conn_params)
        raise AssertionError("the offline Oracle connection tried to connect to a database")

    connection.get_new_connection = refuse_to_connect
    connection.connect_attempts = attempts
    return connection


@contextmanager
def as_default(connection):
    """Make ``connection`` Django's default connection inside the block, as in an Oracle deployment.

    Inside, ``connections["default"]`` and ``django.db.connection`` are ``connection``: queries are built with
    its features and the engine's functions that use the default alias (``transaction.atomic()``,
    ``Model.objects``) reach it, so with a ``RecordingDriverConnection`` attached they run as they would in
    production and never reach SQLite. The previous default is put back after the block.
    """
    previous = connections[DEFAULT_DB_ALIAS]
    connections[DEFAULT_DB_ALIAS] = connection
    try:
        yield connection
    finally:
        connections[DEFAULT_DB_ALIAS] = previous


# --- a stand-in python-oracledb connection that records what it is handed -----


class RecordingDriverCursor:
    """Records ``execute``/``executemany``/``setinputsizes`` as python-oracledb receives them."""

    def __init__(self, log: list):
        self.log = log
        self.outputtypehandler = None
        self.arraysize = 100
        self.description = None
        self.rowcount = 0

    def setinputsizes(self, *args, **kwargs):
        self.log.append(("setinputsizes", args, kwargs))

    def execute(self, statement, parameters=None):
        self.log.append(("execute", statement, parameters))

    def executemany(self, statement, parameters):
        self.log.append(("executemany", statement, parameters))

    def fetchmany(self, size=None):
        return []

    def fetchone(self):
        return None

    def close(self):
        pass


class RecordingDriverConnection:
    """Put in ``DatabaseWrapper.connection``; Django then drives it like a real one."""

    def __init__(self):
        self.log: list = []
        self.autocommit = True

    def cursor(self):
        return RecordingDriverCursor(self.log)

    def commit(self):
        self.log.append(("commit",))

    def rollback(self):
        self.log.append(("rollback",))

    def executed(self) -> list:
        return [entry for entry in self.log if entry[0] in ("execute", "executemany")]


# --- migrations --------------------------------------------------------------------


def project_app_labels() -> list[str]:
    """Labels of the installed apps whose code lives in this repository (not in a venv)."""
    base = Path(settings.BASE_DIR).resolve()
    labels = []
    for config in apps.get_app_configs():
        path = Path(config.path).resolve()
        if path.is_relative_to(base) and not {".venv", "site-packages"} & set(path.relative_to(base).parts):
            labels.append(config.label)
    return labels


@dataclass
class CompiledMigration:
    key: tuple[str, str]
    collected: list[str]  # everything collect_sql gathered, "--" comments included

    @property
    def statements(self) -> list[str]:
        return [s for s in self.collected if not s.lstrip().startswith("--")]


@dataclass
class CompiledPlan:
    migrations: list[CompiledMigration]
    truncated_names: list[str] = field(default_factory=list)  # names quote_name had to hash-truncate
    final_state: object = None

    def statements(self, app_labels=None) -> list[str]:
        return [s for m in self.migrations if app_labels is None or m.key[0] in app_labels
                for s in m.statements]

    def for_migration(self, app_label: str, name_prefix: str) -> CompiledMigration:
        found = [m for m in self.migrations if m.key[0] == app_label and m.key[1].startswith(name_prefix)]
        assert len(found) == 1, f"expected one migration {app_label}.{name_prefix}*, found {found}"
        return found[0]


def migration_plan(loader: MigrationLoader, app_labels) -> list[tuple[str, str]]:
    """Every migration of ``app_labels`` with its dependencies, in a valid apply order."""
    plan: list[tuple[str, str]] = []
    for label in app_labels:
        for leaf in loader.graph.leaf_nodes(label):
            for node in loader.graph.forwards_plan(leaf):
                if node not in plan:
                    plan.append(node)
    return plan


def compiled_plan(loader: MigrationLoader, app_labels) -> list[tuple[str, str]]:
    """The migrations of ``app_labels`` only, in ``migration_plan``'s order.

    Their dependencies in other apps (``django.contrib.auth`` since memory 0008
    adds ``Project.members``, and through it ``contenttypes``) are not
    compiled: their DDL is Django's, not this project's, and some of them
    introspect the database while they run (contenttypes 0002 looks up the
    constraints of ``django_content_type``: "Found wrong number (0) of
    constraints" offline). They still shape the state each compiled
    migration starts from (``MigrationLoader.project_state`` applies every
    ancestor), so a foreign key to ``auth_user`` compiles as on a live database.
    """
    labels = set(app_labels)
    return [key for key in migration_plan(loader, app_labels) if key[0] in labels]


def _created_constraint_names(editor):
    """A stand-in for ``BaseDatabaseSchemaEditor._constraint_names`` (a data dictionary query).

    For a foreign-key lookup of one column it returns the name Django's
    ``_create_fk_sql`` gives that foreign key (``_fk_constraint_name``, the
    ``_fk_<to_table>_<to_column>`` suffix), which is the name a database
    migrated by Django holds. Any other lookup finds nothing: the migrations
    compiled here only ask for foreign keys (``AlterField`` of a referenced
    primary key), and a wrong answer shows in the DDL the tests read.
    """

    def names(model, column_names=None, unique=None, primary_key=None, index=None, foreign_key=None, check=None,
              type_=None, exclude=None):
        if not foreign_key or not column_names or len(column_names) != 1:
            return []
        field = next(f for f in model._meta.local_fields if f.column == column_names[0])
        if field.remote_field is None:
            return []
        return [str(editor._fk_constraint_name(model, field, "_fk_%(to_table)s_%(to_column)s")).strip('"')]

    return names


def compile_migrations(connection, app_labels, *, backwards: bool = False) -> CompiledPlan:
    """``sqlmigrate`` for every migration of ``app_labels`` (and no other app's: ``compiled_plan``), without a
    database.

    ``MigrationLoader(None)`` reads the migration files only (``MigrationExecutor``
    would query django_migrations). Each migration runs through the connection's
    schema editor in ``collect_sql`` mode, ``atomic=False``, from the project
    state just before it. ``quote_name`` is watched for names longer than 30
    characters, which Django's Oracle backend would hash-truncate. Going
    backwards, the identity-column lookup of ``remove_field`` (a data dictionary
    query) answers False.
    """
    loader = MigrationLoader(None, ignore_no_migrations=True)
    plan = compiled_plan(loader, app_labels)
    if backwards:
        plan = list(reversed(plan))
    ops = connection.ops
    original_quote_name = ops.quote_name
    truncated: list[str] = []

    def watching_quote_name(name):
        if not name.startswith('"') and len(name) > ops.max_name_length():
            truncated.append(name)
        return original_quote_name(name)

    ops.quote_name = watching_quote_name
    compiled = []
    try:
        for key in plan:
            migration = loader.graph.nodes[key]
            state = loader.project_state(key, at_end=False)
            with connection.schema_editor(collect_sql=True, atomic=False) as editor:
                # RemoveField asks the data dictionary whether the column is an
                # identity column (a query); none of our removable columns is.
                editor._is_identity_column = lambda table_name, column_name: False
                # Widening a primary key (0006) drops and re-creates the foreign keys
                # pointing at it, found by name in the data dictionary: answer with
                # the names Django gave them when it created them.
                editor._constraint_names = _created_constraint_names(editor)
                if backwards:
                    migration.unapply(state, editor, collect_sql=True)
                else:
                    migration.apply(state, editor, collect_sql=True)
            compiled.append(CompiledMigration(key, list(editor.collected_sql)))
    finally:
        del ops.quote_name  # back to the class attribute
    final_state = loader.project_state()  # every app at its latest migration
    return CompiledPlan(compiled, truncated, final_state)
