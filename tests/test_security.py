"""Security settings: no public secret key, production block that passes
``check --deploy``, staff login throttling (django-axes), CSP on staff pages, no-store on private responses.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from oam_site.secret_key import MIN_LENGTH, load_or_create

ROOT = Path(__file__).resolve().parent.parent
OLD_PUBLIC_KEY = "oam-site-insecure-embedded-default-key"


def manage(*args: str, **env_vars: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
    env.update(env_vars)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


# --- the secret key ---------------------------------------------------------------------------


def test_the_secret_key_is_never_the_old_public_constant():
    assert settings.SECRET_KEY != OLD_PUBLIC_KEY and len(settings.SECRET_KEY) >= MIN_LENGTH


def test_a_new_install_gets_a_random_key_in_a_private_file_and_keeps_it(tmp_path):
    path = tmp_path / "var" / "secret_key"
    first = load_or_create(path)
    assert len(first) >= MIN_LENGTH and path.read_text().strip() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create(path) == first
    assert load_or_create(tmp_path / "other" / "secret_key") != first


def test_a_short_or_unwritable_key_file_is_refused_naming_the_setting(tmp_path):
    short = tmp_path / "short"
    short.write_text("abc")
    with pytest.raises(ImproperlyConfigured, match="shorter than 50"):
        load_or_create(short)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(ImproperlyConfigured, match="DJANGO_SECRET_KEY"):
        load_or_create(blocker / "secret_key")


@pytest.mark.slow
def test_the_documented_production_settings_pass_check_deploy(tmp_path):
    production = {"OAM_VAR_DIR": str(tmp_path), "DJANGO_SECURE": "true", "DJANGO_ALLOWED_HOSTS": "memory.example.org"}
    result = manage("check", "--deploy", "--fail-level", "WARNING", **production)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
    plain = manage("check", "--deploy", "--fail-level", "WARNING", OAM_VAR_DIR=str(tmp_path))
    assert plain.returncode != 0 and "SECURE_SSL_REDIRECT" in plain.stderr + plain.stdout  # the check is real


def test_the_health_probes_answer_plain_http_without_a_key_under_the_production_settings(db, settings, tmp_path):
    """``/healthz`` and ``/readyz`` (``oam_site.health``) are exempt from the HTTPS redirect (a probe comes
    over loopback) and need no key; the API is still redirected."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
    env.update(OAM_VAR_DIR=str(tmp_path), DJANGO_SECURE="true", DJANGO_ALLOWED_HOSTS="memory.example.org",
               DJANGO_SETTINGS_MODULE="oam_site.settings")
    probe = ("from django.conf import settings as s; import json; "
             "print(json.dumps([s.SECURE_SSL_REDIRECT, s.SECURE_REDIRECT_EXEMPT]))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout
    settings.SECURE_SSL_REDIRECT, settings.SECURE_REDIRECT_EXEMPT = json.loads(out.strip().splitlines()[-1])
    assert settings.SECURE_SSL_REDIRECT is True
    assert Client().get("/healthz").status_code == 200
    ready = Client().get("/readyz")
    assert ready.status_code == 200 and set(ready.json()) == {"status", "parts"}
    assert Client().get("/api/threads").status_code == 301


# --- staff login throttling --------------------------------------------------------------------


@pytest.fixture
def staff_account(db):
    from django.contrib.auth import get_user_model

    from memory.records.tenancy import get_project

    user = get_user_model().objects.create_user("guard", password="right-password-1", is_staff=True)
    get_project(None).members.add(user)
    return user


def login(browser: Client, password: str):
    return browser.post("/staff/login/", {"username": "guard", "password": password})


def test_failed_staff_logins_lock_the_account_out_even_for_the_right_password(staff_account):
    browser = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert login(browser, "wrong").status_code == 200  # the form again, with its error
    assert login(browser, "wrong").status_code == 429
    locked = login(browser, "right-password-1")
    assert locked.status_code == 429 and "_auth_user_id" not in browser.session


def test_a_successful_login_resets_the_failure_count(staff_account):
    browser = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        login(browser, "wrong")
    assert login(browser, "right-password-1").status_code == 302
    browser.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert login(browser, "wrong").status_code == 200
    assert login(browser, "right-password-1").status_code == 302


def test_admin_logins_are_throttled_too(staff_account):
    browser = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT):
        browser.post("/admin/login/", {"username": "guard", "password": "wrong"})
    assert browser.post("/admin/login/", {"username": "guard", "password": "right-password-1"}).status_code == 429


# --- headers -----------------------------------------------------------------------------------


def test_staff_pages_carry_a_strict_content_security_policy(staff_account):
    browser = Client()
    browser.force_login(staff_account)
    response = browser.get("/staff/threads/", follow=True)
    assert response.status_code == 200
    policy = response.headers["Content-Security-Policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'",
                      "object-src 'none'"):
        assert directive in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    body = response.content.decode()
    assert "hx-on" not in body and '"allowEval": false' in body and '"includeIndicatorStyles": false' in body
    assert response.headers["X-Frame-Options"] == "DENY"


def test_private_responses_are_not_stored_by_caches(staff_account):
    from threads.auth import api_key_create

    _, key = api_key_create(name="cache-test")
    api = Client(headers={"Authorization": f"Bearer {key}"})
    for response in (api.get("/api/threads"), api.get("/api/threads/none-such"), Client().get("/api/threads")):
        assert "no-store" in response.headers["Cache-Control"] and "private" in response.headers["Cache-Control"]
    browser = Client()
    browser.force_login(staff_account)
    assert "no-store" in browser.get("/staff/threads/", follow=True).headers["Cache-Control"]
    docs = Client().get("/api/openapi.json")
    assert docs.status_code == 200 and "no-store" not in docs.headers.get("Cache-Control", "")
