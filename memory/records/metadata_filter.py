"""Compile a spec ``metadata_filter`` mapping into a Django ``Q`` that runs in SQL.

The whole filter becomes one SQL condition (a custom ``Lookup``) with an
``as_sqlite``, an ``as_oracle`` and an ``as_postgresql`` form; nothing is evaluated in Python after
fetching. Grammar (spec: search / get_context_card ``metadata_filter``)::

    filter      := {key: field_expr, ...}          entries are ANDed
    field_expr  := operator_dict | plain_dict | list | scalar
    operator_dict := {"$array_contains": scalar | [scalar, ...],
                      "$array_contains_any": [scalar, ...],
                      "$gt" | "$gte" | "$lt" | "$lte": bound,
                      "$not": field_expr}            one or more operators, ANDed
    plain_dict  := {key: field_expr, ...}          a nested filter (may be empty)
    scalar      := str | int | float | bool | None
    bound       := str | int | float               not bool

Semantics chosen here (the pure-Python reference in
tests/memory/test_metadata_filter.py checks the SQL against exactly these):

* **Exact match is type-exact JSON equality.** ``"1"`` does not match ``1``;
  ``True`` does not match ``1``; numbers compare by value (``1`` matches
  ``1.0``). ``None`` matches a stored JSON ``null`` only: the key must exist.
  An exact scalar never matches an array that contains it.
* **A plain dict is a nested filter (subset match).** ``{"travel": {"need":
  "transit"}}`` needs ``travel`` to exist and be an object whose entries match;
  other keys of ``travel`` are ignored. Its values follow the same grammar, so
  operators work at any depth. ``{"travel": {}}`` means "``travel`` exists and
  is an object". An empty top-level filter ``{}`` (like ``None``) filters
  nothing.
* **A list is an exact whole-array match**: same length, same order, each
  element equal as above. Objects *inside* a list compare as whole JSON values
  (same key set, key order irrelevant), not as nested filters, and keys
  starting with ``$`` inside list elements are plain data.
* **``$array_contains``** takes one scalar, or a non-empty list of scalars that
  must all be elements; **``$array_contains_any``** takes a non-empty list of
  scalars, at least one of which must be an element. Both require the field to
  exist and be an array; element equality is the exact scalar equality above
  (a nested array element never "contains" its own elements).
* **``$gt``, ``$gte``, ``$lt``, ``$lte``** compare the field with one bound
  (greater than, greater or equal, less than, less or equal), type-strict
  like exact match: a number bound matches only a stored JSON number,
  compared by value (``true``/``false`` are not numbers; ``5`` and ``5.0``
  are equal, so ``{"$gte": 5}`` matches ``5.0`` and ``{"$gt": 5}`` does not);
  a string bound matches only a stored JSON string, compared by code point
  (binary, case-sensitive: ``"B" < "a" < "é"``, and ISO-8601 dates and times
  of one format order as time). A missing key, ``null``, an array, an object
  or a value of the other type never matches (so ``$not`` of a range matches
  them); an array is never searched for an element in range. Several in one
  dict are ANDed (``{"$gte": 1, "$lt": 5}``: ``1 <= v < 5``), and they
  combine with ``$not`` and nest at any depth like the other operators.
  Precision: integers compare with integers exactly (the whole 64-bit
  range), floats with floats exactly, and an integer with a float exactly
  while the integer is within ``±2**53``. Beyond it an integer against a
  float (a bound or a stored value) may differ by the float's last digit
  between databases: SQLite (and the reference) use the float's binary
  value, PostgreSQL and Oracle the shortest decimal Python writes for it
  (its stored JSON text): against ``4.611686018427388e18`` (binary
  ``4611686018427387904``), the integer ``4611686018427388000`` is greater
  on SQLite and equal on PostgreSQL. Exact match compares numbers the same
  way. SQLite reads a stored integer beyond 64 bits as a float.
* **``$not``** negates the field expression it wraps at the same field (an
  operator dict, a nested filter, a list or a scalar). It matches whenever the
  positive expression fails, including when the key is missing or is not an
  array. ``$not`` may nest.
* **Keys are plain object keys**: ``"0"``, ``"a.b"``, keys with quotes,
  ``%`` or non-ASCII characters all address one member of an object, never an
  array index or a sub-path. Keys must be non-empty strings; filter keys may not
  start with ``$`` (that marks an operator).

Errors are ``InvalidArgument`` (a ``ValueError``) naming the path, e.g.
``metadata_filter.tags.$array_contains_any``: a non-dict filter, an unknown
operator, operators mixed with plain keys in one dict, an operator outside a
field, an empty or non-list ``$array_contains_any``, an empty or non-scalar
``$array_contains``, a range bound that is not a string or a number (a bool,
``None``, a list, a dict; ``metadata_filter.price.$gt``), a value that is not JSON (tuple, set, NaN, infinity, an
int outside 64 bits), or nesting deeper than ``MAX_DEPTH``.

The SQL (SQLite, Oracle 23ai and PostgreSQL forms) is ``memory.records.metadata_sql``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from django.db.models import F, Q

from memory.core.errors import InvalidArgument, check_json_text
from memory.records.metadata_sql import COMPARISONS, Contains, Equals, Field, MetadataFilter, Not, Range, Subset

OPERATORS = ("$array_contains", "$array_contains_any", *COMPARISONS, "$not")
MAX_DEPTH = 16
#: Values in one ``$array_contains``/``$array_contains_any`` list, and keys plus such values (and
#: the elements of exact list/object values, and range bounds) in the whole filter. Each becomes a term of one SQL
#: expression, work on every candidate row; terms are joined as balanced trees (``metadata_sql``), as
#: SQLite refuses an expression tree deeper than 1,000 (a filter of ~1,000 keys, or 500
#: ``$array_contains_any`` values, was a 500).
MAX_FILTER_VALUES = 100
MAX_FILTER_TERMS = 200
_INT64 = (-(2**63), 2**63 - 1)


# --- public entry point ------------------------------------------------------------


def compile_filter(metadata_filter: Any, field: str = "metadata") -> Q:
    """Return a ``Q`` over JSON column ``field`` for ``metadata_filter``.

    ``None`` and ``{}`` give an empty ``Q`` (no filtering). Raises
    ``InvalidArgument`` (a ValueError) for anything outside the grammar in
    this module's docstring; validation happens here, before any SQL.
    """
    if metadata_filter is None:
        return Q()
    if not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    fields = _parse_filter(metadata_filter, "metadata_filter", 0)
    check_json_text(metadata_filter, "metadata_filter")
    if not fields:
        return Q()
    terms = _terms(fields)
    if terms > MAX_FILTER_TERMS:
        raise InvalidArgument("metadata_filter",
                              f"has {terms} keys, list values and range bounds; the limit is {MAX_FILTER_TERMS}")
    return Q(MetadataFilter(F(field), fields))


# --- validation and parsing --------------------------------------------------------


def _is_operator(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("$")


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str) or not key:
        raise InvalidArgument(where, f"keys must be non-empty strings, got {key!r}")


def _check_depth(depth: int, where: str) -> None:
    if depth > MAX_DEPTH:
        raise InvalidArgument(where, f"nested more than {MAX_DEPTH} levels deep")


def _parse_filter(spec: dict, where: str, depth: int) -> tuple[Field, ...]:
    _check_depth(depth, where)
    fields = []
    for key, value in spec.items():
        _check_key(key, where)
        if key.startswith("$"):
            raise InvalidArgument(
                where,
                f"{key!r} is not a metadata key: operators ({', '.join(OPERATORS)}) "
                "go inside a field's operator dict, e.g. {\"tags\": {\"$array_contains\": \"x\"}}",
            )
        fields.append(Field(key, _parse_field_expr(value, f"{where}.{key}", depth + 1)))
    return tuple(fields)


def _parse_field_expr(value: Any, where: str, depth: int) -> tuple[Any, ...]:
    _check_depth(depth, where)
    if isinstance(value, dict):
        operators = [k for k in value if _is_operator(k)]
        if operators and len(operators) < len(value):
            plain = [k for k in value if not _is_operator(k)]
            raise InvalidArgument(
                where, f"cannot mix operators {operators} with plain keys {plain} in one dict")
        if operators:
            return tuple(_parse_operator(op, arg, f"{where}.{op}", depth) for op, arg in value.items())
        return (Subset(_parse_filter(value, where, depth)),)
    _check_json(value, where, depth)
    return (Equals(value, _canonical(value)),)


def _parse_operator(op: str, arg: Any, where: str, depth: int):
    if op == "$not":
        return Not(_parse_field_expr(arg, where, depth + 1))
    if op == "$array_contains":
        if isinstance(arg, list):
            values = _check_scalar_list(arg, where)
        else:
            _check_scalar(arg, where, "must be a JSON scalar or a non-empty list of JSON scalars")
            values = (arg,)
        return Contains(values, False, _canonical(list(values)))
    if op == "$array_contains_any":
        if not isinstance(arg, list):
            raise InvalidArgument(where, "must be a non-empty list of JSON scalars")
        values = _check_scalar_list(arg, where)
        return Contains(values, True, _canonical(list(values)))
    if op in COMPARISONS:
        if isinstance(arg, bool) or not isinstance(arg, (str, int, float)):
            raise InvalidArgument(where, f"must be a number or a string (the bound of {op}), got {_kind(arg)}")
        if not isinstance(arg, str):
            _check_number(arg, where)
        return Range(op, arg, _canonical(arg))
    raise InvalidArgument(where, f"unknown operator {op!r}; allowed operators: {', '.join(OPERATORS)}")


def _terms(tests: tuple[Any, ...]) -> int:
    """Keys and operator list values in parsed tests (``MAX_FILTER_TERMS``); iterative, any depth."""
    count, stack = 0, list(tests)
    while stack:
        test = stack.pop()
        if isinstance(test, Field):
            count += 1
            stack.extend(test.tests)
        elif isinstance(test, (Subset,)):
            stack.extend(test.fields)
        elif isinstance(test, Not):
            stack.extend(test.tests)
        elif isinstance(test, Contains):
            count += len(test.values)
        elif isinstance(test, Range):
            count += 1
        elif isinstance(test, Equals):
            count += _json_nodes(test.value) - 1  # a whole list or object is compared element by element
    return count


def _json_nodes(value: Any) -> int:
    """Values in a JSON value, itself included (``[1, [2]]``: 4); iterative."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count


