"""The MCP server: the JSON API's memory methods as MCP tools, over Streamable HTTP (``/mcp``) and stdio.

Modules:

* ``tools``: the tools (named after the spec's methods), the JSON API routes each one stands for, and their
  input schemas generated from the API's OpenAPI document;
* ``server``: the ``mcp`` SDK's low-level ``Server``: tools/list and tools/call for a ``Caller`` (key,
  permission, fixed thread), refusals as JSON-RPC errors, API errors as tool errors, extraction progress;
* ``bridge``: one JSON API request made in this process through Django's ASGI handler (how a tool call
  reaches the engine, with the API's auth, limits, validators and error mapping);
* ``http``: the ASGI app of ``/mcp`` and ``/mcp/threads/{thread_id}`` (Host and key checks, the SDK's
  stateless session manager); ``oam_site.asgi`` routes to it.

The stdio transport is ``manage.py mcp_stdio`` (``threads/management/commands/mcp_stdio.py``).
"""
