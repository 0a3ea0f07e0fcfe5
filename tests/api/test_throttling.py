"""Per-key request rates and the wrong-key cap (``threads.throttling``)."""

from __future__ import annotations

import pytest
from django.test import Client

from threads import throttling
from threads.auth import api_key_create


@pytest.fixture
def two_keys(db):
    return [api_key_create(name=f"rate-{i}")[1] for i in range(2)]


def call(key: str | None, address: str = "10.9.8.7"):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client(headers=headers, REMOTE_ADDR=address).get("/api/threads")


def test_a_key_over_its_rate_gets_429_with_retry_after_and_other_keys_go_on(two_keys, settings):
    settings.OAM_API_RATE_LIMIT = 5
    first, second = two_keys
    assert [call(first).status_code for _ in range(5)] == [200] * 5
    refused = call(first)
    assert refused.status_code == 429 and refused.json() == {"detail": "Too many requests."}
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert call(second).status_code == 200


def test_a_key_of_its_own_rate_wins_over_the_default(two_keys, settings, monkeypatch):
    settings.OAM_API_RATE_LIMIT = 100
    from threads.models import ApiKey

    monkeypatch.setattr(ApiKey, "rate_limit_per_minute", 2, raising=False)
    first, _ = two_keys
    assert [call(first).status_code for _ in range(3)] == [200, 200, 429]


def test_zero_means_no_limit(two_keys, settings):
    settings.OAM_API_RATE_LIMIT = 0
    assert {call(two_keys[0]).status_code for _ in range(30)} == {200}


def test_wrong_keys_from_one_address_are_capped_and_then_even_a_right_key_waits(two_keys, settings):
    settings.OAM_API_AUTH_FAILURE_LIMIT = 4
    statuses = [call("wrong-key-" + str(i)).status_code for i in range(4)] + [call(None).status_code]
    assert statuses == [401, 401, 401, 401, 429]
    blocked = call(two_keys[0])
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) >= 1
    assert call(two_keys[0], address="10.1.1.1").status_code == 200  # another address is not affected


def test_windows_are_aligned_to_the_minute():
    assert throttling.seconds_to_next_window(120.0) == 60
    assert throttling.seconds_to_next_window(179.2) == 1
    assert throttling.seconds_to_next_window(150.5) == 30
