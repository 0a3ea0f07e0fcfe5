"""Bad database configuration stops start-up with a system check naming it (memory.E004, E005, E006)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection, connections
from django.db.utils import load_backend
from django.test import override_settings

from memory.checks import check_database

ROOT = Path(__file__).resolve().parents[2]
#: Nothing listens on port 1 of loopback: a refused connection at once.
UNREACHABLE = "postgres://oam:secret@127.0.0.1:1/oam"


def test_an_unreachable_server_stops_manage_py_check_naming_the_setting(tmp_path):
    env = {**os.environ, "OAM_DATABASE_URL": UNREACHABLE, "OAM_ORACLE_DSN": "", "OAM_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "manage.py", "check", "--database", "default"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "memory.E004" in done.stderr and "cannot be reached" in done.stderr
    assert "OAM_DATABASE_URL" in done.stderr and "secret" not in done.stderr + done.stdout


def test_a_bad_url_scheme_is_refused_when_settings_load(tmp_path):
    env = {**os.environ, "OAM_DATABASE_URL": "mysql://u:p@127.0.0.1/oam", "OAM_ORACLE_DSN": ""}
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0 and "OAM_DATABASE_URL must be a postgres:// or postgresql:// URL" in done.stderr


@pytest.mark.django_db
def test_the_configured_database_passes():
    assert check_database(databases=["default"]) == []


@pytest.mark.backend("postgresql")
@pytest.mark.django_db
def test_an_embedding_column_of_another_size_is_refused_naming_both():
    with override_settings(OAM_EMBEDDING_DIMENSIONS=768):
        errors = check_database(databases=["default"])
    assert [e.id for e in errors] == ["memory.E006"]
    assert "vector(384)" in errors[0].msg and "768" in errors[0].msg


@pytest.mark.backend("postgresql")
@pytest.mark.django_db(transaction=True)
def test_tables_without_the_vector_extension_are_refused():
    """A database whose tables exist but whose ``vector`` extension does not (restored without it, say)."""
    name = "oam_checks_noext"
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'CREATE DATABASE "{name}"')
    other = load_backend(settings.DATABASES["default"]["ENGINE"]).DatabaseWrapper(
        {**connection.settings_dict, "NAME": name}, alias="noext")
    connections["noext"] = other
    try:
        assert check_database(databases=["noext"]) == []  # new and empty: migrate will create the extension
        with other.cursor() as cursor:
            cursor.execute("CREATE TABLE oam_search_chunks (id integer)")
        errors = check_database(databases=["noext"])
        assert [e.id for e in errors] == ["memory.E005"]
        assert "'vector' is not created in this database" in errors[0].msg
    finally:
        other.close()
        del connections["noext"]
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


@pytest.mark.backend("postgresql")
@pytest.mark.django_db(transaction=True)
def test_a_role_that_may_not_create_the_extension_is_refused_before_migrating():
    """pgvector is not a trusted extension: a database owner who is not a superuser cannot create it, and
    ``migrate`` would stop with a bare "permission denied" (found by an attack on the PostgreSQL backend)."""
    name, role = "oam_checks_owned", "oam_checks_owner"
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
        cursor.execute(f'DROP ROLE IF EXISTS "{role}"')
        cursor.execute(f'CREATE ROLE "{role}" LOGIN')
        cursor.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    other = load_backend(settings.DATABASES["default"]["ENGINE"]).DatabaseWrapper(
        {**connection.settings_dict, "NAME": name, "USER": role}, alias="owned")
    connections["owned"] = other
    try:
        errors = check_database(databases=["owned"])
        assert [e.id for e in errors] == ["memory.E005"]
        assert "this role may not create it" in errors[0].msg and "superuser" in errors[0].hint
    finally:
        other.close()
        del connections["owned"]
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')
            cursor.execute(f'DROP ROLE IF EXISTS "{role}"')


def test_the_serve_command_stops_before_serving_on_an_unreachable_server(tmp_path):
    """``python -m oam_site.serve`` (make serve, the daphne units) runs the database checks first: no server that
    answers 500 to every request (found by an attack on the PostgreSQL backend)."""
    env = {**os.environ, "OAM_DATABASE_URL": UNREACHABLE, "OAM_ORACLE_DSN": "", "OAM_VAR_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "oam_site.serve", "-b", "127.0.0.1", "-p", "0",
                           "oam_site.asgi:application"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1 and "memory.E004" in done.stderr and "OAM Site ready" not in done.stdout
