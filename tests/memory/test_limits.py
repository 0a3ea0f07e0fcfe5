"""Bounded work per call: each documented limit is a ValueError naming the field,
and input right at a limit still works (real SQLite file, real embedder)."""

from __future__ import annotations

import time

import pytest

from memory.core.errors import (
    MAX_BATCH_CHARS,
    MAX_BATCH_MESSAGES,
    MAX_CONTENT_CHARS,
    MAX_METADATA_DEPTH,
    MAX_QUERY_CHARS,
    check_depth,
)
from memory.models import Message
from memory.records.metadata_filter import MAX_FILTER_TERMS, MAX_FILTER_VALUES
from memory.search.request import keyword_terms

#: The issue's bound for a 1 MB query.
QUERY_SECONDS = 1.0


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def test_keyword_terms_is_linear_and_stops_at_32_terms():
    words = " ".join(f"word{i}" for i in range(200_000))  # ~1.6 MB of distinct words
    started = time.process_time()
    terms = keyword_terms(words)
    assert time.process_time() - started < QUERY_SECONDS
    assert terms == [f"word{i}" for i in range(32)]
    assert keyword_terms("The İstanbul trip, the trip!") == ["stanbul", "trip"]  # as before ("i": a stopword)


def test_a_1_mb_query_is_refused_at_once_naming_the_field(thread):
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"query: is 1048576 characters; the limit is {MAX_QUERY_CHARS}"):
        thread.search("a" * 2**20)
    assert time.monotonic() - started < QUERY_SECONDS
    assert thread.search("x " * (MAX_QUERY_CHARS // 2)) == []  # at the limit: answered


def test_message_size_and_batch_limits_name_the_field(thread):
    with pytest.raises(ValueError, match=r"messages\[1\]\.content: is 100001 characters"):
        thread.add_messages([{"role": "user", "content": "ok"},
                             {"role": "user", "content": "x" * (MAX_CONTENT_CHARS + 1)}])
    with pytest.raises(ValueError, match=rf"messages: holds {MAX_BATCH_MESSAGES + 1} messages; the limit is"):
        thread.add_messages([{"role": "user", "content": "hi"}] * (MAX_BATCH_MESSAGES + 1))
    per = MAX_CONTENT_CHARS - 1
    with pytest.raises(ValueError, match=r"messages: hold \d+ characters of text; the limit is"):
        thread.add_messages([{"role": "user", "content": "y" * per}] * (MAX_BATCH_CHARS // per + 1))
    with pytest.raises(ValueError, match=r"content: is 100001 characters"):
        thread.add_memory("z" * (MAX_CONTENT_CHARS + 1))
    assert not Message.objects.exists()
    [mid] = thread.add_messages([{"role": "user", "content": "fine"}])
    with pytest.raises(ValueError, match=r"^content: is 100001 characters"):
        thread.update_message(mid, content="z" * (MAX_CONTENT_CHARS + 1))


def test_metadata_depth_is_bounded_everywhere_it_enters(client, thread):
    assert check_depth(nested(MAX_METADATA_DEPTH), "m")  # at the limit
    too_deep = nested(MAX_METADATA_DEPTH + 1)
    with pytest.raises(ValueError, match=rf"messages\[0\]\.metadata: nests more than {MAX_METADATA_DEPTH} levels"):
        thread.add_messages([{"role": "user", "content": "hi", "metadata": too_deep}])
    with pytest.raises(ValueError, match="^metadata: nests more than"):
        thread.add_memory("note", metadata=too_deep)
    with pytest.raises(ValueError, match="^metadata: nests more than"):
        client.create_thread(thread_id="deep", metadata=too_deep)
    very_deep: list = []
    for _ in range(5000):  # deeper than Python's recursion limit: still a ValueError, not a RecursionError
        very_deep = [very_deep]
    with pytest.raises(ValueError, match="^metadata: nests more than"):
        thread.add_memory("note", metadata={"x": very_deep})


def test_metadata_filter_size_is_bounded_and_the_largest_allowed_runs_in_sql(thread):
    thread.add_messages([{"role": "user", "content": "tea", "metadata": {"tags": ["a", "b"], "k0": 0}}])
    many_keys = {f"k{i}": i for i in range(1000)}
    with pytest.raises(ValueError, match=(r"^metadata_filter: has 1000 keys, list values and range bounds; "
                                          rf"the limit is {MAX_FILTER_TERMS}")):
        thread.search("tea", metadata_filter=many_keys)
    with pytest.raises(ValueError, match=(rf"metadata_filter\.tags\.\$array_contains_any: holds 500 values; "
                                          rf"the limit is {MAX_FILTER_VALUES}")):
        thread.search("tea", metadata_filter={"tags": {"$array_contains_any": list(range(500))}})
    # the largest filters allowed compile and run on SQLite
    assert thread.search("tea", metadata_filter={f"k{i}": i for i in range(MAX_FILTER_TERMS)}) == []
    values = ["a"] + [f"v{i}" for i in range(MAX_FILTER_VALUES - 1)]
    wide = {"tags": {"$array_contains_any": values},
            **{f"n{i}": {"$not": i} for i in range(MAX_FILTER_TERMS - MAX_FILTER_VALUES - 1)}}
    assert [r.content for r in thread.search("tea", metadata_filter=wide)] == ["tea"]
    assert thread.search("tea", metadata_filter={"tags": {"$array_contains": values}}) == []
    with pytest.raises(ValueError, match="^metadata_filter: has 10001 keys, list values and range bounds"):
        thread.search("tea", metadata_filter={"tags": list(range(10_000))})  # compared element by element
    assert thread.search("tea", metadata_filter={"tags": list(range(MAX_FILTER_TERMS - 1))}) == []


def test_the_per_request_embedding_budget_refuses_before_anything_is_embedded_or_written(thread, monkeypatch):
    """Issue #29: 1,000 messages of 1,000 characters cost 73.5 CPU-s in one request. A call whose chunks
    (each counted up to ``TEXT_CHARS``) are over ``MAX_EMBED_CHARS`` is refused, naming the field and the
    budget; at the budget it is embedded. The real constant holds a ``MAX_CONTENT_CHARS`` record."""
    from memory import embedders
    from memory.core.batching import embedding_cost
    from memory.core.chunking import chunk_text
    from memory.core.errors import MAX_EMBED_CHARS
    from memory.index import writer as index

    words = " ".join(f"w{i % 97}" for i in range(MAX_CONTENT_CHARS // 4))[:MAX_CONTENT_CHARS]
    full = sum(embedding_cost(index.embedding_text(c, None))
               for c in chunk_text(index.message_chunk_text("user", words)))
    assert 2 * full <= MAX_EMBED_CHARS  # two records of the largest size fit in one call
    assert full > MAX_CONTENT_CHARS  # overlap and prefixes: the budget counts what is embedded
    calls = []
    real = embedders.get_embedder()
    monkeypatch.setattr(embedders, "get_embedder", lambda: calls.append(1) or real)
    text = "a few words about the garden " * 20
    cost = sum(embedding_cost(index.embedding_text(c, None))
               for c in chunk_text(index.message_chunk_text("user", text)))
    monkeypatch.setattr(embedders, "MAX_EMBED_CHARS", 2 * cost - 1)
    with pytest.raises(ValueError, match=rf"messages: needs {2 * cost} characters embedded; the per-request "
                                         rf"embedding budget is {2 * cost - 1} \(MAX_EMBED_CHARS\)"):
        thread.add_messages([{"role": "user", "content": text}] * 2)
    with pytest.raises(ValueError, match=r"content: needs \d+ characters embedded"):
        thread.add_memory(text * 2)
    assert not calls and not Message.objects.exists()
    mid = thread.add_messages([{"role": "user", "content": text}])[0]  # one is within the budget
    with pytest.raises(ValueError, match=r"content: needs \d+ characters embedded"):
        thread.update_message(mid, content=text * 2)
    assert Message.objects.get().content == text and len(calls) == 1


def test_a_calls_images_are_bounded_in_number_and_pixels_before_they_are_decoded(thread, monkeypatch):
    """Issue #29 (an outside attack): 3,000 image parts in one message were accepted, each fully decoded (a
    2 KB lossless WEBP of 40 megapixels costs 0.35 CPU-s). A call holds at most ``MAX_BATCH_IMAGES`` images
    and ``MAX_BATCH_IMAGE_PIXELS`` pixels, counted from the headers, across all its messages."""
    from memory.core.errors import MAX_BATCH_IMAGE_PIXELS, MAX_BATCH_IMAGES
    from memory.records import image_rules
    from tests import image_samples as samples

    assert MAX_BATCH_IMAGES == 100
    assert MAX_BATCH_IMAGE_PIXELS == 3 * image_rules.IMAGE_LIMIT_MAXIMA["max_image_pixels"]
    part = {"type": "image", "bytes": samples.png(), "description": "a red square"}
    half = MAX_BATCH_IMAGES // 2
    batch = [{"role": "user", "content": [part] * half}, {"role": "user", "content": [part] * (half + 1)}]
    with pytest.raises(ValueError, match=rf"messages\[1\]\.content\[{half}\]\.bytes: is image "
                                         rf"{MAX_BATCH_IMAGES + 1} of this call; the limit is {MAX_BATCH_IMAGES}"):
        thread.add_messages(batch)
    monkeypatch.setattr(image_rules, "MAX_BATCH_IMAGE_PIXELS", 2 * 48 * 32)  # two 48x32 samples
    loads = []
    real_load = image_rules.PilImage.Image.load
    monkeypatch.setattr(image_rules.PilImage.Image, "load", lambda self: loads.append(1) or real_load(self))
    mid = thread.add_messages([{"role": "user", "content": [part, part]}])[0]  # at the limit
    two = len(loads)
    with pytest.raises(ValueError, match=r"messages\[2\]\.content\[0\]\.bytes: brings this call's images to 4608 "
                                         r"pixels; the limit is 3072 per call \(MAX_BATCH_IMAGE_PIXELS\)"):
        thread.add_messages([{"role": "user", "content": [part]}] * 3)
    assert len(loads) == 2 * two > 0  # the third image was refused from its header: it was never decoded
    assert Message.objects.count() == 1
    with pytest.raises(ValueError, match=r"content\[2\]\.bytes: brings this call's images"):
        thread.update_message(mid, content=[part] * 3)
