"""Argument checks of the memory engine: one place for every rule a caller's value must meet.

Each check takes the value and the ``field`` it came from and returns the
value to store, or raises the spec's Python error naming the field:
``InvalidType`` (a ``TypeError``) for a wrong type, ``InvalidArgument`` (a
``ValueError``) for a wrong value (``memory.core.errors``; HTTP maps both to a 422
naming the field). The size and text checks that guard the work one call may
ask for (``check_size``, ``check_text``, ``check_depth``, ``check_json_text``,
``check_sql_count``) live next to the limits in ``memory.core.errors``; import
them from there.

Integer arguments go through one check, ``check_bounded_int``.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from memory.core.errors import (
    MAX_CONTENT_CHARS,
    MAX_METADATA_BYTES,
    InvalidArgument,
    InvalidType,
    check_depth,
    check_json_text,
    check_size,
    check_sql_count,
    check_text,
)
from memory.core.types import NOTSET, RecordStatus
from memory.models import MEMORY_TYPES, RecordLink

#: Characters of a caller-chosen identifier (the id columns are ``VARCHAR2(255)``-sized).
MAX_ID_LENGTH = 255
#: Characters of a relation label (``RecordLink.relation_type``).
RELATION_TYPE_MAX_LENGTH = RecordLink._meta.get_field("relation_type").max_length


def check_bounded_int(value: Any, field: str, *, low: int | None = None, high: int | None = None,
                      type_rule: str = "must be an int", low_rule: str | None = None,
                      high_rule: str | None = None, sql_count: bool = False, sql_rule: str = "") -> int:
    """An ``int`` (never a ``bool``) from ``low`` to ``high`` (either bound optional); return it.

    ``type_rule`` is the message of the ``InvalidType``; ``low_rule`` and
    ``high_rule`` those of the ``InvalidArgument`` below ``low`` or above
    ``high`` (defaults: "must be at least N" / "must be at most N").
    ``sql_count`` also bounds it by ``MAX_SQL_COUNT`` (``check_sql_count``:
    SQL ``LIMIT``/``OFFSET`` take 64-bit integers and Oracle 32-bit counts),
    with ``sql_rule`` appended to that message.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, type_rule)
    if low is not None and value < low:
        raise InvalidArgument(field, low_rule or f"must be at least {low}")
    if high is not None and value > high:
        raise InvalidArgument(field, high_rule or f"must be at most {high}")
    if sql_count:
        check_sql_count(value, field, sql_rule)
    return value


