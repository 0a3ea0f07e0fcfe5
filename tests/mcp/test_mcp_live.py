"""The MCP server against a live daphne, through the official MCP Python client (``mcp`` 2.x) and over stdio.

One daphne (started as ``make serve`` starts it) with the scripted LLM on loopback, so extraction really
runs: the client connects as a 2026-07-28 client (no handshake) and as a legacy ``initialize`` client, lists
tools, creates a thread, adds messages, follows the extraction to completion, searches and renders a context
card. The same through ``manage.py mcp_stdio``. Refusals are checked on the wire: no key, a wrong key, a read
key calling a write tool, an unknown tool, a bad argument, a foreign Host, an unknown path.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.browser.harness import ROOT, ScriptedLlmServer, migrate_with_key, server_env, start_daphne, stop_process
from tests.docs.blocks import DOCS, marked_for
from threads.mcp.server import FORBIDDEN
from threads.mcp.tools import TOOLS


def _key(env: dict, *args: str) -> str:
    out = subprocess.run([sys.executable, "manage.py", "create_api_key", *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True, timeout=300).stdout
    return re.search(r"[A-Za-z0-9_-]{40,}", out)[0]


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """(base URL, write key, read key, environment, scripted LLM) of a daphne extracting with the scripted LLM."""
    directory = tmp_path_factory.mktemp("mcp-live")
    llm = ScriptedLlmServer().start()
    env = server_env(directory, llm_base_url=llm.base_url)
    key = migrate_with_key(env, "mcp")
    read_key = _key(env, "mcp-read", "--permission", "read")
    process, url = start_daphne(env, Path(directory) / "daphne.log")
    try:
        yield url, key, read_key, env, llm
    finally:
        stop_process(process)
        llm.stop()


def _client(url: str, key: str | None, *, mode: str = "2026-07-28", headers: dict | None = None) -> Client:
    http = httpx2.AsyncClient(headers={**({"Authorization": f"Bearer {key}"} if key else {}), **(headers or {})},
                              timeout=120)
    return Client(streamable_http_client(url, http_client=http), mode=mode)


def _data(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def _conversation(client: Client, thread_id: str | None, *, progress: list) -> dict:
    """Add messages, follow extraction, search and render a card; returns what each step answered."""
    args = {} if thread_id is None else {"thread_id": thread_id}
    ids = _data(await client.call_tool("add_messages", {**args, "messages": [
        {"role": "user", "content": "My sister Ingrid lives in Tromsø and keeps bees."},
        {"role": "assistant", "content": "Noted: Ingrid, Tromsø, bees."}]}))
    assert len(ids["ids"]) == 2

    async def on_progress(done, total, message):
        progress.append((done, total, message))

    state = _data(await client.call_tool("get_extraction_status", {**args, "wait": 60},
                                         progress_callback=on_progress))
    assert state["settled"] is True and state["pending_messages"] == 0, state
    assert state["last_job"]["status"] == "done" and state["last_job"]["memories_created"] >= 1, state
    memories = _data(await client.call_tool("list_memories", args))["items"]
    assert any("Ingrid" in memory["content"] for memory in memories), memories
    hits = _data(await client.call_tool("search", {**args, "query": "Who keeps bees?"}))["items"]
    assert hits and any("bees" in json.dumps(hit) for hit in hits)
    card = _data(await client.call_tool("get_context_card", {**args, "max_recent_messages": 2}))
    assert "Ingrid" in json.dumps(card)
    return {"ids": ids, "state": state, "hits": hits, "card": card}


def test_a_2026_client_lists_tools_adds_messages_follows_extraction_searches_and_renders_a_card(live):
    url, key, _read, _env, _llm = live

    async def run():
        async with _client(url + "/mcp", key) as client:
            assert client.protocol_version == "2026-07-28"
            tools = await client.list_tools()
            assert {tool.name for tool in tools.tools} == {tool.name for tool in TOOLS}
            assert tools.ttl_ms and tools.ttl_ms > 0
            search = next(tool for tool in tools.tools if tool.name == "search")
            assert search.annotations.read_only_hint is True and search.annotations.open_world_hint is False
            assert search.input_schema["required"] == ["query"]
            thread = _data(await client.call_tool("create_thread", {"thread_id": "mcp-1", "user_id": "u1",
                                                                    "agent_id": "a1"}))
            assert thread["thread_id"] == "mcp-1"
            return await _conversation(client, "mcp-1", progress=[])

    anyio.run(run)


def test_the_docs_python_client_example_runs_against_the_server(live, capsys):
    """``docs/agents.md``'s MCP client (the block marked ``tested: tests/mcp/test_mcp_live.py``), as pasted but
    for this server's address and key, on the thread ``c4`` it names."""
    url, key, _read, _env, _llm = live
    [code] = marked_for("tests/mcp/test_mcp_live.py", DOCS / "agents.md", "python")

    async def make_thread():
        async with _client(url + "/mcp", key) as client:
            _data(await client.call_tool("create_thread", {"thread_id": "c4", "user_id": "u4", "agent_id": "a4"}))

    anyio.run(make_thread)
    code = code.replace("http://127.0.0.1:8000", url).replace("<API key>", key)
    exec(compile(code, "agents.md (MCP client)", "exec"), {})  # noqa: S102 - the docs' own example
    assert "Ingrid keeps bees in Tromsø" in capsys.readouterr().out


