"""``NOTSET``, the omitted-argument marker (``memory.core.types``), and the parameters that default to it.

* The marker is the one instance of ``NotSet`` (PEP 661's sentinel pattern): falsy, shown as ``NOTSET``, and
  copies and unpickled ones are the same object, so ``is NOTSET`` holds wherever a value travelled.
* No public method of ``memory.client.AgentMemory``/``Thread`` and no public function of ``memory.services``
  takes a parameter annotated ``Any`` that defaults to ``NOTSET``: each states the type it accepts, with
  ``NotSet`` for the omission (read with ``inspect``).
* Across the engine's source, every parameter and dataclass field defaulting to ``NOTSET`` names ``NotSet`` in
  its annotation (read with ``ast``, so private helpers are held to it too).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import inspect
import pathlib
import pickle
import pkgutil
from typing import Any

import pytest

import memory.services
from memory.client import AgentMemory, Thread
from memory.core.types import NOTSET, MemorySearchConfig, NotSet, SearchScope
from tests.source import parse

ENGINE = pathlib.Path(__file__).resolve().parents[2] / "memory"


def test_the_marker_is_one_falsy_instance_shown_as_notset():
    assert NotSet() is NOTSET
    assert repr(NOTSET) == "NOTSET" and str(NOTSET) == "NOTSET"
    assert not NOTSET and bool(NOTSET) is False
    assert NOTSET != None  # noqa: E711 - an omitted argument is not None
    assert getattr(NotSet, "__final__", False)  # typing.final: no subclass is meant to exist


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_the_marker_survives_pickling_as_itself(protocol):
    assert pickle.loads(pickle.dumps(NOTSET, protocol=protocol)) is NOTSET
    assert pickle.loads(pickle.dumps(SearchScope(user_id="u1"), protocol=protocol)).agent_id is NOTSET


def test_copies_of_the_marker_are_the_marker():
    assert copy.copy(NOTSET) is NOTSET and copy.deepcopy(NOTSET) is NOTSET
    scope = SearchScope(user_id="u1")
    assert dataclasses.asdict(scope)["thread_id"] is NOTSET  # asdict deep-copies field values
    assert dataclasses.replace(scope, user_id="u2").exact_user_match is NOTSET
    assert copy.deepcopy({"a": [NOTSET]})["a"][0] is NOTSET
    assert MemorySearchConfig().token_budget is None  # an omitted config field still resolves as before


def _public_functions(owner) -> list[tuple[str, Any]]:
    return [(name, value) for name, value in inspect.getmembers(owner, inspect.isfunction)
            if not name.startswith("_") or name == "__init__"]


def _service_functions() -> list[tuple[str, Any]]:
    found = []
    for info in pkgutil.iter_modules(memory.services.__path__):
        module = importlib.import_module(f"memory.services.{info.name}")
        found += [(f"{module.__name__}.{name}", value) for name, value in _public_functions(module)
                  if value.__module__ == module.__name__]
    return found


def _callables() -> list[tuple[str, Any]]:
    client = [(f"{cls.__name__}.{name}", value) for cls in (AgentMemory, Thread)
              for name, value in _public_functions(cls)]
    return client + _service_functions()


def test_the_checked_callables_are_many():
    names = {name for name, _ in _callables()}
    assert {"AgentMemory.create_thread", "AgentMemory.search_async", "Thread.add_memory", "Thread.get_messages_async",
            "memory.services.memories.memory_update", "memory.services.messages.messages_add"} <= names
    assert len(names) > 100, len(names)


@pytest.mark.parametrize(("name", "function"), [pytest.param(name, value, id=name) for name, value in _callables()])
def test_no_parameter_is_any_defaulting_to_notset(name, function):
    loose = [p.name for p in inspect.signature(function).parameters.values()
             if p.default is NOTSET and p.annotation in ("Any", Any)]
    unmarked = [p.name for p in inspect.signature(function).parameters.values()
                if p.default is NOTSET and "NotSet" not in str(p.annotation)]
    assert (loose, unmarked) == ([], []), name


def _notset_defaults_without_the_type(tree: ast.AST) -> list[str]:
    """``name`` of each parameter or class field defaulting to ``NOTSET`` whose annotation lacks ``NotSet``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            positional = args.posonlyargs + args.args
            pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
            pairs += [(arg, default) for arg, default in zip(args.kwonlyargs, args.kw_defaults) if default]
            found += [f"{node.name}({arg.arg})" for arg, default in pairs
                      if isinstance(default, ast.Name) and default.id == "NOTSET"
                      and "NotSet" not in ast.unparse(arg.annotation or ast.Constant(""))]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Name) and node.value.id == "NOTSET":
            if "NotSet" not in ast.unparse(node.annotation) and "Final" not in ast.unparse(node.annotation):
                found.append(ast.unparse(node.target))
    return found


def test_every_notset_default_in_the_engine_names_its_type():
    offenders = {str(path.relative_to(ENGINE)): names for path in sorted(ENGINE.rglob("*.py"))
                 if (names := _notset_defaults_without_the_type(parse(path.read_text(encoding="utf-8"))))}
    assert offenders == {}


def test_the_source_check_catches_an_untyped_default():
    tree = ast.parse("def f(a: Any = NOTSET, *, b: int | NotSet = NOTSET, c=NOTSET): ...\n"
                     "class C:\n    x: int = NOTSET\n    y: int | NotSet = NOTSET\n")
    assert _notset_defaults_without_the_type(tree) == ["f(a)", "f(c)", "x"]
