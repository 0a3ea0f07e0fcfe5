"""``memory.core.aio``: awaiting the synchronous engine, and driving an ``async def`` without an event loop."""

import asyncio
import threading

import pytest
from django.db import connections

from memory.core.aio import SuspendedError, in_worker, run_inline


async def _twice(value):
    first = await in_worker(threading.get_ident)
    return first, await in_worker(lambda: value * 2)


def test_in_worker_runs_in_another_thread_under_an_event_loop():
    here = threading.get_ident()
    worker, doubled = asyncio.run(_twice(21))
    assert worker != here and doubled == 42


def test_run_inline_calls_each_in_worker_here_without_a_loop():
    assert run_inline(_twice(21)) == (threading.get_ident(), 42)


def test_run_inline_refuses_an_await_that_needs_a_loop():
    async def sleeps():
        await asyncio.sleep(0)

    with pytest.raises(SuspendedError, match="in_worker"):
        run_inline(sleeps())


def test_a_thread_of_its_own_closes_its_database_connection(transactional_db):
    def opens():
        connections["default"].ensure_connection()
        return connections["default"]

    used = asyncio.run(in_worker(opens, thread_sensitive=False))
    # that thread's connection, closed after the call
    assert used is not connections["default"] and used.connection is None
