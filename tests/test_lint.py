"""The tree passes ``ruff check`` with the repository's ``ruff.toml`` (pyflakes, import order, line length).

``ruff`` is run as a subprocess at the repository root, as a developer would; the same configuration is
also run on a small planted file, to show it fails on an unused import, unsorted imports and a long line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).parent / "ruff"


def ruff(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--config", str(ROOT / "ruff.toml"), "--no-cache", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def test_the_tree_is_clean():
    result = ruff(".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_configuration_fails_on_what_it_names(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import sys\nimport os\n\nx = '" + "a" * 130 + "'\n")
    result = ruff("--output-format", "concise", str(planted), cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    for rule in ("F401", "I001", "E501"):
        assert rule in result.stdout, result.stdout
