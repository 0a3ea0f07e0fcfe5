"""Fixtures for the offline Oracle checks (``tests/oracle/offline.py``).

``oracle`` is one Oracle ``DatabaseWrapper`` (23.7) for the whole session,
registered in ``django.db.connections`` as ``oracle_offline`` so that
migration operations can look it up by alias. It never connects: its
``get_new_connection`` raises, and teardown asserts nothing tried.
``oracle_driver`` lends it a recording stand-in for a python-oracledb
connection, to see the exact statement text and binds Django hands the driver.
"""

import pytest
from django.db import connections

from tests.oracle.offline import (
    ORACLE_ALIAS,
    RecordingDriverConnection,
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
