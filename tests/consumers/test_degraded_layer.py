"""The extraction WebSocket with a channel layer that is down (issue #34): the socket opens, gets its state,
and the layer is reported degraded (``memory.core.degraded``)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from channels.testing import WebsocketCommunicator

from memory.client import AgentMemory
from memory.core import degraded
from threads.auth import api_key_create

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def dead_layer(settings):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
        "hosts": [{"address": f"redis://127.0.0.1:{port}/0", "socket_timeout": 1}]}}}
    settings.OAM_EMBEDDED_WORKER = False


def test_a_socket_opens_and_gets_its_state_with_the_channel_layer_down(dead_layer):
    AgentMemory(llm=None).create_thread(thread_id="t-ws", user_id="u1", agent_id="a1")
    key = api_key_create(name="ws")[1]
    from oam_site.asgi import application

    async def scenario():
        communicator = WebsocketCommunicator(application, "/ws/threads/t-ws/extraction/",
                                             headers=[(b"authorization", f"Bearer {key}".encode())])
        connected, _ = await communicator.connect(timeout=10)
        state = await communicator.receive_json_from(timeout=10)
        await communicator.disconnect()
        return connected, state

    connected, state = asyncio.run(scenario())
    assert connected and state["event"] == "state" and state["thread_id"] == "t-ws"
    assert degraded.states()["channels"].reason == "unreachable"


def test_progress_events_with_the_channel_layer_down_are_dropped_and_reported(dead_layer):
    from django.test import Client

    from memory.core import progress

    progress.send("1:t-ws", "queued", job_id=1)  # outside a transaction: sent at once; never raises
    assert degraded.states()["channels"].reason == "unreachable"
    response = Client().get("/readyz")
    assert response.status_code == 200
    channels = response.json()["parts"]["channels"]
    assert channels["state"] == "degraded" and channels["reason"] == "unreachable"


@pytest.fixture
def hung_layer(settings):
    """A channel layer whose Redis accepts connections and never answers, with production's 30 s read timeout."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {
        "hosts": [{"address": f"redis://127.0.0.1:{listener.getsockname()[1]}/0", "socket_timeout": 30}]}}}
    settings.OAM_EMBEDDED_WORKER = False
    yield
    stop.set()
    thread.join(5)
    for conn in held:
        conn.close()
    listener.close()


def test_a_socket_opens_within_seconds_when_the_channel_layer_hangs(hung_layer):
    """An outside attack: with a Redis that accepts and never answers, no WebSocket could open (daphne cancelled
    the 30 s group_add, a CancelledError the guard did not see). Channel-layer calls are bounded now."""
    import time

    AgentMemory(llm=None).create_thread(thread_id="t-hung", user_id="u1", agent_id="a1")
    key = api_key_create(name="ws")[1]
    from oam_site.asgi import application

    async def scenario():
        communicator = WebsocketCommunicator(application, "/ws/threads/t-hung/extraction/",
                                             headers=[(b"authorization", f"Bearer {key}".encode())])
        started = time.monotonic()
        connected, _ = await communicator.connect(timeout=10)
        state = await communicator.receive_json_from(timeout=10)
        elapsed = time.monotonic() - started
        await communicator.disconnect(timeout=10)
        return connected, state, elapsed

    connected, state, elapsed = asyncio.run(scenario())
    assert connected and state["event"] == "state" and state["thread_id"] == "t-hung"
    assert elapsed < degraded.CALL_SECONDS + 3
    assert degraded.states()["channels"].reason == "timeout"


def test_a_progress_event_costs_at_most_the_call_bound_when_the_channel_layer_hangs(hung_layer):
    import time

    from memory.core import progress

    started = time.monotonic()
    progress.send("1:t-hung", "queued", job_id=1)
    assert time.monotonic() - started < degraded.CALL_SECONDS + 2
    assert degraded.states()["channels"].reason == "timeout"
    started = time.monotonic()
    progress.send("1:t-hung", "queued", job_id=2)  # the part is paused: dropped at once
    assert time.monotonic() - started < 0.5
