"""Over HTTP, a model's garbage caption is a failed request naming the reason, and nothing is stored (issue #34).

The LLM is a real OpenAI-compatible server on 127.0.0.1 (``ScriptedLlmServer``) whose every completion is garbage.
"""

import base64

import pytest

from memory.llm.adapters import reset_llm
from memory.models import Image
from tests import image_samples as samples
from tests.browser.harness import ScriptedLlmServer


@pytest.fixture
def garbage_llm(settings):
    """A real OpenAI-compatible server on loopback whose every completion is garbage; settings point at it."""
    server = ScriptedLlmServer(handler=lambda body: "§§ 0x00ff ## ~~ }{ ][ 9f8e7d ^^ %%").start()
    settings.OAM_LLM_BASE_URL, settings.OAM_LLM_MODEL, settings.OAM_LLM_MAX_RETRIES = server.base_url, "scripted", 0
    reset_llm()
    try:
        yield server
    finally:
        server.stop()
        reset_llm()


def test_over_http_a_garbage_caption_is_a_502_naming_the_reason_and_nothing_is_stored(api, garbage_llm):
    resp = api.post("/api/threads", {"thread_id": "t-http-cap", "user_id": "u1", "agent_id": "a1",
                                     "memory_extraction_config": {"extract_memories": False}})
    assert resp.status_code == 201, resp.content
    data = base64.b64encode(samples.png()).decode("ascii")
    resp = api.post("/api/threads/t-http-cap/images", {"data": data})
    assert resp.status_code == 502, resp.content
    assert "caption was refused: not words" in resp.json()["detail"]
    assert len(garbage_llm.requests) == 1
    assert Image.objects.count() == 0
