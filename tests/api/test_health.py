"""Degrade, don't fall over (issue #34): the API with its cache, broker or database down, and the probes.

The cache is a real Redis client: on a port nothing listens on, or a ``redis-server`` this module starts on
a free port and stops mid-test. The database is the test database; "down" points this process's new
connections at a file that cannot be opened.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import pytest
from django.db import connections
from django.test import Client
from dramatiq.brokers.redis import RedisBroker

from memory.core import degraded
from memory.extraction import queue
from memory.tasks import extract_job
from tests.api.helpers import JsonClient
from threads import throttling


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def redis_cache(port: int) -> dict:
    return {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                        "LOCATION": f"redis://127.0.0.1:{port}/0", "KEY_PREFIX": "oam-test",
                        "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0}}}


@pytest.fixture(autouse=True)
def _fresh_fallback_counts(monkeypatch):
    """Each test counts from zero in this process too (the root conftest resets the degraded parts)."""
    monkeypatch.setattr(throttling, "fallback_counts", degraded.FallbackCounter())


@pytest.fixture
def dead_cache(settings):
    """The cache is a Redis on a port nothing listens on; returns that port."""
    port = free_port()
    settings.CACHES = redis_cache(port)
    return port


@pytest.fixture
def redis_server(settings, tmp_path):
    """A ``redis-server`` of this test on a free port, the cache pointing at it; yields its process."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(["redis-server", "--port", str(port), "--save", "", "--appendonly", "no",
                                "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        settings.CACHES = redis_cache(port)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)


def ready(client=None):
    response = (client or Client()).get("/readyz")
    return response.status_code, response.json()


# --- the API with the cache down ---------------------------------------------------------------------


def test_with_the_cache_unreachable_reads_and_writes_answer_2xx(dead_cache, api, make_thread):
    thread = make_thread(user_id="u1", agent_id="a1")
    added = api.post(f"/api/threads/{thread['thread_id']}/messages",
                     {"messages": [{"role": "user", "content": "I keep bees on the roof."}]})
    assert added.status_code in (200, 201), added.content
    memory = api.post(f"/api/threads/{thread['thread_id']}/memories", {"content": "keeps bees"})
    assert memory.status_code in (200, 201), memory.content
    assert api.get("/api/threads").status_code == 200
    assert api.get(f"/api/threads/{thread['thread_id']}/messages").status_code == 200
    assert api.delete(f"/api/threads/{thread['thread_id']}").status_code in (200, 204)
    assert degraded.states()["cache"].reason == "unreachable"


def test_with_the_cache_unreachable_an_erasure_still_scrubs_the_storage(dead_cache, db):
    from threads.auth import api_key_create

    admin = JsonClient(headers={"Authorization": f"Bearer {api_key_create(name='admin', permission='admin')[1]}"})
    assert admin.post("/api/threads", {"user_id": "u9"}).status_code == 201
    erased = admin.delete("/api/users/u9")
    assert erased.status_code == 200, erased.content
    assert degraded.states()["cache"].reason == "unreachable"


