"""The parse/validate/retry path, driven by ``ScriptedLlm`` (no server)."""

import json

import jsonschema
import pytest

from memory.llm.adapters import LlmInvalidOutput, LlmTimeout, OpenAICompatibleLlm, get_llm, reset_llm
from memory.llm.replies import parse_json_reply
from memory.llm.scripted import ScriptedLlm

SCHEMA = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "memory_type": {"enum": ["memory", "fact", "guideline", "preference"]},
                    "content": {"type": "string"},
                },
                "required": ["memory_type", "content"],
            },
        }
    },
    "required": ["memories"],
}
GOOD = {"memories": [{"memory_type": "preference", "content": "likes pizza"}]}
CONVERSATION = [{"role": "user", "content": "I love pizza."}]


def test_valid_json_is_returned_parsed():
    llm = ScriptedLlm([json.dumps(GOOD)])
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories") == GOOD
    assert llm.last_call.attempts == 1 and llm.last_call.ok
    assert llm.last_call.kind == "json"


def test_dict_reply_is_sent_as_json_text():
    llm = ScriptedLlm([GOOD])
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories") == GOOD


@pytest.mark.parametrize(
    "raw",
    [
        "```json\n" + json.dumps(GOOD) + "\n```",
        "```\n" + json.dumps(GOOD) + "\n```",
        "Here you go:\n```json\n" + json.dumps(GOOD, indent=2) + "\n```\nHope it helps.",
        "Sure! " + json.dumps(GOOD) + " That is all.",
        "  \n" + json.dumps(GOOD) + "\n\n",
    ],
)
def test_fenced_or_wrapped_json_is_tolerated(raw):
    llm = ScriptedLlm([raw])
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories") == GOOD


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("", "empty"), ("no json here", "not valid JSON"), ('"just a string"', "not an object or array"), ("42", "int")],
)
def test_parse_json_reply_says_why(raw, reason):
    with pytest.raises(ValueError, match=reason):
        parse_json_reply(raw)


def test_schema_goes_into_the_system_prompt():
    llm = ScriptedLlm([GOOD, GOOD])
    llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories")
    first = llm.last_messages
    assert first[0]["role"] == "system" and json.dumps(SCHEMA) in first[0]["content"]
    assert first[1:] == CONVERSATION
    # An existing system message keeps its text and gets the schema appended.
    llm.complete_json([{"role": "system", "content": "You extract memories."}, *CONVERSATION], SCHEMA, schema_name="m")
    system = llm.last_messages[0]["content"]
    assert system.startswith("You extract memories.") and json.dumps(SCHEMA) in system
    assert len(llm.last_messages) == 2


def test_caller_messages_are_not_mutated():
    messages = [{"role": "system", "content": "Be brief."}, *CONVERSATION]
    snapshot = json.loads(json.dumps(messages))
    ScriptedLlm([GOOD]).complete_json(messages, SCHEMA, schema_name="memories")
    assert messages == snapshot


def test_invalid_json_then_valid_is_retried_with_the_error_fed_back():
    llm = ScriptedLlm(["{not json", GOOD])
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories") == GOOD
    assert llm.last_call.attempts == 2 and len(llm.requests) == 2
    retry = llm.requests[1].messages
    assert retry[:-2] == llm.requests[0].messages  # the original prompt, then the bad reply and the error
    assert retry[-2] == {"role": "assistant", "content": "{not json"}
    assert retry[-1]["role"] == "user" and "not valid JSON" in retry[-1]["content"]


def test_schema_mismatch_message_is_fed_back():
    bad = {"memories": [{"memory_type": "opinion", "content": "likes pizza"}]}
    llm = ScriptedLlm([bad, GOOD])
    assert llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories") == GOOD
    feedback = llm.requests[1].messages[-1]["content"]
    assert "does not match the schema" in feedback
    assert "$.memories[0].memory_type" in feedback and "'opinion' is not one of" in feedback


def test_missing_required_field_is_reported():
    llm = ScriptedLlm([{"memories": [{"content": "x"}]}, GOOD])
    llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories")
    assert "'memory_type' is a required property" in llm.requests[1].messages[-1]["content"]


