"""The README's MCP client configuration is valid JSON naming what exists: the endpoint and the command."""

import json
import re

from django.urls import resolve

from tests.browser.harness import ROOT
from threads.management.commands import mcp_stdio
from threads.mcp.http import _PATH

MARK = "<!-- mcp-config: tests/mcp/test_readme_mcp.py -->"


def test_the_readme_mcp_config_block_is_valid_and_points_at_the_server():
    text = (ROOT / "README.md").read_text()
    block = re.search(re.escape(MARK) + r"\n```json\n(.*?)\n```", text, re.DOTALL)
    assert block, "the README lost its MCP configuration block"
    servers = json.loads(block[1])["mcpServers"]
    http = next(server for server in servers.values() if server.get("type") == "http")
    path = re.sub(r"^https?://[^/]+", "", http["url"])
    assert _PATH.match(path) and http["headers"]["Authorization"].startswith("Bearer ")
    local = next(server for server in servers.values() if "command" in server)
    assert local["args"][1] == "mcp_stdio" and local["args"][0].endswith("manage.py")
    assert "OAM_API_KEY" in local["env"] and mcp_stdio.Command.help
    assert resolve("/api/openapi.json")  # the schema the tools are made from is served
