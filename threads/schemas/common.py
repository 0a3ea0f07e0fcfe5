"""What every resource's bodies share: the request base, the error bodies, and field types.

* ``InSchema``: the base of every request body and form (unknown keys refused);
* ``ErrorOut``: a 401/403/404/409/413/503 body; ``ValidationErrorOut`` (items
  ``ValidationErrorItem``): a 422 body (``oam_site.api`` writes both);
* ``MemoryType``, ``Metadata``, ``TtlDays``: field types of several resources;
* ``base64_text``: bytes as the base64 text an ``...Out`` body carries.
"""

from __future__ import annotations

import base64
from typing import Any, Literal, Union

from ninja import Schema
from pydantic import ConfigDict, StrictInt

from memory.models import MEMORY_TYPES

MemoryType = Literal[MEMORY_TYPES]  # type: ignore[valid-type]  # "memory", "fact", "guideline", "preference"
Metadata = Union[dict[str, Any], None]
TtlDays = Union[StrictInt, None]


class InSchema(Schema):
    """A request body or form: an unknown key is a 422 (the spec refuses unexpected keyword arguments)."""

    model_config = ConfigDict(extra="forbid")


class ErrorOut(Schema):
    """A 401/404/409 body: what went wrong and, for domain errors, the field at fault."""

    detail: str
    field: str | None = None


class ValidationErrorItem(Schema):
    """One rule broken by the request; ``loc`` is (source, field ...)."""

    loc: list[Union[str, int]]
    msg: str
    type: str


class ValidationErrorOut(Schema):
    """The 422 body, for schema errors and domain validation errors alike."""

    detail: list[ValidationErrorItem]


def base64_text(data: bytes | None) -> str | None:
    """``data`` as base64 text (ASCII), ``None`` for none."""
    return base64.b64encode(data).decode("ascii") if data is not None else None
