"""The MCP door's own rules, in process: the body gate, rate limits, waits, ids that cannot leave their route."""

import asyncio

import pytest
from mcp.shared.exceptions import MCPError

from memory.models import Project
from oam_site.request_gate import decide
from tests.ids import key
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
    assert bridge.api_path("/threads/{thread_id}/memories/{memory_id}", {"thread_id": "..", "memory_id": "a b"}) \
        == "/api/threads/../memories/a b"
    with pytest.raises(ValueError):
        bridge.api_path("/threads/{thread_id}", {"thread_id": "../keys"})


@pytest.fixture
def writer():
    project = Project.objects.create(slug="mcp-http")
    row, raw = api_key_create(name="w", project=project, permission="write")
    return Caller(token=raw, permission="write", key=row)


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


@pytest.mark.parametrize("path", [b"/mc%70", b"/%6dcp/threads/x", b"/%61pi/threads", b"/mcp%2Fthreads"])
def test_a_percent_encoded_path_is_gated_as_the_path_it_decodes_to(path):
    assert decide(path=path, length=100, chunked=False, authorization=None).status == 401


def test_ids_reach_the_record_they_name_whatever_their_characters(writer):
    for thread_id, user in (("café", "u1"), ("caf%C3%A9", "u2"), ("a b+c@d:e?f#g", "u3")):
        made = asyncio.run(call(writer, "create_thread", {"thread_id": thread_id, "user_id": user, "agent_id": "a"}))
        assert not made.is_error, made.structured_content
    asyncio.run(call(writer, "add_messages", {"thread_id": "café", "messages": [{"role": "user", "content": "u1's"}]}))
    got = asyncio.run(call(writer, "get_thread", {"thread_id": "café"})).structured_content
    assert (got["thread_id"], got["user_id"]) == ("café", "u1")
    other = asyncio.run(call(writer, "get_messages", {"thread_id": "caf%C3%A9"})).structured_content
    assert other["items"] == []
    odd = asyncio.run(call(writer, "get_thread", {"thread_id": "a b+c@d:e?f#g"})).structured_content
    assert odd["user_id"] == "u3"


@pytest.mark.parametrize("args, field, rule", [
    ({"thread_id": "x" * 256}, "thread_id", "at most 255"),
    ({"thread_id": "a/b"}, "thread_id", "'/'"),
    ({"thread_id": ""}, "thread_id", "empty"),
    ({"thread_id": ".."}, "thread_id", "'..'"),
    ({"thread_id": "\ud800"}, "thread_id", "surrogate"),
    ({"thread_id": "t", "memory_id": "\udfff"}, "memory_id", "surrogate"),
])
def test_an_id_that_is_not_one_path_segment_is_a_tool_error_naming_it(writer, args, field, rule):
    name = "get_memory" if "memory_id" in args else "get_thread"
    result = asyncio.run(call(writer, name, args))
    assert result.is_error and result.structured_content["field"] == field
    assert rule in result.structured_content["detail"]


@pytest.mark.parametrize("args, field, rule", [
    ({"user_id": "\ud800"}, "user_id", "surrogate"),
    ({"user_id": "u", "metadata_filter": "{" + " " * 20_000 + "}"}, "metadata_filter", "too long"),
    ({"user_id": ["a"] * 600_000}, "user_id", "one value"),  # took 4 s on the event loop before
    ({"user_id": ["u1", "u2"]}, "user_id", "one value"),  # was ?user_id=u1&user_id=u2, the last one winning
    ({"metadata_filter": ['{"v": 5}', "{}"]}, "metadata_filter", "one value"),
    ({"user_id": "u", "limit": [1, 2]}, "limit", "one value"),
])
def test_query_arguments_must_be_single_values_that_fit_a_request_line(writer, args, field, rule):
    result = asyncio.run(call(writer, "list_memories", args))
    assert result.is_error and result.structured_content["field"] == field
    assert rule in result.structured_content["detail"]


def test_refused_calls_count_against_the_keys_rate_limit(settings, writer):
    settings.OAM_API_RATE_LIMIT = 3
    for _ in range(3):
        assert asyncio.run(call(writer, "get_thread", {"thread_id": "a/b"})).is_error
    with pytest.raises(MCPError) as refused:
        asyncio.run(call(writer, "drop_everything", {}))
    assert refused.value.code == RATE_LIMITED


def test_an_extraction_wait_is_one_request_unless_progress_is_asked_for(writer, monkeypatch):
    from memory.models import ExtractionJob, Thread
    asyncio.run(call(writer, "create_thread", {"thread_id": "w2", "user_id": "u", "agent_id": "a"}))
    row = Thread.objects.get(pk=key("w2", "mcp-http"))
    ExtractionJob.objects.create(thread=row, project=row.project, from_seq=1, to_seq=1, status="running")
    calls = []
    real = bridge.api_call

    async def counted(*args, **kwargs):
        calls.append(kwargs.get("query"))
        return await real(*args, **kwargs)

    monkeypatch.setattr(bridge, "api_call", counted)
    plain = asyncio.run(call(writer, "get_extraction_status", {"thread_id": "w2", "wait": 1}))
    assert plain.structured_content["settled"] is False and len(calls) == 1
    calls.clear()
    notes = []

    async def note(*args):
        notes.append(args)

    followed = asyncio.run(call(writer, "get_extraction_status", {"thread_id": "w2", "wait": 6}, progress=note))
    assert followed.structured_content["settled"] is False
    assert [query["wait"] for query in calls] == [5.0, pytest.approx(1.0, abs=0.2)] and len(notes) == 1
    calls.clear()
    typed = asyncio.run(call(writer, "get_extraction_status", {"thread_id": "w2", "wait": True}, progress=note))
    assert typed.is_error and typed.structured_content["status"] == 422 and len(calls) == 1


