"""The MCP tools' catalogue against the JSON API it stands for: routes, permissions, schemas."""

import json
import re

import jsonschema
import pytest
from django.urls import resolve
from ninja.operation import PathView

from oam_site.api import api
from threads.mcp.server import Caller, visible
from threads.mcp.tools import TOOLS, Catalogue

SPEC_TOOLS = {"add_messages", "get_messages", "search", "get_context_card", "get_summary", "add_memory",
              "get_memory", "update_memory", "delete_memory", "list_memories", "link_records",
              "get_memory_history", "get_extraction_status", "create_thread", "get_thread", "list_threads"}


@pytest.fixture(scope="module")
def catalogue():
    return Catalogue(api.get_openapi_schema(path_prefix="/api/"))


def _route_permission(method: str, path: str) -> str:
    """The permission of the ninja operation serving ``method path`` (its ``ApiKeyAuth``)."""
    concrete = "/api" + path.replace("{thread_id}", "t").replace("{memory_id}", "m")
    view = resolve(concrete).func
    path_view = next(cell.cell_contents for cell in view.__closure__ if isinstance(cell.cell_contents, PathView))
    operation = next(op for op in path_view.operations if method in op.methods)
    return operation.auth_callbacks[0].permission


def test_the_tools_are_the_spec_methods():
    assert {tool.name for tool in TOOLS} == SPEC_TOOLS


@pytest.mark.parametrize("tool", TOOLS, ids=lambda tool: tool.name)
def test_each_tool_needs_what_its_routes_need(tool):
    for route in tool.routes():
        needed = _route_permission(route.method, route.path)
        assert needed == tool.permission, (tool.name, route)
    assert tool.read_only == (tool.permission == "read")
    assert not (tool.read_only and tool.destructive)


LISTED = [(tool, fixed) for tool in TOOLS for fixed in (False, True) if not fixed or tool.thread is not None]


@pytest.mark.parametrize("tool, fixed", LISTED, ids=lambda value: getattr(value, "name", str(value)))
def test_each_schema_is_valid_json_schema_from_the_apis_validators(catalogue, tool, fixed):
    schema = catalogue.schema(tool, fixed_thread=fixed)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    in_body = tool.name == "create_thread"  # the new thread's id is the body's
    assert ("thread_id" in schema["properties"]) == (in_body or (not fixed and tool.thread is not None))
    referenced = set(re.findall(r'"\$ref": "#/\$defs/([^"]+)"', json.dumps(schema)))
    assert referenced <= set(schema.get("$defs", {})) and "#/components" not in json.dumps(schema)


def test_schemas_carry_the_bodies_rules(catalogue):
    by_name = {tool.name: tool for tool in TOOLS}
    search = catalogue.schema(by_name["search"], fixed_thread=False)
    assert search["required"] == ["query"]
    assert search["properties"]["max_results"]["minimum"] == 1
    add = catalogue.schema(by_name["add_messages"], fixed_thread=False)
    assert add["required"] == ["messages", "thread_id"]
    assert catalogue.schema(by_name["add_messages"], fixed_thread=True)["required"] == ["messages"]
    memory = catalogue.schema(by_name["update_memory"], fixed_thread=False)
    assert memory["required"] == ["memory_id"] and "content" in memory["properties"]
    wait = catalogue.schema(by_name["get_extraction_status"], fixed_thread=True)["properties"]["wait"]
    assert wait["maximum"] == 60
    validator = jsonschema.Draft202012Validator(add)
    assert not list(validator.iter_errors({"thread_id": "t", "messages": [{"role": "user", "content": "hi"}]}))
    assert list(validator.iter_errors({"thread_id": "t"}))


def test_a_read_key_sees_read_tools_and_a_thread_url_only_thread_tools():
    read = Caller(token="x", permission="read")
    assert {tool.name for tool in TOOLS if visible(tool, read)} == {t.name for t in TOOLS if t.read_only}
    fixed = Caller(token="x", permission="write", thread_id="t")
    assert {tool.name for tool in TOOLS if not visible(tool, fixed)} == {"create_thread", "list_threads"}
