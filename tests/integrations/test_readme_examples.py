"""The LangGraph and OpenAI Agents examples run as written: the README's short ones and the full ones of
``docs/agents.md`` (the blocks marked ``tested: tests/integrations/test_readme_examples.py``), on the test
database. The Agents examples name no model, so the SDK asks its default provider for one: here the provider
answers with a scripted model (no network, tracing off); nothing else of a block is changed."""

from __future__ import annotations

import datetime as dt

import pytest
from agents import set_tracing_disabled
from agents.models.multi_provider import MultiProvider

from memory.models import Memory, Message
from tests.docs.blocks import DOCS, README, marked_for
from tests.ids import key
from tests.integrations.test_openai_agents import ScriptedModel, reply

HERE = "tests/integrations/test_readme_examples.py"

pytestmark = pytest.mark.django_db(transaction=True)


def blocks(page) -> list[str]:
    found = marked_for(HERE, page, "python")
    assert len(found) == 2, f"{page.name}: its LangGraph and OpenAI Agents examples"
    return found


def test_the_readme_langgraph_example(transactional_db, capsys):
    exec(compile(blocks(README)[0], "README.md (LangGraph)", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out == "Prefers espresso\n"
    row = Memory.objects.get()
    assert (row.user_id, row.content, row.metadata["langgraph"]["key"]) == ("u1", "Prefers espresso", "drink")


def test_the_langgraph_graph_example(transactional_db):
    namespace: dict = {}
    exec(compile(blocks(DOCS / "agents.md")[0], "agents.md (LangGraph)", "exec"), namespace)  # noqa: S102
    row = Memory.objects.get()
    assert (row.user_id, row.content, row.metadata["langgraph"]["key"]) == ("u1", "Prefers espresso", "drink")
    assert row.expires_at == row.created_at + dt.timedelta(days=8)  # a week, and up to a day more
    state = namespace["graph"].invoke({"messages": [("user", "again")]}, {"configurable": {"user_id": "u1"}})
    assert state["messages"][-1].content == "Prefers espresso"


@pytest.fixture
def scripted_default_model(monkeypatch):
    """The SDK's default model, answering the given replies in turn."""
    set_tracing_disabled(True)

    def install(*texts: str) -> ScriptedModel:
        model = ScriptedModel([reply(text, n) for n, text in enumerate(texts, 1)])
        monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: model)
        return model

    return install


def test_the_readme_openai_agents_example(transactional_db, scripted_default_model, capsys):
    scripted_default_model("Rome in May sounds wonderful.")
    exec(compile(blocks(README)[1], "README.md (OpenAI Agents)", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out == "Rome in May sounds wonderful.\n"
    assert list(Message.objects.filter(thread_id=key("chat-42")).order_by("seq").values_list("role", flat=True)) \
        == ["user", "assistant"]


def test_the_openai_agents_session_example(transactional_db, scripted_default_model, capsys):
    model = scripted_default_model("Rome in May sounds wonderful.", "You are going to Rome.")
    exec(compile(blocks(DOCS / "agents.md")[1], "agents.md (OpenAI Agents)", "exec"), {})  # noqa: S102
    assert capsys.readouterr().out == "You are going to Rome.\n"
    assert model.inputs[1][0] == {"role": "user", "content": "I'm planning a trip to Rome in May."}
    assert list(Message.objects.filter(thread_id=key("chat-42")).order_by("seq").values_list("role", flat=True)) \
        == ["user", "assistant", "user", "assistant"]
