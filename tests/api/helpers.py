"""Small helpers shared by the API tests."""

from django.test import Client


class JsonClient(Client):
    """A Django test client that sends JSON bodies by default."""

    def post(self, path, data=None, content_type="application/json", **kwargs):
        return super().post(path, data, content_type=content_type, **kwargs)

    def patch(self, path, data=None, content_type="application/json", **kwargs):
        return super().patch(path, data, content_type=content_type, **kwargs)

    def put(self, path, data=None, content_type="application/json", **kwargs):
        return super().put(path, data, content_type=content_type, **kwargs)


def add_messages(api, thread_id, messages, **extra):
    """POST messages and return the response."""
    return api.post(f"/api/threads/{thread_id}/messages", {"messages": messages, **extra})


def error_fields(resp):
    """The field names named in a 422 body's ``loc`` entries."""
    return [str(part) for item in resp.json()["detail"] for part in item["loc"][1:]]


def items(resp):
    """The ``items`` of a list answer, after checking its shape: 200 and exactly ``{"items": [...], "count": N}``."""
    assert resp.status_code == 200, resp.content
    body = resp.json()
    assert set(body) == {"items", "count"} and isinstance(body["items"], list), body
    assert body["count"] >= len(body["items"]), body
    return body["items"]
