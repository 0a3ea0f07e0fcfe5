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


def _fake_tree(tmp_path: Path, files: dict[str, str]) -> Path:
    packages = ["oam_site", "threads", "staff", "memory", "memory/services", "memory/extraction"]
    for package in packages:
        (tmp_path / package).mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    for name in ("pipeline", "jobs", "queue", "tracker", "config"):
        (tmp_path / "memory/extraction" / f"{name}.py").write_text("")
    # the two imports the cycle contract ignores (services fence and detach extraction) must exist
    (tmp_path / "memory/services/common.py").write_text("import memory.extraction.jobs\nimport memory.extraction.tracker\n")
    for path, text in files.items():
        (tmp_path / path).write_text(text)
    return tmp_path


@pytest.mark.parametrize("files, contract", [
    ({"memory/engine.py": "import threads\n"}, "The memory engine never imports a delivery app BROKEN"),
    ({"threads/views.py": "import oam_site\n"}, "Delivery above the engine: oam_site -> threads | staff -> memory BROKEN"),
    ({"memory/a.py": "from memory import b\n", "memory/b.py": "from memory import a\n"},
     "No import cycles between the engine's modules and packages BROKEN"),
    ({"memory/extraction/jobs.py": "import memory.services\n"},
     "Extraction pipeline -> services -> extraction job bookkeeping BROKEN"),
])
def test_the_contracts_fail_on_an_upward_import_or_a_cycle(tmp_path, files, contract):
    result = lint_imports(_fake_tree(tmp_path, files))
    assert result.returncode == 1, result.stdout + result.stderr
    assert contract in result.stdout, result.stdout


def test_every_file_the_architecture_document_names_exists():
    """``docs/architecture.md`` names files in backticks; a renamed or removed file fails here, not in a reader."""
    import re

    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = {p.rstrip("/") for p in re.findall(r"`([a-z_./]+(?:\.py|\.md|/)|\.importlinter)`", text)}
    paths |= {p.replace("<entity>", "messages") for p in re.findall(r"`([a-z_./<>]+\.py)`", text)}
    assert len(paths) > 30, sorted(paths)
    missing = sorted(p for p in paths if "/" in p or p.startswith(".") if not (ROOT / p).exists())
    assert missing == [], missing
