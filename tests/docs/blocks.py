"""The fenced code blocks of ``README.md`` and ``docs/*.md``, each with the marker on the line above it.

A block that shows commands or code (a fence with a language other than ``text``) carries one of:

* ``<!-- tested: tests/<path>.py -->``: that test runs the block (or, for a configuration block, checks it);
* ``<!-- untested: <why> -->``: no test can run it as written (a production server, placeholders to fill in,
  a manual run of hours), and the reason says which.

``tests/docs/test_docs_examples.py`` checks that every block has one and that each named test reads its marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_OPEN = re.compile(r"^```(\S*)$")
_MARKER = re.compile(r"^<!-- (tested|untested): (.+) -->$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, from 1
    language: str
    marker: tuple[str, str] | None  # ("tested", "tests/...py") or ("untested", reason)
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """The README, then the docs pages in name order."""
    return [README, *sorted(DOCS.glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    lines, found, i = path.read_text().splitlines(), [], 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if not opened:
            i += 1
            continue
        end = lines.index("```", i + 1)
        marker = _MARKER.match(lines[i - 1]) if i else None
        found.append(Block(path, i + 1, opened[1], marker.groups() if marker else None,
                           "\n".join(lines[i + 1:end])))
        i = end + 1
    return found


def marked_for(test_file: str, path: Path, language: str | None = None) -> list[str]:
    """The code of ``path``'s blocks marked ``tested: <test_file>`` (of ``language`` when given), in order."""
    return [b.code for b in blocks(path)
            if b.marker == ("tested", test_file) and (language is None or b.language == language)]
