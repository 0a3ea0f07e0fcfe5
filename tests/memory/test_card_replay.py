"""Card replay (issue #32, part 3): every context card the service returns is logged, and
``get_context_card(as_of=T)`` answers the card served at ``T``, equal to it and its ``content`` byte for byte.

The script below is a life of a thread: messages, memories, an edit, a ``supersedes`` relation, a delete, a TTL
expiry (the expiry purge run two days ahead) and a durable summary; a card is rendered after each step and kept
with the instant after it. Then every kept card is replayed, an instant between two steps answers the earlier
card, other parameters answer "not found", and erasure wins over the log.
"""

import datetime as dt

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from memory.client import AgentMemory
from memory.core.errors import CardNotServed
from memory.models import ContextCardLog, ThreadSummary
from memory.services.erasure import expired_purge

CARD = {"max_recent_messages": 2, "max_relevant_results": 4}


def _step_card(thread, steps, **arguments):
    card = thread.get_context_card(**{**CARD, **arguments})
    steps.append((timezone.now(), card))
    return card


@pytest.fixture
def scripted(client):
    """(thread, [(T_i, card_i)]) after a scripted life of thread ``t-life``."""
    thread = client.create_thread(thread_id="t-life", user_id="u-life", agent_id="a-life")
    steps: list = []
    thread.add_messages([{"role": "user", "content": "I am planning a trip to Lisbon in May."},
                         {"role": "assistant", "content": "Lisbon in May is lovely; shall I note hotels?"}])
    _step_card(thread, steps)
    thread.add_memory("The user plans a trip to Lisbon in May", memory_id="trip")
    thread.add_memory("The user prefers small hotels", memory_id="hotels", memory_type="preference")
    thread.add_memory("The user's budget for the trip is 900 EUR", memory_id="budget", memory_type="fact",
                      ttl_days=1)
    _step_card(thread, steps)
    thread.update_memory("hotels", content="The user prefers small hotels near the river")
    _step_card(thread, steps)
    thread.add_memory("The user now plans the Lisbon trip for June", memory_id="june")
    thread.link_records("june", "memory", "trip", "memory", "supersedes")
    _step_card(thread, steps)
    thread.delete_memory("hotels")
    _step_card(thread, steps)
    assert expired_purge(now=timezone.now() + dt.timedelta(days=2))["memories"] == 1  # the budget expired
    _step_card(thread, steps)
    ThreadSummary.objects.update_or_create(thread=thread.row, defaults={
        "project": thread.row.project, "content": "A trip to Lisbon, now in June.", "topics": ["travel", "Lisbon"],
        "through_seq": 2})
    thread.add_messages([{"role": "user", "content": "Any tips for the river side?"}])
    _step_card(thread, steps)
    return thread, steps


def test_every_card_of_the_script_is_replayed_byte_for_byte(scripted):
    thread, steps = scripted
    contents = [card.content for _, card in steps]
    assert len(set(contents)) == len(contents), "each step changed the card"
    assert "900 EUR" in contents[1] and "900 EUR" not in contents[-1]  # the TTL expiry
    assert "<topic>travel</topic>" in contents[-1]  # the durable summary
    for at, card in steps:
        replayed = thread.get_context_card(**CARD, as_of=at)
        assert replayed == card
        assert replayed.content.encode() == card.content.encode()
        assert replayed.served_at <= at
    # the present card is unchanged by the replays, and identical cards share one row
    rows = ContextCardLog.objects.filter(thread_id=thread.row.pk).count()
    again = thread.get_context_card(**CARD)
    assert again == steps[-1][1] and ContextCardLog.objects.filter(thread_id=thread.row.pk).count() == rows


def test_an_instant_between_steps_answers_the_card_before_and_before_the_first_none(scripted):
    thread, steps = scripted
    for (at, card), (later, _) in zip(steps, steps[1:]):
        between = at + (later - at) / 2
        assert thread.get_context_card(**CARD, as_of=between.isoformat()).content == card.content
    first = steps[0][0] - dt.timedelta(seconds=10)
    with pytest.raises(KeyError, match="no context card") as caught:
        thread.get_context_card(**CARD, as_of=first)
    assert caught.value.field == "as_of"


def test_other_parameters_are_not_answered_by_these_cards(scripted):
    thread, steps = scripted
    at = steps[-1][0]
    for other in ({"max_recent_messages": 3}, {"max_relevant_results": 1}, {"valid_at": "2025-01-01"},
                  {"include_invalid_results": False}):
        with pytest.raises(CardNotServed):
            thread.get_context_card(**{**CARD, **other}, as_of=at)
    # omitted parameters are their defaults: an explicit default is the same call
    thread.get_context_card(**CARD, fallback_message_count=5)  # logged now
    assert thread.get_context_card(**CARD, as_of=timezone.now()) == thread.get_context_card(**CARD)


