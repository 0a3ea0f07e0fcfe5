"""``manage.py mcp_stdio --key <API key> [--thread <thread_id>]``: the MCP server over stdio, for local clients.

A client (Claude Desktop, an IDE, the MCP Inspector, ``mcp.client.stdio``) starts this command and speaks
JSON-RPC on its stdin and stdout (MCP stdio transport; ``mcp`` 2.x serves 2026-07-28 clients and older ones
that begin with ``initialize``). The tools, their schemas and answers are those of ``/mcp``
(``threads.mcp.server``): every call is a JSON API request in this process with this key, so the key's
permission, user and agent restriction, rate limit and the API's limits apply. ``--thread`` fixes a thread as
``/mcp/threads/{thread_id}`` does. The key may come from ``OAM_API_KEY`` instead of ``--key`` (a command line
is visible to other local users; the environment is not).

A key that is not active is refused before anything is served (``CommandError``, exit status 1). Nothing but
JSON-RPC is written to stdout; logs go to stderr.
"""

from __future__ import annotations

import os

import anyio
from django.core.management.base import BaseCommand, CommandError
from mcp.server.stdio import stdio_server

from threads.auth import api_key_lookup
from threads.mcp.server import Caller, build_server


class Command(BaseCommand):
    help = "Serve the MCP tools over stdio for one API key (optionally fixed to one thread)."

    def add_arguments(self, parser):
        parser.add_argument("--key", default=None, help="The API key (default: $OAM_API_KEY).")
        parser.add_argument("--thread", default=None, help="Fix this thread, as /mcp/threads/{thread_id} does.")

    def handle(self, *args, key=None, thread=None, **options):
        token = key or os.environ.get("OAM_API_KEY")
        if not token:
            raise CommandError("give --key <API key> or set OAM_API_KEY")
        row = api_key_lookup(token)
        if row is None:
            raise CommandError("the key is not an active API key")
        server = build_server(Caller(token=token, permission=row.permission, thread_id=thread,
                                     client=("stdio", 0), host="localhost", key=row))

        async def serve() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(serve)
