"""Fixtures for the JSON API tests: an API key and Django test clients with and without it.

The root conftest's ``client`` is an ``AgentMemory``; the HTTP client here is ``api``.
"""

import pytest

from tests.api.helpers import JsonClient
from threads.auth import api_key_create


@pytest.fixture
def api_key(db):
    """The raw value of a fresh active API key."""
    _, raw = api_key_create(name="tests")
    return raw


@pytest.fixture
def api(api_key):
    """A client sending ``Authorization: Bearer <api_key>``."""
    return JsonClient(headers={"Authorization": f"Bearer {api_key}"})


@pytest.fixture
def anon(db):
    """A client without credentials."""
    return JsonClient()


@pytest.fixture
def make_thread(api):
    """Create a thread over HTTP and return its JSON."""

    def make(**body):
        resp = api.post("/api/threads", body)
        assert resp.status_code == 201, resp.content
        return resp.json()

    return make

