"""The SQL of a parsed ``metadata_filter``: one condition (a ``Lookup``) with an SQLite, an Oracle and a PostgreSQL
form.

``memory.records.metadata_filter`` validates a filter against its grammar (and documents its semantics) and
parses it into the nodes below (``Field``, ``Subset``, ``Equals``, ``Contains``, ``Range``, ``Not``); ``MetadataFilter``
turns them into SQL when Django compiles the query, so nothing is evaluated in Python after fetching.

SQL, SQLite: every key is a bound parameter, never part of a JSON path. Each
step is ``EXISTS (SELECT 1 FROM json_each(<parent if it is an object>) AS _mfN
WHERE _mfN.key = %s AND ...)``; types come from json_each's ``type`` column
('text', 'integer', 'real', 'true', 'false', 'null', 'array', 'object'). A range is
``(type IN ('integer', 'real') AND value > %s)`` (or ``type = 'text'`` for a string bound): SQLite
compares an INTEGER with a REAL by exact value, and TEXT with the BINARY collation (json_each's ``value``
column has none of its own), which is code point order for UTF-8.

SQL, Oracle (23ai; the column is NCLOB ``IS JSON``): one ``JSON_EXISTS`` per
positive test, combined with SQL ``AND``/``NOT``. Oracle paths must be
literals, so keys are inlined as JSON-escaped quoted steps (``."a\\"b"``,
non-ASCII as ``\\uXXXX``) inside an SQL string literal whose ``'`` are doubled
(and ``%`` doubled for Django's parameter formatting); values are never
inlined: strings and numbers go through ``PASSING %s AS "v0"`` (numbers as
exact ``Decimal``/``int`` NUMBERs); ``true``, ``false``, ``type() == "null"``
and the empty string ``""`` (Oracle would bind ``''`` as NULL) are fixed path
tokens. ``FALSE ON ERROR`` makes any path or
type error a plain non-match (so ``NOT`` of it matches). Oracle path
mode is left at its default, lax, on purpose (no reliance on a ``strict``
mode keyword), and each test asserts JSON types
with ``type()`` (which does not unwrap arrays) inside a filter on the root
object: every ancestor must be an ``"object"``, an exact scalar must have its
own type (so ``"x"`` never matches ``["x"]``), and membership first checks that
the field is an ``"array"`` before iterating it with ``[*]``. A range is
``@."k".type() == "number" && @."k" > $v0`` (``"string"`` for a string bound), the
bound passed like an exact value (so ``""`` is the fixed literal ``""``); that Oracle
orders JSON strings in path filters by code point (binary UTF-8), whatever
``NLS_SORT``/``NLS_COMP`` say, is assumed from the SQL/JSON standard, not checked here. Whole-array
equality uses ``JSON_EQUAL`` on ``JSON_QUERY`` of the array and the bound JSON
text (so inside lists Oracle's JSON_EQUAL decides number equality). Known
Oracle-only divergence: lax mode unwraps a nested array inside the
membership filter, so ``{"tags": [["x"]]}`` counts as containing ``"x"`` on
Oracle (not on SQLite). This SQL is compiled and asserted offline
(tests/oracle/test_metadata_filter_sql.py), not executed against Oracle here.

SQL, PostgreSQL (the column is ``jsonb``): the Oracle form's SQL/JSON paths, which
PostgreSQL's ``jsonpath`` reads the same way (``.type()`` names, filters on ``$``), run
in ``strict`` mode (``_Postgres``), each in ``jsonb_path_exists(column, %s::jsonpath, %s::jsonb, true)``:
the path is a bound parameter (keys JSON-escaped inside it, as on Oracle), the
values are the bound ``vars`` object (``$v0``, ...), and ``silent`` true makes a
path error a non-match, as Oracle's ``FALSE ON ERROR``. Whole-array equality is
``jsonb_path_query_first(...) = %s::jsonb`` (jsonb compares numbers by value, so
``1`` equals ``1.0`` as on SQLite). Strict mode does not unwrap a nested array inside the
membership filter (``{"tags": [["x"]]}`` does not contain ``"x"``, as on SQLite; unlike Oracle's lax
mode). jsonpath's ``<``/``>`` compare strings by code point whatever the database's collation (PostgreSQL
12+, the SQL standard's rule; ``==`` compares bytes) and numbers as ``numeric``, exactly.
Run on a live PostgreSQL by ``make test``'s second pass (tests/memory/test_metadata_filter.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from decimal import Decimal
from typing import Any

from django.db import NotSupportedError
from django.db.models.lookups import Lookup

# --- the parsed filter ----------------------------------------------------------


@dataclass(frozen=True)
class Equals:
    """Exact JSON equality with ``value`` (a scalar or a list)."""

    value: Any = dataclass_field(compare=False)
    canonical: str = ""  # identity for hashing/equality (Django compares lookups)


@dataclass(frozen=True)
class Subset:
    """The value is an object and every field test holds inside it."""

    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Contains:
    """The value is an array holding all (``any_=False``) or one of ``values``."""

    values: tuple[Any, ...] = dataclass_field(compare=False)
    any_: bool = False
    canonical: str = ""


#: The range operators and their comparison in SQL and in SQL/JSON paths (the same symbols).
COMPARISONS = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


@dataclass(frozen=True)
class Range:
    """The value has the type of ``bound`` (a JSON number, or a string) and compares with it as ``op`` says."""

    op: str  # a key of COMPARISONS
    bound: Any = dataclass_field(compare=False)
    canonical: str = ""


@dataclass(frozen=True)
class Not:
    """The AND of ``tests`` (at the same key) does not hold."""

    tests: tuple[Any, ...]


@dataclass(frozen=True)
class Field:
    """All ``tests`` hold for member ``key`` of the enclosing object."""

    key: str
    tests: tuple[Any, ...]


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, str, int, float))


# --- the SQL condition ---------------------------------------------------------------


class MetadataFilter(Lookup):
    """``lhs`` (a JSON column) satisfies the parsed filter ``rhs`` (a tuple of ``Field``).

    A ``Lookup`` so that Oracle's WHERE takes it as a condition as-is
    (``conditional_expression_supported_in_where_clause``) instead of
    comparing it with True.
    """

    lookup_name = "oam_metadata_filter"  # never registered on a field
    prepare_rhs = False

    def as_sql(self, compiler, connection):
        raise NotSupportedError(f"metadata_filter has no SQL for the {connection.vendor} backend")

    def as_sqlite(self, compiler, connection):
        column, column_params = self.process_lhs(compiler, connection)
        return _SQLite(column, list(column_params)).filter(self.rhs)

    def as_oracle(self, compiler, connection):
        column, column_params = self.process_lhs(compiler, connection)
        return _Oracle(column, list(column_params)).filter(self.rhs)

    def as_postgresql(self, compiler, connection):
        column, column_params = self.process_lhs(compiler, connection)
        return _Postgres(column, list(column_params)).filter(self.rhs)


def _and(parts: list[tuple[str, list]]) -> tuple[str, list]:
    """``parts`` joined by AND, flat: the Oracle form, which ``tests/oracle`` pins (its length is bounded by
    ``MAX_FILTER_TERMS``); SQLite's form is balanced (``_join``)."""
    if len(parts) == 1:
        return parts[0]
    return "(" + " AND ".join(sql for sql, _ in parts) + ")", [p for _, ps in parts for p in ps]


