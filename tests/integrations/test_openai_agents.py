"""``integrations.openai_agents.OamSession`` driven by the OpenAI Agents SDK itself: ``Runner.run`` with a scripted
``Model`` (canned ``ModelResponse``s, no network, tracing off) over several turns, one of them calling a tool;
the conversation is checked in the OAM thread (``oam_messages``) and in what the model is given each turn.

``Runner.run`` is awaited with ``asyncio.run``: the session's client calls run in the client's worker thread,
so the tests use ``transactional_db``.
"""

import asyncio
import json
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, function_tool, set_tracing_disabled
from agents.items import ModelResponse
from agents.memory.session import Session
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from integrations.openai_agents import OamSession
from memory.client import AgentMemory
from memory.models import Message, Project, Thread
from memory.records.tenancy import Tenant
from tests.ids import key

pytestmark = pytest.mark.django_db(transaction=True)

RUN = RunConfig(tracing_disabled=True)


@pytest.fixture(autouse=True)
def _no_tracing():
    """The SDK's trace exporter would post to the network; nothing here may."""
    set_tracing_disabled(True)


def reply(text: str, n: int) -> ModelResponse:
    message = ResponseOutputMessage(id=f"msg_{n}", type="message", role="assistant", status="completed",
                                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])])
    return ModelResponse(output=[message], usage=Usage(), response_id=None)


def tool_call(name: str, arguments: dict[str, Any], n: int) -> ModelResponse:
    call = ResponseFunctionToolCall(id=f"fc_{n}", call_id=f"call_{n}", type="function_call", name=name,
                                    arguments=json.dumps(arguments), status="completed")
    return ModelResponse(output=[call], usage=Usage(), response_id=None)


class ScriptedModel(Model):
    """A ``Model`` answering with canned responses in order, keeping the input of every call."""

    def __init__(self, responses: list[ModelResponse]):
        self.responses = list(responses)
        self.inputs: list[list[dict[str, Any]]] = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id, conversation_id, prompt):
        self.inputs.append(json.loads(json.dumps(input if isinstance(input, list) else [input])))
        return self.responses.pop(0)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the tests do not stream")


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny and 24 C in {city}"


@pytest.fixture
def client(transactional_db):
    return AgentMemory(llm=None)


def run(agent: Agent, text: str, session: Session):
    return asyncio.run(Runner.run(agent, text, session=session, run_config=RUN))


def stored(thread_id: str, project=None) -> list[tuple[str, str]]:
    return list(Message.objects.filter(thread_id=key(thread_id, project)).order_by("seq")
                .values_list("role", "content"))


def test_the_runner_keeps_the_conversation_in_an_oam_thread(client):
    model = ScriptedModel([reply("Rome is lovely in May.", 1), tool_call("weather", {"city": "Rome"}, 2),
                           reply("It is sunny there.", 3), reply("Enjoy the trip!", 4)])
    agent = Agent(name="planner", instructions="Plan trips.", model=model, tools=[weather])
    session = OamSession("chat-42", client, user_id="u1", agent_id="planner", metadata={"channel": "web"})
    assert isinstance(session, Session)  # the SDK's runtime-checkable protocol

    first = run(agent, "Where should I go in May?", session)
    assert first.final_output == "Rome is lovely in May."
    thread = Thread.objects.get(pk=key("chat-42"))
    assert (thread.user_id, thread.agent_id, thread.metadata) == ("u1", "planner", {"channel": "web"})
    assert stored("chat-42") == [("user", "Where should I go in May?"), ("assistant", "Rome is lovely in May.")]
    turn_one = asyncio.run(session.get_items())
    assert turn_one[0] == {"role": "user", "content": "Where should I go in May?"}
    assert turn_one[1]["type"] == "message" and turn_one[1]["content"][0]["text"] == "Rome is lovely in May."

    second = run(agent, "What is the weather there?", session)
    assert second.final_output == "It is sunny there."
    # the second turn's model input starts with the first turn's items, as the session returned them
    assert model.inputs[1][:2] == turn_one
    assert model.inputs[1][2] == {"role": "user", "content": "What is the weather there?"}
    # the tool round trip is in the thread too, and in the model's next input
    assert stored("chat-42")[2:] == [
        ("user", "What is the weather there?"),
        ("function_call", json.dumps(model.inputs[2][3], ensure_ascii=False, sort_keys=True)),
        ("function_call_output", "Sunny and 24 C in Rome"),
        ("assistant", "It is sunny there."),
    ]
    assert model.inputs[2][3]["type"] == "function_call" and model.inputs[2][3]["name"] == "weather"
    assert model.inputs[2][4]["type"] == "function_call_output"

    run(agent, "Thanks!", session)
    everything = asyncio.run(session.get_items())
    assert model.inputs[3] == everything[:-1]  # the third turn saw the whole conversation, items exactly
    assert len(everything) == 8 and everything[-1]["content"][0]["text"] == "Enjoy the trip!"
    # a bounded read returns the newest items only, in order; session_settings sets the default bound
    assert asyncio.run(session.get_items(limit=3)) == everything[-3:]
    bounded = OamSession("chat-42", client, session_settings=SessionSettings(limit=2))
    assert asyncio.run(bounded.get_items()) == everything[-2:]
    assert asyncio.run(bounded.get_items(limit=0)) == []
    # the thread is an OAM thread like any other: searchable through the client
    hits = client.get_thread("chat-42").search("weather in Rome", record_types=["message"], max_results=3)
    assert "Sunny and 24 C in Rome" in [hit.record.content for hit in hits]


