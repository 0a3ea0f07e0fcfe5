"""The MCP ``add_memory`` tool carries ``derived_from`` (issue #32 part 4): its schema is the JSON API body's
(``threads.mcp.tools.Catalogue``), so the bound and the item type come from ``threads.schemas.memories.MemoryIn``."""

import jsonschema

from oam_site.api import api
from threads.mcp.tools import TOOLS, Catalogue


def test_the_add_memory_tool_takes_derived_from_with_its_bound():
    tool = next(tool for tool in TOOLS if tool.name == "add_memory")
    schema = Catalogue(api.get_openapi_schema(path_prefix="/api/")).schema(tool, fixed_thread=True)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors({"content": "x", "derived_from": ["a", "b"]}))
    assert list(validator.iter_errors({"content": "x", "derived_from": [f"m{i}" for i in range(101)]}))
    assert list(validator.iter_errors({"content": "x", "derived_from": "a"}))
