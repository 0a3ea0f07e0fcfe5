"""metadata_filter compiled for Oracle 23.7 without a database (``tests/oracle/offline.py``).

Django's Oracle JSONField is NCLOB ``IS JSON``; each positive test is one
``JSON_EXISTS`` with a literal path (keys quoted as JSON strings inside an SQL
literal) and the values bound through ``PASSING %s AS "vN"``; whole-array
equality is ``JSON_EQUAL`` on ``JSON_QUERY``. Paths stay in Oracle's default lax
mode and assert every JSON type with ``type()``. These tests pin that SQL text;
it is not executed here.
"""

import json
import re
from decimal import Decimal

import pytest

from memory.models import SearchChunk
from memory.records.metadata_filter import compile_filter

COL = '"OAM_SEARCH_CHUNKS"."METADATA"'
SPEC_EXAMPLE = {"source": "chat", "tags": {"$array_contains": "trip", "$not": {"$array_contains": "archived"}}}
HOSTILE_KEY = "x' OR 1=1 --\"\\%s)]?$v0 ü"


def where(oracle, metadata_filter):
    qs = SearchChunk.objects.filter(compile_filter(metadata_filter)).values_list("id")
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert sql.startswith('SELECT "OAM_SEARCH_CHUNKS"."ID" AS "ID" FROM "OAM_SEARCH_CHUNKS" WHERE ')
    return sql.split(" WHERE ", 1)[1], list(params)


def exists(path, binds=0):
    passing = " PASSING " + ", ".join(f'%s AS "v{i}"' for i in range(binds)) if binds else ""
    return f"JSON_EXISTS({COL}, '{path}'{passing} FALSE ON ERROR)"


def split_literals(sql):
    """(text outside string literals, [literal contents with '' undone])."""
    outside, literals, i = [], [], 0
    while i < len(sql):
        if sql[i] != "'":
            outside.append(sql[i])
            i += 1
            continue
        j, content = i + 1, []
        while True:
            if sql[j] == "'" and sql[j + 1:j + 2] == "'":
                content.append("'")
                j += 2
            elif sql[j] == "'":
                break
            else:
                content.append(sql[j])
                j += 1
        literals.append("".join(content))
        outside.append("'?'")
        i = j + 1
    return "".join(outside), literals


def test_spec_example(oracle):
    sql, params = where(oracle, SPEC_EXAMPLE)
    source = '$?(@."source".type() == "string" && @."source" == $v0)'
    tags = '$?(@."tags".type() == "array")."tags"[*]?(@.type() == "string" && @ == $v0)'
    assert sql == f"({exists(source, 1)} AND {exists(tags, 1)} AND NOT ({exists(tags, 1)}))"
    assert params == ["chat", "trip", "archived"]


def test_scalars_are_type_exact_and_bound(oracle):
    sql, params = where(oracle, {"s": "1", "n": 1, "f": 0.1, "t": True, "no": False, "z": None, "e": ""})
    assert sql == "(" + " AND ".join([
        exists('$?(@."s".type() == "string" && @."s" == $v0)', 1),
        exists('$?(@."n".type() == "number" && @."n" == $v0)', 1),
        exists('$?(@."f".type() == "number" && @."f" == $v0)', 1),
        exists('$?(@."t".type() == "boolean" && @."t" == true)'),
        exists('$?(@."no".type() == "boolean" && @."no" == false)'),
        exists('$?(@."z".type() == "null")'),
        exists('$?(@."e".type() == "string" && @."e" == "")'),  # Oracle would bind '' as NULL
    ]) + ")"
    assert params == ["1", 1, Decimal("0.1")]  # a float binds as an exact NUMBER, not BINARY_DOUBLE
    assert type(params[1]) is int


def test_nested_filters_guard_every_ancestor(oracle):
    sql, params = where(oracle, {"travel": {"need": "transit", "opts": {}, "mode": {"$not": "walk"}}})
    travel = '@."travel".type() == "object"'
    mode = exists(f'$?({travel} && @."travel"."mode".type() == "string" && @."travel"."mode" == $v0)', 1)
    assert sql == "(" + " AND ".join([
        exists(f"$?({travel})"),
        exists(f'$?({travel} && @."travel"."need".type() == "string" && @."travel"."need" == $v0)', 1),
        exists(f'$?({travel} && @."travel"."opts".type() == "object")'),
        f"NOT ({mode})",
    ]) + ")"
    assert params == ["transit", "walk"]


