"""Every documented limit over HTTP: a 422 naming the field, never a 500."""

from __future__ import annotations

import json
import time

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import MULTIPART_CONTENT

from memory.core.errors import MAX_BATCH_MESSAGES, MAX_CONTENT_CHARS, MAX_METADATA_BYTES, MAX_METADATA_DEPTH
from memory.models import Image, Message
from tests import image_samples as samples
from tests.api.helpers import add_messages
from tests.memory.test_limits import QUERY_SECONDS, nested


def field_of(resp) -> list:
    assert resp.status_code == 422, (resp.status_code, resp.content[:300])
    return resp.json()["detail"][0]["loc"]


def test_message_limits_are_422_naming_the_field(api, make_thread):
    make_thread(thread_id="t1")
    resp = add_messages(api, "t1", [{"role": "user", "content": "x" * (MAX_CONTENT_CHARS + 1)}])
    assert field_of(resp) == ["body", "messages[0].content"] and "the limit is 100000" in resp.text
    resp = add_messages(api, "t1", [{"role": "user", "content": "hi"}] * (MAX_BATCH_MESSAGES + 1))
    assert field_of(resp) == ["body", "messages"]
    resp = add_messages(api, "t1", [{"role": "user", "content": "hi", "metadata": nested(MAX_METADATA_DEPTH + 1)}])
    assert field_of(resp) == ["body", "messages[0].metadata"]
    assert not Message.objects.exists()
    resp = api.post("/api/threads/t1/memories", {"content": "y" * (MAX_CONTENT_CHARS + 1)})
    assert field_of(resp) == ["body", "content"]