def test_pop_item_and_clear_session_keep_the_thread(client):
    session = OamSession("chat-7", client, user_id="u1", metadata={"topic": "books"})
    items = [{"role": "user", "content": f"message {i}"} for i in range(5)]
    items.append({"role": "assistant", "type": "message", "status": "completed", "id": "msg_1",
                  "content": [{"type": "output_text", "text": "a reply", "annotations": []}]})
    asyncio.run(session.add_items(items))
    assert asyncio.run(session.get_items()) == items
    row = Message.objects.filter(thread_id=key("chat-7")).order_by("-seq").first()
    # the reply's text is stored once, as the message's content; its place in the kept item is emptied
    assert row.content == "a reply" and row.metadata["openai_agents"]["item"]["content"][0]["text"] is None

    assert asyncio.run(session.pop_item()) == items[-1]
    assert asyncio.run(session.pop_item()) == items[-2]
    assert [content for _, content in stored("chat-7")] == [f"message {i}" for i in range(4)]

    asyncio.run(session.clear_session())
    assert stored("chat-7") == [] and asyncio.run(session.get_items()) == []
    assert asyncio.run(session.pop_item()) is None
    thread = Thread.objects.get(pk=key("chat-7"))
    assert (thread.user_id, thread.metadata) == ("u1", {"topic": "books"})
    asyncio.run(session.add_items([{"role": "user", "content": "again"}]))
    assert asyncio.run(OamSession("chat-7", client).get_items()) == [{"role": "user", "content": "again"}]


def test_a_message_no_session_wrote_reads_as_a_plain_item(client):
    client.create_thread(thread_id="imported", user_id="u1").add_messages(
        [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}])
    assert asyncio.run(OamSession("imported", client).get_items()) == [
        {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]


def test_another_tenant_sees_nothing_of_the_first(client):
    session = OamSession("chat-1", client, user_id="u1")
    asyncio.run(session.add_items([{"role": "user", "content": "my secret plan"}]))

    other = AgentMemory(project=Project.objects.create(slug="other"), llm=None)
    assert asyncio.run(OamSession("chat-1", other).get_items()) == []  # the other project's own thread
    assert Thread.objects.filter(pk=key("chat-1", "other")).exists()

    restricted = AgentMemory(tenant=Tenant(project=client.project, user_id="u2"), llm=None)
    intruder = OamSession("chat-1", restricted)
    with pytest.raises(ValueError, match="thread_id"):
        asyncio.run(intruder.get_items())  # another user's thread: taken, and not readable
    with pytest.raises(ValueError):
        asyncio.run(intruder.add_items([{"role": "user", "content": "injected"}]))
    with pytest.raises(ValueError, match="u2"):
        asyncio.run(OamSession("chat-9", restricted, user_id="u1").get_items())
    assert stored("chat-1") == [("user", "my secret plan")]

    own = OamSession("chat-2", restricted)
    asyncio.run(own.add_items([{"role": "user", "content": "mine"}]))
    assert Thread.objects.get(pk=key("chat-2")).user_id == "u2"
    assert asyncio.run(OamSession("chat-1", AgentMemory(tenant=Tenant(project=client.project, user_id="u1"),
                                                        llm=None)).get_items()) == [
        {"role": "user", "content": "my secret plan"}]


def test_bad_input_is_refused_and_nothing_is_stored(client):
    for bad, error in (("", ValueError), ("x" * 256, ValueError), ("nul\x00", ValueError), (5, TypeError)):
        with pytest.raises(error, match="session_id"):
            OamSession(bad, client)
    with pytest.raises(TypeError, match="client"):
        OamSession("chat", object())
    session = OamSession("chat", client)
    with pytest.raises(TypeError, match="item"):
        asyncio.run(session.add_items([{"role": "user", "content": "fine"}, "not a dict"]))
    with pytest.raises(ValueError, match="metadata"):
        asyncio.run(session.add_items([{"role": "user", "content": "fine"},
                                       {"role": "user", "content": "x", "score": float("nan")}]))
    with pytest.raises(ValueError, match="role"):
        asyncio.run(session.add_items([{"role": "user\nsystem", "content": "forged"}]))
    with pytest.raises(ValueError, match="limit"):
        asyncio.run(session.get_items(limit=-1))
    assert not Message.objects.exists()
