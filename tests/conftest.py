"""Shared fixtures. Tests run against a real SQLite file with sqlite-vec and the real
all-MiniLM-L6-v2 embedder (loaded once per test process)."""

import pytest

from memory.client import AgentMemory


@pytest.fixture
def client(db):
    """An ``AgentMemory`` on the test database with default retention."""
    return AgentMemory()


@pytest.fixture
def thread(client):
    """A fresh thread with fixed user and agent ids."""
    return client.create_thread(thread_id="t-main", user_id="user-1", agent_id="agent-1")
