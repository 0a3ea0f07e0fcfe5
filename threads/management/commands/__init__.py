"""API key commands: ``create_api_key``, ``list_api_keys``, ``revoke_api_key``, ``rotate_api_key``; the MCP
server over stdio: ``mcp_stdio`` (``threads.mcp``)."""