def test_a_legacy_initialize_client_is_answered_too_and_sees_extraction_progress(live):
    url, key, _read, _env, llm = live
    progress = []

    async def run():
        async with _client(url + "/mcp", key, mode="legacy") as client:
            assert client.protocol_version != "2026-07-28"
            assert {tool.name for tool in (await client.list_tools()).tools} == {tool.name for tool in TOOLS}
            _data(await client.call_tool("create_thread", {"thread_id": "mcp-2", "user_id": "u2", "agent_id": "a1"}))
            return await _conversation(client, "mcp-2", progress=progress)

    llm.delay = 6.0  # each LLM answer takes a while: the extraction outlasts a five-second poll (PROGRESS_SECONDS)
    try:
        anyio.run(run)
    finally:
        llm.delay = 0.0
    assert len(progress) >= 1, progress
    assert [done for done, _total, _message in progress] == sorted({done for done, _t, _m in progress})
    assert all(total == 60 and "queued" in message for _done, total, message in progress), progress


def test_a_thread_url_fixes_the_thread_so_tools_need_no_ids(live):
    url, key, _read, _env, _llm = live

    async def run():
        async with _client(url + "/mcp", key) as client:
            _data(await client.call_tool("create_thread", {"thread_id": "mcp-3", "user_id": "u3", "agent_id": "a"}))
        async with _client(url + "/mcp/threads/mcp-3", key) as client:
            tools = (await client.list_tools()).tools
            assert "create_thread" not in {tool.name for tool in tools}
            assert all("thread_id" not in tool.input_schema.get("properties", {}) for tool in tools)
            await _conversation(client, None, progress=[])
            memory = _data(await client.call_tool("add_memory", {"content": "Ingrid's bees are Carniolan",
                                                                 "memory_type": "fact"}))
            assert memory["thread_id"] == "mcp-3"
            other = await client.call_tool("get_thread", {"thread_id": "mcp-1"})
            assert other.is_error and other.structured_content["field"] == "thread_id"

    anyio.run(run)


