"""Images over HTTP: base64 JSON and multipart uploads, listing, bytes, updates, deletes,
multimodal messages, search, and the 422s for unsafe images. Real Pillow-made files (tests/image_samples.py)."""

import base64

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import MULTIPART_CONTENT

from memory.llm.adapters import LlmUnavailable
from memory.llm.scripted import ScriptedLlm
from memory.models import Image, Message, SearchChunk
from tests import image_samples as samples
from tests.api.helpers import add_messages, items
from tests.ids import key

URL = "/api/threads/t-main/images"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def upload(api, data: bytes, **fields):
    return api.post(URL, {"data": b64(data), **fields})


def test_json_upload_detects_the_type_and_returns_the_record(api, thread):
    data = samples.png()
    resp = upload(api, data, description="a red test card", image_id="img-1", metadata={"source": "chat"},
                  timestamp="2024-05-01T10:00:00Z")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["id"] == "img-1" and body["record_type"] == "image"
    assert (body["mime_type"], body["width"], body["height"], body["size_bytes"]) == ("image/png", 48, 32, len(data))
    assert (body["thread_id"], body["user_id"], body["agent_id"], body["message_id"]) == (
        "t-main", "user-1", "agent-1", None)
    assert body["description"] == "a red test card" and body["metadata"] == {"source": "chat"}
    assert body["timestamp"] == "2024-05-01T10:00:00Z" and body["data"] is None
    assert body["content_url"] == "/api/threads/t-main/images/img-1/content"


def test_multipart_upload_with_form_fields(api, thread):
    data = samples.jpeg()
    resp = api.post(URL, {"image": SimpleUploadedFile("pass.jpg", data, content_type="image/jpeg"),
                          "description": "a boarding pass", "metadata": '{"trip": "rome"}', "ttl_days": "3",
                          "mime_type": "image/jpeg"}, content_type=MULTIPART_CONTENT)
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["mime_type"] == "image/jpeg" and body["metadata"] == {"trip": "rome"}
    assert body["expires_at"] is not None
    assert Image.objects.with_bytes().get(pk=key(body["id"])).data == data