def _check_scalar_list(values: list, where: str) -> tuple[Any, ...]:
    if not values:
        raise InvalidArgument(where, "must be a non-empty list of JSON scalars")
    if len(values) > MAX_FILTER_VALUES:
        raise InvalidArgument(where, f"holds {len(values)} values; the limit is {MAX_FILTER_VALUES}")
    for i, v in enumerate(values):
        _check_scalar(v, f"{where}[{i}]", "list items must be JSON scalars (str, number, bool, None)")
    return tuple(values)


def _check_scalar(value: Any, where: str, message: str) -> None:
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, (int, float)):
        _check_number(value, where)
        return
    raise InvalidArgument(where, message)


def _check_number(value: int | float, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgument(where, "numbers must be finite")
    if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        raise InvalidArgument(where, "integers must fit in 64 bits")


def _check_json(value: Any, where: str, depth: int) -> None:
    """A literal JSON value for exact matching (dicts only appear inside lists)."""
    _check_depth(depth, where)
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, (int, float)):
        _check_number(value, where)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, f"{where}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_key(key, where)
            _check_json(item, f"{where}.{key}", depth + 1)
    else:
        raise InvalidArgument(
            where, f"values must be JSON (str, int, float, bool, None, list, dict), got {type(value).__name__}")


def _kind(value: Any) -> str:
    """How an error names a value's type: JSON's names where it has one."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a dict"
    return type(value).__name__


def _canonical(value: Any) -> str:
    # Type-tagged so that 1, 1.0 and True stay distinct identities.
    def tag(v):
        if isinstance(v, bool) or v is None:
            return ["b", v]
        if isinstance(v, (int, float)):
            return ["n", repr(v)]
        if isinstance(v, list):
            return ["l", [tag(x) for x in v]]
        if isinstance(v, dict):
            return ["d", sorted((k, tag(x)) for k, x in v.items())]
        return ["s", v]

    return json.dumps(tag(value))
