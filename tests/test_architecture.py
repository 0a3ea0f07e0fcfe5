"""The import contracts of ``.importlinter`` hold (layers, no delivery import in the engine, no cycles).

``lint-imports`` (import-linter) is run as a subprocess at the repository
root, as a developer would; the same contracts are also run on a small fake
tree with an upward import and a cycle, to show they fail on those.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), str(ROOT / ".importlinter"), "--no-cache"],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_import_contracts_are_kept():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def _layers(contract: str) -> list[str]:
    """The modules a layers contract of ``.importlinter`` names, in order."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    layers = parser[f"importlinter:contract:{contract}"]["layers"].split("\n")
    return [module.strip() for layer in layers for module in layer.split("|") if module.strip()]


def _floors() -> list[str]:
    """The modules the engine-floors contract names, top to bottom."""
    return _layers("engine-floors")


def _root_packages() -> list[str]:
    """The top-level packages ``.importlinter`` analyses (``root_packages``)."""
    import configparser

    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    return parser["importlinter"]["root_packages"].split()


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A tree with every package and module the contracts name, empty, plus ``files``."""
    named = [*_floors(), *_layers("api-resources"), *_layers("staff-resources")]
    for module in [*_root_packages(), *named]:
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):  # the package and every one above it
            package = tmp_path.joinpath(*parts[:depth])
            package.mkdir(exist_ok=True)
            (package / "__init__.py").touch()
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return tmp_path


FLOORS = "The engine's floors, top to bottom (docs/architecture.md) BROKEN"
LAYERS = "Delivery above the engine: oam_site -> threads | staff | integrations -> memory BROKEN"


@pytest.mark.parametrize("files, contract", [
    ({"memory/engine.py": "import threads\n"}, "The memory engine never imports a delivery app BROKEN"),
    ({"memory/engine.py": "import integrations\n"}, "The memory engine never imports a delivery app BROKEN"),
    ({"threads/views.py": "import oam_site\n"}, LAYERS),
    # the framework adapters import the engine only, not a delivery app beside them
    ({"integrations/langgraph.py": "import threads.auth\n", "threads/auth.py": ""}, LAYERS),
    ({"memory/a.py": "from memory import b\n", "memory/b.py": "from memory import a\n"},
     "No import cycles between the engine's modules and packages BROKEN"),
    # an upward import between floors, from the bottom floor and from the middle
    ({"memory/core/errors.py": "from memory import models\n"}, FLOORS),
    ({"memory/records/selectors.py": "import memory.services.memories\n",
      "memory/services/memories.py": ""}, FLOORS),
    # two packages of one floor never import each other
    ({"memory/extraction/dedup.py": "from memory.context import cards\n", "memory/context/cards.py": ""}, FLOORS),
    # a resource router of the JSON API never imports another one
    ({"threads/api/search/__init__.py": "from threads.api.memories import router\n"},
     "JSON API: routes -> resource routers, each alone -> common -> schemas BROKEN"),
    ({"staff/views/review/__init__.py": "from staff.views import memories\n"},
     "Staff pages: urls -> resource views, each alone -> regions -> common BROKEN"),
])
def test_the_contracts_fail_on_an_upward_import_or_a_cycle(tmp_path, files, contract):
    result = lint_imports(_fake_tree(tmp_path, files))
    assert result.returncode == 1, result.stdout + result.stderr
    assert contract in result.stdout, result.stdout


def test_the_fake_tree_alone_keeps_every_contract(tmp_path):
    """The planted imports above are what breaks the contracts, not the fake tree itself."""
    result = lint_imports(_fake_tree(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_floors_cover_every_module_of_the_engine():
    """Every top-level module and package of ``memory`` stands on a floor, so none escapes the contract."""
    engine = ROOT / "memory"
    names = {p.stem for p in engine.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in engine.iterdir() if (p / "__init__.py").exists()}
    assert sorted(f"memory.{n}" for n in names) == sorted(_floors())


def _packages(root: Path):
    for init in sorted(root.rglob("__init__.py")):
        if "migrations" not in init.parts and "__pycache__" not in init.parts:
            yield init.parent


def test_every_package_docstring_names_its_modules_and_exports_nothing():
    """Each package of the engine and the delivery apps lists its modules in its ``__init__`` docstring and
    holds nothing else (one import path per name); ``memory.client``, the SDK's face, is the one exception."""
    import ast

    from tests.source import parse

    for package in [p for top in ("memory", "threads", "staff", "oam_site", "integrations")
                    for p in _packages(ROOT / top)]:
        tree = parse((package / "__init__.py").read_text())
        doc = ast.get_docstring(tree) or ""
        names = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
        names += [p.name for p in package.iterdir() if (p / "__init__.py").exists() and p.name != "migrations"]
        if package.parent == ROOT and package.name in ("threads", "staff", "oam_site"):
            continue  # a Django app's own package (threads/, staff/, oam_site/): Django's module names
        assert doc, package
        assert [n for n in names if f"``{n}``" not in doc and f"`{n}`" not in doc] == [], package
        code = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        if package.relative_to(ROOT).as_posix() != "memory/client":
            assert code == [], f"{package}/__init__.py exports names: {ast.unparse(code[0])[:80]}"


def test_every_file_the_architecture_document_names_exists():
    """``docs/architecture.md`` names files in backticks; a renamed or removed file fails here, not in a reader."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = {p.rstrip("/") for p in re.findall(r"`([a-z_./]+(?:\.py|\.md|/)|\.importlinter)`", text)}
    paths |= {p.replace("<entity>", "messages") for p in re.findall(r"`([a-z_./<>]+\.py)`", text)}
    assert len(paths) > 30, sorted(paths)
    missing = sorted(p for p in paths if "/" in p or p.startswith(".") if not (ROOT / p).exists())
    assert missing == [], missing
