"""The engine's settings: defaults in one place (``memory.core.conf``) and a bad value reported by
``manage.py check``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from memory.checks import check_settings
from memory.core import conf

ROOT = Path(__file__).resolve().parent.parent.parent


def test_the_configured_settings_pass_the_checks():
    assert check_settings() == []


def test_a_left_out_setting_reads_its_default(settings):
    del settings.OAM_EXTRACTION_QUEUE_CAPACITY
    assert conf.get("OAM_EXTRACTION_QUEUE_CAPACITY") == 1000 == conf.DEFAULTS["OAM_EXTRACTION_QUEUE_CAPACITY"]


def test_an_unknown_setting_name_is_a_key_error():
    with pytest.raises(KeyError):
        conf.get("OAM_NO_SUCH_SETTING")


@pytest.mark.parametrize("name, value, rule", [
    ("OAM_VECTOR_TARGET_ACCURACY", 150, "must be at most 100"),
    ("OAM_EXTRACTION_DUPLICATE_DISTANCE", -0.5, "must be at least 0"),
    ("OAM_EXTRACTION_MAX_ATTEMPTS", "4", "must be an int, not str"),
    ("OAM_EMBEDDED_WORKER", "yes", "must be a bool"),
    ("OAM_SEARCH_MODE", "FUZZY", "must be one of VECTOR, KEYWORD, HYBRID"),
    ("OAM_DEFAULT_TTL_DAYS", 0, "must be at least 1"),
    ("OAM_EXTRACTION_RETRY_HORIZON_SECONDS", -1, "must be at least 0"),
    ("OAM_EXTRACTION_RETRY_BACKOFF_SECONDS", 0, "must be at least 0.01"),
    ("OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS", "5m", "must be a float, not str"),
    ("OAM_MESSAGE_WINDOW", None, "must be set"),
])
def test_a_bad_value_is_an_error_naming_the_setting(settings, name, value, rule):
    setattr(settings, name, value)
    [error] = check_settings()
    assert error.id == "memory.E001" and error.msg.startswith(name) and rule in error.msg, error.msg
    with pytest.raises(SystemCheckError, match=name):
        call_command("check")


def test_an_optional_setting_may_be_none(settings):
    settings.OAM_MAX_TTL_DAYS = None
    assert check_settings() == []


def test_manage_py_check_reports_a_bad_environment_value_by_name():
    """The value comes from the environment, as in production: the check fails before any request."""
    env = {"PATH": "/usr/bin:/bin", "OAM_VECTOR_TARGET_ACCURACY": "101", "HOME": str(Path.home())}
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "(memory.E001) OAM_VECTOR_TARGET_ACCURACY must be at most 100, not 101" in result.stderr


def test_the_first_retry_backoff_may_not_exceed_the_longest(settings):
    """``OAM_EXTRACTION_RETRY_BACKOFF_SECONDS`` above ``..._MAX_SECONDS`` is an error naming the first."""
    settings.OAM_EXTRACTION_RETRY_BACKOFF_SECONDS, settings.OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS = 600, 300
    assert conf.problems() == [("OAM_EXTRACTION_RETRY_BACKOFF_SECONDS",
                                "must be at most OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS (300), not 600")]
    assert [error.id for error in check_settings()] == ["memory.E001"]
