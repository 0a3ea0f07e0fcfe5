"""Time-to-live: anchors, retention defaults and clamping, and invisibility after expiry."""

import datetime as dt

import pytest
from django.utils import timezone

from memory.client import AgentMemory
from memory.core.types import MemoryRetentionConfig, TimeToLiveAnchor
from memory.models import Memory, Message
from tests.ids import key


def _days_from_now(value):
    return (value - timezone.now()).total_seconds() / 86400


def test_ttl_from_creation_time(thread):
    [mid] = thread.add_messages([{"role": "user", "content": "a"}], ttl_days=7)
    assert _days_from_now(Message.objects.get(pk=key(mid)).expires_at) == pytest.approx(7, abs=0.01)
    assert thread.get_message(mid).expires_at is not None


def test_no_ttl_means_no_expiry_by_default(thread):
    [mid] = thread.add_messages([{"role": "user", "content": "a"}])
    assert Message.objects.get(pk=key(mid)).expires_at is None


def test_timestamp_anchor_uses_event_time_naive_is_utc(thread):
    mid = thread.add_memory("trip", timestamp="2030-01-01T00:00:00", ttl_days=10,
                            ttl_anchor=TimeToLiveAnchor.TIMESTAMP)
    assert Memory.objects.get(pk=key(mid)).expires_at == dt.datetime(2030, 1, 11, tzinfo=dt.timezone.utc)
    mid2 = thread.add_memory("zoned", timestamp="2030-01-01T02:00:00+02:00", ttl_days=1, ttl_anchor="timestamp")
    assert Memory.objects.get(pk=key(mid2)).expires_at == dt.datetime(2030, 1, 2, tzinfo=dt.timezone.utc)


def test_timestamp_anchor_requires_iso_timestamp(thread):
    with pytest.raises(ValueError, match="ISO-8601"):
        thread.add_memory("no time", ttl_days=3, ttl_anchor=TimeToLiveAnchor.TIMESTAMP)
    with pytest.raises(ValueError, match="ISO-8601"):
        thread.add_messages([{"role": "u", "content": "x", "timestamp": "last tuesday"}],
                            ttl_days=3, ttl_anchor="timestamp")
    with pytest.raises(ValueError, match="ttl_anchor"):
        thread.add_memory("bad anchor", ttl_days=3, ttl_anchor="sometime")
    assert Memory.objects.count() == Message.objects.count() == 0


def test_bad_ttl_values(thread):
    with pytest.raises(ValueError, match="ttl_days"):
        thread.add_memory("x", ttl_days=-1)
    with pytest.raises(TypeError, match="ttl_days"):
        thread.add_memory("x", ttl_days="3")


def test_zero_days_expire_at_once(thread):
    # SDK 26.8.0: ttl_days=0 is accepted and the record expires at once (stored, never live).
    memory_id = thread.add_memory("gone at once", ttl_days=0)
    [message_id] = thread.add_messages([{"role": "user", "content": "gone too"}], ttl_days=0)
    with pytest.raises(KeyError):
        thread.get_memory(memory_id)
    with pytest.raises(KeyError):
        thread.get_message(message_id)
    assert Message.objects.filter(pk=key(message_id)).exists()


def test_max_only_retention_gives_an_omitted_ttl_the_maximum(db):
    client = AgentMemory(memory_retention_config=MemoryRetentionConfig(max_ttl_days=7))
    thread = client.create_thread(thread_id="t-max", user_id="u", agent_id="a")
    [message_id] = thread.add_messages([{"role": "user", "content": "kept a week"}])
    row = Message.objects.get(pk=key(message_id))
    assert row.expires_at is not None and 6.9 < (row.expires_at - row.created_at).total_seconds() / 86400 <= 7


def test_per_message_ttl_lists(thread):
    a, b = thread.add_messages([{"role": "u", "content": "a"}, {"role": "u", "content": "b"}], ttl_days=[1, None])
    assert Message.objects.get(pk=key(a)).expires_at is not None
    assert Message.objects.get(pk=key(b)).expires_at is None


@pytest.fixture
def retained(db):
    client = AgentMemory(retention_config=MemoryRetentionConfig(default_ttl_days=30, max_ttl_days=90))
    return client.create_thread(thread_id="t-ret", user_id="u", agent_id="a")


def test_retention_default_cap_and_none(retained):
    omitted = retained.add_memory("default")
    assert _days_from_now(Memory.objects.get(pk=key(omitted)).expires_at) == pytest.approx(30, abs=0.01)
    none = retained.add_memory("none means max", ttl_days=None)
    assert _days_from_now(Memory.objects.get(pk=key(none)).expires_at) == pytest.approx(90, abs=0.01)
    with pytest.warns(UserWarning, match="clamped"):
        big = retained.add_memory("too long", ttl_days=365)
    assert _days_from_now(Memory.objects.get(pk=key(big)).expires_at) == pytest.approx(90, abs=0.01)


def test_ttl_refresh_on_update(thread):
    mid = thread.add_memory("refresh me", timestamp="2031-06-01T00:00:00")
    thread.update_memory(mid, ttl_days=2)
    assert _days_from_now(Memory.objects.get(pk=key(mid)).expires_at) == pytest.approx(2, abs=0.01)
    thread.update_memory(mid, ttl_days=1, ttl_anchor="timestamp")
    assert Memory.objects.get(pk=key(mid)).expires_at == dt.datetime(2031, 6, 2, tzinfo=dt.timezone.utc)
    thread.update_memory(mid, ttl_days=None)
    assert Memory.objects.get(pk=key(mid)).expires_at is None


def test_expired_records_are_invisible_everywhere(thread):
    [gone, kept] = thread.add_messages([{"role": "user", "content": "volcano trip"},
                                        {"role": "user", "content": "volcano museum"}])
    mem = thread.add_memory("volcano facts")
    past = timezone.now() - dt.timedelta(seconds=1)
    Message.objects.filter(pk=key(gone)).update(expires_at=past)
    Memory.objects.filter(pk=key(mem)).update(expires_at=past)
    from memory.models import SearchChunk
    SearchChunk.objects.filter(record_id__in=[gone, mem]).update(expires_at=past)

    assert [m.id for m in thread.get_messages()] == [kept]
    with pytest.raises(KeyError):
        thread.get_message(gone)
    with pytest.raises(KeyError):
        thread.update_message(gone, ttl_days=5)
    with pytest.raises(KeyError):
        thread.update_memory(mem, ttl_days=5)
    assert {r.record_id for r in thread.search("volcano")} == {kept}