def test_tools_list_counts_against_the_keys_rate_limit(settings, writer):
    from mcp import Client

    from threads.mcp.server import build_server
    settings.OAM_API_RATE_LIMIT = 2
    fixed = writer

    async def run():
        async with Client(build_server(fixed), cache=None) as client:
            await client.list_tools()
            await client.list_tools()
            with pytest.raises(MCPError) as refused:
                await client.list_tools()
            return refused.value

    refused = asyncio.run(run())
    assert refused.code == RATE_LIMITED and refused.data["retry_after"] >= 1


def test_the_memory_tools_take_the_validity_window_and_valid_at(writer):
    """Valid time (issue #32) through MCP: the tools' schemas come from the API's, so add_memory/update_memory take
    valid_from/valid_to, search/list_memories/get_context_card take valid_at, and a bad value is the API's 422."""
    def tool(name, args):
        return asyncio.run(call(writer, name, args))

    tool("create_thread", {"thread_id": "vt", "user_id": "u", "agent_id": "a"})
    made = tool("add_memory", {"thread_id": "vt", "content": "Lives in Lyon", "memory_id": "lyon",
                               "valid_to": "2024-06-01"}).structured_content
    assert made["valid_to"] == "2024-06-01T00:00:00+00:00" and made["valid_from"] is None
    tool("add_memory", {"thread_id": "vt", "content": "Lives in Paris", "memory_id": "paris",
                        "valid_from": "2024-06-01"})
    listed = tool("list_memories", {"thread_id": "vt", "valid_at": "2025-01-01"}).structured_content
    assert [m["id"] for m in listed["items"]] == ["paris"]
    across = tool("list_memories", {"valid_at": "2020-01-01"}).structured_content
    assert [m["id"] for m in across["items"]] == ["lyon"]
    hits = tool("search", {"thread_id": "vt", "query": "lives", "valid_at": "2020-01-01"}).structured_content
    assert [hit["record_id"] for hit in hits["items"]] == ["lyon"]
    changed = tool("update_memory", {"memory_id": "lyon", "valid_to": None}).structured_content
    assert changed["valid_to"] is None
    refused = tool("search", {"thread_id": "vt", "query": "lives", "valid_at": "whenever"})
    assert refused.is_error and refused.structured_content["status"] == 422 and "valid_at" in str(
        refused.structured_content)
    card = tool("get_context_card", {"thread_id": "vt", "valid_at": "2020-01-01"})
    assert not card.is_error


def test_the_memory_tools_take_as_of(writer):
    """Recorded time (issue #32) through MCP: get_memory, list_memories and search take as_of (the API's schemas);
    an edit made since is undone, a bad value is the API's 422 naming it."""
    import time

    from django.utils import timezone

    def tool(name, args):
        return asyncio.run(call(writer, name, args))

    tool("create_thread", {"thread_id": "ao", "user_id": "u", "agent_id": "a"})
    tool("add_memory", {"thread_id": "ao", "content": "Lives in Lyon", "memory_id": "home"})
    time.sleep(0.005)
    then = timezone.now().isoformat()
    time.sleep(0.005)
    tool("update_memory", {"thread_id": "ao", "memory_id": "home", "content": "Lives in Paris"})
    got = tool("get_memory", {"thread_id": "ao", "memory_id": "home", "as_of": then}).structured_content
    assert got["content"] == "Lives in Lyon"
    listed = tool("list_memories", {"thread_id": "ao", "as_of": then}).structured_content
    assert [m["content"] for m in listed["items"]] == ["Lives in Lyon"]
    across = tool("list_memories", {"user_id": "u", "as_of": then}).structured_content
    assert [m["content"] for m in across["items"]] == ["Lives in Lyon"] and "erased_since" not in across
    hits = tool("search", {"thread_id": "ao", "query": "lives", "as_of": then}).structured_content
    assert hits["items"][0]["record"]["content"] == "Lives in Lyon"
    refused = tool("search", {"thread_id": "ao", "query": "lives", "as_of": "whenever"})
    assert refused.is_error and refused.structured_content["status"] == 422 and "as_of" in str(
        refused.structured_content)
    from memory.client import AgentMemory

    tool("create_thread", {"thread_id": "gone", "user_id": "leaver", "agent_id": "a"})
    tool("add_memory", {"thread_id": "gone", "content": "The leaver's note"})
    before_erasure = timezone.now().isoformat()
    time.sleep(0.005)
    project = Project.objects.get(slug="mcp-http")
    AgentMemory(project=project, llm=None).erase_user("leaver")
    erased = tool("list_memories", {"user_id": "leaver", "as_of": before_erasure}).structured_content
    assert erased == {**erased, "items": []} and "erased_since" not in erased  # a write key is not told
    row, raw = api_key_create(name="admin", project=project, permission="admin")
    admin = Caller(token=raw, permission="admin", key=row)  # an admin key is, as the erasure receipts tell it
    erased = asyncio.run(call(admin, "list_memories", {"user_id": "leaver", "as_of": before_erasure}))
    assert erased.structured_content["items"] == [] and erased.structured_content["erased_since"] is True
    searched = asyncio.run(call(admin, "search", {"query": "note", "user_id": "leaver", "as_of": before_erasure}))
    assert searched.structured_content == {"items": [], "erased_since": True}
