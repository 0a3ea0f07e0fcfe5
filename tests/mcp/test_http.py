"""The MCP door's own rules, in process: the body gate, rate limits, waits, ids that cannot leave their route."""

import asyncio

import pytest
from mcp.shared.exceptions import MCPError

from memory.models import Project
from oam_site.request_gate import decide
from threads.auth import api_key_create
from threads.mcp import bridge
from threads.mcp.server import RATE_LIMITED, Caller, call

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("path, refused", [(b"/mcp", True), (b"/mcp/threads/t1", True), (b"/mcp?x=1", True),
                                           (b"/mcpx", False), (b"/staff/", False)])
def test_a_body_to_mcp_without_a_key_is_refused_before_it_is_read(path, refused):
    decision = decide(path=path, length=100, chunked=False, authorization=None)
    assert (decision.status == 401) is refused
    assert decide(path=path, length=100, chunked=False, authorization=b"Bearer k").key == ("k" if refused else None)


def test_an_id_is_one_path_segment():
    assert bridge.api_path("/threads/{thread_id}/memories/{memory_id}", {"thread_id": "../keys", "memory_id": "a/b"}) \
        == "/api/threads/..%2Fkeys/memories/a%2Fb"


@pytest.fixture
def writer():
    project = Project.objects.create(slug="mcp-http")
    return Caller(token=api_key_create(name="w", project=project, permission="write")[1], permission="write")


def test_the_keys_rate_limit_counts_each_tool_call(settings, writer):
    settings.OAM_API_RATE_LIMIT = 2
    for _ in range(2):
        assert not asyncio.run(call(writer, "list_threads", {})).is_error
    with pytest.raises(MCPError) as refused:
        asyncio.run(call(writer, "list_threads", {}))
    assert refused.value.code == RATE_LIMITED and 1 <= refused.value.data["retry_after"] <= 60


@pytest.mark.parametrize("wait", [61, -1, "soon", 1e9])
def test_an_extraction_wait_beyond_the_limit_is_the_apis_422_not_a_long_loop(writer, wait):
    asyncio.run(call(writer, "create_thread", {"thread_id": "w1", "user_id": "u", "agent_id": "a"}))
    progress = []

    async def note(*args):
        progress.append(args)

    result = asyncio.run(call(writer, "get_extraction_status", {"thread_id": "w1", "wait": wait}, progress=note))
    assert result.is_error and result.structured_content["status"] == 422 and "wait" in str(result.structured_content)
    assert progress == []
