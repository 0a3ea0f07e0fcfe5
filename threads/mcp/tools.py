"""The MCP tools: each one the JSON API request (or pair of requests) it stands for, and its JSON Schema.

A tool is named after the spec's method (``../spec``: ``add_messages``,
``search``, ``get_context_card`` ...) and made of the JSON API routes that serve
that method: a thread's route, and for the methods the API also serves across a
project (``search``, ``list_memories``, ``update_memory``, ``delete_memory``) the
project's route, taken when no thread is given. Its input schema is generated
from the API's OpenAPI document, so the same ninja schemas (``threads.schemas``)
validate REST and MCP: the route's path parameters (``thread_id`` apart), its
query parameters and its JSON body's properties, with the referenced component
schemas under ``$defs``. ``thread_id`` is an argument unless the MCP URL fixes
it (``/mcp/threads/{thread_id}``: ``threads.mcp.http``), so an agent's tools
then need no ids.

``permission`` is what the routes need (``threads.api.common``: ``READ`` or
write); ``tests/mcp/test_tools.py`` checks it against each route's own ninja auth,
and a read key is shown and may call only read tools. Annotations follow the
MCP tool annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``,
``openWorldHint``: false, every tool acts on this service's own data only).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

#: The JSON API's component schemas are referenced as ``#/components/schemas/<name>`` in OpenAPI and as
#: ``#/$defs/<name>`` in a tool's input schema.
_REF = re.compile(r"^#/components/schemas/(.+)$")


@dataclass(frozen=True)
class Route:
    """One JSON API route: HTTP ``method`` and ``path`` below ``/api`` (as OpenAPI names it, with ``{params}``)."""

    method: str
    path: str


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its spec name, the routes that serve it, the permission they need and its annotations.

    ``thread``: the route taken with a thread (given, or fixed by the URL); ``project``: the route taken
    without one (None: a thread is required). ``read_only``/``destructive``/``idempotent``: the MCP
    annotations.
    """

    name: str
    title: str
    description: str
    thread: Route | None
    project: Route | None = None
    permission: str = "write"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False

    def routes(self) -> list[Route]:
        """The tool's routes, thread's first."""
        return [route for route in (self.thread, self.project) if route is not None]


def _read(name, title, description, thread, project=None) -> Tool:
    return Tool(name, title, description, thread, project, permission="read", read_only=True, idempotent=True)


TOOLS: tuple[Tool, ...] = (
    Tool("create_thread", "Create a thread",
         "Create a thread of messages for a user and an agent (spec: create_thread); returns the stored thread.",
         None, Route("POST", "/threads")),
    _read("get_thread", "Get a thread", "The thread: ids, metadata and settings (spec: get_thread).",
          Route("GET", "/threads/{thread_id}")),
    _read("list_threads", "List threads", "Threads visible to this key, oldest first; filter by user_id or "
          "agent_id.", None, Route("GET", "/threads")),
    Tool("add_messages", "Add messages",
         "Append messages to the thread (spec: add_messages); extraction of memories follows in the background "
         "when the thread extracts. Returns the message ids.", Route("POST", "/threads/{thread_id}/messages")),
    _read("get_messages", "Get messages", "The thread's messages, oldest first: the most recent page, "
          "limit/offset, or start/end indexes (spec: get_messages).", Route("GET", "/threads/{thread_id}/messages")),
    _read("search", "Search memory",
          "Search messages, memories and images by meaning and keywords (spec: search). With a thread: that "
          "thread's user and agent by default; without one: user_id is required and matched exactly. as_of "
          "answers as the store stood at that instant (erased_since: true when its user was erased since).",
          Route("POST", "/threads/{thread_id}/search"), Route("POST", "/search")),
    _read("get_summary", "Get the thread summary", "The running summary of the thread (spec: get_summary).",
          Route("GET", "/threads/{thread_id}/summary")),
    _read("get_context_card", "Get a context card",
          "A context card for the thread: summary and the memories relevant to the query, ready to put in a "
          "prompt (spec: get_context_card).", Route("POST", "/threads/{thread_id}/context-card")),
    Tool("add_memory", "Add a memory", "Store a memory (memory, fact, guideline or preference) in the thread's "
         "scope (spec: add_memory); returns the stored memory.", Route("POST", "/threads/{thread_id}/memories")),
    _read("get_memory", "Get a memory", "One memory of the thread by id (spec: get_memory); as_of: as it was "
          "at that instant.",
          Route("GET", "/threads/{thread_id}/memories/{memory_id}")),
    Tool("update_memory", "Update a memory", "Change a memory's content, metadata, status, expiry or validity "
         "window (valid_from/valid_to) (spec: update_memory); the change is kept in its history.",
         Route("PATCH", "/threads/{thread_id}/memories/{memory_id}"), Route("PATCH", "/memories/{memory_id}"),
         idempotent=True),
    Tool("delete_memory", "Delete a memory", "Delete a memory and its relations (spec: delete_memory).",
         Route("DELETE", "/threads/{thread_id}/memories/{memory_id}"), Route("DELETE", "/memories/{memory_id}"),
         destructive=True, idempotent=True),
    _read("list_memories", "List memories", "Memories of the thread (by memory_type), or without a thread the "
          "project's memories filtered by user_id, agent_id, thread_id and metadata_filter; valid_at keeps those "
          "valid at that instant; as_of answers as the store stood at that instant (recorded time).",
          Route("GET", "/threads/{thread_id}/memories"), Route("GET", "/memories")),
    Tool("link_records", "Link two memories", "Relate two memories with a relation_type (spec: link_records); "
         "returns the relation.", Route("POST", "/threads/{thread_id}/links")),
    _read("get_memory_history", "Get a memory's history", "Every version of a memory, newest first: creates, "
          "changes, restores, with actor and reason.", Route("GET", "/threads/{thread_id}/memories/{memory_id}/"
                                                              "history")),
    _read("get_extraction_status", "Extraction status",
          "Where the thread's memory extraction stands; with wait (seconds, up to 60) waits until its jobs are "
          "done (settled) first, reporting progress when the client asks for it (spec: "
          "wait_for_memory_extraction).", Route("GET", "/threads/{thread_id}/extraction")),
)

