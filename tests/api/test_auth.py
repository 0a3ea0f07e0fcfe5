"""API keys: every operation needs ``Authorization: Bearer <key>``; keys are stored hashed."""

import hashlib
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.api.helpers import JsonClient
from threads.auth import api_key_create
from threads.models import ApiKey

PROTECTED = [
    ("get", "/api/threads"),
    ("post", "/api/threads"),
    ("get", "/api/threads/t-main"),
    ("patch", "/api/threads/t-main"),
    ("delete", "/api/threads/t-main"),
    ("post", "/api/threads/t-main/messages"),
    ("get", "/api/threads/t-main/messages"),
    ("get", "/api/threads/t-main/messages/m1"),
    ("patch", "/api/threads/t-main/messages/m1"),
    ("delete", "/api/threads/t-main/messages/m1"),
    ("post", "/api/threads/t-main/memories"),
    ("get", "/api/threads/t-main/memories"),
    ("patch", "/api/threads/t-main/memories/x"),
    ("delete", "/api/threads/t-main/memories/x"),
    ("post", "/api/threads/t-main/search"),
    ("post", "/api/search"),
]


@pytest.mark.parametrize("method,path", PROTECTED)
def test_every_endpoint_rejects_a_request_without_a_key(anon, thread, method, path):
    resp = getattr(anon, method)(path)
    assert resp.status_code == 401
    assert resp.json() == {"detail": "Unauthorized"}


def test_delete_without_a_key_leaves_the_thread(anon, api, thread):
    assert anon.delete("/api/threads/t-main").status_code == 401
    assert api.get("/api/threads/t-main").status_code == 200


@pytest.mark.parametrize(
    "header",
    ["Bearer not-a-key", "Bearer ", "Basic dXNlcjpwYXNz", "not-a-key"],
)
def test_a_wrong_key_gets_401(db, thread, header):
    resp = JsonClient(headers={"Authorization": header}).get("/api/threads")
    assert resp.status_code == 401


def test_the_right_key_is_accepted(api):
    assert api.get("/api/threads").status_code == 200


def test_an_inactive_key_gets_401(db, api, api_key):
    ApiKey.objects.filter(key_hash=hashlib.sha256(api_key.encode()).hexdigest()).update(is_active=False)
    assert api.get("/api/threads").status_code == 401


def test_keys_are_stored_as_sha256_with_a_short_prefix(db):
    row, raw = api_key_create(name="agent-x")
    row.refresh_from_db()
    assert raw not in (row.key_hash, row.prefix)
    assert row.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert raw.startswith(row.prefix) and 0 < len(row.prefix) < len(raw) // 2
    assert len(raw) >= 32


