"""Background extraction across processes: Redis broker, a ``manage.py rundramatiq`` worker, channels-redis.

The test process queues the job on Redis (the real service at 127.0.0.1:6379)
and watches ``/ws/threads/<id>/extraction/`` through a ``WebsocketCommunicator``
on a channels-redis layer; a worker subprocess (``manage.py rundramatiq``, its
own Django, the same SQLite test database) runs the job against a fake
OpenAI-compatible server and sends the progress events through Redis.
Dramatiq and channel keys use a namespace of their own, removed afterwards.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
from channels.testing import WebsocketCommunicator
from django.conf import settings as django_settings
from dramatiq.brokers.redis import RedisBroker

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.dev.postgres_server import database_url
from memory.llm.adapters import reset_llm
from memory.models import ExtractionJob, Memory
from memory.tasks import QUEUE, extract_job
from threads.auth import api_key_create

REDIS_URL = "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def namespace():
    """A key prefix of this test's own; its Redis keys are deleted afterwards."""
    name = f"oamtest{uuid.uuid4().hex[:10]}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(f"{name}*"):
        client.delete(key)
    client.close()


@pytest.fixture
def worker_process(namespace, fake_openai, tmp_path):
    """``manage.py rundramatiq`` (one process, two threads) on Redis, the test database and the fake LLM."""
    env = {
        **os.environ,
        "OAM_REDIS_URL": REDIS_URL,
        "OAM_DRAMATIQ_NAMESPACE": namespace,
        "OAM_CHANNELS_PREFIX": namespace,
        "OAM_SQLITE_PATH": str(django_settings.DATABASES["default"]["NAME"]),
        "OAM_LLM_BASE_URL": fake_openai.base_url,
        "OAM_LLM_MODEL": "fake",
        "OAM_EXTRACTION_SWEEP_SECONDS": "0",
        "DRAMATIQ_NPROCS": "1",
        "DRAMATIQ_NTHREADS": "2",
    }
    if os.environ.get("OAM_DATABASE_URL"):  # the PostgreSQL pass: the same test database, by name
        env["OAM_DATABASE_URL"] = database_url(os.environ["OAM_DATABASE_URL"],
                                               str(django_settings.DATABASES["default"]["NAME"]))
    log_path = tmp_path / "worker.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "rundramatiq", "--processes", "1", "--threads", "2"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: the master and its forked worker stop together
        )
    try:
        yield process, log_path
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_process_extracts_and_the_websocket_sees_its_events(
    namespace, worker_process, fake_openai, settings, monkeypatch, fresh_extraction_tracker
):
    process, log_path = worker_process
    fake_openai.replies = [json.dumps({"memories": [
        {"memory_type": "preference", "content": "Ann loves green tea.", "source_message_ids": ["m1"]},
        {"memory_type": "fact", "content": "Ann lives in Lisbon.", "source_message_ids": ["m2"]},
    ]})]
    # This process: channels-redis and the Redis broker under the test's namespace, no embedded worker.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
        "hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "prefix": namespace}}}  # as oam_site.settings
    settings.OAM_EMBEDDED_WORKER = False
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL = fake_openai.base_url, "fake"
    reset_llm()
    broker = RedisBroker(url=REDIS_URL, namespace=namespace)
    broker.declare_queue(QUEUE)
    monkeypatch.setattr(extract_job, "broker", broker)
    thread = AgentMemory().create_thread(
        thread_id="t-redis", user_id="u1", agent_id="a1",
        memory_extraction_config=MemoryExtractionConfig(enable_context_summary=False))  # BACKGROUND
    _, key = api_key_create(name="ws")
    from oam_site.asgi import application

    async def scenario():
        communicator = WebsocketCommunicator(application, f"/ws/threads/t-redis/extraction/?api_key={key}")
        connected, _ = await communicator.connect(timeout=10)
        assert connected
        assert (await communicator.receive_json_from(timeout=10))["event"] == "state"
        ids = await thread.add_messages_async([{"role": "user", "content": "I love green tea."},
                                               {"role": "user", "content": "I live in Lisbon."}])
        events = []
        while not events or events[-1]["event"] not in ("finished", "failed"):
            events.append(await communicator.receive_json_from(timeout=180))
        await communicator.disconnect()
        return ids, events

    try:
        ids, events = asyncio.run(scenario())
    except BaseException:
        print("WORKER LOG\n" + log_path.read_text(errors="replace")[-6000:])
        raise
    finally:
        reset_llm()
        broker.close()
    names = [e["event"] for e in events]
    assert names == ["queued", "started", "progress", "memory_created", "memory_created", "finished"], (
        names, log_path.read_text(errors="replace")[-3000:])
    assert events[-1]["memories_created"] == 2 and events[-1]["watermark"] == 2
    assert {e["memory_id"] for e in events if e["event"] == "memory_created"} == {
        row.public_id for row in Memory.objects.all()}  # events carry public ids
    assert Memory.objects.get(content="Ann lives in Lisbon.").source_message_ids == [ids[1]]
    job = ExtractionJob.objects.get()
    assert (job.status, job.attempts) == ("done", 1)
    assert len(fake_openai.requests) == 1  # the worker process called the LLM once
    assert process.poll() is None  # still serving