def test_with_the_cache_unreachable_a_key_rate_still_applies_in_this_process(dead_cache, api, settings):
    settings.OAM_API_RATE_LIMIT = 3
    statuses = [api.get("/api/threads").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert len(throttling.fallback_counts) >= 1


def test_with_the_cache_unreachable_wrong_keys_are_still_capped(dead_cache, api_key, settings):
    settings.OAM_API_AUTH_FAILURE_LIMIT = 2
    wrong = Client(headers={"Authorization": "Bearer wrong"}, REMOTE_ADDR="10.2.3.4")
    assert [wrong.get("/api/threads").status_code for _ in range(3)] == [401, 401, 429]
    right = Client(headers={"Authorization": f"Bearer {api_key}"}, REMOTE_ADDR="10.2.3.4")
    assert right.get("/api/threads").status_code == 429


def test_a_cache_that_stops_mid_test_degrades_and_comes_back(redis_server, api, settings, monkeypatch):
    assert api.get("/api/threads").status_code == 200
    status, body = ready()
    assert status == 200 and body["parts"]["cache"]["state"] == "up"
    redis_server.terminate()
    redis_server.wait(timeout=10)
    assert [api.get("/api/threads").status_code for _ in range(3)] == [200] * 3
    assert api.post("/api/threads", {"user_id": "u2"}).status_code == 201
    status, body = ready()
    assert status == 200 and body["status"] == "degraded"
    assert body["parts"]["cache"] == {"state": "degraded", "latency_ms": body["parts"]["cache"]["latency_ms"],
                                      "reason": "unreachable"}


def test_a_failing_cache_is_not_asked_again_for_a_while_and_warns_once(dead_cache, api, caplog):
    with caplog.at_level("WARNING", logger="memory.core.degraded"):
        for _ in range(5):
            assert api.get("/api/threads").status_code == 200
    warnings = [r for r in caplog.records if r.name == "memory.core.degraded"]
    assert len(warnings) == 1 and "cache is unreachable" in warnings[0].getMessage()
    assert degraded.states()["cache"].failures == 1  # paused: the next calls went to the fallback at once


def test_the_fallback_counter_stays_bounded():
    counter = degraded.FallbackCounter(max_keys=100)
    for i in range(1000):
        counter.count(f"authfail:10.0.{i // 256}.{i % 256}", window=7)
    assert len(counter) == 100
    assert counter.count("x", window=8) == 1 and counter.count("x", window=8) == 2
    counter.count("y", window=10)  # windows before the previous one are gone
    assert counter.peek("x", window=8) == 0 and len(counter) == 1


# --- the probes --------------------------------------------------------------------------------------


def database_down(monkeypatch, tmp_path) -> None:
    """New connections of this process open a directory as the database file: SQLite cannot open it."""
    monkeypatch.setitem(connections.settings["default"], "NAME", str(tmp_path))


def test_healthz_answers_without_a_key_or_any_dependency(dead_cache, db, monkeypatch, tmp_path):
    database_down(monkeypatch, tmp_path)
    response = Client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"
    assert degraded.states() == {}  # the cache was not touched
    assert Client().post("/healthz").status_code == 405


def test_readyz_with_everything_up_is_200(db, settings):
    settings.OAM_LLM_BASE_URL = ""
    status, body = ready()
    assert status == 200
    parts = body["parts"]
    assert set(parts) == {"database", "cache", "broker", "channels", "embedder", "llm"}
    assert parts["database"]["state"] == "up" and parts["database"]["latency_ms"] >= 0
    assert parts["cache"] == {"state": "off", "latency_ms": parts["cache"]["latency_ms"], "reason": "local"}
    assert parts["broker"]["state"] == "up"
    assert (parts["channels"]["state"], parts["channels"]["reason"]) == ("off", "local")  # the in-memory layer
    assert parts["llm"]["state"] == "off"
    assert body["status"] in ("ok", "degraded")  # the embedder may not be loaded in this process yet


def test_readyz_with_a_real_redis_cache_up(redis_server, db):
    status, body = ready()
    assert status == 200 and body["parts"]["cache"]["state"] == "up" and body["parts"]["cache"]["reason"] is None


def test_readyz_with_the_database_down_is_503(db, monkeypatch, tmp_path):
    database_down(monkeypatch, tmp_path)
    status, body = ready()
    assert status == 503 and body["status"] == "down"
    assert body["parts"]["database"]["state"] == "down" and body["parts"]["database"]["reason"] == "error"


def test_readyz_with_the_broker_down_is_200_degraded_and_a_write_still_succeeds(db, monkeypatch):
    port = free_port()
    dead = RedisBroker(url=f"redis://127.0.0.1:{port}/0", middleware=[])
    monkeypatch.setattr(extract_job, "broker", dead)
    status, body = ready()
    assert status == 200 and body["status"] == "degraded"
    assert body["parts"]["broker"]["state"] == "degraded" and body["parts"]["broker"]["reason"] == "unreachable"
    assert queue.enqueue_job(10**9) is False  # the send fails, is reported, and raises nothing
    assert degraded.states()["broker"].reason == "unreachable"


def test_a_broker_that_never_answers_costs_a_write_seconds_not_for_ever(db, monkeypatch):
    from oam_site.settings import redis_url_with_timeouts

    with socket.socket() as listener:  # a "Redis" that takes connections and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = redis_url_with_timeouts(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", connect=0.5, read=0.5)
        monkeypatch.setattr(extract_job, "broker", RedisBroker(url=url, middleware=[]))
        started = time.monotonic()
        assert queue.enqueue_job(10**9) is False
        assert time.monotonic() - started < 5.0
    assert degraded.states()["broker"].reason == "timeout"
    assert redis_url_with_timeouts("redis://h/0?socket_timeout=9") == "redis://h/0?socket_timeout=9"
    assert redis_url_with_timeouts("redis://h/0?db=1").endswith("?db=1&socket_connect_timeout=2&socket_timeout=2")


def test_readyz_with_a_real_redis_broker_up(db, monkeypatch):
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=0.5).close()
    except OSError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    monkeypatch.setattr(extract_job, "broker", RedisBroker(url="redis://127.0.0.1:6379/0", middleware=[]))
    status, body = ready()
    assert status == 200 and body["parts"]["broker"]["state"] == "up"


