"""Thread summaries (spec: get_summary, OracleSummary): durable LLM summary, transcript fallback, budgets."""

import asyncio

import jsonschema
import pytest

from memory.client import AgentMemory
from memory.context import summaries as context
from memory.core.chunking import estimate_tokens
from memory.core.types import OracleSummary, Summary
from memory.llm.adapters import LlmTimeout
from memory.llm.scripted import ScriptedLlm
from memory.models import ThreadSummary
from memory.records.tenancy import get_project
from memory.services.threads import thread_create
from tests.ids import key


def test_spec_examples_of_the_value_type():
    summary = OracleSummary(content="Plan the Rome itinerary.")
    assert summary.content == "Plan the Rome itinerary."
    assert str(summary) == "Plan the Rome itinerary."
    assert OracleSummary(content="Keep the tea preference in mind.").content == "Keep the tea preference in mind."
    assert Summary(content="Thread recap").formatted_content == "Thread recap"


def test_spec_example_summary_after_a_message(thread):
    assert len(thread.add_messages([{"role": "assistant", "content": "Summary source message"}])) == 1
    summary = thread.get_summary()
    assert bool(summary.content)


@pytest.mark.django_db(transaction=True)
def test_async_twin():
    thread = AgentMemory(llm=None).create_thread(thread_id="t-sum-async", user_id="u", agent_id="a")
    thread.add_messages([{"role": "user", "content": "Async summary source"}])
    assert asyncio.run(thread.get_summary_async()).content == "user: Async summary source"


# --- without an LLM: the transcript fallback ----------------------------------------------


@pytest.fixture
def plain(db):
    """A thread without an LLM."""
    return AgentMemory(llm=None).create_thread(thread_id="t-plain", user_id="u", agent_id="a")


def test_empty_thread_has_an_empty_summary(plain):
    assert plain.get_summary().content == ""


def test_transcript_lines_in_order(plain):
    plain.add_messages([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!\nHow can I help?"},
                        {"role": "tool", "content": "42"}])
    assert plain.get_summary().content == "user: Hi\nassistant: Hello!\nHow can I help?\ntool: 42"
    assert plain.get_summary(except_last=1).content == "user: Hi\nassistant: Hello!\nHow can I help?"
    assert plain.get_summary(except_last=3).content == ""
    assert plain.get_summary(except_last=10).content == ""


def test_transcript_keeps_the_newest_messages_within_4000_characters(plain):
    plain.add_messages([{"role": "user", "content": f"message {i:03d} " + "x" * 90} for i in range(100)])
    for kwargs in ({}, {"token_budget": 0}, {"token_budget": -5}, {"token_budget": None}, {"token_budget": 10_000}):
        text = plain.get_summary(**kwargs).content
        assert len(text) <= 4000, kwargs
        assert text.endswith("message 099 " + "x" * 90)
        assert "message 000" not in text
        assert text.startswith("user: message ")  # whole lines only
    assert len(plain.get_summary().content) > 3800


def test_one_huge_message_is_cut_to_the_cap(plain):
    plain.add_messages([{"role": "user", "content": "y" * 10_000}])
    text = plain.get_summary(token_budget=0).content
    assert len(text) == 4000 and text.startswith("user: yyy") and text.endswith("…")


def test_positive_budget_tightens_the_transcript(plain):
    plain.add_messages([{"role": "user", "content": "alpha"}, {"role": "user", "content": "beta"}])
    assert plain.get_summary(token_budget=3).content == "user: beta"  # 12 characters fit, one line
    assert estimate_tokens(plain.get_summary(token_budget=1).content) <= 1


@pytest.mark.parametrize("kwargs, error", [
    ({"except_lats": 1}, TypeError),
    ({"except_last": -1}, ValueError),
    ({"except_last": "1"}, TypeError),
    ({"token_budget": "100"}, TypeError),
    ({"token_budget": 1.5}, TypeError),
])
def test_bad_arguments(plain, kwargs, error):
    with pytest.raises(error):
        plain.get_summary(**kwargs)


# --- with an LLM: the durable summary ----------------------------------------------------------


def reply(summary, topics=()):
    return {"summary": summary, "topics": list(topics)}


def llm_thread(llm, thread_id="t-llm", **config):
    """A thread whose LLM serves summaries only: extraction off, so no other call takes the scripted replies."""
    thread_create(project=get_project(None), thread_id=thread_id, user_id="u", agent_id="a",
                  config={"extract_memories": False, **config})
    return AgentMemory(llm=llm).get_thread(thread_id)


def durable(thread_id="t-llm"):
    return ThreadSummary.objects.get(thread_id=key(thread_id))


def user_text(request):
    return request.messages[-1]["content"]


