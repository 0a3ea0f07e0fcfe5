"""Domain errors. Each is the built-in type the spec names, carrying the field at fault.

The HTTP layer maps them: ``InvalidArgument`` -> 422, ``NotFound`` -> 404,
``Conflict`` -> 409, each with a JSON body naming ``field`` and the rule.
"""

from __future__ import annotations


class InvalidArgument(ValueError):
    """A value breaks a rule of the spec (``ValueError``); ``field`` names the argument."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidType(TypeError):
    """An argument has the wrong type, or is not an argument at all (``TypeError``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


#: Largest count or index a caller may pass (``max_results``, ``limit``, ``start``...):
#: they become SQL ``LIMIT``/``OFFSET`` values, 64-bit in SQLite and Oracle, and no
#: thread holds 2**31 records. One bound for every such argument.
MAX_SQL_COUNT = 2**31 - 1


def check_sql_count(value: int, field: str, rule: str = "") -> int:
    """``value`` unchanged if it is at most ``MAX_SQL_COUNT``; else ``InvalidArgument`` naming ``field``.

    ``rule`` is appended to the message (e.g. ", or None for no limit").
    """
    if value > MAX_SQL_COUNT:
        raise InvalidArgument(field, f"must be at most {MAX_SQL_COUNT}{rule}")
    return value


def check_text(value: str, field: str) -> str:
    """``value`` unchanged if it is valid Unicode text; else ``InvalidArgument`` naming ``field``.

    Python strings may hold lone UTF-16 surrogates (``"\\ud800"``) that no
    database can store as UTF-8 and the tokenizer refuses with a TypeError;
    they are refused here, before anything is written.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgument(field, f"is not valid Unicode text (a lone surrogate at position {exc.start})") from None
    return value


class NotFound(KeyError):
    """A thread, message or memory does not exist here (``KeyError``, as the spec says)."""

    def __init__(self, field: str, value: str):
        super().__init__(f"{field} {value!r} not found")
        self.field = field
        self.value = value
        self.message = f"no {field.removesuffix('_id')} with id {value!r}"

    def __str__(self) -> str:  # KeyError's str() would add quotes
        return self.args[0]


class Conflict(ValueError):
    """A caller-chosen id is already taken (``ValueError``; HTTP 409)."""

    def __init__(self, field: str, value: str):
        super().__init__(f"{field} {value!r} already exists")
        self.field = field
        self.value = value
        self.message = f"{field} {value!r} already exists"


class OutOfScope(InvalidArgument):
    """A value reaches outside what the caller may touch: another end user or agent than the one a
    restricted client acts for (``memory.tenancy.Tenant``; issue #12). A ``ValueError`` in Python,
    HTTP 403 naming the field."""
