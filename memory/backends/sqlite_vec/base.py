"""SQLite backend with the sqlite-vec extension loaded on every connection.

This is the embedded default database (docs/architecture.md, "Embedded default and
production"). It is Django's own SQLite backend with two changes:

* The DB-API module is ``pysqlite3`` (package ``pysqlite3-binary``) when the
  interpreter's ``sqlite3`` was built without extension loading, as on these
  machines' pyenv Python. Otherwise the standard library module is used.
* Every new connection loads sqlite-vec (``vec_distance_cosine``,
  ``vec_distance_l2`` and ``vec0`` tables), turns ``secure_delete`` on (a
  deleted record's text does not stay in the file: ``memory.services.erasure``) and
  applies the ``init_command`` pragmas from settings (WAL journal, busy timeout).
* The database file's folder is created on the first connection (a fresh
  clone has no ``var/``), or ``ImproperlyConfigured`` names ``OAM_VAR_DIR`` /
  ``OAM_SQLITE_PATH`` when it cannot be.

Use it with ``ENGINE = "memory.backends.sqlite_vec"``.
"""

from __future__ import annotations

import datetime
import decimal
import os
import sqlite3 as _stdlib_sqlite3
import threading
import time
from collections.abc import Mapping
from itertools import tee
from pathlib import Path

import sqlite_vec
from django.core.exceptions import ImproperlyConfigured
from django.db.backends.sqlite3 import base as sqlite_base
from django.db.backends.sqlite3._functions import register as register_functions
from django.utils.asyncio import async_unsafe
from django.utils.dateparse import parse_date, parse_datetime, parse_time


def _pick_dbapi():
    """Return a DB-API module whose connections can load extensions."""
    if hasattr(_stdlib_sqlite3.Connection, "enable_load_extension"):
        return _stdlib_sqlite3.dbapi2
    from pysqlite3 import dbapi2  # pysqlite3-binary: same API, bundled SQLite

    return dbapi2


Database = _pick_dbapi()

if Database is not _stdlib_sqlite3.dbapi2:
    # Django registers these on the stdlib module at import time; mirror them on
    # the drop-in so dates, booleans and decimals round-trip identically.
    Database.register_converter("bool", b"1".__eq__)
    Database.register_converter("date", sqlite_base.decoder(parse_date))
    Database.register_converter("time", sqlite_base.decoder(parse_time))
    Database.register_converter("datetime", sqlite_base.decoder(parse_datetime))
    Database.register_converter("timestamp", sqlite_base.decoder(parse_datetime))
    Database.register_adapter(decimal.Decimal, str)
    Database.register_adapter(datetime.date, sqlite_base.adapt_date)
    Database.register_adapter(datetime.datetime, sqlite_base.adapt_datetime)


class SQLiteCursorWrapper(Database.Cursor):
    """Django's format/pyformat to qmark/named conversion, on ``Database.Cursor``.

    Same behaviour as ``django.db.backends.sqlite3.base.SQLiteCursorWrapper``,
    which is bound to the stdlib cursor class and cannot serve pysqlite3.
    """

    def execute(self, query, params=None):
        if params is None:
            return super().execute(query)
        param_names = list(params) if isinstance(params, Mapping) else None
        query = self.convert_query(query, param_names=param_names)
        return super().execute(query, params)

    def executemany(self, query, param_list):
        peekable, param_list = tee(iter(param_list))
        if (params := next(peekable, None)) and isinstance(params, Mapping):
            param_names = list(params)
        else:
            param_names = None
        query = self.convert_query(query, param_names=param_names)
        return super().executemany(query, param_list)

    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return sqlite_base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")
        return query % {name: f":{name}" for name in param_names}


