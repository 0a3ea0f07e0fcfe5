"""Every error under /api/ is JSON naming the field, whatever the input.

Every answer under /api/ is JSON naming the field: a lone UTF-16 surrogate in a
query-string filter or a multipart ``metadata`` field is a 422 (was a 500, or stored);
a field that takes several types names the field, not pydantic's member names; an
unknown path or method is JSON; a too-large body names OAM_MAX_REQUEST_BYTES.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memory.core.errors import check_json_text
from memory.models import Image
from memory.records.metadata_filter import compile_filter
from memory.records.validators import check_metadata
from tests.image_samples import png

SURROGATE_FILTER = '{"a": "\\ud800"}'  # JSON text whose value decodes to a lone surrogate


@pytest.fixture
def thread_id(make_thread):
    return make_thread(thread_id="t-review", user_id="u", agent_id="a")["thread_id"]


@pytest.mark.parametrize("path", ["images"])
def test_a_lone_surrogate_in_a_query_filter_is_a_422_naming_it(api, thread_id, path):
    response = api.get(f"/api/threads/{thread_id}/{path}", {"metadata_filter": SURROGATE_FILTER})
    assert response.status_code == 422, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["detail"][0]["loc"] == ["query", "metadata_filter"]


def test_the_staff_thread_list_shows_a_surrogate_filter_as_an_error(db):
    from django.contrib.auth import get_user_model

    from memory.records.tenancy import get_project

    browser = Client()
    user = get_user_model().objects.create_user("s", password="pw", is_staff=True)
    get_project(None).members.add(user)
    browser.force_login(user)
    response = browser.get("/staff/threads/", {"metadata": SURROGATE_FILTER}, follow=True)
    assert response.status_code in (200, 422)
    assert "lone surrogate" in response.content.decode()


def test_python_refuses_surrogates_in_metadata_and_filters():
    with pytest.raises(ValueError, match="metadata_filter"):
        compile_filter({"a": "\ud800"})
    with pytest.raises(ValueError, match="metadata"):
        check_metadata({"\udfff": 1})
    with pytest.raises(ValueError, match="meta"):
        check_json_text({"a": [1, {"b": "x\ud800"}]}, "meta")
    check_json_text({"a": "ok ✓"}, "meta")


def test_a_multipart_upload_with_a_surrogate_in_its_metadata_stores_nothing(api_key, thread_id):
    upload = Client(headers={"Authorization": f"Bearer {api_key}"})
    metadata = json.dumps({"a": "\ud800"})  # json.dumps escapes it; json.loads gives it back
    from django.core.files.uploadedfile import SimpleUploadedFile

    response = upload.post(f"/api/threads/{thread_id}/images", {
        "image": SimpleUploadedFile("r.png", png(), content_type="image/png"),
        "description": "receipt", "metadata": metadata,
    })
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"][-1] == "metadata"
    assert not Image.objects.exists()


@pytest.mark.parametrize(("method", "path", "body", "loc"), [
    ("patch", "/api/threads/t-review/messages/{mid}", {"content": 5}, ["body", "content"]),
    ("post", "/api/threads/t-review/messages", {"messages": [{"role": "user", "content": [{"type": "video"}]}]},
     ["body", "messages", 0, "content"]),
    ("post", "/api/threads/t-review/messages", {"messages": [{"role": "u", "content": "x"}], "ttl_days": "x"},
     ["body", "ttl_days"]),
])
def test_a_field_of_several_types_is_named_without_pydantic_member_names(api, thread_id, method, path, body, loc):
    mid = api.post(f"/api/threads/{thread_id}/messages", {"messages": [{"role": "user", "content": "hi"}]}).json()
    mid = mid[0] if isinstance(mid, list) else mid.get("message_ids", [None])[0]
    response = getattr(api, method)(path.format(mid=mid), body)
    assert response.status_code == 422, response.content
    locs = [item["loc"] for item in response.json()["detail"]]
    assert all(tuple(l[:len(loc)]) == tuple(loc) for l in locs), locs
    flat = json.dumps(locs)
    for internal in ("function-wrap", "list[", "nullable[", "union[", '"str"', '"int"'):
        assert internal not in flat, locs


@pytest.mark.parametrize(("method", "path", "status"), [
    ("get", "/api/nonexistent", 404),
    ("get", "/api/threads/t-review/messages/", 404),
    ("put", "/api/threads", 405),
    ("delete", "/api/threads", 405),
])
def test_unknown_paths_and_methods_under_api_answer_json(api, thread_id, method, path, status):
    response = getattr(api, method)(path)
    assert response.status_code == status
    assert response["Content-Type"] == "application/json" and "detail" in response.json()
    if status == 405:
        assert "GET" in response["Allow"] or "POST" in response["Allow"]
    assert "no-store" in response["Cache-Control"]


def test_a_body_over_the_limit_names_the_setting(api, thread_id, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api.post(f"/api/threads/{thread_id}/messages", {"messages": [{"role": "u", "content": "x" * 5000}]})
    assert response.status_code == 413
    assert response.json() == {"detail": "the request body is over OAM_MAX_REQUEST_BYTES (1000 bytes)", "field": "body"}