def test_lists_compare_as_whole_json_values(oracle):
    sql, params = where(oracle, {"a": {"tags": ["x", {"k": 1}, [True]]}})
    path = '$?(@."a".type() == "object" && @."a"."tags".type() == "array")."a"."tags"'
    a_is_object = exists('$?(@."a".type() == "object")')
    assert sql == (
        f"({a_is_object} AND (CASE WHEN JSON_EQUAL(JSON_QUERY({COL}, '{path}' "
        "RETURNING CLOB NULL ON ERROR), %s) THEN 1 ELSE 0 END = 1))"
    )
    assert params == ['["x", {"k": 1}, [true]]']


def test_membership_operators(oracle):
    sql, params = where(oracle, {"tags": {"$array_contains": ["a", 2], "$array_contains_any": [None, False, "x"]}})
    items = '$?(@."tags".type() == "array")."tags"[*]'
    assert sql == "(" + " AND ".join([
        exists(f'{items}?(@.type() == "string" && @ == $v0)', 1),
        exists(f'{items}?(@.type() == "number" && @ == $v0)', 1),
        exists(f'{items}?((@.type() == "null") || (@.type() == "boolean" && @ == false) '
               '|| (@.type() == "string" && @ == $v0))', 1),
    ]) + ")"
    assert params == ["a", 2, "x"]


def test_ranges_are_type_guarded_comparisons_with_bound_values(oracle):
    sql, params = where(oracle, {"price": {"$gte": 1, "$lt": 2.5}, "day": {"$gt": "2026-03-01", "$lte": "ünï"},
                                 "name": {"$gt": ""}, "big": {"$lte": 2**63 - 1}})
    number = '$?(@."price".type() == "number" && @."price" {} $v0)'
    string = '$?(@."day".type() == "string" && @."day" {} $v0)'
    assert sql == "(" + " AND ".join([
        exists(number.format(">="), 1),
        exists(number.format("<"), 1),
        exists(string.format(">"), 1),
        exists(string.format("<="), 1),
        exists('$?(@."name".type() == "string" && @."name" > "")'),  # Oracle would bind '' as NULL
        exists('$?(@."big".type() == "number" && @."big" <= $v0)', 1),
    ]) + ")"
    assert params == [1, Decimal("2.5"), "2026-03-01", "ünï", 2**63 - 1]
    assert type(params[0]) is int and type(params[4]) is int  # exact NUMBERs, not BINARY_DOUBLE


def test_ranges_nest_and_negate(oracle):
    sql, params = where(oracle, {"a": {"b": {"$not": {"$gt": 5, "$lte": 9.75}}}})
    a = '@."a".type() == "object"'
    b = '@."a"."b"'
    inner = " AND ".join([
        exists(f'$?({a} && {b}.type() == "number" && {b} > $v0)', 1),
        exists(f'$?({a} && {b}.type() == "number" && {b} <= $v0)', 1),
    ])
    assert sql == f"({exists(f'$?({a})')} AND NOT (({inner})))"
    assert params == [5, Decimal("9.75")]


def test_the_driver_gets_range_bounds_as_named_binds(oracle, oracle_driver):
    qs = SearchChunk.objects.filter(compile_filter({"day": {"$gte": "2026-01-01", "$lt": "2026-04-01"},
                                                    "price": {"$gt": 0.1}}))
    assert list(qs.using("oracle_offline").values_list("id")) == []
    (kind, statement, binds), = oracle_driver.executed()
    assert kind == "execute"
    outside, _ = split_literals(statement)
    assert "%" not in outside
    assert ("""'$?(@."day".type() == "string" && @."day" >= $v0)' PASSING :arg0 AS "v0" FALSE ON ERROR"""
            in statement)
    assert ("""'$?(@."day".type() == "string" && @."day" < $v0)' PASSING :arg1 AS "v0" FALSE ON ERROR"""
            in statement)
    assert ("""'$?(@."price".type() == "number" && @."price" > $v0)' PASSING :arg2 AS "v0" FALSE ON ERROR"""
            in statement)
    assert binds == {":arg0": "2026-01-01", ":arg1": "2026-04-01", ":arg2": Decimal("0.1")}


def test_digit_and_dotted_keys_are_quoted_member_steps(oracle):
    sql, _ = where(oracle, {"0": {"a.b": 1}})
    assert '@."0"."a.b".type() == "number"' in sql
    assert "[0]" not in sql