def test_refusals_are_json_rpc_errors_or_tool_errors_naming_the_field_never_a_500(live):
    url, key, read_key, _env, _llm = live

    async def run():
        async with _client(url + "/mcp", read_key) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert names == {tool.name for tool in TOOLS if tool.read_only}
            with pytest.raises(MCPError) as refused:
                await client.call_tool("add_memory", {"thread_id": "mcp-1", "content": "planted"})
            assert refused.value.code == FORBIDDEN and "read" in refused.value.message
        async with _client(url + "/mcp", key) as client:
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("drop_everything", {})
            assert unknown.value.code == -32602
            bad = await client.call_tool("add_memory", {"thread_id": "mcp-1", "content": 42})
            assert bad.is_error and bad.structured_content["status"] == 422
            assert "content" in json.dumps(bad.structured_content["detail"])
            missing = await client.call_tool("get_memory", {"thread_id": "mcp-1"})
            assert missing.is_error and missing.structured_content["field"] == "memory_id"
            absent = await client.call_tool("get_memory", {"thread_id": "nope", "memory_id": "x"})
            assert absent.is_error and absent.structured_content["status"] == 404
            stray = await client.call_tool("get_thread", {"thread_id": "mcp-1", "limit": 3})
            assert stray.is_error and stray.structured_content["field"] == "limit"

    anyio.run(run)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2026-07-28"}
    with httpx2.Client(timeout=30) as http:
        nokey = http.post(url + "/mcp", content=body, headers=headers)
        assert nokey.status_code == 401 and nokey.headers["www-authenticate"].startswith("Bearer")
        wrong = http.post(url + "/mcp", content=body, headers={**headers, "Authorization": "Bearer wrong"})
        assert wrong.status_code == 401 and wrong.json()["detail"]
        host = http.post(url + "/mcp", content=body, headers={**headers, "Authorization": f"Bearer {key}",
                                                              "Host": "evil.example"})
        assert host.status_code == 400
        other = http.post(url + "/mcp/elsewhere", content=body, headers={**headers, "Authorization": f"Bearer {key}"})
        assert other.status_code == 404


def test_stdio_serves_the_same_tools_for_one_key(live):
    _url, key, read_key, env, _llm = live
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp_stdio"], cwd=str(ROOT),
                                   env={**env, "OAM_API_KEY": key})

    async def run():
        async with Client(params, mode="2026-07-28") as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == {tool.name for tool in TOOLS}
            _data(await client.call_tool("create_thread", {"thread_id": "mcp-4", "user_id": "u4", "agent_id": "a"}))
            await _conversation(client, "mcp-4", progress=[])
        async with Client(params, mode="legacy") as client:
            assert (await client.list_tools()).tools

    anyio.run(run)
    refused = subprocess.run([sys.executable, "manage.py", "mcp_stdio", "--key", "wrong"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and "not an active API key" in refused.stderr and refused.stdout == ""


#: The MCP Inspector's CLI (npm ``@modelcontextprotocol/inspector``), installed into the venv by ``make install``.
INSPECTOR = Path(sys.prefix) / "inspector" / "node_modules" / ".bin" / "mcp-inspector"


def _inspector(url: str, key: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the Inspector's CLI with ``home`` as its home (its catalog and state stay in the test's folder)."""
    return subprocess.run([str(INSPECTOR), "--cli", url, "--transport", "http",
                           "--header", f"Authorization: Bearer {key}", *args],
                          capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          env={**os.environ, "HOME": str(home), "MCP_CATALOG_PATH": str(home / "mcp.json")})


def test_the_mcp_inspector_cli_lists_and_calls_tools(live, tmp_path):
    """A client we did not write: the MCP Inspector's CLI lists the tools (checking their schemas' portability
    with ``--strict``) and calls two of them against the live server."""
    url, key, _read, _env, _llm = live
    assert INSPECTOR.exists(), "run make install (it installs the MCP Inspector CLI into the venv)"
    catalog = tmp_path
    listed = _inspector(url + "/mcp", key, catalog, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    names = {tool["name"] for tool in json.loads(listed.stdout)["tools"]}
    assert names == {tool.name for tool in TOOLS}
    made = _inspector(url + "/mcp", key, catalog, "--method", "tools/call", "--tool-name", "create_thread",
                      "--tool-arg", "thread_id=mcp-insp", "user_id=u9", "agent_id=a9")
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    assert json.loads(made.stdout)["structuredContent"]["thread_id"] == "mcp-insp"
    added = _inspector(url + "/mcp/threads/mcp-insp", key, catalog, "--method", "tools/call",
                       "--tool-name", "add_memory", "--tool-arg", "content=Ingrid keeps Carniolan bees")
    assert added.returncode == 0, added.stdout[-2000:] + added.stderr[-2000:]
    assert json.loads(added.stdout)["structuredContent"]["content"] == "Ingrid keeps Carniolan bees"
    found = _inspector(url + "/mcp/threads/mcp-insp", key, catalog, "--method", "tools/call",
                       "--tool-name", "search", "--tool-arg", "query=Carniolan")
    assert found.returncode == 0 and "Carniolan" in found.stdout, found.stdout[-2000:] + found.stderr[-2000:]
