from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from memory.core.errors import InvalidArgument, InvalidType
from memory.extraction.config import MemoryExtractionConfig
from memory.extraction.settings import ACTIVE, POLL_SECONDS
from memory.llm.adapters import Llm, get_llm
from memory.models import ExtractionJob, Thread

logger = logging.getLogger(__name__)

# --- what this process knows beyond the database ----------------------------------------


@dataclass
class _Attached:
    llm: Llm | None
    config: MemoryExtractionConfig


class _Tracker:
    """Process-wide bookkeeping for ``wait_for_memory_extraction``.

    All three are keyed by the thread's stored id (``Thread.pk``).
    ``attached``: the LLM object and config a thread handle used, so that an
    in-process (embedded) worker extracts with the caller's LLM; workers in
    other processes use ``settings.OAM_LLM_*`` and ``Thread.config``.
    ``accepted``: per thread, the highest job id handed to the queue by this
    process. ``inflight``: calls that are storing messages and may be about
    to accept a job.
    """

    def __init__(self):
        self.cond = threading.Condition()
        self.attached: dict[str, _Attached] = {}
        self.accepted: dict[str, int] = {}
        self.inflight: dict[str, int] = {}


_tracker = _Tracker()


def attach(thread_id: str, *, llm: Llm | None, config: MemoryExtractionConfig) -> None:
    """Remember the LLM and config a thread handle extracts with, for this process's worker."""
    with _tracker.cond:
        _tracker.attached[thread_id] = _Attached(llm=llm, config=config)


def detach(thread_id: str) -> None:
    """Forget what ``attach`` remembered (the thread was deleted)."""
    with _tracker.cond:
        _tracker.attached.pop(thread_id, None)
        _tracker.accepted.pop(thread_id, None)


def _accepted(thread_id: str, job_id: int) -> None:
    with _tracker.cond:
        _tracker.accepted[thread_id] = max(job_id, _tracker.accepted.get(thread_id, 0))


@contextmanager
def inflight(thread_id: str) -> Iterator[None]:
    """Mark a call that may accept extraction work for ``thread_id`` (``wait_for_memory_extraction`` waits for it)."""
    with _tracker.cond:
        _tracker.inflight[thread_id] = _tracker.inflight.get(thread_id, 0) + 1
    try:
        yield
    finally:
        with _tracker.cond:
            left = _tracker.inflight[thread_id] - 1
            if left:
                _tracker.inflight[thread_id] = left
            else:
                del _tracker.inflight[thread_id]
            _tracker.cond.notify_all()


def thread_config(thread: Thread, default: MemoryExtractionConfig | None = None) -> MemoryExtractionConfig:
    """The thread's extraction config: ``Thread.config`` over the attached (client) config over the defaults."""
    with _tracker.cond:
        attached = _tracker.attached.get(thread.pk)
    base = default or (attached.config if attached else None)
    return MemoryExtractionConfig.from_thread_config(thread.config, base)


def thread_llm(thread_id: str) -> Llm | None:
    """The LLM to extract with: the one attached in this process, else ``get_llm()`` (None: none)."""
    with _tracker.cond:
        attached = _tracker.attached.get(thread_id)
    if attached is not None and attached.llm is not None:
        return attached.llm
    return get_llm()


#: Why extraction cannot run (``off_reason``): the thread's config turned it off, or no LLM is configured.
REASON_CONFIG_OFF = "extract_memories is false in this thread's memory_extraction_config."
REASON_NO_LLM = ("No LLM is configured, so messages are stored and no memories are extracted: set "
                 "OAM_LLM_BASE_URL and OAM_LLM_MODEL for the server (docs/extraction.md), or pass llm= "
                 "to the Python client.")


_warned_off = threading.Event()


def off_reason(config: MemoryExtractionConfig, llm: Llm | None) -> str | None:
    """Why extraction does not run for a thread with ``config`` and ``llm`` (None: it runs).

    ``REASON_CONFIG_OFF`` when ``extract_memories`` is false, else ``REASON_NO_LLM`` when there is no LLM (issue #33:
    a new user's extraction example stored nothing and said nothing). ``GET /api/threads/{id}/extraction`` answers
    it as ``reason`` and the staff thread page shows it.
    """
    if not config.extract_memories:
        return REASON_CONFIG_OFF
    if llm is None:
        return REASON_NO_LLM
    return None


def warn_if_off(thread_id: str, config: MemoryExtractionConfig, llm: Llm | None) -> bool:
    """Say once per process, as a warning of this module's logger (the server's log, or stderr in a shell), that
    ``add_messages`` stored messages of a thread whose config asks for extraction while no LLM is configured; True
    when it warned now.

    Once, not per call: the operator learns it from the first add and the log is not flooded. A thread whose config
    turns extraction off is not warned about (that is what was asked for).
    """
    if not config.extract_memories or llm is not None or _warned_off.is_set():
        return False
    with _tracker.cond:
        if _warned_off.is_set():
            return False
        _warned_off.set()
    logger.warning("thread %s: %s (said once per process)", thread_id, REASON_NO_LLM)
    return True


def reset_off_warning() -> None:
    """Forget that ``warn_if_off`` warned (tests)."""
    _warned_off.clear()


# --- waiting ------------------------------------------------------------------------------------


def wait_for_extraction(*, thread_id: str, timeout: float | None) -> None:
    """Wait until the thread's extraction accepted by this process before the call has finished.

    First waits for calls of this process that are storing messages for the
    thread (they may be about to accept work), then for every job of the
    thread up to the last one this process handed to the queue. Failed jobs
    count as finished. ``timeout`` in seconds (None: no limit). Raises
    ``TimeoutError`` when time runs out (spec: wait_for_memory_extraction).
    """
    deadline = None if timeout is None else time.monotonic() + timeout

    def left() -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    with _tracker.cond:
        while _tracker.inflight.get(thread_id):
            remaining = left()
            if remaining is not None and remaining <= 0:
                raise TimeoutError(f"extraction for thread {thread_id!r} is still being accepted after {timeout:g} s")
            _tracker.cond.wait(remaining)
        last = _tracker.accepted.get(thread_id)
    if last is None:
        return
    pending = ExtractionJob.objects.filter(thread_id=thread_id, pk__lte=last, status__in=ACTIVE)
    while pending.exists():
        remaining = left()
        if remaining is not None and remaining <= 0:
            raise TimeoutError(f"background extraction for thread {thread_id!r} did not finish within {timeout:g} s")
        time.sleep(POLL_SECONDS if remaining is None else min(POLL_SECONDS, remaining))


def accepted_threads(*, prefix: str = "") -> list[str]:
    """Stored ids (starting with ``prefix``) of the threads this process accepted extraction work for,
    or is about to (for the client-level ``wait_for_memory_extraction``)."""
    with _tracker.cond:
        keys = set(_tracker.accepted) | set(_tracker.inflight)
    return sorted(k for k in keys if k.startswith(prefix))


def check_timeout(timeout: Any) -> float | None:
    """``timeout`` of the wait methods: None or a number of seconds >= 0 (TypeError/ValueError otherwise)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise InvalidType("timeout", "must be a number of seconds or None")
    if timeout < 0 or timeout != timeout:
        raise InvalidArgument("timeout", "must be 0 or more")
    return float(timeout)
