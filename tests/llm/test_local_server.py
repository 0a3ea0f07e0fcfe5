"""End to end against llama.cpp's OpenAI-compatible server running SmolLM2-135M.

The model is tiny: these tests check the pipeline (server start, the
response_format fallback, parsing, validation, stats), not the content. If the
server cannot start, the tests error with its log rather than skip.
"""

import jsonschema
import pytest
from django.core.management import CommandError, call_command

from memory.dev.llm_server import free_port
from memory.llm.adapters import get_llm
from tests.llm.test_scripted import SCHEMA

pytestmark = pytest.mark.slow

MEMORY_SCHEMA = SCHEMA  # the memories schema the scripted tests use
CONVERSATION = [
    {
        "role": "system",
        "content": "Extract durable memories about the user from the conversation. "
        "memory_type is one of: memory, fact, guideline, preference.",
    },
    {"role": "user", "content": "I'm vegetarian and I live in Lisbon. Please always answer in short sentences."},
    {"role": "assistant", "content": "Noted: vegetarian, Lisbon, short answers."},
]


def test_complete_json_returns_schema_valid_data(local_llm):
    result = local_llm.complete_json(CONVERSATION, MEMORY_SCHEMA, schema_name="memories", max_tokens=300)
    jsonschema.validate(result, MEMORY_SCHEMA)
    stats = local_llm.last_call
    assert stats.ok and 1 <= stats.attempts <= local_llm.max_retries + 1
    assert stats.prompt_tokens > 0 and stats.completion_tokens > 0 and stats.seconds > 0
    # llama.cpp's server rejects json_schema; the adapter must have switched.
    assert local_llm.json_form == "json_object" and stats.response_format == "json_object"


def test_complete_text_returns_text(local_llm):
    text = local_llm.complete_text(
        [{"role": "user", "content": "Say hello in one short sentence."}], max_tokens=30
    )
    assert isinstance(text, str) and text.strip()
    assert local_llm.last_call.completion_tokens > 0


def test_get_llm_from_settings_reaches_the_server(local_llm_settings):
    llm = get_llm()
    result = llm.complete_json(
        [{"role": "user", "content": "My favourite colour is green."}],
        MEMORY_SCHEMA,
        schema_name="memories",
        max_tokens=200,
    )
    jsonschema.validate(result, MEMORY_SCHEMA)


def test_run_local_llm_command_reports_a_server_that_cannot_start(tmp_path):
    """The command's error (like the fixture's) carries the server log: a missing model file here."""
    with pytest.raises(CommandError, match="exited with code 1") as info:
        call_command(
            "run_local_llm", port=free_port(), model=str(tmp_path / "missing.gguf"),
            log=str(tmp_path / "server.log"), startup_timeout=60, verbosity=0,
        )
    assert "--- server log (tail) ---" in str(info.value)
    assert "Model path does not exist" in str(info.value)  # llama.cpp's own words, from its log
