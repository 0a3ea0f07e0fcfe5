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
