"""Schemathesis hooks that make the generated inputs large ("no 500 for any input").

Not a test module: load it with ``SCHEMATHESIS_HOOKS=tests.fuzz.schemathesis_large``
(docs/api.md, "Limits"). In each generated JSON body one value, chosen at random
from the body's own content, is made large: a string to 100,001 or 1,048,576
characters (over the content and query limits), a list to 1,001 or 1,500 items
(over the batch and filter limits), or a ``metadata``/``metadata_filter``
object to 1,000 keys or 25 or 500 levels deep; one value only, so a body
stays near 1 MB. Query strings get 1,024-character values. Nothing here knows
the API's rules.
"""

import json
import random
import zlib

import schemathesis

STRING_SIZES = (100_001, 1_048_576)
LIST_SIZES = (1_001, 1_500)
DEPTHS = (25, 500)  # deeper than the API's 20 and the JSON parser's ~200; the client's json.dumps stops near 1,000


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def _places(value, path=()):
    """Every (path, kind) that can be made large: strings, lists, metadata objects."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("metadata", "metadata_filter"):
                yield (*path, key), "metadata"
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        yield path, "list"
        for i, item in enumerate(value):
            yield from _places(item, (*path, i))
    elif isinstance(value, str) and not (path and str(path[-1]).endswith("id")):
        yield path, "string"  # ids are left alone: they come back in URLs of later calls


def _large(value, kind: str, rng: random.Random):
    if kind == "metadata":
        return _nested(rng.choice(DEPTHS)) if rng.random() < 0.5 else {f"k{i}": i for i in range(1_000)}
    if kind == "list":
        size = rng.choice(LIST_SIZES)
        return (value * (size // len(value) + 1))[:size] if value else ["x"] * size
    return ((value or "x") * (rng.choice(STRING_SIZES) // max(1, len(value or "x")) + 1))


def _grow(body, rng: random.Random):
    places = list(_places(body))
    if not places:
        return body
    path, kind = rng.choice(places)
    if not path:
        return _large(body, kind, rng)
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = _large(parent[path[-1]], kind, rng)
    return body


def _rng(value) -> random.Random:
    return random.Random(zlib.crc32(json.dumps(value, sort_keys=True, default=str).encode()))


@schemathesis.hook
def map_body(context, body):
    """Grow JSON bodies (multipart bodies are left as generated)."""
    if isinstance(body, (dict, list)):
        return _grow(body, _rng(body))
    return body


@schemathesis.hook
def map_query(context, query):
    """Give string query parameters 1,024 characters, half the time (percent-encoded, the request line
    stays under the 16 KiB Twisted allows; longer ones are dropped without an answer)."""
    if not isinstance(query, dict):
        return query
    rng = _rng(query)
    return {k: (v * (1_024 // max(1, len(v)) + 1))[:1_024] if isinstance(v, str) and v and rng.random() < 0.5 else v
            for k, v in query.items()}