def test_a_hung_dependency_does_not_hang_readyz(db, settings):
    with socket.socket() as listener:  # a "Redis" that takes connections and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        settings.CACHES = redis_cache(listener.getsockname()[1])
        settings.CACHES["default"]["OPTIONS"]["socket_timeout"] = 10.0
        started = time.monotonic()
        status, body = ready()
        elapsed = time.monotonic() - started
    assert status == 200 and elapsed < 3.0
    assert body["parts"]["cache"] == {"state": "degraded", "latency_ms": None, "reason": "timeout"}
    assert body["parts"]["database"]["state"] == "up"


def test_readyz_shows_no_address_dsn_or_exception_text(dead_cache, db, settings, monkeypatch, tmp_path):
    settings.OAM_LLM_BASE_URL = "http://llm-secret-host.invalid:8012/v1"
    settings.OAM_LLM_API_KEY = "sk-very-secret"
    database_down(monkeypatch, tmp_path)
    response = JsonClient().get("/readyz")
    text = response.content.decode()
    for secret in ("llm-secret-host", "sk-very-secret", str(tmp_path), str(dead_cache), "127.0.0.1", "Error",
                   "refused"):
        assert secret not in text
    words = {part["reason"] for part in json.loads(text)["parts"].values()}
    assert words <= {None, "unreachable", "timeout", "error", "not_loaded", "unchecked", "local",
                     "not_configured"}


def _probe(path: str, method: str = "GET") -> tuple[int, dict, bytes]:
    """One request to ``oam_site.health.asgi_probe`` (what ``oam_site.asgi.HttpRouter`` sends the probe paths
    to; the router itself is exercised by a real daphne in tests/api/test_degraded_live.py)."""
    import asyncio

    from oam_site.health import asgi_probe

    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"host", b"10.0.0.5")]}
    asyncio.run(asgi_probe(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), body


@pytest.mark.django_db(transaction=True)
def test_the_asgi_probe_answers_get_and_head_and_refuses_other_methods():
    status, headers, body = _probe("/healthz")
    assert (status, json.loads(body)) == (200, {"status": "ok"}) and headers[b"cache-control"] == b"no-store"
    status, headers, body = _probe("/readyz")
    assert status == 200 and set(json.loads(body)) == {"status", "parts"}
    assert int(headers[b"content-length"]) == len(body)
    assert _probe("/healthz", method="HEAD")[2] == b""
    status, headers, _ = _probe("/readyz", method="POST")
    assert status == 405 and headers[b"allow"] == b"GET, HEAD"


def test_concurrent_probes_share_the_running_checks_and_a_slow_part_never_makes_the_database_down(db, settings):
    """An outside attack sent 8-20 probes at once during a Redis hang: the database check queued behind the
    hung checks in a shared pool and answered 503 "down". Each part now has its own thread and concurrent
    probes wait on the running check."""
    import asyncio
    import threading

    from oam_site import health

    release = threading.Event()
    calls = []

    def hung_cache():
        calls.append(1)
        release.wait(10)

    checks = dict(health.CHECKS)
    checks["cache"] = (hung_cache, "degraded")
    settings.OAM_LLM_BASE_URL = ""

    async def probes():
        return await asyncio.gather(*(health.readiness() for _ in range(20)))

    original = health.CHECKS
    health.CHECKS = checks
    try:
        bodies = asyncio.run(probes())
    finally:
        release.set()
        health.CHECKS = original
    assert len(calls) == 1  # one cache check for all twenty probes
    assert {b["parts"]["database"]["state"] for b in bodies} == {"up"}
    assert {b["parts"]["cache"]["reason"] for b in bodies} == {"timeout"}
    assert {b["status"] for b in bodies} == {"degraded"}
