"""The API's operations are async views: ``threads.api``, ``oam_site.api.api_urls``, ``memory.core.aio``.

* every operation is ``async def`` and no middleware makes Django adapt a
  request to sync and back;
* ``OAM_API_SYNC`` serves the same operations as sync views (for
  ``bench/api_load.py``), with the same answers;
* on a real daphne, an image upload whose LLM caption hangs does not hold up a
  cheap request of another client: it is answered while the upload is still
  in flight.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import threading
import types
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import MULTIPART_CONTENT
from django.urls import path, resolve
from django.utils.module_loading import import_string

from oam_site.api import api, api_urls
from tests.api.helpers import add_messages, items
from tests.browser.harness import ROOT, ScriptedLlmServer, server_env, start_daphne, stop_process
from tests.image_samples import png
from threads.api.routes import ROUTERS

#: Generous bounds: nothing here is timed, these only keep a broken server from hanging the run.
TIMEOUT = 60


def test_every_operation_is_async_def():
    operations = [op for router in ROUTERS for view in router.path_operations.values() for op in view.operations]
    assert operations
    for op in operations:
        assert op.is_async and inspect.iscoroutinefunction(op.view_func), op.view_func.__name__
    patterns, _, _ = api.urls
    docs = {"openapi-json", "openapi-view", "api-root"}  # ninja's own pages, no operation
    assert all(iscoroutinefunction(p.callback) for p in patterns if p.name not in docs)


def test_no_middleware_adapts_requests_to_sync():
    """A sync-only middleware would run every request below it in a worker thread (Django adapts it)."""
    sync_only = [dotted for dotted in settings.MIDDLEWARE if not getattr(import_string(dotted), "async_capable", False)]
    assert sync_only == []


# --- OAM_API_SYNC: the same operations as sync views ----------------------------------------------------


@pytest.fixture
def sync_views(settings):
    """The site's URLs with the API mounted as sync views (what ``OAM_API_SYNC=true`` mounts)."""
    from oam_site import urls

    patterns = [path("api/", api_urls(sync=True)) if str(p.pattern) == "api/" else p for p in urls.urlpatterns]
    urlconf = types.ModuleType("sync_api_urls")
    urlconf.urlpatterns = patterns
    settings.ROOT_URLCONF = urlconf
    yield


def test_sync_views_answer_like_the_async_ones(sync_views, api, make_thread):
    assert not iscoroutinefunction(resolve("/api/threads").func)
    thread = make_thread(user_id="u1", agent_id="a1")["thread_id"]
    resp = add_messages(api, thread, [{"role": "user", "content": "I love pizza, but I am allergic to peanuts."}])
    assert resp.status_code == 201 and len(resp.json()["ids"]) == 1
    assert api.get(f"/api/threads/{thread}").json()["thread_id"] == thread
    assert [t["thread_id"] for t in items(api.get("/api/threads?user_id=u1"))] == [thread]  # paginated
    assert api.get(f"/api/threads/{thread}/messages?limit=5").json()["count"] == 1
    hits = api.post(f"/api/threads/{thread}/search", {"query": "food allergy", "max_results": 3})
    assert hits.status_code == 200 and hits.json()[0]["content"].startswith("I love pizza")
    card = api.post(f"/api/threads/{thread}/context-card", {"max_relevant_results": 2})
    assert card.status_code == 200 and "pizza" in card.json()["content"]
    upload = api.post(f"/api/threads/{thread}/images", {"image": SimpleUploadedFile("a.png", png()),
                                                        "description": "a small image"},
                      content_type=MULTIPART_CONTENT)
    assert upload.status_code == 201, upload.content
    missing = api.get("/api/threads/nope")
    assert missing.status_code == 404 and missing.json()["field"] == "thread_id"
    assert api.get("/api/threads", headers={"Authorization": "Bearer wrong"}).status_code == 401




# --- a real daphne: a hung caption holds up no one else ---------------------------------------------------


class Gate:
    """The scripted LLM's caption handler: blocks until ``open()``; ``entered`` is set once a caption waits."""

    def __init__(self):
        self.entered, self.released = threading.Event(), threading.Event()

    def __call__(self, body: dict):
        self.entered.set()
        self.released.wait(TIMEOUT)
        return "A slow caption"

    def open(self) -> None:
        self.released.set()


def _call(url: str, key: str, method: str, route: str, body: bytes | None = None,
          content_type: str = "application/json") -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}/api{route}", data=body, method=method,
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


@pytest.mark.slow
def test_a_hung_caption_does_not_hold_up_other_requests(tmp_path):
    gate = Gate()
    llm = ScriptedLlmServer(handler=gate).start()
    env = server_env(tmp_path, llm_base_url=llm.base_url)
    env["OAM_EMBEDDED_WORKER"] = "false"
    process = None
    try:
        for args in (["migrate", "-v0"], ["create_api_key", "slow-llm"]):
            out = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                                 text=True, check=True, timeout=300, stdin=subprocess.DEVNULL).stdout
        key = re.search(r"[A-Za-z0-9_-]{40,}", out)[0]
        process, url = start_daphne(env, Path(tmp_path) / "daphne.log")
        status, thread = _call(url, key, "POST", "/threads", json.dumps({"user_id": "u1"}).encode())
        assert status == 201, thread
        thread_id = thread["thread_id"]

        boundary = uuid.uuid4().hex
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n"
                f"Content-Type: image/png\r\n\r\n").encode() + png() + f"\r\n--{boundary}--\r\n".encode()
        upload: dict = {}

        def post_image():  # no description: the thread's LLM captions it, and hangs until the gate opens
            upload["answer"] = _call(url, key, "POST", f"/threads/{thread_id}/images", body,
                                     f"multipart/form-data; boundary={boundary}")

        uploader = threading.Thread(target=post_image, daemon=True)
        uploader.start()
        assert gate.entered.wait(TIMEOUT), "the caption request never reached the LLM"

        # The upload is in flight, inside its LLM call; another client's requests are answered meanwhile.
        assert _call(url, key, "GET", f"/threads/{thread_id}") == (200, thread)
        status, ids = _call(url, key, "POST", f"/threads/{thread_id}/messages",
                            json.dumps({"messages": [{"role": "user", "content": "still here"}]}).encode())
        assert status == 201 and len(ids["ids"]) == 1
        assert uploader.is_alive() and "answer" not in upload

        gate.open()
        uploader.join(TIMEOUT)
        status, image = upload["answer"]
        assert status == 201 and image["description"] == "A slow caption", image
    finally:
        gate.open()
        if process is not None:
            stop_process(process)
        llm.stop()
