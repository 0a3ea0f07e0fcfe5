"""The MCP server (``mcp`` 2.x low-level ``Server``): tools/list and tools/call over the JSON API.

One ``Server`` serves both transports: Streamable HTTP at ``/mcp`` (``threads.mcp.http``) and stdio
(``manage.py mcp_stdio``). Each request carries a ``Caller``: the API key's raw token and row, the thread the
URL fixes (if any), and the client's address. The transport sets it (HTTP: on the ASGI scope, under
``CALLER``; stdio: once, for the process).

* ``tools/list`` lists the tools the key may call (a read key: read tools only), with input schemas from
  ``threads.mcp.tools.Catalogue``; results carry a ``ttlMs`` cache hint (the list changes only with a
  deploy).
* ``tools/call`` checks the tool and the key's permission, routes the arguments to the tool's JSON API
  request (path, query, body) and makes it in process (``threads.mcp.bridge``). A 2xx answer is the tool's
  result: its JSON as text and as ``structuredContent`` (a list under ``items``). A 4xx naming a field and
  rule is a tool error (``isError``, the API's JSON body with its ``status``), which the agent's model sees
  and can act on. Refusals of the call itself are JSON-RPC errors, never a 500: an unknown tool or an
  argument of the wrong shape ``-32602`` (invalid params), a tool beyond the key's permission
  ``FORBIDDEN``, a key no longer usable ``UNAUTHORIZED``, the key's rate limit ``RATE_LIMITED`` (with
  ``retry_after`` seconds in ``data``).
* ``get_extraction_status`` with ``wait`` and a progress token waits in one-second long polls and sends
  ``notifications/progress`` after each (jobs queued and running, the last job's counts), so a client
  follows an extraction to completion as the WebSocket shows it.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server import CacheHint, Server
from mcp.shared.exceptions import MCPError

from memory.extraction.waiting import MAX_EXTRACTION_WAIT_SECONDS
from threads.auth import permits
from threads.mcp import bridge
from threads.mcp.tools import BY_NAME, TOOLS, Catalogue, Tool

#: The ASGI scope key under which ``threads.mcp.http`` puts the request's ``Caller``.
CALLER = "oam.mcp.caller"

#: JSON-RPC error codes of refusals (the implementation-defined server range, JSON-RPC 2.0 section 5.1).
UNAUTHORIZED = -32001
FORBIDDEN = -32003
RATE_LIMITED = -32029

#: How long a client may cache tools/list (milliseconds): the tools change only when the service is deployed.
TOOLS_TTL_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class Caller:
    """Who calls: the raw API key ``token``, its ``permission`` (read, write, admin), the thread the URL fixes
    (``thread_id``, or None) and the client's address ``(host, port)`` and ``Host`` header for the JSON API
    request."""

    token: str
    permission: str
    thread_id: str | None = None
    client: tuple[str, int] | None = None
    host: str | None = None


_catalogue: Catalogue | None = None


async def catalogue(caller: Caller) -> Catalogue:
    """The tools' schemas from this server's own OpenAPI document (read once per process)."""
    global _catalogue
    if _catalogue is None:
        answer = await bridge.api_call("GET", bridge.API_ROOT + "/openapi.json", token=caller.token,
                                       client=caller.client, host=caller.host)
        if not answer.ok:
            raise MCPError(types.INTERNAL_ERROR, f"the JSON API's schema answered {answer.status}")
        _catalogue = Catalogue(answer.body)
    return _catalogue


def _caller(ctx, fixed: Caller | None) -> Caller:
    if fixed is not None:
        return fixed
    request = getattr(ctx, "request", None)
    caller = getattr(request, "scope", {}).get(CALLER) if request is not None else None
    if caller is None:
        raise MCPError(UNAUTHORIZED, "Unauthorized: send Authorization: Bearer <API key>")
    return caller


def visible(tool: Tool, caller: Caller) -> bool:
    """Whether ``caller`` may list and call ``tool``: its key's permission covers the tool's, and a URL fixed to
    a thread keeps only the tools that act on a thread."""
    return permits(caller.permission, tool.permission) and (caller.thread_id is None or tool.thread is not None)


def build_server(fixed: Caller | None = None) -> Server:
    """The MCP ``Server``; ``fixed``: the one caller of a stdio process (HTTP callers come with each request)."""

    async def list_tools(ctx, params) -> types.ListToolsResult:
        caller = _caller(ctx, fixed)
        tools = await catalogue(caller)
        return types.ListToolsResult(tools=[
            types.Tool(name=tool.name, title=tool.title, description=tool.description,
                       input_schema=tools.schema(tool, fixed_thread=caller.thread_id is not None),
                       annotations=types.ToolAnnotations(
                           title=tool.title, read_only_hint=tool.read_only, destructive_hint=tool.destructive,
                           idempotent_hint=tool.idempotent, open_world_hint=False))
            for tool in TOOLS if visible(tool, caller)])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        caller = _caller(ctx, fixed)
        return await call(caller, params.name, params.arguments, progress=ctx.session.report_progress)

    return Server(
        "oam-site", version=_version(), title="OAM Site memory",
        instructions=("Durable memory for this agent: threads of messages, memories extracted from them, "
                      "search and context cards. Add the conversation with add_messages, recall with search "
                      "or get_context_card, keep facts with add_memory."),
        cache_hints={"tools/list": CacheHint(ttl_ms=TOOLS_TTL_MS)},
        on_list_tools=list_tools, on_call_tool=call_tool,
    )


def _version() -> str:
    return getattr(settings, "OAM_VERSION", "") or "1"


def _tool_error(status: int, body: Any) -> types.CallToolResult:
    """A tool error the agent sees: the API's JSON answer with its HTTP ``status``."""
    detail = body if isinstance(body, dict) else {"detail": body}
    data = {"status": status, **detail}
    return types.CallToolResult(content=[types.TextContent(text=json.dumps(data, ensure_ascii=False))],
                                structured_content=data, is_error=True)