def _join_and(parts: list[tuple[str, list]]) -> tuple[str, list]:
    return _join(parts, "AND")


def _join(parts: list[tuple[str, list]], op: str) -> tuple[str, list]:
    """``parts`` joined by ``op`` (AND/OR) as a balanced tree: ``((a op b) op (c op d))``.

    SQLite parses ``a AND b AND c ...`` into a tree as deep as the list is long
    and refuses one deeper than 1,000; balanced, n terms nest log2(n) levels.
    Parameters keep the order of the parts.
    """
    while len(parts) > 4:
        parts = [parts[i] if i + 1 == len(parts) else
                 (f"({parts[i][0]} {op} {parts[i + 1][0]})", [*parts[i][1], *parts[i + 1][1]])
                 for i in range(0, len(parts), 2)]
    if len(parts) == 1:
        return parts[0]
    return "(" + f" {op} ".join(sql for sql, _ in parts) + ")", [p for _, ps in parts for p in ps]


# --- SQLite ------------------------------------------------------------------------------


@dataclass
class _Loc:
    """Where a JSON value sits: SQL for its json_each-style ``type`` and ``value``."""

    type: str
    value: str
    params: list  # parameters of ``type`` and of ``value`` (each used once per use of both)


class _SQLite:
    def __init__(self, column: str, column_params: list):
        self.root = _Loc(f"json_type({column})", column, column_params)
        self.aliases = 0

    def filter(self, fields: tuple[Field, ...]) -> tuple[str, list]:
        return _join_and([part for f in fields for part in self.field(self.root, f)])

    def field(self, parent: _Loc, f: Field) -> list[tuple[str, list]]:
        """The conjuncts for ``f`` under the object at ``parent``."""
        return [self.test(parent, f.key, t) for t in f.tests]

    def test(self, parent: _Loc, key: str, test) -> tuple[str, list]:
        if isinstance(test, Not):
            sql, params = _join_and([self.test(parent, key, t) for t in test.tests])
            return (f"NOT ({sql})", params)
        return self.child(parent, "object", key, lambda loc: self.value(loc, test))

    def child(self, parent: _Loc, kind: str, key, inner) -> tuple[str, list]:
        """EXISTS a member ``key`` (object key or array index) of ``parent`` satisfying ``inner``."""
        self.aliases += 1
        alias = f"_mf{self.aliases}"
        loc = _Loc(f"{alias}.type", f"{alias}.value", [])
        inner_sql, inner_params = inner(loc)
        sql = (f"EXISTS (SELECT 1 FROM json_each(CASE WHEN {parent.type} = '{kind}' THEN {parent.value} END)"
               f" AS {alias} WHERE {alias}.key = %s AND {inner_sql})")
        return sql, [*parent.params, *parent.params, key, *inner_params]

    def value(self, loc: _Loc, test) -> tuple[str, list]:
        if isinstance(test, Equals):
            return self.exact(loc, test.value)
        if isinstance(test, Subset):
            parts = [(f"{loc.type} = 'object'", list(loc.params))]
            parts += [part for f in test.fields for part in self.field(loc, f)]
            return _join_and(parts)
        if isinstance(test, Contains):
            parts = [(f"{loc.type} = 'array'", list(loc.params))]
            groups = [test.values] if test.any_ else [(v,) for v in test.values]
            for group in groups:
                parts.append(self.element(loc, group))
            return _join_and(parts)
        if isinstance(test, Range):
            kind = "= 'text'" if isinstance(test.bound, str) else "IN ('integer', 'real')"
            return (f"({loc.type} {kind} AND {loc.value} {COMPARISONS[test.op]} %s)",
                    [*loc.params, *loc.params, test.bound])
        raise TypeError(test)

    def element(self, array: _Loc, values: tuple) -> tuple[str, list]:
        """EXISTS an element of ``array`` equal to one of ``values`` (scalars)."""
        self.aliases += 1
        alias = f"_mf{self.aliases}"
        loc = _Loc(f"{alias}.type", f"{alias}.value", [])
        cond, params = _join([self.exact(loc, v) for v in values], "OR")
        sql = (f"EXISTS (SELECT 1 FROM json_each(CASE WHEN {array.type} = 'array' THEN {array.value} END)"
               f" AS {alias} WHERE {cond})")
        return sql, [*array.params, *array.params, *params]

    def exact(self, loc: _Loc, value: Any) -> tuple[str, list]:
        t = loc.type
        if value is None:
            return f"{t} = 'null'", list(loc.params)
        if value is True:
            return f"{t} = 'true'", list(loc.params)
        if value is False:
            return f"{t} = 'false'", list(loc.params)
        if isinstance(value, str):
            return f"({t} = 'text' AND {loc.value} = %s)", [*loc.params, *loc.params, value]
        if isinstance(value, (int, float)):
            return f"({t} IN ('integer', 'real') AND {loc.value} = %s)", [*loc.params, *loc.params, value]
        if isinstance(value, list):
            parts = [(f"{t} = 'array'", list(loc.params)),
                     (f"json_array_length(CASE WHEN {t} = 'array' THEN {loc.value} END) = %s",
                      [*loc.params, *loc.params, len(value)])]
            for i, item in enumerate(value):
                parts.append(self.child(loc, "array", i, lambda c, item=item: self.exact(c, item)))
            return _join_and(parts)
        if isinstance(value, dict):
            parts = [(f"{t} = 'object'", list(loc.params)),
                     (f"(SELECT count(*) FROM json_each(CASE WHEN {t} = 'object' THEN {loc.value} END)) = %s",
                      [*loc.params, *loc.params, len(value)])]
            for key, item in value.items():
                parts.append(self.child(loc, "object", key, lambda c, item=item: self.exact(c, item)))
            return _join_and(parts)
        raise TypeError(value)


