"""Fixtures for LLM tests: a fake OpenAI-compatible HTTP server.

The real llama.cpp server fixtures (``local_llm_server``, ``local_llm``,
``local_llm_settings``) live in ``tests/conftest.py`` so that one server serves
the whole session, whichever folders use it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

# --- a fake OpenAI-compatible server ----------------------------------------------------------

# What llama-cpp-python 0.3.36's server answers (HTTP 500) to response_format
# {"type": "json_schema", ...}; copied from a real reply.
LLAMA_CPP_JSON_SCHEMA_REJECTION = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", "
        "line 376, in create_chat_completion\n    POST /v1/chat/completions",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


@dataclass
class FakeOpenAI:
    """State of a fake chat-completions server: what it answers and what it received.

    ``replies`` are message contents answered in order (the last one repeats);
    ``reject_json_schema`` answers json_schema requests like llama.cpp does;
    ``delay`` is seconds to sleep before answering; ``handler`` may replace the
    whole answer: ``handler(body) -> (status, json_body)``.
    """

    replies: list[str] = field(default_factory=lambda: ['{"ok": true}'])
    reject_json_schema: bool = False
    delay: float = 0.0
    handler: Callable[[dict], tuple[int, dict]] | None = None
    requests: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)  # names lower-cased
    base_url: str = ""

    def answer(self, body: dict) -> tuple[int, dict]:
        if self.handler:
            return self.handler(body)
        response_format = body.get("response_format") or {}
        if self.reject_json_schema and response_format.get("type") == "json_schema":
            return 500, LLAMA_CPP_JSON_SCHEMA_REJECTION
        content = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        }


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A stdlib HTTP server on 127.0.0.1 speaking just enough of ``POST /v1/chat/completions``."""
    state = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            state.requests.append(body)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if state.delay:
                time.sleep(state.delay)
            status, payload = state.answer(body)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:  # the client gave up (timeout tests)
                pass

        def log_message(self, format, *args):  # keep pytest output clean
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    state.base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
