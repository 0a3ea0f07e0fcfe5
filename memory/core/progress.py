"""Extraction progress events, sent to the channel-layer group of a thread after commit.

Each event is a channel-layer message ``{"type": "extraction.<event>",
"thread_id": ..., "job_id": ..., ...}`` carrying ids, counts and seconds only
(docs/architecture.md, "Flows"): ``extraction.queued``, ``.started``, ``.progress``
(one LLM call done), ``.memory_created``, ``.memory_linked``, ``.finished``,
``.failed``, ``.repaired`` (the sweep made a stuck queue advance) and
``.fenced`` (a delete took a running job back; it runs again), ``.retrying``
(the LLM was unreachable; the job waits ``retry_in`` seconds, its range stays pending, until
``retry_until``) and ``.rerun`` (a failed range was queued again by a person or the API).
``.failed`` carries ``failure`` (transient or permanent) and the range.
``threads.consumers.ExtractionConsumer`` relays them to
WebSocket clients of ``/ws/threads/<thread_id>/extraction/``.

Events are queued with ``transaction.on_commit``: one sent inside a
transaction leaves only if it commits; outside one, at once. Sending never
raises: a channel layer that is down costs the events, not the extraction (``memory.core.degraded``: the
layer is reported ``degraded``, one warning a minute, and not tried again for a few seconds).

Delivery across threads: channels-redis (production) is safe from any thread.
``InMemoryChannelLayer`` (the embedded default) keeps ``asyncio.Queue`` objects
bound to the event loop that serves the WebSockets, and is not thread-safe; the
consumer registers that loop (``bind_event_loop``) and events from worker
threads are handed to it with ``run_coroutine_threadsafe``. With the in-memory
layer and no loop registered nobody in this process can be listening, so
nothing is sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from memory.core import degraded
from memory.core.ids import public_id

logger = logging.getLogger(__name__)

GROUP_PREFIX = "thread."
_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,80}")
EVENTS = ("queued", "started", "progress", "memory_created", "memory_linked", "finished", "failed", "repaired",
          "fenced", "derived_memories", "retrying", "rerun")

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def group_name(thread_id: str) -> str:
    """Return the channel-layer group of a thread's events; ``thread_id`` is its stored id (``Thread.pk``).

    ``thread.<thread_id>`` when the id is made of ``[A-Za-z0-9_.-]`` and at
    most 80 characters (group names allow those characters, under 100);
    otherwise ``thread.x.<sha256 hex of the id, 40 chars>``. Stored ids
    contain ``:`` (``memory.records.tenancy``), so every thread of every project gets
    the hashed form: two projects' threads of the same public id never share a group.
    """
    if _SAFE.fullmatch(thread_id):
        return f"{GROUP_PREFIX}{thread_id}"
    return f"{GROUP_PREFIX}x.{hashlib.sha256(thread_id.encode('utf-8')).hexdigest()[:40]}"


def bind_event_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Register the event loop that serves WebSocket consumers in this process (in-memory layer)."""
    global _loop
    with _loop_lock:
        _loop = loop


def _deliver(group: str, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    if not isinstance(layer, InMemoryChannelLayer):
        # Not tried while the layer is pausing after a failure (the event is dropped); a hung layer costs
        # CALL_SECONDS; a failure is reported, logged at most once a minute, and shown by /readyz.
        degraded.attempt("channels", lambda: async_to_sync(degraded.bounded)(layer.group_send(group, message)),
                         lambda: None)
        return
    try:
        loop = _loop
        if loop is None or loop.is_closed() or not loop.is_running():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(layer.group_send(group, message))
        else:
            asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
    except Exception as exc:  # noqa: BLE001 - progress must never break extraction
        degraded.report_failure("channels", exc)


def publish(group: str, message: dict[str, Any]) -> None:
    """Queue ``message`` (a channel-layer event: ``{"type": ..., ...}``, JSON values) for ``group``, sent when
    the current transaction commits (at once outside one). Never raises; same delivery rules as ``send``."""
    transaction.on_commit(partial(_deliver, group, message))


def send(thread_id: str, event: str, **fields: Any) -> None:
    """Queue ``extraction.<event>`` for the thread's group, sent when the current transaction commits.

    ``thread_id`` is the thread's stored id; the event carries its public id.
    ``fields`` must be JSON-serialisable public ids, counts, seconds or short
    strings. Raises ValueError for an event name not in ``EVENTS``.
    """
    if event not in EVENTS:
        raise ValueError(f"unknown extraction event {event!r}")
    publish(group_name(thread_id), {"type": f"extraction.{event}", "thread_id": public_id(thread_id), **fields})