def test_the_async_twin_replays(scripted):
    thread, steps = scripted
    at, card = steps[2]
    # async_to_sync, as Django runs an async view: the twin's worker is this thread, with its connection
    assert async_to_sync(thread.get_context_card_async)(**CARD, as_of=at) == card


def test_bad_as_of_names_it(scripted):
    thread, _ = scripted
    with pytest.raises(ValueError, match="as_of"):
        thread.get_context_card(as_of="yesterday")
    with pytest.raises(TypeError, match="as_of"):
        thread.get_context_card(as_of=12)
    with pytest.raises(TypeError):
        thread.get_context_card(as_of=timezone.now(), unknown=1)
    # the other arguments are checked as for a present-time card: the same errors, not "not found"
    with pytest.raises(TypeError, match="max_relevant_results"):
        thread.get_context_card(as_of=timezone.now(), max_relevant_results="5")
    with pytest.raises(ValueError, match="max_recent_messages"):
        thread.get_context_card(as_of=timezone.now(), except_last_messages=2, max_recent_messages=1)


def test_erasure_wins_over_the_log(client, scripted):
    thread, steps = scripted
    other = client.create_thread(thread_id="t-other", user_id="u-other", agent_id="a-life")
    other.get_context_card()
    client.delete_user("u-life")
    assert not ContextCardLog.objects.filter(user_id="u-life").exists()
    assert ContextCardLog.objects.filter(user_id="u-other").exists()
    again = client.create_thread(thread_id="t-life", user_id="u-life", agent_id="a-life")
    with pytest.raises(CardNotServed):
        again.get_context_card(**CARD, as_of=steps[-1][0])
    client.delete_thread("t-other")
    assert not ContextCardLog.objects.filter(user_id="u-other").exists()


def test_log_off_logs_nothing_and_refuses_replay(settings, thread):
    settings.OAM_CONTEXT_CARD_LOG_DAYS = 0
    thread.add_messages([{"role": "user", "content": "hello"}])
    thread.get_context_card()
    assert not ContextCardLog.objects.exists()
    with pytest.raises(ValueError, match="OAM_CONTEXT_CARD_LOG_DAYS"):
        thread.get_context_card(as_of=timezone.now())


def test_the_expiry_purge_drops_cards_past_retention(settings, thread):
    thread.add_messages([{"role": "user", "content": "hello"}])
    thread.get_context_card()
    assert expired_purge(now=timezone.now() + dt.timedelta(days=89)).get("context_cards", 0) == 0
    assert expired_purge(now=timezone.now() + dt.timedelta(days=91))["context_cards"] == 1
    assert not ContextCardLog.objects.exists()


def test_a_card_of_another_client_project_is_not_replayed(db, thread):
    from memory.models import Project

    thread.add_messages([{"role": "user", "content": "hello"}])
    thread.get_context_card()
    elsewhere = AgentMemory(project=Project.objects.create(slug="elsewhere")).create_thread(
        thread_id="t-main", user_id="user-1", agent_id="agent-1")
    with pytest.raises(CardNotServed):
        elsewhere.get_context_card(as_of=timezone.now())


def test_the_log_of_a_thread_is_bounded_in_rows_and_characters_the_newest_kept(settings, thread):
    """An outside attack: a read key asking with ever new parameters logged one whole card per read (50.7 MB from
    20 reads of 1.1 KB). Now a thread keeps its newest OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD cards of at most
    OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD characters; an older replay is "not served", as past retention."""
    settings.OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD = 3
    thread.add_messages([{"role": "user", "content": "word " * 400}])
    served = []
    for count in range(1, 6):
        served.append((count, thread.get_context_card(fallback_message_count=count), timezone.now()))
    rows = list(ContextCardLog.objects.order_by("served_at"))
    assert len(rows) == 3 and all(row.size == len(row.content) + len(row.parts) for row in rows)
    for count, card, at in served[-3:]:
        assert thread.get_context_card(fallback_message_count=count, as_of=at) == card
    with pytest.raises(CardNotServed):
        thread.get_context_card(fallback_message_count=1, as_of=served[0][2])
    settings.OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD = 500
    settings.OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD = rows[-1].size + 1  # room for one card only
    newest = thread.get_context_card(fallback_message_count=9)
    assert list(ContextCardLog.objects.values_list("content", flat=True)) == [newest.content]
    settings.OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD = 1  # the newest is kept whatever its size
    thread.get_context_card(fallback_message_count=10)
    assert ContextCardLog.objects.count() == 1


def test_a_future_as_of_is_refused_as_the_other_as_of_reads_refuse_it(scripted):
    thread, _ = scripted
    with pytest.raises(ValueError, match="as_of.*future"):
        thread.get_context_card(as_of="9999-12-31")
