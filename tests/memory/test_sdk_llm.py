"""``llm=`` takes the SDK's LLM objects: anything with ``ILlm.generate()`` (``oracleagentmemory.Llm``
included) is wrapped into the engine's ``Llm`` (``memory.llm.adapters.GenerateLlm``); anything else is a TypeError
at construction. Before, such an object was accepted and extraction failed later in the background with
AttributeError 'complete_json'."""

import pytest
from oracleagentmemory.apis.llms.llm import ILlm, LlmResponse

from memory.client import AgentMemory
from memory.llm.adapters import GenerateLlm, LlmUnavailable
from memory.models import Thread
from tests import image_samples as samples
from tests.ids import key


class ScriptedSdkLlm(ILlm):
    """A real subclass of the SDK's ILlm answering from a queue and recording each call."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.calls = []

    def generate(self, prompt, *, response_json_schema=None, **kwargs):
        self.calls.append({"prompt": prompt, "response_json_schema": response_json_schema, **kwargs})
        return LlmResponse(text=self.replies.pop(0))

    async def generate_async(self, prompt, *, response_json_schema=None, **kwargs):
        return self.generate(prompt, response_json_schema=response_json_schema, **kwargs)


def test_an_sdk_llm_is_wrapped_and_used_for_json_and_text(db):
    sdk = ScriptedSdkLlm(['{"ok": tru', '{"ok": true}', "A red square."])
    client = AgentMemory(llm=sdk)
    assert isinstance(client.llm, GenerateLlm) and client.llm.inner is sdk
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    assert client.llm.complete_json([{"role": "user", "content": "ok?"}], schema, schema_name="probe") == {"ok": True}
    assert [c["response_json_schema"] for c in sdk.calls] == [schema, schema]  # bad JSON retried
    thread = client.create_thread(thread_id="t-sdk", extract_memories=False)
    thread.add_image(samples.png())
    assert thread.list_images()[0].description == "A red square."
    assert sdk.calls[-1]["response_json_schema"] is None and sdk.calls[-1]["max_tokens"] == 200
    # The thread-level llm= is wrapped the same way.
    assert isinstance(client.get_thread("t-sdk", llm=ScriptedSdkLlm([])).llm, GenerateLlm)


def test_the_installed_sdks_llm_class_is_accepted(db):
    from oracleagentmemory.core.llms import Llm as SdkLlm

    llm = AgentMemory(llm=SdkLlm(model="gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key="x")).llm
    assert isinstance(llm, GenerateLlm)
    with pytest.raises(LlmUnavailable, match="generate failed"):  # nothing listens on port 9
        llm.complete_text([{"role": "user", "content": "hi"}], max_tokens=5)


@pytest.mark.parametrize("bad", [object(), "gpt-4o", 3, ScriptedSdkLlm])
def test_anything_else_is_a_type_error_at_construction(db, bad):
    with pytest.raises(TypeError, match="^llm: must be"):
        AgentMemory(llm=bad)
    with pytest.raises(TypeError, match="^llm: must be"):
        AgentMemory(llm=None).create_thread(thread_id="t-bad", llm=bad, extract_memories=False)
    assert not Thread.objects.filter(pk=key("t-bad")).exists()  # nothing half-written
