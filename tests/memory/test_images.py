"""Images as memory through the Python API: validation, captions, CRUD, messages, search.

Every image is a real file built by Pillow (tests/image_samples.py), hostile
ones included; the store is the real SQLite file with sqlite-vec and the real
embedder. Captions use ``ScriptedLlm``, which records what it was sent.
"""

import asyncio
import base64
import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory.client import AgentMemory, ImageContent, ImageMimeType, MemoryExtractionConfig
from memory.core.types import ImageRecord, TextContent, TimeToLiveAnchor
from memory.llm.adapters import LlmUnavailable
from memory.llm.scripted import ScriptedLlm
from memory.models import Image, Message, SearchChunk
from memory.records import image_rules
from memory.records.image_rules import ImageInputLimitConfig
from tests import image_samples as samples
from tests.ids import default_project_id, key

NO_EXTRACTION = MemoryExtractionConfig(extract_memories=False)


@pytest.fixture
def client(db):
    """A client without an LLM (captions off) unless a test gives one."""
    return AgentMemory(llm=None)


def nothing_stored():
    return Image.objects.count() == 0 and not SearchChunk.objects.filter(source_kind="image").exists()


def scripted_thread(client, replies, thread_id="t-llm", **kwargs):
    llm = ScriptedLlm(replies)
    thread = client.create_thread(thread_id=thread_id, user_id="user-1", agent_id="agent-1", llm=llm,
                                  memory_extraction_config=NO_EXTRACTION, **kwargs)
    return thread, llm


# --- validation ------------------------------------------------------------------------


@pytest.mark.parametrize("make,mime,size", [
    (samples.png, ImageMimeType.PNG, (48, 32)),
    (samples.jpeg, ImageMimeType.JPEG, (48, 32)),
    (samples.webp, ImageMimeType.WEBP, (48, 32)),
])
def test_png_jpeg_webp_are_detected_stored_and_read_back(thread, make, mime, size):
    data = make()
    image_id = thread.add_image(data, description="a plain test card")
    [record] = thread.list_images()
    assert isinstance(record, ImageRecord)
    assert (record.id, record.mime_type, (record.width, record.height)) == (image_id, mime, size)
    assert record.size_bytes == len(data) and record.bytes is None
    assert (record.thread_id, record.user_id, record.agent_id, record.message_id) == (
        "t-main", "user-1", "agent-1", None)
    [loaded] = thread.list_images(image_id=image_id, include_bytes=True)
    assert loaded.bytes == data


def test_a_declared_type_must_match_the_bytes(thread):
    assert thread.add_image(samples.jpeg(), mime_type=ImageMimeType.JPEG, description="ok")
    assert thread.add_image(samples.png(), mime_type="image/png", description="ok")
    with pytest.raises(ValueError, match=r"mime_type: declared image/png but the bytes are image/jpeg"):
        thread.add_image(samples.jpeg(), mime_type="image/png", description="a lie")
    with pytest.raises(ValueError, match=r"mime_type: 'image/gif' is not supported"):
        thread.add_image(samples.png(), mime_type="image/gif", description="x")
    assert Image.objects.count() == 2


@pytest.mark.parametrize("make,message", [
    (samples.animated_png, r"animated PNG \(2 frames\)"),
    (samples.animated_webp, r"animated WEBP \(2 frames\)"),
    (samples.bomb, r"9000x6000 = 54000000 pixels; the limit is 40000000"),
    (samples.giant_header_png, r"decompression bomb\); the limit is 40000000 \(ImageInputLimitConfig"),
    (samples.truncated_png, r"corrupt or truncated"),
    (samples.truncated_jpeg, r"corrupt or truncated"),
    (samples.gif, r"not a PNG, JPEG or WEBP image"),
    (lambda: b"definitely not an image", r"not a PNG, JPEG or WEBP image"),
    (lambda: samples.png()[:-12] + b"\0" * 12, r"corrupt or truncated"),  # IEND chunk and CRC destroyed
    (lambda: b"", r"is empty"),
])
def test_unsafe_or_broken_images_are_refused_and_nothing_is_stored(thread, make, message):
    with pytest.raises(ValueError, match=rf"^image: .*{message}"):
        thread.add_image(make(), description="never stored")
    assert nothing_stored()


