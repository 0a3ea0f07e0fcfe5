"""Fixtures for the offline Oracle checks (``tests/oracle/offline.py``).

``oracle`` is one Oracle ``DatabaseWrapper`` (23.7) for the whole session,
registered in ``django.db.connections`` as ``oracle_offline`` so that
migration operations can look it up by alias. It never connects: its
``get_new_connection`` raises, and teardown asserts nothing tried.
``oracle_driver`` lends it a recording stand-in for a python-oracledb
connection, to see the exact statement text and binds Django hands the driver.

The offline compile is the production compile: every test here runs with
``oracle`` as Django's default connection (``_oracle_is_the_default``,
``offline.as_default``), since Django reads the *default* connection's features
while it builds a query. Tests on the test database (a ``django_db`` mark, or
the ``db``/``transactional_db``/``sqlite`` fixtures) keep the configured default.
"""

import pytest
from django.db import connections

from tests.oracle.offline import (
    ORACLE_ALIAS,
    RecordingDriverConnection,
    as_default,
    compile_migrations,
    make_offline_oracle,
    project_app_labels,
)


@pytest.fixture(scope="session")
def oracle():
    connection = make_offline_oracle(ORACLE_ALIAS)
    connections[ORACLE_ALIAS] = connection
    try:
        yield connection
    finally:
        del connections[ORACLE_ALIAS]
    assert connection.connect_attempts == [], "the offline Oracle connection tried to connect"
    assert connection.connection is None


#: Fixtures that ask for the configured test database: a test using one keeps it as the default connection.
TEST_DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences",
                                    "django_db_serialized_rollback", "sqlite"})


def uses_the_test_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(TEST_DATABASE_FIXTURES & set(item.fixturenames))


@pytest.fixture(autouse=True)
def _oracle_is_the_default(request):
    """``oracle`` as ``connections["default"]`` for the test (``offline.as_default``), unless the test uses the
    test database. Without it, ``exclude(record_id=...)`` compiles to ``NOT ("RECORD_ID" = %s)`` where Oracle
    deployments emit ``NOT ("RECORD_ID" = %s AND "RECORD_ID" IS NOT NULL)``, and ``filter(x="")`` to
    ``"X" = ''`` (true for no row on Oracle, which stores '' as NULL) where they emit ``"X" IS NULL``."""
    if uses_the_test_database(request.node):
        yield None
        return
    connection = request.getfixturevalue("oracle")
    with as_default(connection):
        yield connection


@pytest.fixture
def sqlite():
    """The configured default connection, for tests comparing SQLite with Oracle; skipped, with the reason,
    when the suite runs on another database (``OAM_ORACLE_DSN``, ``OAM_DATABASE_URL``)."""
    connection = connections["default"]
    if connection.vendor != "sqlite":
        pytest.skip(f"SQLite-only test: this run's database is {connection.vendor}")
    return connection


@pytest.fixture
def oracle_driver(oracle):
    """Attach a recording driver connection for one test, then detach it."""
    driver = RecordingDriverConnection()
    oracle.connection = driver
    # pytest-django blocks BaseDatabaseWrapper.ensure_connection outside db tests;
    # with a driver connection in place the real method would do nothing anyway.
    oracle.ensure_connection = lambda: None
    try:
        yield driver
    finally:
        del oracle.ensure_connection
        oracle.connection = None


@pytest.fixture(scope="session")
def project_apps():
    return project_app_labels()


@pytest.fixture(scope="session")
def compiled(oracle, project_apps):
    """Forward DDL of every migration of the project's apps (and their dependencies)."""
    return compile_migrations(oracle, project_apps)
