"""The MCP client configuration blocks (the README's and ``docs/agents.md``'s, marked
``tested: tests/mcp/test_readme_mcp.py``) are valid JSON naming what exists: the endpoint and the command."""

import json

import pytest
from django.urls import resolve

from tests.docs.blocks import DOCS, README, marked_for
from threads.management.commands import mcp_stdio
from threads.mcp.http import _PATH

HERE = "tests/mcp/test_readme_mcp.py"


@pytest.mark.parametrize("page", [README, DOCS / "agents.md"], ids=["README", "agents.md"])
def test_the_mcp_config_block_is_valid_and_points_at_the_server(page):
    [block] = marked_for(HERE, page, "json")
    servers = json.loads(block)["mcpServers"]
    http = next(server for server in servers.values() if server.get("type") == "http")
    path = http["url"].removeprefix("http://127.0.0.1:8000")
    assert _PATH.match(path) and http["headers"]["Authorization"].startswith("Bearer ")
    local = next(server for server in servers.values() if "command" in server)
    assert local["args"][1] == "mcp_stdio" and local["args"][0].endswith("manage.py")
    assert "OAM_API_KEY" in local["env"] and mcp_stdio.Command.help
    assert resolve("/api/openapi.json")  # the schema the tools are made from is served