def test_the_size_limit_applies_before_pillow_sees_the_bytes(client, monkeypatch):
    thread = client.create_thread(thread_id="t-small",
                                  image_input_limit_config=ImageInputLimitConfig(max_raw_image_bytes=100))

    def pillow_must_not_run(*args, **kwargs):
        raise AssertionError("Pillow opened an oversize image")

    monkeypatch.setattr(image_rules.PilImage, "open", pillow_must_not_run)
    data = samples.jpeg()
    assert len(data) > 100
    with pytest.raises(ValueError, match=rf"^image: is {len(data)} bytes; the limit is 100 bytes"):
        thread.add_image(data, description="too big")
    assert nothing_stored()


def test_limits_are_per_thread_kept_with_it_and_cannot_be_disabled(client):
    limits = ImageInputLimitConfig(max_image_pixels=1000)
    thread = client.create_thread(thread_id="t-tiny", image_input_limit_config=limits)
    assert client.get_thread("t-tiny").image_input_limit_config == limits
    with pytest.raises(ValueError, match=r"48x32 = 1536 pixels; the limit is 1000"):
        thread.add_image(samples.png(), description="too many pixels")
    assert thread.add_image(samples.png((20, 20)), description="small enough")
    assert client.create_thread(thread_id="t-default").image_input_limit_config == ImageInputLimitConfig()
    # ValueError for every bad value, a non-int too, and above the SDK's absolute maximum (SDK 26.8.0)
    for bad in (0, -1, None, "5", True, 32 * 1024 * 1024 + 1):
        with pytest.raises(ValueError, match="max_raw_image_bytes"):
            ImageInputLimitConfig(max_raw_image_bytes=bad)
    with pytest.raises(TypeError, match="image_input_limit_config"):
        client.create_thread(image_input_limit_config={"max_raw_image_bytes": 5})


def test_defaults_are_the_sdks():
    limits = ImageInputLimitConfig()
    assert limits.max_raw_image_bytes == 10 * 1024 * 1024
    # ours: the ceiling too (memory.records.image_rules.IMAGE_LIMIT_MAXIMA)
    assert limits.max_image_pixels == 40_000_000
    assert limits.max_images_per_llm_request == 100
    assert limits.max_total_raw_image_bytes_per_llm_request == 100 * 1024 * 1024


def test_thread_limits_resolve_field_by_field_over_the_clients(db):
    client = AgentMemory(image_input_limit_config=ImageInputLimitConfig(max_images_per_llm_request=3))
    thread = client.create_thread(thread_id="t-lim", image_input_limit_config=ImageInputLimitConfig(
        max_raw_image_bytes=1000))
    limits = client.get_thread("t-lim").image_input_limit_config
    assert (limits.max_raw_image_bytes, limits.max_images_per_llm_request) == (1000, 3)
    assert thread.image_input_limit_config == limits
    assert limits.max_total_raw_image_bytes_per_llm_request == 100 * 1024 * 1024  # the SDK default


def test_wrong_argument_types(thread):
    with pytest.raises(TypeError, match="image: must be bytes"):
        thread.add_image(base64.b64encode(samples.png()).decode(), description="x")
    with pytest.raises(TypeError, match="description"):
        thread.add_image(samples.png(), description=5)
    with pytest.raises(TypeError, match="colour"):
        thread.add_image(samples.png(), description="x", colour="red")
    assert nothing_stored()


# --- captions ------------------------------------------------------------------------------


def test_a_description_is_bounded_like_a_memorys_text(thread):
    """An image's description is chunked and embedded like a memory's content: the same limit (MAX_CONTENT_CHARS),
    in ``add_image``, ``update_image`` and image parts (``image_rules.check_description``; import uses it too)."""
    long = "word " * 20_001
    with pytest.raises(ValueError, match="description: is 100005 characters; the limit is 100000"):
        thread.add_image(samples.png(), description=long)
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]\.description: is 100005 characters"):
        thread.add_messages([{"role": "user", "content": [{"type": "image", "bytes": samples.png(),
                                                           "description": long}]}])
    image_id = thread.add_image(samples.png(), description="short")
    with pytest.raises(ValueError, match="description: is 100005 characters"):
        thread.update_image(image_id, description=long)
    assert Image.objects.get(pk=key(image_id)).description == "short"