# --- Oracle --------------------------------------------------------------------------------


def _steps(keys: list[str]) -> str:
    """Quoted object steps: JSON string escaping keeps any key inside its quotes."""
    return "".join("." + json.dumps(key) for key in keys)  # ensure_ascii: \\uXXXX for non-ASCII


def _literal(path: str) -> str:
    """An SQL string literal for a path: ``'`` doubled; ``%`` doubled for Django's formatting."""
    return "'" + path.replace("'", "''").replace("%", "%%") + "'"


def _type_guards(keys: list[str], last_type: str | None) -> list[str]:
    """Every ancestor of ``keys`` is an object (and the target has ``last_type``)."""
    guards = [f'@{_steps(keys[:i])}.type() == "object"' for i in range(1, len(keys))]
    if last_type:
        guards.append(f'@{_steps(keys)}.type() == "{last_type}"')
    return guards


class _Oracle:
    def __init__(self, column: str, column_params: list):
        self.column = column
        self.column_params = column_params

    def filter(self, fields: tuple[Field, ...]) -> tuple[str, list]:
        return _and([part for f in fields for part in self.field([], f)])

    def field(self, parent: list[str], f: Field) -> list[tuple[str, list]]:
        """The conjuncts for ``f`` under the object at ``parent`` (a list of keys from the root)."""
        return [part for t in f.tests for part in self.test([*parent, f.key], t)]

    def test(self, keys: list[str], test) -> list[tuple[str, list]]:
        if isinstance(test, Not):
            sql, params = _and([part for t in test.tests for part in self.test(keys, t)])
            return [(f"NOT ({sql})", params)]
        if isinstance(test, Subset):
            parts = [self.exists("$?(" + " && ".join(_type_guards(keys, "object")) + ")", [])]
            return parts + [part for f in test.fields for part in self.field(keys, f)]
        if isinstance(test, Contains):
            root = "$?(" + " && ".join(_type_guards(keys, "array")) + ")" + _steps(keys) + "[*]"
            groups = [test.values] if test.any_ else [(v,) for v in test.values]
            parts = []
            for group in groups:
                binds: list = []
                preds = [self.scalar("@", v, binds) for v in group]
                cond = preds[0] if len(preds) == 1 else " || ".join(f"({p})" for p in preds)
                parts.append(self.exists(f"{root}?({cond})", binds))
            return parts
        if isinstance(test, Equals) and _is_scalar(test.value):
            binds = []
            pred = self.scalar("@" + _steps(keys), test.value, binds)
            return [self.exists("$?(" + " && ".join([*_type_guards(keys, None), pred]) + ")", binds)]
        if isinstance(test, Range):
            binds = []
            target = "@" + _steps(keys)
            kind = "string" if isinstance(test.bound, str) else "number"
            pred = (f'{target}.type() == "{kind}" && {target} {COMPARISONS[test.op]} '
                    f"{self.operand(test.bound, binds)}")
            return [self.exists("$?(" + " && ".join([*_type_guards(keys, None), pred]) + ")", binds)]
        if isinstance(test, Equals):  # a list: whole-value JSON equality
            path = "$?(" + " && ".join(_type_guards(keys, "array")) + ")" + _steps(keys)
            sql = (f"(CASE WHEN JSON_EQUAL(JSON_QUERY({self.column}, {_literal(path)} RETURNING CLOB"
                   " NULL ON ERROR), %s) THEN 1 ELSE 0 END = 1)")
            return [(sql, [*self.column_params, json.dumps(test.value)])]
        raise TypeError(test)

    def scalar(self, target: str, value: Any, binds: list) -> str:
        """A path predicate: ``target`` is the JSON scalar ``value`` (type-exact)."""
        if value is None:
            return f'{target}.type() == "null"'
        if isinstance(value, bool):
            return f'{target}.type() == "boolean" && {target} == {"true" if value else "false"}'
        kind = "string" if isinstance(value, str) else "number"
        return f'{target}.type() == "{kind}" && {target} == {self.operand(value, binds)}'

    def operand(self, value: str | int | float, binds: list) -> str:
        """The path's token for a string or number ``value``: a ``PASSING`` variable appended to ``binds``."""
        if value == "":
            # Oracle binds '' as NULL; the empty string is a fixed literal, not data.
            return '""'
        # Numbers as NUMBER: Decimal keeps 0.1 exact (a float would bind as BINARY_DOUBLE).
        binds.append(value if isinstance(value, (str, int)) else Decimal(repr(value)))
        return f"$v{len(binds) - 1}"

    def exists(self, path: str, binds: list) -> tuple[str, list]:
        passing = ""
        if binds:
            passing = " PASSING " + ", ".join(f'%s AS "v{i}"' for i in range(len(binds)))
        sql = f"JSON_EXISTS({self.column}, {_literal(path)}{passing} FALSE ON ERROR)"
        return sql, [*self.column_params, *binds]