BY_NAME = {tool.name: tool for tool in TOOLS}

THREAD_ID = {"type": "string", "description": "The thread; omit for the project-wide call where the tool has one."}


@dataclass(frozen=True)
class Parameters:
    """How one route takes a tool's arguments: ``path`` and ``query`` parameter names (``arrays``: the query
    parameters that take several values), and whether it has a JSON ``body`` (whose ``properties`` are the
    remaining arguments)."""

    path: tuple[str, ...]
    query: tuple[str, ...]
    body: dict[str, Any] | None
    arrays: frozenset[str] = frozenset()


class Catalogue:
    """The tools' input schemas and argument routing, built from the JSON API's OpenAPI document (a dict).

    ``schema(tool, fixed_thread)``: the JSON Schema of the tool's arguments (``thread_id`` left out when the
    URL fixes it, required when the tool has no project route). ``parameters(route)``: how a route takes
    them.
    """

    def __init__(self, openapi: dict[str, Any]):
        self.openapi = openapi
        self.components = openapi.get("components", {}).get("schemas", {})
        self._routes = {(route.method, route.path): self._parameters(route)
                        for tool in TOOLS for route in tool.routes()}

    def _operation(self, route: Route) -> dict[str, Any]:
        try:
            return self.openapi["paths"]["/api" + route.path][route.method.lower()]
        except KeyError:
            raise LookupError(f"the JSON API has no route {route.method} /api{route.path}") from None

    def _parameters(self, route: Route) -> Parameters:
        operation = self._operation(route)
        params = operation.get("parameters", [])
        body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body is not None:
            body = self._resolve(body)
        return Parameters(tuple(p["name"] for p in params if p["in"] == "path"),
                          tuple(p["name"] for p in params if p["in"] == "query"), body,
                          frozenset(p["name"] for p in params if p["in"] == "query" and _is_array(p.get("schema"))))

    def parameters(self, route: Route) -> Parameters:
        """How ``route`` takes a tool's arguments."""
        return self._routes[(route.method, route.path)]

    def _resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        match = _REF.match(schema.get("$ref", ""))
        return copy.deepcopy(self.components[match.group(1)]) if match else copy.deepcopy(schema)

    def schema(self, tool: Tool, *, fixed_thread: bool) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12, as MCP asks) of ``tool``'s arguments."""
        properties: dict[str, Any] = {}
        required: list[str] | None = None
        for route in tool.routes():
            operation, taken = self._operation(route), self.parameters(route)
            own: set[str] = set()
            for param in operation.get("parameters", []):
                if param["name"] == "thread_id" and tool.thread is not None:
                    continue  # the tool's own thread_id: a thread's route, or none for the project's
                properties.setdefault(param["name"], {**param.get("schema", {}),
                                                      **({"description": param["description"]}
                                                         if param.get("description") else {})})
                if param.get("required"):
                    own.add(param["name"])
            if taken.body is not None:
                for name, value in taken.body.get("properties", {}).items():
                    if name != "thread_id" or tool.thread is None:  # else the tool's thread_id stands for it
                        properties.setdefault(name, value)
                own.update(taken.body.get("required", []))
            required = own if required is None else required & own
        if tool.thread is not None and not fixed_thread:
            properties = {"thread_id": THREAD_ID, **properties}
            if tool.project is None:
                required = (required or set()) | {"thread_id"}
        result: dict[str, Any] = {"type": "object", "properties": _rewrite_refs(properties)}
        if required:
            result["required"] = sorted(required)
        defs = self._definitions(result)
        if defs:
            result["$defs"] = defs
        return result

    def _definitions(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Every component schema ``schema`` reaches through ``$ref``, refs rewritten to ``#/$defs/``."""
        found: dict[str, Any] = {}
        pending = list(_refs(schema))
        while pending:
            name = pending.pop()
            if name in found or name not in self.components:
                continue
            found[name] = _rewrite_refs(copy.deepcopy(self.components[name]))
            pending.extend(_refs(found[name]))
        return found


def _is_array(schema: Any) -> bool:
    """Whether a parameter's schema takes a list (``type: array``, or an ``anyOf`` holding one)."""
    if not isinstance(schema, dict):
        return False
    return schema.get("type") == "array" or any(_is_array(option) for option in schema.get("anyOf", []))


def _refs(value: Any):
    """The component names referenced anywhere in ``value`` (either spelling)."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            yield ref.rsplit("/", 1)[-1]
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _rewrite_refs(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: ("#/$defs/" + _REF.match(item).group(1) if key == "$ref" and isinstance(item, str)
                      and _REF.match(item) else _rewrite_refs(item)) for key, item in value.items()}
    if isinstance(value, list):
        return [_rewrite_refs(item) for item in value]
    return value