def test_without_an_llm_an_image_needs_a_description(thread):
    # SDK 26.8.0: with no LLM to caption it, an image without a description is refused.
    for description in ({}, {"description": None}):
        with pytest.raises(ValueError, match="^description: required"):
            thread.add_image(samples.png(), **description)
    assert nothing_stored()
    image_id = thread.add_image(samples.png(), description="a small square")
    [record] = thread.list_images()
    assert record.id == image_id and record.description == "a small square" and record.content == "a small square"
    assert SearchChunk.objects.filter(record_id=key(image_id)).exists()


def test_an_llm_captions_an_image_sent_as_an_image_url_data_uri(client):
    thread, llm = scripted_thread(client, ["  A red square on a white table.  "])
    data = samples.png()
    image_id = thread.add_image(data)
    assert thread.list_images()[0].description == "A red square on a white table."
    [request] = llm.requests
    assert request.schema is None and request.max_tokens == image_rules.CAPTION_MAX_TOKENS
    system, user = request.messages
    assert system["role"] == "system" and "describe images" in system["content"]
    text_part, image_part = user["content"]
    assert text_part == {"type": "text", "text": image_rules.CAPTION_USER_PROMPT}
    assert image_part == {"type": "image_url",
                          "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()}}
    [result] = thread.search("red square on a table", record_types=["image"])
    assert result.record.id == image_id


def test_a_given_description_is_not_sent_to_the_llm(client):
    thread, llm = scripted_thread(client, [])  # any request would fail the test
    thread.add_image(samples.jpeg(), description="given")
    assert llm.requests == [] and thread.list_images()[0].description == "given"


def test_caption_requests_respect_the_request_limits(client):
    limits = ImageInputLimitConfig(max_total_raw_image_bytes_per_llm_request=100)
    thread, llm = scripted_thread(client, ["never asked"], image_input_limit_config=limits)
    with pytest.raises(ValueError, match=r"image: \d+ image bytes in one LLM request; the limit is 100"):
        thread.add_image(samples.jpeg())
    assert llm.requests == [] and nothing_stored()
    assert thread.add_image(samples.jpeg(), description="described by the caller")  # no request needed
    with pytest.raises(ValueError, match="max_images_per_llm_request"):
        image_rules.check_llm_request([image_rules.validate_image(samples.png(), limits=limits)] * 2,
                                      ImageInputLimitConfig(max_images_per_llm_request=1))


def test_a_failed_caption_stores_nothing(client):
    thread, _ = scripted_thread(client, [LlmUnavailable("down")])
    with pytest.raises(LlmUnavailable):
        thread.add_image(samples.png())
    assert nothing_stored()


def test_update_with_description_none_recaptions_the_stored_bytes(client):
    thread, llm = scripted_thread(client, ["first caption", "second caption"])
    data = samples.webp()
    image_id = thread.add_image(data)
    assert thread.update_image(image_id, description=None) == image_id
    assert thread.list_images()[0].description == "second caption"
    assert llm.requests[1].messages[1]["content"][1]["image_url"]["url"].startswith("data:image/webp;base64,")
    assert [r.record.id for r in thread.search("second caption", record_types=["image"])] == [image_id]


def test_description_none_without_an_llm_never_erases_a_description(thread):
    image_id = thread.add_image(samples.png(), description="a red square")
    with pytest.raises(ValueError, match="^description: None asks the thread's LLM"):
        thread.update_image(image_id, description=None)
    assert thread.list_images()[0].description == "a red square"
    # with new bytes the old text no longer describes the image: it is cleared
    assert thread.update_image(image_id, samples.jpeg(), mime_type="image/jpeg", description=None) == image_id
    assert thread.list_images()[0].description is None
    assert thread.search("red square", record_types=["image"]) == []


# --- scope, ids, metadata, timestamps, TTL ------------------------------------------------


def test_scope_assertions_must_match_the_thread_exactly(thread):
    assert thread.add_image(samples.png(), description="x", user_id="user-1", agent_id="agent-1",
                            thread_id="t-main")
    for name, value in (("user_id", "someone-else"), ("agent_id", None), ("thread_id", "t-other")):
        with pytest.raises(ValueError, match=rf"^{name}: must match this thread's {name}"):
            thread.add_image(samples.png(), description="x", **{name: value})
    assert Image.objects.count() == 1


def test_ids_metadata_and_timestamps(thread):
    assert thread.add_image(samples.png(), image_id="img-1", description="x", metadata={"source": "chat"},
                            timestamp="2024-05-01T10:00:00Z") == "img-1"
    with pytest.raises(ValueError, match="image_id 'img-1' already exists"):
        thread.add_image(samples.jpeg(), image_id="img-1", description="y")
    untimed = thread.add_image(samples.png(), description="z")
    records = {r.id: r for r in thread.list_images()}
    assert records["img-1"].timestamp == "2024-05-01T10:00:00Z" and records["img-1"].metadata == {"source": "chat"}
    assert records[untimed].timestamp == records[untimed].created_at  # NULL event time reads as creation time
    assert Image.objects.get(pk=key(untimed)).timestamp is None


def test_ttl_expires_an_image_everywhere(thread):
    old = "2020-01-01T00:00:00Z"
    image_id = thread.add_image(samples.png(), description="an expired receipt", timestamp=old, ttl_days=1,
                                ttl_anchor=TimeToLiveAnchor.TIMESTAMP)
    kept = thread.add_image(samples.png(), description="a fresh receipt", ttl_days=3)
    assert [r.id for r in thread.list_images()] == [kept]
    assert thread.search("receipt", record_types=["image"])[0].record.id == kept
    assert all(r.record.id != image_id for r in thread.search("receipt", record_types=["image"]))
    assert thread.delete_image(image_id) == 0
    expires = dt.datetime.fromisoformat(thread.list_images()[0].expires_at)
    assert dt.timedelta(days=2, hours=23) < expires - dt.datetime.now(dt.timezone.utc) <= dt.timedelta(days=3)


# --- update, delete, list ---------------------------------------------------------------------


def test_update_keeps_what_is_omitted_and_replaces_what_is_given(thread):
    image_id = thread.add_image(samples.png(), description="a red card", metadata={"v": 1}, timestamp="2024-01-01")
    thread.update_image(image_id, metadata={"v": 2})
    record = thread.list_images(image_id=image_id, include_bytes=True)[0]
    assert (record.description, record.metadata, record.timestamp, record.mime_type) == (
        "a red card", {"v": 2}, "2024-01-01", ImageMimeType.PNG)
    new = samples.jpeg((10, 20))
    thread.update_image(image_id, image=new, mime_type="image/jpeg", description="a green card", timestamp=None)
    record = thread.list_images(image_id=image_id, include_bytes=True)[0]
    assert (record.bytes, record.mime_type, record.width, record.height) == (new, ImageMimeType.JPEG, 10, 20)
    assert record.description == "a green card" and Image.objects.get(pk=key(image_id)).timestamp is None
    assert [c.text for c in SearchChunk.objects.filter(record_id=key(image_id))] == ["a green card"]
    assert SearchChunk.objects.get(record_id=key(image_id)).metadata == {"v": 2}


def test_update_rules(thread):
    image_id = thread.add_image(samples.png(), description="x")
    with pytest.raises(ValueError, match="mime_type: is required when image is given"):
        thread.update_image(image_id, image=samples.jpeg())
    with pytest.raises(ValueError, match="mime_type: declared image/png but the bytes are image/jpeg"):
        thread.update_image(image_id, image=samples.jpeg(), mime_type="image/png")
    with pytest.raises(ValueError, match="mime_type: can only be given together with new image bytes"):
        thread.update_image(image_id, mime_type="image/jpeg")
    with pytest.raises(ValueError, match="animated"):
        thread.update_image(image_id, image=samples.animated_png(), mime_type="image/png")
    with pytest.raises(KeyError):
        thread.update_image("no-such-image", description="y")
    with pytest.raises(TypeError, match="colour"):
        thread.update_image(image_id, colour="red")
    assert thread.list_images(image_id=image_id, include_bytes=True)[0].bytes == samples.png()


def test_delete_returns_one_then_zero_and_only_in_this_thread(client, thread):
    image_id = thread.add_image(samples.png(), description="a boarding pass")
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    assert other.delete_image(image_id) == 0
    assert other.list_images() == []
    assert thread.delete_image(image_id) == 1
    assert thread.delete_image(image_id) == 0
    assert nothing_stored()


def test_list_filters_by_id_and_metadata_and_honours_limit(thread):
    ids = [thread.add_image(samples.png(), description=f"image {i}",
                            metadata={"n": i, "tags": ["even" if i % 2 == 0 else "odd"]})
           for i in range(5)]
    assert [r.id for r in thread.list_images()] == ids  # store order
    assert [r.id for r in thread.list_images(limit=2)] == ids[:2]
    assert [r.id for r in thread.list_images(image_id=ids[3])] == [ids[3]]
    assert [r.id for r in thread.list_images(metadata_filter={"tags": {"$array_contains": "even"}})] == ids[::2]
    assert thread.list_images(image_id="missing") == []
    assert all(r.bytes is None for r in thread.list_images())
    with pytest.raises(ValueError, match="include_bytes: loading bytes requires an image_id"):
        thread.list_images(include_bytes=True)
    with pytest.raises(ValueError, match="limit"):
        thread.list_images(limit=0)
    with pytest.raises(ValueError, match="^limit: must be at most 2147483647"):
        thread.list_images(limit=10**20)  # not a database error
    with pytest.raises(ValueError, match="metadata_filter"):
        thread.list_images(metadata_filter=["n"])


def test_default_limit_is_100_and_none_lifts_it(thread):
    data = samples.png((2, 2))
    Image.objects.bulk_create([
        Image(id=key(f"img-{i:03d}"), project_id=default_project_id(), thread_id=key("t-main"), mime_type="image/png",
              data=data, size_bytes=len(data))
        for i in range(101)
    ])
    assert len(thread.list_images()) == 100
    assert len(thread.list_images(limit=None)) == 101


def test_listings_never_load_bytes(thread):
    thread.add_image(samples.png(), description="x")
    with CaptureQueriesContext(connection) as queries:
        thread.list_images()
    [select] = [q["sql"] for q in queries.captured_queries if "oam_images" in q["sql"]]
    assert '"oam_images"."data"' not in select
    with CaptureQueriesContext(connection) as queries:
        thread.list_images(image_id=thread.list_images()[0].id, include_bytes=True)
    assert any('"oam_images"."data"' in q["sql"] for q in queries.captured_queries)


# --- messages with image parts --------------------------------------------------------------


def test_a_text_and_an_image_part_round_trip_in_order(thread):
    data = samples.jpeg()
    [mid] = thread.add_messages([{"role": "user", "content": [
        {"type": "text", "text": "Here is my boarding pass."},
        {"type": "image", "bytes": data, "description": "A boarding pass for flight AZ 610 to Rome.",
         "id": "img-pass"},
    ]}])
    message = thread.get_message(mid)
    text, image = message.content
    assert isinstance(text, TextContent) and text.text == "Here is my boarding pass."
    assert isinstance(image, ImageContent)
    assert (image.id, image.mime_type, image.bytes) == ("img-pass", ImageMimeType.JPEG, None)
    assert image.description == "A boarding pass for flight AZ 610 to Rome."
    assert message.text == "Here is my boarding pass."
    loaded = thread.get_message(mid, included_image_ids=["img-pass", "unrelated"]).content[1]
    assert loaded.bytes == data
    assert thread.get_messages(include_image_bytes=True)[0].content[1].bytes == data
    assert thread.get_messages()[0].content[1].bytes is None
    [record] = thread.list_images()
    assert (record.id, record.message_id) == ("img-pass", mid)
    [hit] = thread.search("flight ticket to Rome", record_types=["image"])
    assert hit.record.id == "img-pass" and "<image>" in hit.formatted_content


def test_image_content_objects_and_base64_data_are_accepted(thread):
    png, webp = samples.png(), samples.webp()
    [mid] = thread.add_messages([{"role": "user", "content": [
        ImageContent(bytes=png, mime_type=ImageMimeType.PNG, description="a red square", id="img-a"),
        TextContent(text="and"),
        {"type": "image", "data": base64.b64encode(webp).decode(), "description": "a blue square"},
    ]}])
    parts = thread.get_message(mid, included_image_ids=["img-a"]).content
    assert [type(p).__name__ for p in parts] == ["ImageContent", "TextContent", "ImageContent"]
    assert parts[0].bytes == png and parts[2].bytes is None and parts[2].mime_type is ImageMimeType.WEBP



def test_a_data_uri_declares_the_type_and_text_content_comes_from_the_client():
    from memory import client as client_module

    assert client_module.TextContent is TextContent  # the client module re-exports the part types
    png = base64.b64encode(samples.png()).decode()
    assert image_rules.decode_image_base64(f"data:image/png;base64,{png}", "data") == (
        samples.png(), ImageMimeType.PNG)
    assert image_rules.decode_image_base64(png, "data", "image/png") == (samples.png(), ImageMimeType.PNG)
    assert image_rules.decode_image_base64(f"data:;base64,{png}", "data") == (samples.png(), None)
    with pytest.raises(ValueError, match="data: the data URI declares 'text/html'"):
        image_rules.decode_image_base64(f"data:text/html;base64,{png}", "data")
    with pytest.raises(ValueError, match="mime_type: is image/jpeg but the data URI declares image/png"):
        image_rules.decode_image_base64(f"data:image/png;base64,{png}", "data", ImageMimeType.JPEG)


def test_a_bad_image_part_writes_nothing_of_the_batch(thread):
    good = {"role": "user", "content": [{"type": "image", "bytes": samples.png(), "description": "fine"}]}
    for bad_part, field in (
        ({"type": "image", "bytes": samples.animated_webp()}, r"messages\[1\]\.content\[0\]\.bytes: .*animated"),
        ({"type": "image", "bytes": samples.jpeg(), "mime_type": "image/png"},
         r"messages\[1\]\.content\[0\]\.mime_type: declared image/png"),
        ({"type": "image", "data": "***"}, r"messages\[1\]\.content\[0\]\.data: is not valid base64"),
        ({"type": "image", "data": "data:image/jpeg;base64," + base64.b64encode(samples.png()).decode()},
         r"messages\[1\]\.content\[0\]\.mime_type: declared image/jpeg but the bytes are image/png"),
        ({"type": "image", "data": "data:image/gif;base64," + base64.b64encode(samples.png()).decode()},
         r"messages\[1\]\.content\[0\]\.data: the data URI declares 'image/gif'"),
        ({"type": "image", "data": "data:image/png;base64," + base64.b64encode(samples.png()).decode(),
          "mime_type": "image/webp"}, r"messages\[1\]\.content\[0\]\.mime_type: is image/webp but the data URI"),
        ({"type": "image", "description": "no bytes"}, r"messages\[1\]\.content\[0\]\.bytes: is required"),
        ({"type": "image", "bytes": samples.png(), "colour": "red"}, r"messages\[1\]\.content\[0\]: unknown key"),
    ):
        with pytest.raises(ValueError, match=field):
            thread.add_messages([good, {"role": "user", "content": [bad_part]}])
    assert Message.objects.count() == 0 and nothing_stored()


def test_image_parts_without_a_description_are_captioned(client):
    thread, llm = scripted_thread(client, ["A cat asleep on a keyboard."])
    [mid] = thread.add_messages([{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image", "bytes": samples.png()}]}])
    assert thread.get_message(mid).content[1].description == "A cat asleep on a keyboard."
    assert len(llm.requests) == 1
    assert thread.search("sleeping cat", record_types=["image"])[0].record.message_id == mid


def test_deleting_a_message_takes_its_images(thread):
    [mid, other] = thread.add_messages([
        {"role": "user", "content": [{"type": "image", "bytes": samples.png(), "description": "a parking ticket"}]},
        {"role": "user", "content": "unrelated"},
    ])
    [image] = thread.list_images()
    with pytest.raises(ValueError, match="attached to message"):
        thread.delete_image(image.id)
    assert thread.delete_message(mid) == 1
    assert thread.list_images() == [] and nothing_stored()
    assert thread.get_message(other).content == "unrelated"


def test_an_expired_message_hides_its_images(thread):
    thread.add_messages([{"role": "user", "timestamp": "2020-01-01T00:00:00Z", "content": [
        {"type": "image", "bytes": samples.png(), "description": "an old parking ticket"}]}],
        ttl_days=1, ttl_anchor="timestamp")
    assert thread.list_images() == []
    assert thread.search("parking ticket", record_types=["image"]) == []


def test_message_ttl_refresh_moves_its_images_expiry_and_image_ttl_changes_are_refused(thread):
    [mid] = thread.add_messages([{"role": "user", "content": [
        {"type": "image", "bytes": samples.png(), "description": "a receipt", "id": "img-r"}]}])
    with pytest.raises(ValueError, match="ttl_days: image 'img-r' is attached to message .* update_message"):
        thread.update_image("img-r", ttl_days=3)
    with pytest.raises(ValueError, match="ttl_anchor"):
        thread.update_image("img-r", ttl_anchor="created_at")
    thread.update_message(mid, ttl_days=2)
    expiry = Message.objects.get(pk=key(mid)).expires_at
    assert expiry is not None and Image.objects.get(pk=key("img-r")).expires_at == expiry
    assert {c.expires_at for c in SearchChunk.objects.filter(record_id=key("img-r"))} == {expiry}


def test_updating_an_attached_image_shows_in_its_message(thread):
    [mid] = thread.add_messages([{"role": "user", "content": [
        {"type": "image", "bytes": samples.png(), "description": "before", "id": "img-m"}]}])
    thread.update_image("img-m", image=samples.jpeg(), mime_type="image/jpeg", description="after")
    part = thread.get_message(mid, included_image_ids=["img-m"]).content[0]
    assert (part.description, part.mime_type, part.bytes) == ("after", ImageMimeType.JPEG, samples.jpeg())


def test_update_message_keeps_referenced_images_and_drops_the_rest(thread):
    [mid] = thread.add_messages([{"role": "user", "content": [
        {"type": "image", "bytes": samples.png(), "description": "a map of Rome", "id": "img-keep"},
        {"type": "image", "bytes": samples.jpeg(), "description": "a menu", "id": "img-drop"},
    ]}])
    thread.update_message(mid, content=[
        {"type": "text", "text": "updated"},
        ImageContent(id="img-keep", mime_type=ImageMimeType.PNG),  # no bytes: keep the attached image
        {"type": "image", "bytes": samples.webp(), "description": "a train ticket", "id": "img-new"},
    ])
    parts = thread.get_message(mid, included_image_ids=["img-keep"]).content
    assert [p.id for p in parts[1:]] == ["img-keep", "img-new"]
    assert parts[1].bytes == samples.png() and parts[1].description == "a map of Rome"
    assert sorted(r.id for r in thread.list_images()) == ["img-keep", "img-new"]
    assert not SearchChunk.objects.filter(record_id=key("img-drop")).exists()
    with pytest.raises(ValueError, match=r"content\[0\]\.bytes: is required: image 'img-other' is not attached"):
        thread.update_message(mid, content=[{"type": "image", "id": "img-other"}])
    thread.update_message(mid, content=[{"type": "image", "id": "img-keep", "description": "a map of Florence"}])
    assert thread.get_message(mid).content[0].description == "a map of Florence"
    assert [c.text for c in SearchChunk.objects.filter(record_id=key("img-keep"))] == ["a map of Florence"]
    assert sorted(r.id for r in thread.list_images()) == ["img-keep"]
    thread.update_message(mid, content="just text now")
    assert thread.list_images() == [] and nothing_stored()


def test_image_ids_are_unique_across_images(thread):
    thread.add_image(samples.png(), image_id="img-x", description="x")
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]\.id 'img-x' already exists"):
        thread.add_messages([{"role": "user", "content": [
            {"type": "image", "bytes": samples.png(), "description": "y", "id": "img-x"}]}])
    assert Message.objects.count() == 0


def test_deleting_the_thread_takes_its_images(client, thread):
    thread.add_image(samples.png(), description="standalone")
    thread.add_messages([{"role": "user", "content": [{"type": "image", "bytes": samples.png(), "description": "p"}]}])
    assert client.delete_thread("t-main") == 1
    assert nothing_stored()


# --- search and async ------------------------------------------------------------------------


def test_images_are_searched_by_description_with_record_types(thread):
    image_id = thread.add_image(samples.png(), description="Whiteboard photo of the Q3 sales funnel diagram")
    thread.add_memory("The user likes sales meetings")
    hits = thread.search("sales funnel whiteboard", record_types=["image"])
    assert [h.record.id for h in hits] == [image_id]
    assert hits[0].record_type == "image" and hits[0].record.bytes is None
    assert hits[0].content == "Whiteboard photo of the Q3 sales funnel diagram"
    assert {h.record_type for h in thread.search("sales", record_types=["memory"])} == {"memory"}
    assert image_id in {h.record_id for h in thread.search("sales funnel whiteboard")}


@pytest.mark.django_db(transaction=True)
def test_async_twins():
    async def scenario():
        client = AgentMemory(llm=None)
        thread = await client.create_thread_async(thread_id="t-async", user_id="u", agent_id="a")
        image_id = await thread.add_image_async(samples.png(), description="async square")
        await thread.update_image_async(image_id, metadata={"k": 1})
        [record] = await thread.list_images_async(image_id=image_id, include_bytes=True)
        return record, await thread.delete_image_async(image_id)

    record, deleted = asyncio.run(scenario())
    assert record.bytes == samples.png() and record.metadata == {"k": 1}
    assert deleted == 1


def test_the_pixel_ceiling_bounds_one_decode_whatever_a_thread_sets(client):
    """A thread may not raise max_image_pixels past 40 MP (a full RGBA decode of at most ~160 MB);
    a 13000 x 13000 PNG (169 MP, 656 KB) was accepted under the earlier 200 MP ceiling."""
    assert image_rules.IMAGE_LIMIT_MAXIMA["max_image_pixels"] == 40_000_000
    for bad in (40_000_001, 169_000_000, 200_000_000):
        with pytest.raises(ValueError, match="max_image_pixels: exceeds the maximum of 40000000"):
            ImageInputLimitConfig(max_image_pixels=bad)
    # A thread stored under the earlier ceiling reads as the ceiling, and refuses 169 MP from the header.
    stored = {"image_input_limit_config": {"max_image_pixels": 200_000_000}}
    limits = ImageInputLimitConfig.from_thread_config(stored)
    assert limits.max_image_pixels == 40_000_000
    with pytest.raises(ValueError, match=r"13000x13000 = 169000000 pixels; the limit is 40000000"):
        image_rules.validate_image(samples.giant_header_png(13000, 13000), limits=limits)


def test_a_jpeg_is_verified_by_a_reduced_decode(monkeypatch):
    """Truncation is still caught, but the pixels are decoded at 1/8 scale (Image.draft), not in full."""
    from PIL import ImageFile

    decoded = []
    load = ImageFile.ImageFile.load

    def recording_load(self):
        decoded.append(self.size)
        return load(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", recording_load)
    valid = image_rules.validate_image(samples.jpeg((4000, 3000)), limits=ImageInputLimitConfig())
    assert (valid.width, valid.height) == (4000, 3000)
    assert decoded and max(w * h for w, h in decoded) <= 500 * 375
    with pytest.raises(ValueError, match="corrupt or truncated"):
        image_rules.validate_image(samples.truncated_jpeg(), limits=ImageInputLimitConfig())
