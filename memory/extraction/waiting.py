"""Waiting for a thread's background extraction from any process: the HTTP form of the SDK's
``wait_for_memory_extraction`` (``GET /api/threads/{thread_id}/extraction?wait=SECONDS``).

The SDK's wait (``memory.client.Thread.wait_for_memory_extraction``) covers work this process accepted;
an HTTP request may land in another server process than the one that queued the work, so this wait reads
the database instead: the thread is *settled* when none of its extraction jobs is queued or running (a
failed job counts as finished, as in the SDK; a job released for a retry is queued again). The wait polls
every ``POLL_SECONDS`` on the event loop, holding no worker thread between polls, and is bounded: at most
``MAX_EXTRACTION_WAIT_SECONDS`` (60) per request (ValueError beyond, and for a negative or non-number wait).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from memory.core.aio import in_worker
from memory.core.errors import InvalidArgument, InvalidType
from memory.models import ExtractionJob

MAX_EXTRACTION_WAIT_SECONDS = 60.0
POLL_SECONDS = 0.25
PENDING_STATES = ("queued", "running")


def check_wait(seconds: Any) -> float:
    """A wait in seconds: a finite number from 0 to ``MAX_EXTRACTION_WAIT_SECONDS``."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidType("wait", "must be a number of seconds")
    if not math.isfinite(seconds) or seconds < 0 or seconds > MAX_EXTRACTION_WAIT_SECONDS:
        raise InvalidArgument("wait", f"must be from 0 to {MAX_EXTRACTION_WAIT_SECONDS:g} seconds")
    return float(seconds)


def extraction_settled(thread_pk: str) -> bool:
    """True when no extraction job of the thread (stored id) is queued or running."""
    return not ExtractionJob.objects.filter(thread_id=thread_pk, status__in=PENDING_STATES).exists()


async def wait_until_settled(thread_pk: str, seconds: Any) -> bool:
    """Wait up to ``seconds`` for the thread to settle; True when it did, False when the time ran out first."""
    seconds = check_wait(seconds)
    deadline = time.monotonic() + seconds
    while True:
        if await in_worker(extraction_settled, thread_pk):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(POLL_SECONDS, left))
