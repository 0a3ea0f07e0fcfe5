"""Fixtures of the real-browser tests: Playwright driving Debian's Chromium against daphne.

One server and one browser serve every test of this folder (package scope):

* ``live_app`` (``tests.browser.harness.LiveApp``): daphne on 127.0.0.1 with its
  own migrated SQLite file, seeded by ``tests.browser.seed`` (a superuser, a
  plain user, an API key, the LoCoMo sample ``conv-30`` imported with
  ``manage.py import_locomo``, three memories and two relations in its first
  session thread). Embedded services only: the in-process Dramatiq broker with
  the embedded worker, so extraction runs inside the server process, and the
  in-memory channel layer, which is enough because the worker and the
  WebSocket consumers share that process (Redis would only be needed if a
  second process, e.g. ``manage.py rundramatiq``, sent the events). The LLM
  follows ``OAM_BROWSER_LLM``: ``scripted`` (default; ``live_app.llm``, a
  schema-driven fake in this process, deterministic), ``local`` (the real
  llama.cpp SmolLM2 server of ``tests/conftest.py``) or ``none``.
* ``browser``: Chromium from ``/usr/bin/chromium`` (``make chromium``), launched
  with the issue's flags. Missing, the tests ERROR: they are never skipped.
* ``context``/``page``: a fresh context (base URL = the server) per test; a
  failed test leaves ``test-artifacts/screenshots/FAILED-<test>.png`` and prints
  the end of the server log.
* ``logged_in_page``: ``page`` after logging in as the seeded staff user at
  ``/staff/login/`` (``/admin/login/`` while the staff app is absent).
* ``screenshot(page, name)``: ``test-artifacts/screenshots/<name>.png``.

Why package scope and not session: Playwright's sync API leaves its event loop
registered as the running loop of the main thread while it is started (its
``_sync`` sets it back after each call), so every later test in the session
that calls ``asyncio.run`` or the Django ORM (``SynchronousOnlyOperation``)
would break. Package scope stops Playwright when the last test of this folder
ends. Tests here never touch pytest-django's test database: the server has
its own; read or change it with ``live_app.python(code)``/``live_app.api(...)``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.browser.harness import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    LiveApp,
    ScriptedLlmServer,
    login,
    run_seed,
    server_env,
    start_daphne,
    stop_process,
)
from tests.browser.harness import (
    screenshot as save_screenshot,
)

HERE = Path(__file__).resolve().parent
#: The smallest LoCoMo conversation by turns (369 turns in 19 sessions; conv-26 has 419).
LOCOMO_SAMPLE = "conv-30"
LLM_MODES = ("scripted", "local", "none")
_REPORTS = pytest.StashKey[dict]()


def pytest_collection_modifyitems(config, items):
    """Mark this folder's tests ``browser`` and ``slow`` (``-m "not browser"`` leaves them out)."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, for the failure artifacts below."""
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


def _failed(node) -> bool:
    return any(r.failed for r in node.stash.get(_REPORTS, {}).values())


# --- the server --------------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def live_app(request, tmp_path_factory) -> Iterator[LiveApp]:
    """daphne on 127.0.0.1 (free port) with a seeded database of its own; stopped after this folder's tests."""
    mode = os.environ.get("OAM_BROWSER_LLM", "scripted").strip().lower() or "scripted"
    if mode not in LLM_MODES:
        raise ValueError(f"OAM_BROWSER_LLM must be one of {', '.join(LLM_MODES)}, not {mode!r}")
    llm, base_url, model = None, "", ""
    if mode == "scripted":
        llm = ScriptedLlmServer().start()
        base_url, model = llm.base_url, llm.model
    elif mode == "local":
        server = request.getfixturevalue("local_llm_server")
        base_url, model = server.base_url, server.model
    directory = tmp_path_factory.mktemp("live_app")
    env = server_env(directory, llm_base_url=base_url, llm_model=model)
    log_path = directory / "daphne.log"
    try:
        seed = run_seed(env, LOCOMO_SAMPLE)
        process, url = start_daphne(env, log_path)
    except BaseException:
        if llm is not None:
            llm.stop()
        raise
    app = LiveApp(url=url, env=env, directory=directory, log_path=log_path, process=process, seed=seed,
                  llm=llm, llm_mode=mode)
    try:
        yield app
    finally:
        stop_process(process)
        if llm is not None:
            llm.stop()
        (ARTIFACTS / "browser").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log_path, ARTIFACTS / "browser" / "daphne.log")


@pytest.fixture(autouse=True)
def _server_log_on_failure(request) -> Iterator[None]:
    """Print the end of the server log under a failed test that used the server."""
    yield
    if "live_app" in request.fixturenames and _failed(request.node):
        app = request.getfixturevalue("live_app")
        print(f"--- live server log ({app.log_path}), last 6000 characters ---\n{app.log_tail()}")


@pytest.fixture(scope="package")
def staff_login_path(live_app) -> str:
    """``/staff/login/`` when the staff app answers there, else the admin's ``/admin/login/``."""
    return "/staff/login/" if live_app.has_path("/staff/login/") else "/admin/login/"


# --- the browser -------------------------------------------------------------------------------------


@pytest.fixture(scope="package")
def playwright_sync() -> Iterator[object]:
    """Playwright's sync API, started once for this folder (see the module docstring for why not per session)."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} is missing: run `make chromium` (apt-get install chromium) first")
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        yield playwright
    finally:
        playwright.stop()


@pytest.fixture(scope="package")
def browser(playwright_sync) -> Iterator[object]:
    """Headless Debian Chromium with the issue's flags (never Playwright's downloaded build)."""
    browser = playwright_sync.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def context(browser, live_app) -> Iterator[object]:
    """A fresh browser context (no cookies) whose relative URLs resolve against the live server."""
    context = browser.new_context(base_url=live_app.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(request, context) -> Iterator[object]:
    """A page of ``context``; on failure its screenshot goes to ``test-artifacts/screenshots/FAILED-<test>.png``.

    Chromium's console reports of Content-Security-Policy violations are collected; any one fails the
    test at teardown (the staff pages' policy allows this origin's files only: no inline script or eval).
    """
    page = context.new_page()
    violations: list[str] = []
    page.on("console", lambda message: violations.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    yield page
    if _failed(request.node) and not page.is_closed():
        try:
            save_screenshot(page, f"FAILED-{request.node.name}")
        except Exception as exc:  # noqa: BLE001 - the test's own failure matters more
            print(f"could not save the failure screenshot: {exc!r}")
    # Every page test is also a Content-Security-Policy test: the browser refused nothing the page needs.
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)


@pytest.fixture
def logged_in_page(page, live_app, staff_login_path) -> object:
    """``page`` with the seeded staff user logged in (staff login form, or the admin's while there is none)."""
    username, password = live_app.staff
    login(page, live_app.url, username, password, login_path=staff_login_path)
    return page


@pytest.fixture
def screenshot() -> Callable[..., Path]:
    """``screenshot(page, name)``: save ``test-artifacts/screenshots/<name>.png`` (git-ignored); return the path."""
    return save_screenshot
