"""Reading the project's own source in tests."""

from __future__ import annotations

import ast

#: Times ``parse`` tries before it lets CPython's spurious SystemError through.
PARSE_ATTEMPTS = 5


def parse(source: str) -> ast.Module:
    """``ast.parse(source)``, tried again when CPython 3.11 raises its spurious ``SystemError: AST constructor
    recursion depth mismatch`` (python/cpython#106905): the AST constructor's recursion counter is shared by the
    interpreter's threads, and 3.11 parses a traceback's source line to print it, so a background thread (the
    embedded extraction worker) logging an error while a test parses made a fresh-clone run fail once."""
    for attempt in range(PARSE_ATTEMPTS):
        try:
            return ast.parse(source)
        except SystemError:
            if attempt == PARSE_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")
