"""The README's LangGraph and OpenAI Agents examples run as written (the blocks marked ``MARK``), on the test
database. The Agents example names no model, so the SDK asks its default provider for one: here the provider
answers with a scripted model (no network, tracing off); nothing else of the block is changed."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
from agents import set_tracing_disabled
from agents.models.multi_provider import MultiProvider

from memory.models import Memory, Message
from tests.ids import key
from tests.integrations.test_openai_agents import ScriptedModel, reply

README = Path(__file__).resolve().parents[2] / "README.md"
MARK = "<!-- tested: tests/integrations/test_readme_examples.py -->"
_BLOCK = re.compile(re.escape(MARK) + r"\n```python\n(.*?)\n```", re.DOTALL)

pytestmark = pytest.mark.django_db(transaction=True)


def blocks() -> list[str]:
    found = _BLOCK.findall(README.read_text())
    assert len(found) == 2, "the README's LangGraph and OpenAI Agents examples"
    return found


def test_the_langgraph_example(transactional_db):
    namespace: dict = {}
    exec(compile(blocks()[0], "README.md (LangGraph)", "exec"), namespace)
    row = Memory.objects.get()
    assert (row.user_id, row.content, row.metadata["langgraph"]["key"]) == ("u1", "Prefers espresso", "drink")
    assert row.expires_at == row.created_at + dt.timedelta(days=8)  # a week, and up to a day more
    state = namespace["graph"].invoke({"messages": [("user", "again")]}, {"configurable": {"user_id": "u1"}})
    assert state["messages"][-1].content == "Prefers espresso"


def test_the_openai_agents_example(transactional_db, monkeypatch, capsys):
    set_tracing_disabled(True)
    model = ScriptedModel([reply("Rome in May sounds wonderful.", 1), reply("You are going to Rome.", 2)])
    monkeypatch.setattr(MultiProvider, "get_model", lambda self, name: model)
    exec(compile(blocks()[1], "README.md (OpenAI Agents)", "exec"), {})
    assert capsys.readouterr().out == "You are going to Rome.\n"
    assert model.inputs[1][0] == {"role": "user", "content": "I'm planning a trip to Rome in May."}
    assert list(Message.objects.filter(thread_id=key("chat-42")).order_by("seq").values_list("role", flat=True)) \
        == ["user", "assistant", "user", "assistant"]