def test_multipart_errors_name_the_form_field(api, thread):
    def post(fields):
        return api.post(URL, fields, content_type=MULTIPART_CONTENT)

    file = lambda: SimpleUploadedFile("x.png", samples.png(), content_type="image/png")  # noqa: E731
    resp = post({"description": "no file"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "image"]
    resp = post({"image": file(), "metadata": "{not json"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "metadata"]
    resp = post({"image": file(), "colour": "red"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "colour"]
    resp = post({"image": SimpleUploadedFile("a.png", samples.animated_png(), content_type="image/png")})
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "image"] and "animated" in resp.json()["detail"][0]["msg"]
    assert not Image.objects.exists()


def test_content_returns_the_bytes_with_their_content_type(api, thread):
    for make, mime in ((samples.png, "image/png"), (samples.jpeg, "image/jpeg"), (samples.webp, "image/webp")):
        data = make()
        image_id = upload(api, data, description="x").json()["id"]
        resp = api.get(f"{URL}/{image_id}/content")
        assert resp.status_code == 200
        assert resp["Content-Type"] == mime and resp["X-Content-Type-Options"] == "nosniff"
        assert resp.content == data and resp["Content-Length"] == str(len(data))
    assert api.get(f"{URL}/missing/content").status_code == 404


@pytest.mark.parametrize("make,mime_type,rule", [
    (samples.animated_png, None, "animated PNG"),
    (samples.animated_webp, None, "animated WEBP"),
    (samples.bomb, None, "pixels; the limit is 40000000"),
    (samples.truncated_png, None, "corrupt or truncated"),
    (samples.truncated_jpeg, None, "corrupt or truncated"),
    (samples.gif, None, "not a PNG, JPEG or WEBP image"),
    (samples.jpeg, "image/png", "declared image/png but the bytes are image/jpeg"),
])
def test_unsafe_images_are_422_naming_the_field_and_nothing_is_stored(api, thread, make, mime_type, rule):
    body = {"description": "never stored"} | ({"mime_type": mime_type} if mime_type else {})
    resp = upload(api, make(), **body)
    assert resp.status_code == 422
    [item] = resp.json()["detail"]
    assert item["loc"] == ["body", "mime_type" if mime_type else "data"] and rule in item["msg"]
    assert not Image.objects.exists() and not SearchChunk.objects.filter(source_kind="image").exists()


def test_schema_and_base64_errors_are_422(api, thread):
    resp = api.post(URL, {"description": "no data"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "data"]
    resp = api.post(URL, {"data": "%%% not base64"})
    assert resp.status_code == 422 and resp.json()["detail"][0] == {
        "loc": ["body", "data"], "msg": "is not valid base64", "type": "value_error"}
    resp = upload(api, samples.png(), mime_type="image/gif")
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"][:2] == ["body", "mime_type"]
    resp = upload(api, samples.png(), user_id="someone-else")
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "user_id"]
    assert upload(api, samples.png(), image_id="dup", description="x").status_code == 201
    resp = upload(api, samples.png(), image_id="dup")
    assert resp.status_code == 409 and resp.json()["field"] == "image_id"
    assert api.post("/api/threads/nope/images", {"data": b64(samples.png())}).status_code == 404


def test_a_data_uri_type_is_a_declared_mime_type(api, thread):
    png, jpeg = b64(samples.png()), b64(samples.jpeg())
    resp = api.post(URL, {"data": f"data:image/jpeg;base64,{png}"})  # the URI lies about the bytes
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "mime_type"]
    assert "declared image/jpeg but the bytes are image/png" in resp.json()["detail"][0]["msg"]
    resp = api.post(URL, {"data": f"data:text/html;base64,{png}"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "data"]
    resp = api.post(URL, {"data": f"data:image/png;base64,{png}", "mime_type": "image/webp"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "mime_type"]
    resp = add_messages(api, "t-main", [{"role": "user", "content": [
        {"type": "image", "data": f"data:image/webp;base64,{png}", "description": "x"}]}])
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "messages[0].content[0].mime_type"]
    assert not Image.objects.exists() and not Message.objects.exists()

    resp = api.post(URL, {"data": f"data:image/png;base64,{png}", "image_id": "img-uri", "description": "x"})
    assert resp.status_code == 201 and resp.json()["mime_type"] == "image/png"
    resp = api.patch(f"{URL}/img-uri", {"data": f"data:image/png;base64,{jpeg}"})
    assert resp.status_code == 422 and "the bytes are image/jpeg" in resp.text
    resp = api.patch(f"{URL}/img-uri", {"data": f"data:image/jpeg;base64,{jpeg}"})  # the URI declares the type
    assert resp.status_code == 200 and resp.json()["mime_type"] == "image/jpeg"
    assert api.get(f"{URL}/img-uri/content").content == samples.jpeg()


def test_ids_with_a_slash_or_unicode_do_not_break_listings(api, thread):
    """An id ``reverse()`` cannot put in a URL used to make every listing holding it a 500."""
    resp = upload(api, samples.png(), image_id="albums/rome ünï 😀", description="a slash in the id")
    assert resp.status_code == 201, resp.content
    url = resp.json()["content_url"]
    assert url == "/api/threads/t-main/images/albums%2Frome%20%C3%BCn%C3%AF%20%F0%9F%98%80/content"
    assert upload(api, samples.png(), image_id="ünï", description="x").json()["content_url"] == (
        "/api/threads/t-main/images/%C3%BCn%C3%AF/content")
    assert [i["id"] for i in items(api.get(URL))] == ["albums/rome ünï 😀", "ünï"]
    [listed] = items(api.get(URL, {"image_id": "albums/rome ünï 😀", "include_bytes": "true"}))
    assert base64.b64decode(listed["data"]) == samples.png()
    resp = api.post("/api/threads/t-main/search", {"query": "a slash in the id", "record_types": ["image"]})
    assert resp.status_code == 200 and resp.json()[0]["record"]["content_url"] == url
    assert api.get(f"{URL}/%C3%BCn%C3%AF/content").content == samples.png()


def test_an_oversize_image_is_refused_before_decoding(api, thread, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None  # let the body through: the image limit must catch it
    big = b"\x89PNG" + b"\0" * (20 * 1024 * 1024)
    resp = upload(api, big)
    assert resp.status_code == 422
    # the SDK's default max_raw_image_bytes, 10 MiB
    assert resp.json()["detail"][0]["loc"] == ["body", "data"] and "the limit is 10485760 bytes" in resp.text
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    resp = upload(api, samples.png((64, 64)) * 10)
    assert resp.status_code == 413
    assert not Image.objects.exists()


def test_list_get_patch_delete(api, thread):
    ids = [upload(api, samples.png(), description=f"card {i}", metadata={"n": i}).json()["id"] for i in range(3)]
    assert [i["id"] for i in items(api.get(URL))] == ids
    assert [i["id"] for i in items(api.get(URL + "?limit=2"))] == ids[:2]
    assert api.get(URL + "?limit=2&offset=1").json() == {"items": items(api.get(URL))[1:3], "count": len(ids)}
    assert [i["id"] for i in items(api.get(URL, {"metadata_filter": '{"n": 1}'}))] == [ids[1]]
    assert api.get(URL, {"metadata_filter": '{"n": 1}'}).json()["count"] == 1  # the filter's matches
    listed = items(api.get(URL, {"image_id": ids[0], "include_bytes": "true"}))
    assert base64.b64decode(listed[0]["data"]) == samples.png()
    resp = api.get(URL, {"include_bytes": "true"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["query", "include_bytes"]
    assert api.get(URL, {"metadata_filter": "{bad"}).status_code == 422
    assert api.get(f"{URL}/{ids[0]}").json()["data"] is None
    assert base64.b64decode(api.get(f"{URL}/{ids[0]}?include_bytes=true").json()["data"]) == samples.png()

    resp = api.patch(f"{URL}/{ids[0]}", {"description": "a green card", "metadata": {"n": 9}})
    assert resp.status_code == 200 and resp.json()["description"] == "a green card"
    assert resp.json()["metadata"] == {"n": 9} and resp.json()["mime_type"] == "image/png"
    resp = api.patch(f"{URL}/{ids[0]}", {"data": b64(samples.jpeg())})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "mime_type"]
    resp = api.patch(f"{URL}/{ids[0]}", {"data": b64(samples.truncated_jpeg()), "mime_type": "image/jpeg"})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "data"]
    resp = api.patch(f"{URL}/{ids[0]}", {"data": b64(samples.webp()), "mime_type": "image/webp"})
    assert resp.status_code == 200 and resp.json()["mime_type"] == "image/webp"
    assert api.get(f"{URL}/{ids[0]}/content")["Content-Type"] == "image/webp"
    assert api.patch(f"{URL}/missing", {"description": "x"}).status_code == 404

    assert api.delete(f"{URL}/{ids[0]}").status_code == 204
    assert api.delete(f"{URL}/{ids[0]}").status_code == 404
    assert api.get(f"{URL}/{ids[0]}").status_code == 404


def test_a_message_with_a_text_and_an_image_part_round_trips(api, thread):
    data = samples.jpeg()
    resp = add_messages(api, "t-main", [{"role": "user", "content": [
        {"type": "text", "text": "Here is my boarding pass."},
        {"type": "image", "data": b64(data), "description": "Boarding pass for flight AZ 610 to Rome",
         "id": "img-pass"},
    ]}])
    assert resp.status_code == 201, resp.content
    [mid] = resp.json()["ids"]
    message = api.get(f"/api/threads/t-main/messages/{mid}").json()
    text, image = message["content"]
    assert text["type"] == "text" and text["text"] == "Here is my boarding pass."
    assert image == {"type": "image", "id": "img-pass", "mime_type": "image/jpeg",
                     "description": "Boarding pass for flight AZ 610 to Rome", "timestamp": None, "data": None}
    hydrated = api.get(f"/api/threads/t-main/messages/{mid}?included_image_ids=img-pass&included_image_ids=x").json()
    assert base64.b64decode(hydrated["content"][1]["data"]) == data
    listed = items(api.get("/api/threads/t-main/messages?include_image_bytes=true"))
    assert base64.b64decode(listed[0]["content"][1]["data"]) == data
    assert items(api.get("/api/threads/t-main/messages"))[0]["content"][1]["data"] is None
    assert api.get(f"{URL}/img-pass").json()["message_id"] == mid
    assert api.get(f"{URL}/img-pass/content").content == data

    resp = api.post("/api/threads/t-main/search", {"query": "flight ticket to Rome", "record_types": ["image"]})
    [hit] = resp.json()
    assert hit["record_type"] == "image" and hit["record"]["id"] == "img-pass"
    assert hit["record"]["data"] is None and "<image>" in hit["formatted_content"]

    resp = api.delete(f"{URL}/img-pass")
    assert resp.status_code == 422 and "attached to message" in resp.json()["detail"][0]["msg"]
    resp = api.patch(f"{URL}/img-pass", {"ttl_days": 3})
    assert resp.status_code == 422 and resp.json()["detail"][0]["loc"] == ["body", "ttl_days"]
    assert api.delete(f"/api/threads/t-main/messages/{mid}").status_code == 204
    assert api.get(f"{URL}/img-pass").status_code == 404
    assert not Image.objects.exists() and not SearchChunk.objects.exists()


def test_a_bad_image_part_is_422_and_the_batch_is_not_written(api, thread):
    resp = add_messages(api, "t-main", [
        {"role": "user", "content": "fine"},
        {"role": "user", "content": [{"type": "image", "data": b64(samples.animated_webp())}]},
    ])
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"] == ["body", "messages[1].content[0].data"]
    assert not Message.objects.exists() and not Image.objects.exists()


def test_patch_message_keeps_an_image_referenced_by_id(api, thread):
    [mid] = add_messages(api, "t-main", [{"role": "user", "content": [
        {"type": "image", "data": b64(samples.png()), "description": "a map", "id": "img-map"}]}]).json()["ids"]
    resp = api.patch(f"/api/threads/t-main/messages/{mid}", {"content": [
        {"type": "text", "text": "the map again"}, {"type": "image", "id": "img-map"}]})
    assert resp.status_code == 200, resp.content
    assert [p["type"] for p in resp.json()["content"]] == ["text", "image"]
    assert resp.json()["content"][1]["description"] == "a map"
    assert api.get(f"{URL}/img-map/content").content == samples.png()


def test_captions_come_from_the_configured_llm_and_its_failure_is_503(api, thread, monkeypatch):
    llm = ScriptedLlm(["A red square.", LlmUnavailable("connection refused")])
    monkeypatch.setattr("memory.llm.adapters.get_llm", lambda: llm)
    resp = upload(api, samples.png())
    assert resp.status_code == 201 and resp.json()["description"] == "A red square."
    assert llm.requests[0].messages[1]["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")
    resp = upload(api, samples.png(), image_id="img-down")
    assert resp.status_code == 503 and "connection refused" in resp.json()["detail"]
    assert not Image.objects.filter(pk=key("img-down")).exists()


def test_openapi_documents_both_upload_forms_and_the_content_types(api):
    schema = api.get("/api/openapi.json").json()
    paths = schema["paths"]
    assert {"/api/threads/{thread_id}/images", "/api/threads/{thread_id}/images/{image_id}",
            "/api/threads/{thread_id}/images/{image_id}/content"} <= set(paths)
    body = paths["/api/threads/{thread_id}/images"]["post"]["requestBody"]["content"]
    json_body = body["application/json"]["schema"]
    assert json_body["required"] == ["data"] and "$ref" not in str(json_body)
    assert "image/webp" in str(json_body["properties"]["mime_type"])
    assert body["multipart/form-data"]["schema"]["properties"]["image"]["format"] == "binary"
    content = paths["/api/threads/{thread_id}/images/{image_id}/content"]["get"]["responses"]["200"]["content"]
    assert set(content) == {"image/png", "image/jpeg", "image/webp"}
    parts = schema["components"]["schemas"]["MessageIn"]["properties"]["content"]
    assert "ImagePartIn" in str(parts)


def test_a_multipart_body_django_cannot_parse_is_422_naming_the_body(api, thread):
    # Django alone answered with an HTML 400 (MultiPartParserError).
    resp = api.generic("POST", URL, b"--x\r\nnot a part", content_type="multipart/form-data")  # no boundary
    assert resp.status_code == 422
    [item] = resp.json()["detail"]
    assert item["loc"] == ["body"] and item["type"] == "multipart_invalid" and "boundary" in item["msg"]
    assert not Image.objects.exists()


def test_more_files_than_the_limit_is_413_json(api, thread, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FILES = 1
    files = [SimpleUploadedFile(f"{i}.png", samples.png(), content_type="image/png") for i in range(2)]
    resp = api.post(URL, {"image": files}, content_type=MULTIPART_CONTENT)
    assert resp.status_code == 413
    assert "DATA_UPLOAD_MAX_NUMBER_FILES" in resp.json()["detail"]
    assert not Image.objects.exists()