def test_a_1_mb_query_is_refused_in_under_a_second(api, make_thread):
    make_thread(thread_id="t1")
    started = time.monotonic()
    resp = api.post("/api/threads/t1/search", {"query": "word " * (2**20 // 5)})
    assert time.monotonic() - started < QUERY_SECONDS
    assert field_of(resp) == ["body", "query"]
    resp = api.post("/api/search", {"query": "q" * 2**20, "user_id": "u1"})
    assert field_of(resp) == ["body", "query"]


def test_metadata_filter_size_is_422(api, make_thread):
    make_thread(thread_id="t1")
    resp = api.post("/api/threads/t1/search", {"query": "tea", "metadata_filter": {f"k{i}": i for i in range(1000)}})
    assert field_of(resp) == ["body", "metadata_filter"]
    resp = api.post("/api/threads/t1/search",
                    {"query": "tea", "metadata_filter": {"tags": {"$array_contains_any": list(range(500))}}})
    assert field_of(resp) == ["body", "metadata_filter.tags.$array_contains_any"]
    resp = api.post("/api/threads/t1/context-card", {"metadata_filter": {f"k{i}": i for i in range(1000)}})
    assert field_of(resp) == ["body", "metadata_filter"]
    resp = api.get("/api/threads/t1/images", {"metadata_filter": json.dumps({f"k{i}": i for i in range(1000)})})
    assert field_of(resp) == ["query", "metadata_filter"]


def test_multipart_metadata_of_any_depth_is_a_422(api, make_thread):
    make_thread(thread_id="t1")

    def post(metadata: str):
        return api.post("/api/threads/t1/images", {"image": SimpleUploadedFile("x.png", samples.png()),
                                                   "description": "x", "metadata": metadata},
                        content_type=MULTIPART_CONTENT)

    for depth in (MAX_METADATA_DEPTH + 1, 930, 5000):  # 930 was stored (then pages broke), 970+ was a 500
        assert field_of(post('{"k": ' * (depth - 1) + "{}" + "}" * (depth - 1))) == ["body", "metadata"]
    assert not Image.objects.exists()
    assert post(json.dumps(nested(MAX_METADATA_DEPTH))).status_code == 201


def test_a_multipart_upload_over_the_image_limit_is_refused_before_parsing(api, make_thread, monkeypatch):
    from django.http import multipartparser

    make_thread(thread_id="t1")
    parsed = []
    original = multipartparser.MultiPartParser.parse
    monkeypatch.setattr(multipartparser.MultiPartParser, "parse", lambda self: parsed.append(1) or original(self))
    resp = api.post("/api/threads/t1/images", {"image": SimpleUploadedFile("x.png", b"\0" * (22 * 1024 * 1024))},
                    content_type=MULTIPART_CONTENT)
    assert field_of(resp) == ["body", "image"] and "the upload is" in resp.text
    assert parsed == []


def test_every_list_answers_at_most_one_page(api, make_thread, settings):
    """``limit`` over ``OAM_API_MAX_PAGE`` is a 422 on every list; a get_messages window wider than the page
    cap (``end=-1`` over a long thread included) is a 422 naming ``end``; within the cap it answers."""
    make_thread(thread_id="t1")
    assert add_messages(api, "t1", [{"role": "user", "content": f"m{i}"} for i in range(5)]).status_code == 201
    cap = settings.OAM_API_MAX_PAGE
    for path in ("/api/threads", "/api/threads/t1/messages", "/api/messages", "/api/memories", "/api/images",
                 "/api/threads/t1/images", "/api/threads/t1/memories"):
        resp = api.get(f"{path}?limit={cap + 1}")
        assert field_of(resp)[-1] == "limit", path
        assert api.get(f"{path}?limit={cap}").status_code == 200, path
    settings.OAM_API_MAX_PAGE = 3
    for query in ("?end=-1", "?start=0&end=5", "?start=1&end=-1"):
        resp = api.get(f"/api/threads/t1/messages{query}")
        assert field_of(resp)[-1] == "end", query
        assert "at most 3" in resp.text
    assert [m["content"] for m in api.get("/api/threads/t1/messages?start=2&end=-1").json()["items"]] == \
        ["m2", "m3", "m4"]
    assert len(api.get("/api/threads/t1/messages").json()["items"]) == 3  # the recent window, capped too
    assert [m["content"] for m in api.get("/api/threads/t1/messages?start=1").json()["items"]] == ["m1", "m2", "m3"]


def test_metadata_over_its_size_limit_is_a_422_on_every_record(api, make_thread):
    big = {"blob": "x" * MAX_METADATA_BYTES}
    assert field_of(api.post("/api/threads", {"thread_id": "t-big", "metadata": big})) == ["body", "metadata"]
    make_thread(thread_id="t1")
    resp = add_messages(api, "t1", [{"role": "user", "content": "hi", "metadata": big}])
    assert field_of(resp) == ["body", "messages[0].metadata"]
    resp = api.post("/api/threads/t1/memories", {"content": "note", "metadata": big})
    assert field_of(resp) == ["body", "metadata"] and "65536" in resp.text
    fits = {"blob": "é" * ((MAX_METADATA_BYTES - 20) // 2)}  # two bytes a character: within the limit
    assert api.post("/api/threads/t1/memories", {"content": "note", "metadata": fits}).status_code == 201
    assert not Message.objects.exists()


def test_the_per_request_embedding_budget_is_a_422_naming_the_field_and_the_budget(api, make_thread, monkeypatch):
    from memory import embedders

    make_thread(thread_id="t1")
    monkeypatch.setattr(embedders, "MAX_EMBED_CHARS", 1_000)
    resp = add_messages(api, "t1", [{"role": "user", "content": "garden words " * 50}] * 2)
    assert field_of(resp) == ["body", "messages"]
    assert "the per-request embedding budget is 1000 (MAX_EMBED_CHARS)" in resp.text
    resp = api.post("/api/threads/t1/memories", {"content": "garden words " * 100})
    assert field_of(resp) == ["body", "content"] and "embedding budget" in resp.text
    assert not Message.objects.exists()


def test_more_images_than_a_call_may_hold_is_a_422_naming_the_part(api, make_thread):
    import base64

    from memory.core.errors import MAX_BATCH_IMAGES

    make_thread(thread_id="t1")
    part = {"type": "image", "data": base64.b64encode(samples.png()).decode(), "description": "a red square"}
    resp = add_messages(api, "t1", [{"role": "user", "content": [part] * (MAX_BATCH_IMAGES + 1)}])
    assert field_of(resp) == ["body", f"messages[0].content[{MAX_BATCH_IMAGES}].data"]
    assert "(MAX_BATCH_IMAGES)" in resp.text and not Message.objects.exists() and not Image.objects.exists()
