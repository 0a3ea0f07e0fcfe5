"""The code blocks of ``README.md`` and ``docs/*.md``: every one says which test runs it (or why none can), and
the docs pages' Python blocks marked for this file run here, as pasted, on the test database.

The markers (``tests/docs/blocks.py``) make "every block meant to run is run by a test" checkable: a block
without one fails here, and so does a ``tested:`` marker naming a test that does not exist or does not read
that page. The other tests named run their own blocks: the README's walkthrough and the API steps
(``tests/api/test_readme_examples.py``), the agent adapters (``tests/integrations/test_readme_examples.py``),
the MCP configuration and client (``tests/mcp/test_readme_mcp.py``, ``tests/mcp/test_mcp_live.py``).
"""

from __future__ import annotations

import re

import pytest

from memory.models import Memory
from tests.browser.harness import ScriptedLlmServer
from tests.docs.blocks import DOCS, README, ROOT, blocks, marked_for, pages

HERE = "tests/docs/test_docs_examples.py"
#: The README's first block is the two commands (`make serve`, `make test`): CI runs the second itself.
TWO_COMMANDS = (README, 3)

pytestmark = pytest.mark.usefixtures("fresh_extraction_tracker")


def _run(code: str, capsys) -> str:
    """Run a block as pasted (its own globals); what it printed."""
    exec(compile(code, "<docs block>", "exec"), {})  # noqa: S102 - the docs' own example
    return capsys.readouterr().out


def test_every_code_block_says_which_test_runs_it_or_why_none_can():
    unmarked, dangling = [], []
    for page in pages():
        for block in blocks(page):
            if block.language in ("", "text") or (block.path, block.line) == TWO_COMMANDS:
                continue
            if block.marker is None:
                unmarked.append(f"{block.where} ({block.language})")
                continue
            kind, value = block.marker
            if kind == "untested":
                assert len(value) > 20, f"{block.where}: say why no test can run it"
                continue
            test = ROOT / value
            reads = "README" if page == README else page.name
            if not (test.is_file() and value in test.read_text() and reads in test.read_text()):
                dangling.append(f"{block.where} names {value}, which does not exist or does not read {reads}")
    assert unmarked == [], "blocks without a <!-- tested: ... --> or <!-- untested: why --> marker"
    assert dangling == []


def test_the_docs_python_blocks_marked_here_are_the_ones_run_below():
    marked = {page.name: len(marked_for(HERE, page, "python")) for page in sorted(DOCS.glob("*.md"))}
    assert {name: n for name, n in marked.items() if n} == {"python.md": 1, "projects-and-keys.md": 1,
                                                           "extraction.md": 1}
    assert marked_for(HERE, README) == []
    assert [b for page in pages() for b in blocks(page) if b.marker == ("tested", HERE) and b.language != "python"] \
        == []


def test_switching_from_oracleagentmemory_runs_as_pasted(db, capsys):
    """Friction 3 of issue #33: ``db_pool``, ``embedder`` and ``llm`` were undefined. Twice: no id conflict."""
    [code] = marked_for(HERE, DOCS / "python.md", "python")
    first, second = _run(code, capsys).strip(), _run(code, capsys).strip()
    pattern = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    assert re.fullmatch(pattern, first) and re.fullmatch(pattern, second) and first != second


def test_the_projects_example_keeps_each_projects_threads_apart(db, capsys):
    [code] = marked_for(HERE, DOCS / "projects-and-keys.md", "python")
    assert _run(code, capsys) == "True\nFalse\n"
    assert _run(code, capsys) == "True\nFalse\n"  # a second run finds the project made by the first


def test_the_extraction_example_extracts_with_the_llm_it_names(db, capsys):
    """The block names the local llama.cpp server's address; here a scripted OpenAI-compatible server answers
    there instead (one ``fact`` per message: ``"<role> said: <text>"``). Friction 4 of issue #33: the example
    used to name no LLM, so on a server without one it stored nothing and said nothing."""
    [code] = marked_for(HERE, DOCS / "extraction.md", "python")
    address = "http://127.0.0.1:8012/v1"
    assert address in code
    llm = ScriptedLlmServer().start()
    try:
        out = _run(code.replace(address, llm.base_url), capsys)
    finally:
        llm.stop()
    assert out == "fact user said: My sister Ingrid keeps bees in Tromsø.\n"
    assert Memory.objects.get().source_message_ids


#: A duration: "74 s", "9 min", "4 to 9 minutes", "2-3 minutes".
_DURATION = re.compile(r"\b\d+(?:\.\d+)?(?:\s*(?:to|-)\s*\d+)?\s*(?:s|min|minutes|seconds)\b")


def test_set_up_times_are_dated_measurements():
    """Friction 7 of issue #33: "about 4 minutes" for the llama.cpp build took 9 on a loaded machine, and "2-3
    minutes" for `make serve` took 74 s. A set-up time is now a measurement with a date and a machine
    (``docs/benchmarks.md``, "Set-up"), and where set-up is described a duration gives its date or points there."""
    table = (DOCS / "benchmarks.md").read_text().split("\n## Set-up\n")[1].split("\n## ")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| what ")]
    assert len(rows) >= 3
    for row in rows:
        _what, figure, date, machine = [cell.strip() for cell in row.strip("|").split("|")]
        assert _DURATION.search(figure) and re.search(r"\b20\d\d-\d\d-\d\d\b", date) and "core" in machine, row
    undated = [f"{path.name}: {line.strip()}" for path in (README, DOCS / "index.md", DOCS / "testing.md",
                                                           ROOT / "requirements-dev.txt", ROOT / "Makefile",
                                                           ROOT / "scripts" / "llama_wheel.sh")
               for line in path.read_text().splitlines()
               if _DURATION.search(line) and not re.search(r"\b20\d\d-\d\d-\d\d\b|benchmarks\.md", line)]
    assert undated == []