def test_refresh_stores_reuses_and_extends_the_durable_summary(db):
    llm = ScriptedLlm([reply("  User wants a vegetarian menu. ", ["food", " vegetarian  menu", "FOOD"]),
                       reply("User wants a vegetarian menu for 12 guests.", ["food", "party"])])
    thread = llm_thread(llm)
    thread.add_messages([{"role": "user", "content": "I am vegetarian"},
                         {"role": "assistant", "content": "Noted"}])
    assert thread.get_summary().content == "User wants a vegetarian menu."
    row = durable()
    assert (row.content, row.topics, row.through_seq, row.revision) == (
        "User wants a vegetarian menu.", ["food", "vegetarian menu"], 2, 1)
    request = llm.requests[0]
    assert request.schema == context.SUMMARY_SCHEMA and request.schema_name == "thread_summary"
    assert "Previous summary:\n(none)" in user_text(request)
    assert "user: I am vegetarian\nassistant: Noted" in user_text(request)

    # Covers the latest message: reused, no call (ScriptedLlm would have one reply left to give).
    assert thread.get_summary().content == "User wants a vegetarian menu."
    assert len(llm.requests) == 1

    thread.add_messages([{"role": "user", "content": "We will be 12"}])
    assert thread.get_summary().content == "User wants a vegetarian menu for 12 guests."
    row = durable()
    assert (row.through_seq, row.revision, row.topics) == (3, 2, ["food", "party"])
    prompt = user_text(llm.requests[1])
    assert "Previous summary:\nUser wants a vegetarian menu." in prompt
    assert "Previous topics: food, vegetarian menu" in prompt
    assert "We will be 12" in prompt and "I am vegetarian" not in prompt  # only the new messages


def test_except_last_summarizes_the_prefix_and_leaves_the_durable_summary(db):
    llm = ScriptedLlm([reply("About A and B."), reply("About A only."), reply("About A, B and C.")])
    thread = llm_thread(llm)
    thread.add_messages([{"role": "user", "content": "A"}, {"role": "user", "content": "B"}])
    assert thread.get_summary().content == "About A and B."
    # The durable summary covers the tail: the prefix is summarized from scratch, not stored.
    assert thread.get_summary(except_last=1).content == "About A only."
    assert "user: A" in user_text(llm.requests[1]) and "user: B" not in user_text(llm.requests[1])
    assert (durable().content, durable().revision) == ("About A and B.", 1)
    # The durable summary covers exactly the prefix: reused without a call.
    thread.add_messages([{"role": "user", "content": "C"}])
    assert thread.get_summary(except_last=1).content == "About A and B."
    assert len(llm.requests) == 2
    assert thread.get_summary().content == "About A, B and C."
    assert durable().revision == 2


def test_except_last_extends_an_older_durable_summary_without_storing(db):
    llm = ScriptedLlm([reply("About A."), reply("About A and B.")])
    thread = llm_thread(llm)
    thread.add_messages([{"role": "user", "content": "A"}])
    thread.get_summary()
    thread.add_messages([{"role": "user", "content": "B"}, {"role": "user", "content": "C"}])
    assert thread.get_summary(except_last=1).content == "About A and B."
    prompt = user_text(llm.requests[1])
    assert "Previous summary:\nAbout A." in prompt and "user: B" in prompt and "user: C" not in prompt
    assert (durable().content, durable().through_seq, durable().revision) == ("About A.", 1, 1)


def test_invalid_llm_output_falls_back_to_the_transcript(db):
    llm = ScriptedLlm(["not json", {"summary": ""}, {"summary": "x", "topics": "no"}])
    thread = llm_thread(llm)
    thread.add_messages([{"role": "user", "content": "Hello"}])
    assert thread.get_summary().content == "user: Hello"
    assert len(llm.requests) == 3  # the adapter retried twice
    assert not ThreadSummary.objects.filter(thread_id="t-llm").exists()


def test_transport_error_falls_back_to_the_transcript(db):
    thread = llm_thread(ScriptedLlm([LlmTimeout("slow")]))
    thread.add_messages([{"role": "user", "content": "Hello"}])
    assert thread.get_summary().content == "user: Hello"


def test_token_budget_soft_truncates_the_llm_summary(db):
    long_text = "The user talked about " + " ".join(f"topic{i}" for i in range(600))
    thread = llm_thread(ScriptedLlm([reply(long_text)]))
    thread.add_messages([{"role": "user", "content": "many things"}])
    assert thread.get_summary(token_budget=0).content == long_text
    assert thread.get_summary(token_budget=-1).content == long_text
    assert thread.get_summary(token_budget=None).content == long_text
    short = thread.get_summary(token_budget=10).content
    assert estimate_tokens(short) <= 10 and short.endswith("…") and short.startswith("The user talked")
    assert thread.get_summary(token_budget=10_000).content == long_text
    default = thread.get_summary().content
    assert estimate_tokens(default) <= context.DEFAULT_SUMMARY_TOKEN_BUDGET < estimate_tokens(long_text)