def test_create_api_key_command_prints_a_working_key_once(db):
    out, err = StringIO(), StringIO()
    call_command("create_api_key", "my-agent", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert "\n" not in raw and raw not in err.getvalue()
    row = ApiKey.objects.get(name="my-agent")
    assert row.key_hash == hashlib.sha256(raw.encode()).hexdigest()
    assert JsonClient(headers={"Authorization": f"Bearer {raw}"}).get("/api/threads").status_code == 200


def test_openapi_schema_lists_the_paths_and_bearer_auth(anon):
    resp = anon.get("/api/openapi.json")
    assert resp.status_code == 200
    schema = resp.json()
    paths = schema["paths"]
    expected = {
        "/api/threads": {"get", "post"},
        "/api/threads/{thread_id}": {"get", "patch", "delete"},
        "/api/threads/{thread_id}/messages": {"get", "post"},
        "/api/threads/{thread_id}/messages/{message_id}": {"get", "patch", "delete"},
        "/api/threads/{thread_id}/memories": {"get", "post"},
        "/api/threads/{thread_id}/memories/{memory_id}": {"patch", "delete"},
        "/api/threads/{thread_id}/search": {"post"},
        "/api/search": {"post"},
    }
    for path, methods in expected.items():
        assert path in paths, path
        assert methods <= set(paths[path]), (path, set(paths[path]))
    schemes = schema["components"]["securitySchemes"]
    assert any(s == {"type": "http", "scheme": "bearer"} for s in schemes.values())
    assert paths["/api/search"]["post"]["security"]
    memory_in = schema["components"]["schemas"]["MemoryIn"]["properties"]["memory_type"]
    assert set(memory_in["enum"]) == {"memory", "fact", "guideline", "preference"}


def test_openapi_documents_401_on_every_operation_and_413_on_those_with_a_body(anon):
    paths = anon.get("/api/openapi.json").json()["paths"]
    error_out = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
    with_body = 0
    for path, operations in paths.items():
        for method, operation in operations.items():
            responses = operation["responses"]
            assert operation["security"] and responses["401"]["content"] == error_out, (method, path)
            assert ("413" in responses) == ("requestBody" in operation), (method, path)
            with_body += "requestBody" in operation
    assert with_body >= 10  # POST and PATCH routes


@pytest.mark.parametrize(
    "method,url,path,field",
    [
        ("get", "/api/threads?offset=-1", "/api/threads", "offset"),
        ("delete", "/api/threads/%20", "/api/threads/{thread_id}", "thread_id"),
        ("delete", "/api/threads/t-main/messages/%20", "/api/threads/{thread_id}/messages/{message_id}",
         "message_id"),
        ("get", "/api/threads/t-main/memories?offset=-1", "/api/threads/{thread_id}/memories", "offset"),
        ("delete", "/api/threads/t-main/memories/%20", "/api/threads/{thread_id}/memories/{memory_id}", "memory_id"),
        ("get", "/api/threads/t-main/images/i1?include_bytes=maybe", "/api/threads/{thread_id}/images/{image_id}",
         "include_bytes"),
        ("get", "/api/threads/t-main/links?record_id=", "/api/threads/{thread_id}/links", "record_id"),
        ("delete", "/api/threads/t-main/links/%20", "/api/threads/{thread_id}/links/{relation_id}", "relation_id"),
    ],
)
def test_a_422_that_an_operation_gives_is_documented_for_it(api, anon, thread, method, url, path, field):
    """Found by schemathesis' status_code_conformance: these answered 422 without declaring it."""
    resp = getattr(api, method)(url)
    assert resp.status_code == 422
    assert resp.json()["detail"][0]["loc"][-1] == field
    operation = anon.get("/api/openapi.json").json()["paths"][path][method]
    assert operation["responses"]["422"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ValidationErrorOut"}


def test_docs_page_is_served(anon):
    resp = anon.get("/api/docs")
    assert resp.status_code == 200
    assert b"openapi.json" in resp.content


def test_create_api_key_command_rejects_an_empty_name(db):
    with pytest.raises(CommandError):
        call_command("create_api_key", "  ", stdout=StringIO(), stderr=StringIO())
    assert not ApiKey.objects.exists()


def test_admin_lists_keys_by_prefix_and_shows_a_new_key_once(admin_client, db):
    row, raw = api_key_create(name="listed-key")
    resp = admin_client.get("/admin/threads/apikey/")
    assert resp.status_code == 200
    assert b"listed-key" in resp.content and row.prefix.encode() in resp.content
    assert raw.encode() not in resp.content
    added = admin_client.post("/admin/threads/apikey/add/", {
        "name": "from-admin", "project": row.project_id, "permission": "read", "user_id": "u7", "agent_id": "",
        "expires_at_0": "", "expires_at_1": ""})
    assert added.status_code == 200, added.content[:1000]
    shown = re.search(rb'id="raw-key" readonly size="60" value="([^"]+)"', added.content).group(1).decode()
    made = ApiKey.objects.get(name="from-admin")
    assert made.key_hash == hashlib.sha256(shown.encode()).hexdigest() and shown not in (made.key_hash, made.prefix)
    assert (made.permission, made.user_id, made.agent_id, made.created_by) == ("read", "u7", None, "admin:admin")
    assert shown.encode() not in admin_client.get(f"/admin/threads/apikey/{made.pk}/change/").content
    assert admin_client.get(f"/admin/threads/apikey/{made.pk}/delete/").status_code == 403  # revoked, not deleted


def test_writes_need_no_csrf_token(db, api_key):
    strict = JsonClient(enforce_csrf_checks=True, headers={"Authorization": f"Bearer {api_key}"})
    assert strict.post("/api/threads", {"thread_id": "csrf-free"}).status_code == 201
