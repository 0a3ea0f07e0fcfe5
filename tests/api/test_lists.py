"""Every list endpoint answers one shape, ``{"items": [...], "count": N}``, paged by ``limit``/``offset``."""

import base64

import pytest

from tests import image_samples as samples
from tests.api.helpers import add_messages, items

T = "/api/threads/t-main"
#: list URL -> how many records the fixture below leaves behind it
LISTS = {"/api/threads": 2, f"{T}/messages": 3, f"{T}/memories": 3, f"{T}/images": 4, f"{T}/links": 2,
         # project-wide (the SDK's client-level lists): standalone images only
         "/api/messages": 3, "/api/memories": 3, "/api/images": 3}


@pytest.fixture
def filled(api, thread, client):
    """Two threads; in t-main three messages (one with an image part), three memories, three standalone
    images and two relations."""
    client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    png = base64.b64encode(samples.png()).decode("ascii")
    assert add_messages(api, "t-main", [
        {"role": "user", "content": "one"}, {"role": "user", "content": "two"},
        {"role": "user", "content": [{"type": "image", "data": png, "description": "a part"}]},
    ]).status_code == 201
    for i in range(3):
        assert api.post(f"{T}/memories", {"content": f"memory {i}", "memory_id": f"mem{i}"}).status_code == 201
        assert api.post(f"{T}/images", {"data": png, "description": f"image {i}"}).status_code == 201
    for target in ("mem1", "mem2"):
        assert api.post(f"{T}/links", {"source_record_id": "mem0", "source_record_type": "memory",
                                       "target_record_id": target, "target_record_type": "memory",
                                       "relation_type": "supports"}).status_code == 201


@pytest.mark.parametrize("url,total", LISTS.items())
def test_every_list_answers_items_and_count_paged_by_limit_and_offset(api, filled, url, total):
    everything = items(api.get(url, {"limit": 100}))
    assert len(everything) == total and api.get(url, {"limit": 100}).json()["count"] == total
    assert api.get(url, {"limit": 1}).json() == {"items": everything[:1], "count": total}
    assert api.get(url, {"limit": 2, "offset": 1}).json() == {"items": everything[1:3], "count": total}
    assert api.get(url, {"offset": total}).json() == {"items": [], "count": total}
    for params, field in (({"limit": 0}, "limit"), ({"offset": -1}, "offset"), ({"limit": 2**31}, "limit"),
                          ({"offset": 2**31}, "offset"), ({"limit": "x"}, "limit")):
        resp = api.get(url, params)
        assert resp.status_code == 422, (url, params)
        assert [item["loc"] for item in resp.json()["detail"]] == [["query", field]]


def test_the_schema_documents_no_bare_array_and_limit_offset_on_every_list(anon):
    """The OpenAPI document, read as a client generator would: no GET answers a bare array."""
    schema = anon.get("/api/openapi.json").json()
    components = schema["components"]["schemas"]
    lists = []
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or "application/json" not in get["responses"].get("200", {}).get("content", {}):
            continue
        body = get["responses"]["200"]["content"]["application/json"]["schema"]
        assert body.get("type") != "array", path
        body = components[body["$ref"].rsplit("/", 1)[-1]] if "$ref" in body else body
        if "items" in body.get("properties", {}):
            lists.append(path)
            assert set(body["properties"]) == {"items", "count"} and body["properties"]["items"]["type"] == "array"
            assert {"limit", "offset"} <= {p["name"] for p in get["parameters"]}, path
    assert sorted(lists) == sorted([*(url.replace("t-main", "{thread_id}") for url in LISTS),
                                    "/api/keys", "/api/erasures",
                                    "/api/profiles/{kind}", "/api/threads/{thread_id}/memories/{memory_id}/history",
                                    "/api/review/memories", "/api/review/dependants"])
