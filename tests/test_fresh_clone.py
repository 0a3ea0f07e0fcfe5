"""What a newcomer meets on a fresh clone, run as they would run it.

``manage.py migrate`` without ``make``: there is no ``var/`` yet. The SQLite backend
creates the database file's folder on its first connection, or names the setting to
change when it cannot.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def manage(*args: str, var_dir: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
    env["OAM_VAR_DIR"] = str(var_dir)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_migrate_creates_the_var_folder_on_a_fresh_clone(tmp_path):
    var_dir = tmp_path / "fresh" / "var"
    assert not var_dir.exists()
    result = manage("migrate", "--noinput", "-v0", var_dir=var_dir)
    assert result.returncode == 0, result.stderr[-3000:]
    database = var_dir / "oam.sqlite3"
    assert database.is_file() and database.stat().st_size > 0
    shown = manage("showmigrations", "memory", var_dir=var_dir)
    assert "[X] 0001_initial" in shown.stdout and "[ ]" not in shown.stdout


def test_migrate_names_oam_var_dir_when_the_folder_cannot_be_made(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    result = manage("migrate", "--noinput", "-v0", var_dir=blocker / "var")
    assert result.returncode != 0
    assert "OAM_VAR_DIR" in result.stderr and str(blocker / "var") in result.stderr
    assert "unable to open database file" not in result.stderr


def test_a_folder_that_is_not_writable_is_named_with_the_settings(tmp_path, monkeypatch):
    """A read-only mount (root ignores permission bits, so the kernel's answer is stood in for here)."""
    from django.core.exceptions import ImproperlyConfigured

    from memory.backends.sqlite_vec import base

    folder = tmp_path / "ro"
    folder.mkdir()
    real_access = base.os.access
    monkeypatch.setattr(base.os, "access",
                        lambda path, mode: False if Path(path) == folder else real_access(path, mode))
    with pytest.raises(ImproperlyConfigured, match="not writable.*OAM_VAR_DIR"):
        base.ensure_database_folder(folder / "oam.sqlite3")
    base.ensure_database_folder(tmp_path / "fine" / "oam.sqlite3")  # a folder it can make is made
    assert (tmp_path / "fine").is_dir()