def test_prompt_is_cut_to_the_context_card_token_limit(db):
    llm = ScriptedLlm([reply("Cut.")])
    thread = llm_thread(llm, context_card_token_limit=300)
    thread.add_messages([{"role": "user", "content": f"message {i:02d} " + "z" * 60} for i in range(40)])
    thread.get_summary()
    messages = llm.requests[0].messages
    assert estimate_tokens("".join(m["content"] for m in messages)) <= 300
    prompt = user_text(llm.requests[0])
    assert "message 39" in prompt and "message 00" not in prompt
    assert "earlier new messages left out" in prompt
    assert durable().through_seq == 40  # the summary still covers the thread


def test_prompt_limit_off_sends_everything(db):
    llm = ScriptedLlm([reply("All.")])
    thread = llm_thread(llm, context_card_token_limit=0)
    thread.add_messages([{"role": "user", "content": f"message {i:02d} " + "z" * 60} for i in range(40)])
    thread.get_summary()
    prompt = user_text(llm.requests[0])
    assert "message 00" in prompt and "message 39" in prompt and "left out" not in prompt


def test_summary_prompt_cuts_the_newest_message_and_the_previous_summary_when_needed():
    messages = context.summary_prompt("p" * 5000, ["t"], ["user: " + "n" * 5000], token_limit=400)
    assert estimate_tokens("".join(m["content"] for m in messages)) <= 400
    assert "user: nnn" in messages[1]["content"]


def test_disabled_summaries_are_computed_but_not_stored(db):
    llm = ScriptedLlm([reply("One-off.")])
    thread = llm_thread(llm, enable_context_summary=False)
    thread.add_messages([{"role": "user", "content": "hi"}])
    assert thread.get_summary().content == "One-off."
    assert not ThreadSummary.objects.filter(thread_id="t-llm").exists()


def test_refresh_if_due_follows_the_update_frequency(db):
    llm = ScriptedLlm([reply("Two."), reply("Four.")])
    thread = llm_thread(llm, context_summary_update_frequency=2)
    row = thread._row
    thread.add_messages([{"role": "user", "content": "1"}])
    assert context.summary_refresh_if_due(thread=row, llm=llm) is None
    thread.add_messages([{"role": "user", "content": "2"}])
    assert context.summary_refresh_if_due(thread=row, llm=llm).content == "Two."
    assert context.summary_refresh_if_due(thread=row, llm=llm) is None  # nothing new
    thread.add_messages([{"role": "user", "content": "3"}, {"role": "user", "content": "4"}])
    assert context.summary_refresh_if_due(thread=row, llm=None) is None  # no LLM, no refresh
    assert context.summary_refresh_if_due(thread=row, llm=llm).content == "Four."
    assert (durable().through_seq, durable().revision) == (4, 2)


def test_refresh_keeps_a_summary_that_got_further_meanwhile(db):
    llm = ScriptedLlm([reply("Older.")])
    thread = llm_thread(llm)
    thread.add_messages([{"role": "user", "content": "1"}, {"role": "user", "content": "2"}])
    ThreadSummary.objects.create(thread_id=key("t-llm"), project=get_project(None), content="Newer.", through_seq=0,
                                 revision=0)

    def race(*args, **kwargs):
        ThreadSummary.objects.filter(thread_id=key("t-llm")).update(content="Newer.", through_seq=2, revision=5)
        return ("Older.", [])

    original = context.llm_summarize
    context.llm_summarize = race
    try:
        row = context.summary_refresh(thread=thread._row, llm=llm)
    finally:
        context.llm_summarize = original
    assert (row.content, row.through_seq, row.revision) == ("Newer.", 2, 5)


def test_without_llm_a_covering_durable_summary_is_still_used(db):
    llm_thread(ScriptedLlm([]), thread_id="t-kept")
    ThreadSummary.objects.create(thread_id=key("t-kept"), project=get_project(None), content="Stored.", through_seq=1,
                                 revision=1)
    thread = AgentMemory(llm=None).get_thread("t-kept")
    thread.add_messages([{"role": "user", "content": "1"}])
    assert thread.get_summary().content == "Stored."
    thread.add_messages([{"role": "user", "content": "2"}])
    assert thread.get_summary().content == "user: 1\nuser: 2"  # behind and no LLM: transcript


# --- the real local LLM ------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_llm_produces_and_stores_a_durable_summary(db, local_llm):
    """Pipeline check against SmolLM2-135M: a valid summary is produced and stored (not its quality)."""
    thread = llm_thread(local_llm, thread_id="t-real")
    thread.add_messages([
        {"role": "user", "content": "I'm planning a trip to Lisbon in May with my sister."},
        {"role": "assistant", "content": "Great! Do you want hotel or apartment suggestions?"},
        {"role": "user", "content": "An apartment near the river, and we are both vegetarian."},
    ])
    summary = thread.get_summary(token_budget=0)
    row = durable("t-real")
    assert row.content.strip() and row.revision == 1 and row.through_seq == 3
    jsonschema.validate({"summary": row.content, "topics": row.topics}, context.SUMMARY_SCHEMA)
    assert summary.content == row.content
    assert local_llm.last_call.ok and local_llm.last_call.response_format == "json_object"