def test_retry_feedback_does_not_pile_up():
    llm = ScriptedLlm(["bad 1", "bad 2", GOOD])
    llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories")
    # Each retry carries only the latest failure: original prompt + 2 messages.
    assert len(llm.requests[2].messages) == len(llm.requests[0].messages) + 2
    assert llm.requests[2].messages[-2]["content"] == "bad 2"


@pytest.mark.parametrize("max_retries", [0, 1, 2, 4])
def test_always_invalid_raises_after_max_retries_plus_one_attempts(max_retries):
    replies = [f"garbage {i}" for i in range(max_retries)] + [{"memories": "nope"}]
    llm = ScriptedLlm(replies, max_retries=max_retries)
    with pytest.raises(LlmInvalidOutput) as info:
        llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories")
    error = info.value
    assert error.attempts == max_retries + 1 == len(llm.requests)
    assert error.raw == '{"memories": "nope"}'  # the last raw text
    assert len(error.errors) == max_retries + 1
    assert "does not match the schema" in error.errors[-1]
    assert "memories" in str(error)
    assert llm.replies == []  # nothing consumed beyond the budget
    assert llm.last_call.ok is False and llm.last_call.attempts == max_retries + 1


def test_exceptions_in_the_script_are_raised():
    llm = ScriptedLlm([LlmTimeout("slow")])
    with pytest.raises(LlmTimeout):
        llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories")
    assert llm.totals.calls == 1


def test_running_out_of_replies_is_an_assertion_error():
    llm = ScriptedLlm([])
    with pytest.raises(AssertionError, match="no reply queued"):
        llm.complete_text(CONVERSATION)


def test_an_invalid_schema_is_a_programming_error():
    with pytest.raises(jsonschema.SchemaError):
        ScriptedLlm([GOOD]).complete_json(CONVERSATION, {"type": "objekt"}, schema_name="bad")


def test_complete_text_returns_the_reply_untouched():
    llm = ScriptedLlm(["A summary."])
    assert llm.complete_text(CONVERSATION, max_tokens=20) == "A summary."
    assert llm.requests[0].messages == CONVERSATION and llm.requests[0].max_tokens == 20
    assert llm.last_call.kind == "text" and llm.last_call.response_format is None


def test_totals_add_up_over_calls():
    llm = ScriptedLlm(["bad", GOOD, "text"])
    llm.complete_json(CONVERSATION, SCHEMA, schema_name="memories")
    llm.complete_text(CONVERSATION)
    assert llm.totals.calls == 2 and llm.totals.attempts == 3
    assert llm.totals.seconds >= 0


# --- settings -------------------------------------------------------------------------------


def test_get_llm_is_none_without_a_base_url(settings):
    settings.OAM_LLM_BASE_URL = ""
    reset_llm()
    try:
        assert get_llm() is None
    finally:
        reset_llm()


def test_get_llm_builds_one_adapter_from_settings(settings):
    settings.OAM_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OAM_LLM_MODEL = "some-model"
    settings.OAM_LLM_API_KEY = "sk-test"
    settings.OAM_LLM_TIMEOUT = 7.5
    settings.OAM_LLM_MAX_RETRIES = 1
    reset_llm()
    try:
        llm = get_llm()
        assert isinstance(llm, OpenAICompatibleLlm)
        assert (llm.base_url, llm.model, llm.timeout, llm.max_retries) == (
            "http://127.0.0.1:9/v1", "some-model", 7.5, 1)
        assert get_llm() is llm  # cached per process
        reset_llm()
        assert get_llm() is not llm
    finally:
        reset_llm()


def test_last_call_is_per_thread():
    """get_llm()'s adapter is shared by worker threads; each sees its own last call."""
    import threading

    llm = ScriptedLlm(["from the worker"])
    worker = threading.Thread(target=llm.complete_text, args=(CONVERSATION,))
    worker.start()
    worker.join()
    assert llm.last_call is None  # this thread made no call
    assert llm.totals.calls == 1
