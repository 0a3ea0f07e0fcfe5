"""``OpenAICompatibleLlm`` against a fake OpenAI-compatible server on 127.0.0.1."""

import json
import time

import pytest

from memory.dev.llm_server import free_port
from memory.llm.adapters import LlmInvalidOutput, LlmRequestRejected, LlmTimeout, LlmUnavailable, OpenAICompatibleLlm

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
CONVERSATION = [{"role": "user", "content": "I'm Ada, 36."}]


def make_llm(fake, **kwargs) -> OpenAICompatibleLlm:
    return OpenAICompatibleLlm(base_url=fake.base_url, model="fake-model", **kwargs)


def test_json_schema_form_is_used_when_the_server_accepts_it(fake_openai):
    fake_openai.replies = ['{"name": "Ada", "age": 36}']
    llm = make_llm(fake_openai)
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="person") == {"name": "Ada", "age": 36}
    (body,) = fake_openai.requests
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": SCHEMA, "strict": True},
    }
    assert body["model"] == "fake-model" and body["temperature"] == 0.0
    assert json.dumps(SCHEMA) in body["messages"][0]["content"]  # also in the system prompt
    assert llm.json_form == "json_schema"
    stats = llm.last_call
    assert (stats.prompt_tokens, stats.completion_tokens, stats.attempts, stats.ok) == (11, 7, 1, True)
    assert stats.response_format == "json_schema" and stats.seconds > 0


def test_falls_back_to_json_object_when_json_schema_is_rejected_like_llama_cpp(fake_openai):
    fake_openai.reject_json_schema = True
    fake_openai.replies = ['{"name": "Ada", "age": 36}']
    llm = make_llm(fake_openai)
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="person", max_tokens=50) == {"name": "Ada", "age": 36}
    assert [r["response_format"]["type"] for r in fake_openai.requests] == ["json_schema", "json_object"]
    assert fake_openai.requests[1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert fake_openai.requests[1]["max_tokens"] == 50
    assert llm.json_form == "json_object"
    assert llm.last_call.response_format == "json_object"
    assert llm.last_call.attempts == 1  # the rejected form is not an attempt at the answer
    # The adapter remembers: the next call goes straight to json_object.
    llm.complete_json(CONVERSATION, SCHEMA, schema_name="person")
    assert [r["response_format"]["type"] for r in fake_openai.requests] == ["json_schema", "json_object", "json_object"]


def test_invalid_output_is_retried_over_http_then_raised(fake_openai):
    fake_openai.reject_json_schema = True
    fake_openai.replies = ["not json", '{"name": "Ada"}', '{"name": "Ada", "age": "old"}']
    llm = make_llm(fake_openai, max_retries=2)
    with pytest.raises(LlmInvalidOutput) as info:
        llm.complete_json(CONVERSATION, SCHEMA, schema_name="person")
    assert info.value.attempts == 3
    assert info.value.raw == '{"name": "Ada", "age": "old"}'
    # one rejected json_schema request, then three json_object attempts
    assert [r["response_format"]["type"] for r in fake_openai.requests] == ["json_schema"] + ["json_object"] * 3
    last = fake_openai.requests[-1]["messages"]
    assert "'age' is a required property" in last[-1]["content"]
    assert llm.last_call.prompt_tokens == 3 * 11  # usage summed over attempts


def test_complete_text_sends_no_response_format(fake_openai):
    fake_openai.replies = ["Hello there."]
    llm = make_llm(fake_openai)
    assert llm.complete_text(CONVERSATION, max_tokens=5) == "Hello there."
    (body,) = fake_openai.requests
    assert "response_format" not in body and body["max_tokens"] == 5
    assert body["messages"] == CONVERSATION


def test_api_key_is_sent_as_bearer_token(fake_openai):
    make_llm(fake_openai, api_key="sk-local").complete_text(CONVERSATION)
    assert fake_openai.headers[0]["authorization"] == "Bearer sk-local"


def test_timeout_raises_llm_timeout_quickly(fake_openai):
    fake_openai.delay = 3.0
    llm = make_llm(fake_openai, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(LlmTimeout, match="0.3 s"):
        llm.complete_json(CONVERSATION, SCHEMA, schema_name="person")
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"took {elapsed:.1f} s: the client must not retry a timeout"
    assert len(fake_openai.requests) == 1
    assert isinstance(LlmTimeout("x"), LlmUnavailable)
    assert llm.last_call.ok is False and llm.last_call.seconds >= 0.3
    assert llm.totals.calls == 1


def test_refused_connection_raises_llm_unavailable():
    llm = OpenAICompatibleLlm(base_url=f"http://127.0.0.1:{free_port()}/v1", model="m", timeout=5)
    with pytest.raises(LlmUnavailable) as info:
        llm.complete_text(CONVERSATION)
    assert not isinstance(info.value, LlmTimeout)


def test_server_errors_are_unavailable_and_client_errors_rejected(fake_openai):
    llm = make_llm(fake_openai)
    fake_openai.handler = lambda body: (503, {"error": {"message": "loading model"}})
    with pytest.raises(LlmUnavailable, match="503"):
        llm.complete_json(CONVERSATION, SCHEMA, schema_name="person")
    assert llm.json_form == "json_schema"  # an unrelated 5xx does not switch forms
    fake_openai.handler = lambda body: (401, {"error": {"message": "bad key"}})
    with pytest.raises(LlmRequestRejected, match="bad key") as info:
        llm.complete_text(CONVERSATION)
    assert info.value.status_code == 401


def test_both_forms_rejected_names_both_errors(fake_openai):
    def reject_all(body):
        kind = body["response_format"]["type"]
        return 400, {"error": {"message": f"response_format {kind} is not supported"}}

    fake_openai.handler = reject_all
    llm = make_llm(fake_openai)
    with pytest.raises(LlmRequestRejected) as info:
        llm.complete_json(CONVERSATION, SCHEMA, schema_name="person")
    assert "json_object is not supported" in str(info.value)
    assert "json_schema is not supported" in str(info.value)
    assert len(fake_openai.requests) == 2
