"""The issue #34 scenario on a real daphne: ``OAM_REDIS_URL`` names a Redis that is down (the cache, the
channel layer and the broker all point at it), and the API still answers reads and writes with 2xx while
``/readyz`` reports the parts degraded. Before ``memory.core.degraded`` every API call answered 500.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.browser.harness import migrate_with_key, server_env, start_daphne, stop_process


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(base URL, an active API key) of a daphne whose Redis is a port nothing listens on."""
    directory = tmp_path_factory.mktemp("degraded")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = server_env(directory)
    env.update({"OAM_REDIS_URL": f"redis://127.0.0.1:{port}/0", "OAM_EMBEDDED_WORKER": "false"})
    key = migrate_with_key(env, "degraded")
    process, url = start_daphne(env, Path(directory) / "daphne.log")
    try:
        yield url, key
    finally:
        stop_process(process)


def call(url: str, method: str = "GET", body: dict | None = None, key: str | None = None,
         host: str | None = None) -> tuple[int, dict]:
    headers = ({"Content-Type": "application/json"} | ({"Authorization": f"Bearer {key}"} if key else {})
               | ({"Host": host} if host else {}))
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def test_with_redis_down_the_api_answers_reads_and_writes(live):
    url, key = live
    status, thread = call(f"{url}/api/threads", "POST", {"user_id": "u1", "agent_id": "a1"}, key)
    assert status == 201, thread
    status, added = call(f"{url}/api/threads/{thread['thread_id']}/messages", "POST",
                         {"messages": [{"role": "user", "content": "My sister lives in Porto."}]}, key)
    assert status in (200, 201), added
    for _ in range(5):
        status, listed = call(f"{url}/api/threads", key=key)
        assert status == 200 and any(t["thread_id"] == thread["thread_id"] for t in listed["items"]), listed
    assert call(f"{url}/api/threads", key="wrong")[0] == 401  # the wrong-key cap still counts, in the process


def test_with_redis_down_the_probes_say_what_is_degraded(live):
    url, _ = live
    assert call(f"{url}/healthz") == (200, {"status": "ok"})
    # a load balancer probes by address, a Host ALLOWED_HOSTS never lists: answered ahead of Django's check
    # (an outside attack got 400 DisallowedHost under the production settings); the API is not
    assert call(f"{url}/healthz", host="10.0.0.5") == (200, {"status": "ok"})
    assert call(f"{url}/readyz", host="10.0.0.5")[0] == 200
    refused = urllib.request.Request(f"{url}/api/threads", headers={"Host": "10.0.0.5"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(refused, timeout=30)
    assert caught.value.code == 400
    status, body = call(f"{url}/readyz")
    assert status == 200 and body["status"] == "degraded", body
    parts = body["parts"]
    assert parts["database"]["state"] == "up"
    assert parts["cache"]["state"] == "degraded" and parts["cache"]["reason"] == "unreachable"
    assert parts["broker"]["state"] == "degraded" and parts["broker"]["reason"] == "unreachable"
