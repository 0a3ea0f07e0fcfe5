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
* ``get_extraction_status`` with ``wait`` and a progress token waits in long polls of ``PROGRESS_SECONDS``
  and sends ``notifications/progress`` after each (jobs queued and running, the last job's counts), so a
  client follows an extraction to completion; without a token it is one long poll, as on REST.
* Ids in paths must be one path segment of at most ``MAX_ID_LENGTH`` characters (no ``/``), and query
  arguments fit an HTTP request line (``MAX_QUERY_BYTES``), as they must on REST: otherwise a tool error
  naming the field. ``tools/list`` counts against the key's rate limit like a JSON API request.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server import CacheHint, Server
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params

from memory.core.errors import lone_surrogate
from memory.extraction.waiting import MAX_EXTRACTION_WAIT_SECONDS
from memory.records.validators import MAX_ID_LENGTH
from threads.auth import permits
from threads.mcp import bridge
from threads.mcp.tools import BY_NAME, TOOLS, Catalogue, Tool
from threads.throttling import key_request_allowed, seconds_to_next_window

#: The ASGI scope key under which ``threads.mcp.http`` puts the request's ``Caller``.
CALLER = "oam.mcp.caller"

#: JSON-RPC error codes of refusals (the implementation-defined server range, JSON-RPC 2.0 section 5.1).
UNAUTHORIZED = -32001
FORBIDDEN = -32003
RATE_LIMITED = -32029

#: How long a client may cache tools/list (milliseconds): the tools change only when the service is deployed.
TOOLS_TTL_MS = 5 * 60 * 1000
#: Seconds of one slice of an extraction wait followed with progress notifications.
PROGRESS_SECONDS = 5.0
#: Bytes of a tool call's query arguments, URL-encoded: what an HTTP request line to ``/api/`` carries under
#: daphne (Twisted's ``HTTPChannel.MAX_LENGTH``, 16,384 bytes, less room for the method and path).
MAX_QUERY_BYTES = 15_000
#: Values of one query parameter that takes several (``?a=1&a=2``).
MAX_QUERY_VALUES = 100


@dataclass(frozen=True)
class Caller:
    """Who calls: the raw API key ``token``, its ``permission`` (read, write, admin), the thread the URL fixes
    (``thread_id``, or None), the client's address ``(host, port)`` and ``Host`` header for the JSON API
    request, and the key's row (``threads.models.ApiKey``: for counting requests that are not tool calls)."""

    token: str
    permission: str
    thread_id: str | None = None
    client: tuple[str, int] | None = None
    host: str | None = None
    key: Any = None

    async def api(self, method: str, path: str, *, query: dict[str, Any] | None = None,
                  body: Any = None) -> bridge.Answer:
        """``threads.mcp.bridge.api_call`` of ``method path`` as this caller (its key, address and Host)."""
        return await bridge.api_call(method, path, token=self.token, query=query, body=body, client=self.client,
                                     host=self.host)

    def allow_request(self) -> bool:
        """Count one request against the key's rate limit (``threads.throttling.key_request_allowed``, as the
        JSON API counts one); False once the key is over it. A tool call is counted by its JSON API request."""
        return key_request_allowed(self.key)


_catalogue: Catalogue | None = None


async def catalogue(caller: Caller) -> Catalogue:
    """The tools' schemas from this server's own OpenAPI document (read once per process)."""
    global _catalogue
    if _catalogue is None:
        answer = await caller.api("GET", bridge.API_ROOT + "/openapi.json")
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
        if not caller.allow_request():
            raise _rate_limited(seconds_to_next_window())
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
        wants_progress = progress_token_from_params(ctx.params) is not None
        return await call(caller, params.name, params.arguments,
                          progress=ctx.session.report_progress if wants_progress else None)

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


def _rate_limited(retry_after: int) -> MCPError:
    """The JSON-RPC error of a key over its rate limit, with ``retry_after`` seconds in ``data``."""
    return MCPError(RATE_LIMITED, "Too many requests for this key; retry later", {"retry_after": retry_after})


def _refusal(field: str, rule: str) -> types.CallToolResult:
    return _tool_error(422, {"detail": f"{field}: {rule}", "field": field})


def _number(value: Any) -> bool:
    """Whether ``value`` is a JSON number other than 0 (a wait to follow with progress)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def _path_rule(value: Any) -> str | None:
    """Why ``value`` cannot be an id in a JSON API path (one segment, as ``/api/`` takes it), or None."""
    if not isinstance(value, str):
        return "must be a string"
    if not value:
        return "must not be empty"
    if len(value) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters"
    if "/" in value:
        return "must not contain '/' (an id with '/' cannot be reached through an HTTP path)"
    if value in (".", ".."):
        return "must not be '.' or '..' (HTTP clients drop such path segments)"
    if lone_surrogate(value) is not None:
        return "must be valid Unicode (no lone surrogates)"
    return None


def _check_query(query: dict[str, Any], arrays: frozenset[str]) -> None:
    """Raise ``_Local`` for query arguments an HTTP request line could not carry, naming the field: a list
    where the parameter takes one value (``arrays``: those that take several, at most ``MAX_QUERY_VALUES``),
    a lone surrogate, or more than ``MAX_QUERY_BYTES`` in all (daphne's line limit for ``/api/``). The size
    is bounded by the characters first, so a huge argument is refused before it is encoded."""
    chars = 0
    for name, value in query.items():
        items = value if isinstance(value, list) else [value]
        if isinstance(value, list) and name not in arrays:
            raise _Local.refusal(name, "must be one value, not a list")
        if len(items) > MAX_QUERY_VALUES:
            raise _Local.refusal(name, f"at most {MAX_QUERY_VALUES} values")
        for item in items:
            if isinstance(item, list) or (isinstance(item, dict) and name in arrays):
                raise _Local.refusal(name, "must be a list of single values")
            text = bridge.query_text(item)
            if lone_surrogate(text) is not None:
                raise _Local.refusal(name, "must be valid Unicode (no lone surrogates)")
            chars += len(text)
            if chars > MAX_QUERY_BYTES:
                raise _Local.refusal(name, f"too long: the call's query arguments are over {MAX_QUERY_BYTES} bytes")
    if len(bridge.query_string(query)) > MAX_QUERY_BYTES:
        longest = max(query, key=lambda name: len(str(query[name])))
        raise _Local.refusal(longest, f"too long: the call's query arguments are over {MAX_QUERY_BYTES} bytes")


class _Local(Exception):
    """A tool call refused before its JSON API request: a JSON-RPC ``error``, or a tool error ``result``."""

    def __init__(self, error: MCPError | None = None, result: types.CallToolResult | None = None):
        super().__init__(error or result)
        self.error, self.result = error, result

    @classmethod
    def refusal(cls, field: str, rule: str) -> _Local:
        return cls(result=_refusal(field, rule))


async def call(caller: Caller, name: str, arguments: dict[str, Any] | None, *, progress=None) -> types.CallToolResult:
    """Call tool ``name`` with ``arguments`` for ``caller`` (see the module docstring for answers and errors).

    ``progress``: an ``async (progress, total, message)`` callable, for ``get_extraction_status``'s waits.
    A call that reaches the JSON API is counted against the key's rate limit there; one refused before it is
    counted here, so refusals cost a caller the same as calls (a refusal past the limit is ``RATE_LIMITED``).
    """
    try:
        return await _call(caller, name, arguments, progress)
    except _Local as refused:
        if not caller.allow_request():
            raise _rate_limited(seconds_to_next_window()) from None
        if refused.error is not None:
            raise refused.error from None
        return refused.result


async def _call(caller: Caller, name: str, arguments: dict[str, Any] | None, progress) -> types.CallToolResult:
    """``call``'s work; a refusal before the JSON API request raises ``_Local``."""
    tool = BY_NAME.get(name)
    if tool is None:
        raise _Local(MCPError(types.INVALID_PARAMS, f"unknown tool {name!r}"))
    if not permits(caller.permission, tool.permission):
        raise _Local(MCPError(FORBIDDEN, f"this key's permission is {caller.permission!r}; tool {name!r} "
                                         f"needs {tool.permission!r}"))
    if not visible(tool, caller):
        raise _Local(MCPError(types.INVALID_PARAMS, f"tool {name!r} is not served at a thread's URL; use /mcp"))
    if arguments is not None and not isinstance(arguments, dict):
        raise _Local(MCPError(types.INVALID_PARAMS, "arguments must be an object"))
    args = dict(arguments or {})
    thread_id = args.pop("thread_id", None) if tool.thread is not None else None
    if caller.thread_id is not None:
        if thread_id is not None and thread_id != caller.thread_id:
            raise _Local.refusal("thread_id", f"this MCP URL is fixed to thread {caller.thread_id!r}")
        thread_id = caller.thread_id
    if thread_id is not None and not isinstance(thread_id, str):
        raise _Local.refusal("thread_id", "must be a string")
    route = tool.thread if thread_id is not None and tool.thread is not None else tool.project
    if route is None:
        raise _Local.refusal("thread_id", "required")
    tools = await catalogue(caller)
    taken = tools.parameters(route)
    values: dict[str, Any] = {}
    for param in taken.path:
        value = thread_id if param == "thread_id" else args.pop(param, None)
        if value is None:
            raise _Local.refusal(param, "required")
        if rule := _path_rule(value):
            raise _Local.refusal(param, rule)
        values[param] = value
    query = {param: args.pop(param) for param in taken.query if param in args}
    _check_query(query, taken.arrays)
    if taken.body is None and args:
        field = sorted(args)[0]
        raise _Local.refusal(field, "not an argument of this tool" + (" with thread_id" if tool.project and
                                                                   thread_id is not None else ""))
    body = args if taken.body is not None else None
    path = bridge.api_path(route.path, values)
    if tool.name == "get_extraction_status" and progress is not None and _number(query.get("wait")):
        answer = await _wait_with_progress(caller, path, query, progress)
    else:
        answer = await caller.api(route.method, path, query=query, body=body)
    return _result(answer)


def _result(answer: bridge.Answer) -> types.CallToolResult:
    if answer.status == 401:
        raise MCPError(UNAUTHORIZED, "Unauthorized: the key is not an active API key")
    if answer.status == 429:
        raise _rate_limited(int(answer.retry_after or 60))
    if not answer.ok:
        return _tool_error(answer.status, answer.body)
    body = answer.body
    structured = body if isinstance(body, dict) else {"items": body} if isinstance(body, list) else {"ok": True}
    if answer.erased_since:  # as_of (issue #32): the API's X-OAM-Erased-Since header, as a field of the result
        structured = body = {**structured, "erased_since": True}
    text = json.dumps(body if body is not None else structured, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=structured)


async def _wait_with_progress(caller: Caller, path: str, query: dict[str, Any], progress) -> bridge.Answer:
    """The extraction long poll in slices of ``PROGRESS_SECONDS``, with a progress notification after each.

    Only for a client that asked for progress (a progress token): each slice is one JSON API request, so a
    wait of ``w`` seconds counts ``ceil(w / PROGRESS_SECONDS)`` against the key's rate limit. A wait outside
    0-60 seconds goes to the API as given, for its 422 naming ``wait``.
    """
    total = float(query["wait"])
    if not 0 <= total <= MAX_EXTRACTION_WAIT_SECONDS:
        return await caller.api("GET", path, query=query)
    started = time.monotonic()
    while True:
        left = max(0.0, total - (time.monotonic() - started))
        answer = await caller.api("GET", path, query={**query, "wait": min(PROGRESS_SECONDS, left)})
        if not answer.ok or answer.body.get("settled") or left <= PROGRESS_SECONDS:
            return answer
        state = answer.body
        last = state.get("last_job") or {}
        await progress(round(time.monotonic() - started, 3), total,
                       f"{state.get('queued_jobs', 0)} jobs queued, {state.get('running_jobs', 0)} running; "
                       f"last job {last.get('status', 'none')}: {last.get('memories_created', 0)} memories created")
