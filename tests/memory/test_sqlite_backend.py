"""The SQLite backend (``memory.backends.sqlite_vec``): planner statistics refreshed per process, not per connection."""

from __future__ import annotations

import pytest
from django.db import connection

from memory.backends.sqlite_vec import base

pytestmark = pytest.mark.backend("sqlite")  # SQLite machinery: the file, WAL, FTS5 or the vector cache


@pytest.fixture
def fresh_clock(monkeypatch):
    monkeypatch.setattr(base, "_optimized_at", None)


def test_optimize_is_due_on_the_first_connection_then_once_per_interval(fresh_clock):
    every = base.OPTIMIZE_EVERY_SECONDS
    assert base.optimize_due(now=1000.0) is True
    assert base.optimize_due(now=1000.0 + 1) is False
    assert base.optimize_due(now=1000.0 + every - 0.01) is False
    assert base.optimize_due(now=1000.0 + every) is True
    assert base.optimize_due(now=1000.0 + every + 1) is False


@pytest.mark.django_db(transaction=True)
def test_a_new_connection_runs_optimize_only_when_due(fresh_clock, monkeypatch):
    """The pragma reaches the database on the first connection of the process, not on the next one."""
    statements = []

    class Recording:
        def __init__(self, conn):
            self.conn = conn

        def execute(self, sql, *args):
            statements.append(sql)
            return self.conn.execute(sql, *args)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    real_connect = base.Database.connect
    monkeypatch.setattr(base.Database, "connect", lambda *a, **k: Recording(real_connect(*a, **k)))
    for _ in range(2):
        connection.close()
        connection.ensure_connection()
    connection.close()
    assert statements.count("PRAGMA optimize=0x10002") == 1
    assert statements.count("PRAGMA secure_delete = ON") == 2  # both connections were really opened here