def ensure_database_folder(name) -> None:
    """Create the folder of the SQLite file ``name`` if it does not exist yet.

    In-memory databases (``:memory:``, ``file:...mode=memory``) are left alone.
    Raises ``ImproperlyConfigured`` naming ``OAM_VAR_DIR`` and ``OAM_SQLITE_PATH``
    when the folder cannot be created or is not writable (``manage.py migrate`` on a
    fresh clone failed with "unable to open database file").
    """
    name = str(name)
    if name == ":memory:" or name.startswith("file:"):
        return
    folder = Path(name).expanduser().parent
    advice = ("Set OAM_VAR_DIR (the folder for the embedded database, default ./var) or "
              "OAM_SQLITE_PATH (the database file) to a writable place.")
    if not folder.is_dir():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ImproperlyConfigured(
                f"cannot create {folder} for the SQLite database {name}: {exc.strerror or exc}. {advice}"
            ) from exc
    if not os.access(folder, os.W_OK | os.X_OK):
        # WAL mode writes name-wal and name-shm beside the file: the folder itself must be writable.
        raise ImproperlyConfigured(f"{folder} (the SQLite database's folder) is not writable. {advice}")


#: Opening and closing SQLite connections happen one at a time per process. Under load (a
#: schemathesis run against daphne, each request opening and closing its connection in its own
#: thread) SQLite 3.51.1 from pysqlite3-binary deadlocked with one thread in open and another in
#: the close of a WAL connection (py-spy); queries themselves are not serialised.
CONNECT_CLOSE_LOCK = threading.Lock()


#: Seconds between two ``PRAGMA optimize`` runs of one process (``optimize_due``).
OPTIMIZE_EVERY_SECONDS = 300.0
_optimized_at: float | None = None
_optimize_lock = threading.Lock()


def optimize_due(now: float | None = None) -> bool:
    """True for this process's first connection, then at most once every ``OPTIMIZE_EVERY_SECONDS``.

    SQLite advises ``PRAGMA optimize=0x10002`` when a long-lived connection
    opens. Here every request opens its own connection (each has a thread of
    its own), and on a table that is being written the pragma re-ran ANALYZE,
    which also takes the write lock: 0.8 of the 2.1 CPU-seconds the server
    spent on 38 LoCoMo sessions posted by 8 clients with embedding stubbed out
    (``bench/ingest.py``'s API path, measured with an instant embedder). The
    statistics live in the database file (``sqlite_stat1``), so a connection
    opened after another one refreshed them uses them: once per process per
    interval keeps them fresh while tables grow. Bulk writers
    (``import_locomo``) run ``PRAGMA optimize`` themselves when they finish.
    """
    global _optimized_at
    now = time.monotonic() if now is None else now
    with _optimize_lock:
        if _optimized_at is not None and now - _optimized_at < OPTIMIZE_EVERY_SECONDS:
            return False
        _optimized_at = now
        return True


class DatabaseWrapper(sqlite_base.DatabaseWrapper):
    """Django's SQLite wrapper on an extension-capable driver with sqlite-vec."""

    Database = Database

    def get_connection_params(self):
        params = super().get_connection_params()
        params["detect_types"] = Database.PARSE_DECLTYPES | Database.PARSE_COLNAMES
        return params

    @async_unsafe
    def get_new_connection(self, conn_params):
        ensure_database_folder(conn_params["database"])
        with CONNECT_CLOSE_LOCK:
            conn = Database.connect(**conn_params)
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        register_functions(conn)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA legacy_alter_table = OFF")
        # Deleted content is overwritten with zeros, not left in free pages.
        conn.execute("PRAGMA secure_delete = ON")
        for init_command in self.init_commands:
            if init_command := init_command.strip():
                conn.execute(init_command)
        # Refresh the planner's statistics where they are stale
        # (sqlite.org/pragma.html#pragma_optimize). Without them the scoped
        # search picked the record-type index over the scope index and read
        # every chunk. Not on every connection: see optimize_due.
        if optimize_due():
            conn.execute("PRAGMA optimize=0x10002")
        return conn

    def _close(self):
        with CONNECT_CLOSE_LOCK:
            super()._close()

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=SQLiteCursorWrapper)