# --- PostgreSQL ------------------------------------------------------------------------------

#: The mode every PostgreSQL path is evaluated in (``_Postgres``).
STRICT = "strict "


class _Postgres(_Oracle):
    """The Oracle paths in ``jsonb_path_exists``, the path and the ``vars`` object bound, in ``strict`` mode.

    Lax mode (PostgreSQL's default) unwraps arrays in a filter's comparisons, so ``{"k": [[true]]}`` matched
    ``{"k": {"$array_contains": true}}`` (found by the property test against the reference matcher). Strict
    mode compares what is there; a missing key is an error that ``silent`` (the last argument) turns into a
    non-match, as on Oracle (``FALSE ON ERROR``).
    """

    def test(self, keys: list[str], test) -> list[tuple[str, list]]:
        if isinstance(test, Equals) and not _is_scalar(test.value):  # a list: whole-value jsonb equality
            path = "$?(" + " && ".join(_type_guards(keys, "array")) + ")" + _steps(keys)
            # coalesce: no value at the path is a plain non-match (so NOT of it matches), as on Oracle
            sql = (f"coalesce(jsonb_path_query_first({self.column}, %s::jsonpath, '{{}}'::jsonb, true) = %s::jsonb, "
                   "false)")
            return [(sql, [*self.column_params, STRICT + path, json.dumps(test.value)])]
        return super().test(keys, test)

    def operand(self, value: str | int | float, binds: list) -> str:
        """As Oracle's, but every string (the empty one too) and number is a ``vars`` member, as is."""
        binds.append(value)
        return f"$v{len(binds) - 1}"

    def exists(self, path: str, binds: list) -> tuple[str, list]:
        variables = json.dumps({f"v{i}": value for i, value in enumerate(binds)})
        return (f"jsonb_path_exists({self.column}, %s::jsonpath, %s::jsonb, true)",
                [*self.column_params, STRICT + path, variables])
