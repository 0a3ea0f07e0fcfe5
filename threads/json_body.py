"""Reading JSON request bodies, and saying where in a refused body the fault is.

Every JSON body of the API (ninja's parser, ``oam_site.api.JsonParser``, and
the image upload's own) is read by ``parse_json_body``: pydantic's JSON
parser, which refuses a string holding a lone UTF-16 surrogate (``"\\ud800"``:
RFC 8259 section 8.2 leaves its meaning undefined and it has no UTF-8 form).
The error then names the field holding it (``loc``), as a schema error would.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic_core

from memory.core.errors import InvalidArgument, check_text


class InvalidJsonBody(ValueError):
    """A request body that is not JSON the API reads; ``loc`` is where in the body (``()``: the whole body)."""

    def __init__(self, message: str, loc: tuple[str | int, ...] = ()):
        super().__init__(message)
        self.loc = tuple(loc)


def parse_json_body(body: bytes) -> Any:
    """The JSON value of ``body`` (dict, list, str, number, bool or None); ``InvalidJsonBody`` otherwise.

    ``NaN``/``Infinity`` are read, as ``json.loads`` reads them, so that the
    domain check names the field (``metadata``: "must be JSON-serialisable").
    Nesting deeper than pydantic's limit (about 200 levels) is refused.
    """
    try:
        return pydantic_core.from_json(body, allow_inf_nan=True)
    except ValueError as exc:
        loc = surrogate_loc(body)
        if loc is None:
            raise InvalidJsonBody(str(exc)) from None
        raise InvalidJsonBody(f"a string holds a lone UTF-16 surrogate, which has no UTF-8 form ({exc})", loc) from None


def surrogate_loc(body: bytes | str) -> tuple[str | int, ...] | None:
    """Keys and indexes leading to the first string of ``body`` that holds a lone surrogate (``()``: the
    body's top-level value); None when ``body`` holds none or is not JSON even to ``json.loads`` (which
    reads lone surrogates). A surrogate inside an object key names that object (the key itself cannot be
    written back as UTF-8).
    """
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, str):
            if not _is_text(node):
                return loc
        elif isinstance(node, dict):
            if not all(_is_text(key) for key in node):
                return loc
            stack.extend(reversed([(item, (*loc, key)) for key, item in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(item, (*loc, index)) for index, item in enumerate(node)]))
    return None


def _is_text(value: str) -> bool:
    """True when ``value`` has a UTF-8 form (no lone surrogate)."""
    try:
        check_text(value, "")
    except InvalidArgument:
        return False
    return True