def _refusal(field: str, rule: str) -> types.CallToolResult:
    return _tool_error(422, {"detail": f"{field}: {rule}", "field": field})


async def call(caller: Caller, name: str, arguments: dict[str, Any] | None, *, progress=None) -> types.CallToolResult:
    """Call tool ``name`` with ``arguments`` for ``caller`` (see the module docstring for answers and errors).

    ``progress``: an ``async (progress, total, message)`` callable, for ``get_extraction_status``'s waits.
    """
    tool = BY_NAME.get(name)
    if tool is None:
        raise MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}")
    if not permits(caller.permission, tool.permission):
        raise MCPError(FORBIDDEN, f"this key's permission is {caller.permission!r}; tool {name!r} needs "
                                  f"{tool.permission!r}")
    if not visible(tool, caller):
        raise MCPError(types.INVALID_PARAMS, f"tool {name!r} is not served at a thread's URL; use /mcp")
    if arguments is not None and not isinstance(arguments, dict):
        raise MCPError(types.INVALID_PARAMS, "arguments must be an object")
    args = dict(arguments or {})
    thread_id = args.pop("thread_id", None) if tool.thread is not None else None
    if caller.thread_id is not None:
        if thread_id is not None and thread_id != caller.thread_id:
            return _refusal("thread_id", f"this MCP URL is fixed to thread {caller.thread_id!r}")
        thread_id = caller.thread_id
    if thread_id is not None and not isinstance(thread_id, str):
        return _refusal("thread_id", "must be a string")
    route = tool.thread if thread_id is not None and tool.thread is not None else tool.project
    if route is None:
        return _refusal("thread_id", "required")
    tools = await catalogue(caller)
    taken = tools.parameters(route)
    values: dict[str, Any] = {}
    for param in taken.path:
        value = thread_id if param == "thread_id" else args.pop(param, None)
        if value is None:
            return _refusal(param, "required")
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            return _refusal(param, "must be a string")
        values[param] = value
    query = {param: args.pop(param) for param in taken.query if param in args}
    if taken.body is None and args:
        field = sorted(args)[0]
        return _refusal(field, "not an argument of this tool" + (" with thread_id" if tool.project and
                                                                   thread_id is not None else ""))
    body = args if taken.body is not None else None
    path = bridge.api_path(route.path, values)
    if tool.name == "get_extraction_status" and progress is not None and query.get("wait"):
        answer = await _wait_with_progress(caller, path, query, progress)
    else:
        answer = await bridge.api_call(route.method, path, token=caller.token, query=query, body=body,
                                       client=caller.client, host=caller.host)
    return _result(answer)


def _result(answer: bridge.Answer) -> types.CallToolResult:
    if answer.status == 401:
        raise MCPError(UNAUTHORIZED, "Unauthorized: the key is not an active API key")
    if answer.status == 429:
        raise MCPError(RATE_LIMITED, "Too many requests for this key; retry later",
                       {"retry_after": int(answer.retry_after or 60)})
    if not answer.ok:
        return _tool_error(answer.status, answer.body)
    body = answer.body
    structured = body if isinstance(body, dict) else {"items": body} if isinstance(body, list) else {"ok": True}
    text = json.dumps(body if body is not None else structured, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


async def _wait_with_progress(caller: Caller, path: str, query: dict[str, Any], progress) -> bridge.Answer:
    """The extraction long poll in slices of at most a second, with a progress notification after each."""
    try:
        total = float(query["wait"])
    except (TypeError, ValueError):
        total = math.nan
    if not 0 <= total <= MAX_EXTRACTION_WAIT_SECONDS:  # the API names the field and the rule
        return await bridge.api_call("GET", path, token=caller.token, query=query, client=caller.client,
                                     host=caller.host)
    started = time.monotonic()
    while True:
        left = max(0.0, total - (time.monotonic() - started))
        answer = await bridge.api_call("GET", path, token=caller.token, query={**query, "wait": min(1.0, left)},
                                       client=caller.client, host=caller.host)
        if not answer.ok or answer.body.get("settled") or left <= 1.0:
            return answer
        state = answer.body
        last = state.get("last_job") or {}
        await progress(round(time.monotonic() - started, 3), total,
                       f"{state.get('queued_jobs', 0)} jobs queued, {state.get('running_jobs', 0)} running; "
                       f"last job {last.get('status', 'none')}: {last.get('memories_created', 0)} memories created")