def test_hostile_key_stays_inside_its_path_literal(oracle):
    sql, params = where(oracle, {HOSTILE_KEY: {"$not": "v"}, "ok": 1})
    outside, literals = split_literals(sql)
    assert outside == (
        f"(NOT (JSON_EXISTS({COL}, '?' PASSING %s AS \"v0\" FALSE ON ERROR)) AND "
        f"JSON_EXISTS({COL}, '?' PASSING %s AS \"v0\" FALSE ON ERROR))"
    )
    assert params == ["v", 1]
    # The literal is the path with % doubled for Django's formatting; the key is one JSON string step.
    path = literals[0].replace("%%", "%")
    step = json.dumps(HOSTILE_KEY)
    assert step.isascii() and "\\u00fc" in step
    assert path == f"$?(@.{step}.type() == \"string\" && @.{step} == $v0)"
    assert json.loads(step) == HOSTILE_KEY
    assert re.fullmatch(r'\$\?\(@\.(".*")\.type\(\)', path.split(" == ")[0]).group(1) == step


def test_values_are_never_inlined(oracle):
    values = ["chat') OR 1=1 --", 'say "hi"', "%s", "ünï", 12345, 6.25, "sneaky $v1"]
    metadata_filter = {f"k{i}": v for i, v in enumerate(values)}
    metadata_filter["tags"] = {"$array_contains_any": ["needle-a", "needle-b"], "$not": ["needle-c"]}
    sql, params = where(oracle, metadata_filter)
    for text in ["chat", "hi", "ünï", "12345", "6.25", "sneaky", "needle"]:
        assert text not in sql
    assert sql.count("%s") == len(params)
    assert params == ["chat') OR 1=1 --", 'say "hi"', "%s", "ünï", 12345, Decimal("6.25"), "sneaky $v1",
                      "needle-a", "needle-b", '["needle-c"]']


def test_none_and_empty_filter_add_no_sql(oracle):
    for metadata_filter in (None, {}):
        qs = SearchChunk.objects.filter(compile_filter(metadata_filter)).values_list("id")
        sql, params = qs.query.get_compiler(connection=oracle).as_sql()
        assert "JSON_" not in sql and " WHERE " not in sql and params == ()


def test_the_driver_gets_named_binds_and_the_real_path(oracle, oracle_driver):
    qs = SearchChunk.objects.filter(compile_filter({HOSTILE_KEY: "v", "tags": {"$array_contains": "trip"}}))
    assert list(qs.using("oracle_offline").values_list("id")) == []
    (kind, statement, binds), = oracle_driver.executed()
    assert kind == "execute"
    outside, _ = split_literals(statement)
    assert "%" not in outside  # every placeholder became a named bind
    step = json.dumps(HOSTILE_KEY).replace("'", "''")  # Django's %% became %
    assert f"'$?(@.{step}.type() == \"string\" && @.{step} == $v0)' PASSING :arg0 AS \"v0\" FALSE ON ERROR" in statement
    assert "PASSING :arg1 AS \"v0\"" in statement
    assert binds == {":arg0": "v", ":arg1": "trip"}


@pytest.mark.parametrize("metadata_filter", [
    {"a": {"b": {"c": {"$not": {"$not": [[1, {"x": None}]]}}}}},
    {"k": {"$array_contains": 1.5, "$array_contains_any": ["", True]}},
    {"k": {"$gt": "", "$lt": "z", "$not": {"$gte": 1.5, "$lte": -3}}, "j": {"x": {"$lt": 0}}},
])
def test_every_placeholder_has_a_param(oracle, metadata_filter):
    sql, params = where(oracle, metadata_filter)
    assert sql.count("%s") == len(params)
    outside, _ = split_literals(sql)
    assert outside.count("(") == outside.count(")")


def test_the_search_query_carries_the_filter(oracle):
    """What replaces the old key-transform shape in test_search_sql (same request filter)."""
    import datetime

    import numpy as np

    from memory.core.types import MemorySearchConfig, SearchScope
    from memory.search.query import chunk_queryset
    from memory.search.request import build_request

    request = build_request("refund policy", project_id=7, scope=SearchScope(user_id="user-1"),
                            config=MemorySearchConfig(), metadata_filter={"topic": "billing", "extra": {}})
    now = datetime.datetime(2026, 11, 30, 12, 0, 0, tzinfo=datetime.UTC)
    qs = chunk_queryset(request, np.zeros(384, dtype="f4"), now=now)
    sql, params = qs.query.get_compiler(connection=oracle).as_sql()
    assert exists('$?(@."topic".type() == "string" && @."topic" == $v0)', 1) in sql
    assert exists('$?(@."extra".type() == "object")') in sql
    assert "billing" not in sql and "billing" in params
    assert sql.count("%s") == len(params)
