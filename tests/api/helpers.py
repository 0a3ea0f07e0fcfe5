"""Small helpers shared by the API tests."""

import json
import warnings

from django.http import HttpResponse
from django.test import Client


class JsonClient(Client):
    """A Django test client that sends JSON bodies by default; a streamed answer is read whole into
    ``content`` (as a plain response), so tests read every answer alike."""

    def request(self, **request):
        response = super().request(**request)
        if not getattr(response, "streaming", False):
            return response
        with warnings.catch_warnings():  # an async stream read by a sync client: Django says so, then reads it
            warnings.filterwarnings("ignore", "StreamingHttpResponse must consume asynchronous iterators")
            body = b"".join(response)
        whole = HttpResponse(body, status=response.status_code)
        for name, value in response.items():
            whole[name] = value
        whole.streamed = True
        whole.json = lambda: json.loads(whole.content)
        whole.wsgi_request = response.wsgi_request
        return whole

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