#: Control characters (C0, DEL, C1): no identifier needs them, and an id holding NUL or ESC reached the admin's
#: pages and terminals as binary (found by a reviewer).
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_id(value: Any, field: str) -> str:
    """A caller-chosen identifier: a non-empty string of at most 255 characters, no control character."""
    if not isinstance(value, str):
        raise InvalidType(field, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(field, "must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgument(field, f"must be at most {MAX_ID_LENGTH} characters")
    return _check_no_control(value, field)


def _check_no_control(value: str, field: str) -> str:
    """``value`` (valid Unicode, ``check_text``) when it holds no control character; ValueError naming ``field``
    and where the first one is."""
    if control := _CONTROL.search(value):
        raise InvalidArgument(field, f"must not hold a control character (U+{ord(control.group()):04X} at "
                                     f"position {control.start()})")
    return check_text(value, field)


#: Characters of a message's role (``Message.role`` is ``VARCHAR(255)``).
MAX_ROLE_LENGTH = 255


#: Unicode categories a role may not hold besides the control characters (Cc): line and paragraph separators
#: (U+2028, U+2029) and format characters (zero-width, bidirectional controls, soft hyphen, tags).
_ROLE_REFUSED_CATEGORIES = frozenset({"Zl", "Zp", "Cf"})


def check_role(value: Any, field: str) -> str:
    """A message's role: a non-blank string of at most 255 characters, valid Unicode, no control character
    (Cc), line or paragraph separator (Zl, Zp) or format character (Cf).

    A role is written into the extraction and summary transcripts as ``role: text``: a line break in it
    ("system\\nignore ...", "user\\u2028system: ...") forged a line of the transcript, and a format
    character hides what it says (found by outside attacks, issue #29).
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(field, "is required and must be a non-empty string")
    if len(value) > MAX_ROLE_LENGTH:
        raise InvalidArgument(field, f"must be at most {MAX_ROLE_LENGTH} characters")
    value = _check_no_control(value, field)
    for position, char in enumerate(value):
        if unicodedata.category(char) in _ROLE_REFUSED_CATEGORIES:
            raise InvalidArgument(field, f"must not hold a line separator or format character "
                                         f"(U+{ord(char):04X} at position {position})")
    return value


def check_scope_id(value: Any, field: str) -> str | None:
    """A user/agent/thread scope value: a string or None."""
    if value is None:
        return None
    return check_id(value, field)


def check_metadata(value: Any, field: str = "metadata") -> dict[str, Any]:
    """Metadata: a JSON-serialisable dict (None means empty), nested at most ``MAX_METADATA_DEPTH`` levels
    and at most ``MAX_METADATA_BYTES`` as JSON (``memory.core.errors``)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidType(field, f"must be a dict or None, not {type(value).__name__}")
    value = dict(value)
    check_depth(value, field)
    for key in value:
        if not isinstance(key, str):
            raise InvalidArgument(field, "keys must be strings")
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(field, f"must be JSON-serialisable ({exc})") from None
    check_json_text(value, field)
    if len(text.encode()) > MAX_METADATA_BYTES:  # lone surrogates were refused just above
        raise InvalidArgument(field, f"holds more than {MAX_METADATA_BYTES} bytes of JSON; the limit is "
                                     f"{MAX_METADATA_BYTES}")
    return value


def check_status(value: Any, field: str = "status") -> str:
    """A ``RecordStatus`` or its string value."""
    try:
        return RecordStatus(value).value
    except ValueError:
        raise InvalidArgument(field, "must be one of: valid, invalid") from None


def check_memory_type(value: Any, field: str = "memory_type") -> str:
    """One of the spec's memory types: memory, fact, guideline, preference."""
    if value is NOTSET:
        return "memory"
    if value not in MEMORY_TYPES:
        raise InvalidArgument(field, f"must be one of: {', '.join(MEMORY_TYPES)}")
    return value


def check_content(value: Any, field: str = "content") -> str:
    """A record's text (a memory's content, a profile's information): a non-blank string of valid Unicode,
    at most ``MAX_CONTENT_CHARS`` characters (``memory.core.errors``). TypeError/ValueError name ``field``."""
    if not isinstance(value, str):
        raise InvalidType(field, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(field, "must not be empty")
    check_text(value, field)
    check_size(value, field, MAX_CONTENT_CHARS)
    return value


def check_relation_type(value: Any, field: str = "relation_type") -> str:
    """A relation label: a non-empty string of at most 64 characters (built-in or custom)."""
    if not isinstance(value, str):
        raise InvalidType(field, f"must be a string, not {type(value).__name__}")
    if not value.strip():
        raise InvalidArgument(field, "must not be empty")
    if len(value) > RELATION_TYPE_MAX_LENGTH:
        raise InvalidArgument(field, f"must be at most {RELATION_TYPE_MAX_LENGTH} characters")
    return value


def check_record_type(value: Any, field: str) -> str:
    """An endpoint type: currently only the memory-like types (spec: link_records)."""
    if not isinstance(value, str):
        raise InvalidType(field, f"must be a string, not {type(value).__name__}")
    if value not in MEMORY_TYPES:
        raise InvalidArgument(field, f"both endpoints must be memory-like records: {', '.join(MEMORY_TYPES)}")
    return value


def reject_unknown(kwargs: Mapping[str, Any], where: str) -> None:
    """Unexpected keyword arguments raise TypeError (spec: ``**kwargs`` notes)."""
    if kwargs:
        names = ", ".join(sorted(kwargs))
        raise InvalidType(next(iter(sorted(kwargs))), f"{where}() got unexpected keyword argument(s): {names}")


def per_item(value: Any, n: int, field: str) -> list[Any]:
    """Expand a scalar-or-list batch argument to one value per message."""
    if isinstance(value, list):
        if len(value) != n:
            raise InvalidArgument(field, f"a list must have one entry per message ({n}), got {len(value)}")
        return list(value)
    return [value] * n
