"""Running the synchronous engine from async code: ``in_worker`` and ``run_inline``.

The ORM, the embedder and the LLM client are synchronous, so async callers
(``memory.client``'s ``_async`` twins, the API's ``async def`` operations in
``threads.api``) await them in a worker thread:

* ``await in_worker(fn, *args)`` runs ``fn`` in Django's thread-sensitive
  executor (``asgiref.sync.sync_to_async``). Under Django's ASGI handler every
  request has an executor of its own (``ThreadSensitiveContext``), so a slow
  call (an LLM caption, a wait for extraction) holds that request's thread
  only, never another request's. Outside a request (a script's
  ``asyncio.run``, a consumer) the executor is one thread for the whole
  process: ``thread_sensitive=False`` sends a long wait to a thread of its own
  instead, and that thread's database connections are closed when it is done.
* ``run_inline(coroutine)`` drives an ``async def`` to its end in the calling
  (worker) thread, with no event loop: every ``in_worker`` it awaits calls its
  function directly. ``OAM_API_SYNC`` serves the API this way
  (``oam_site.api.api_urls``): one worker thread runs a request's whole
  operation, as sync views did, from the same operation code.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

T = TypeVar("T")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _closing_connections(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn``, then close the database connections of the (pool) thread it ran in."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return run


async def in_worker(fn: Callable[..., T], /, *args: Any, thread_sensitive: bool = True, **kwargs: Any) -> T:
    """Await ``fn(*args, **kwargs)`` run in a worker thread (see the module docstring).

    ``thread_sensitive=False``: in a thread of the loop's default executor,
    with its own database connection, closed afterwards (it sees only what is
    committed). With no event loop running in this thread (``run_inline``),
    ``fn`` is called directly, here.
    """
    if not _loop_running():
        return fn(*args, **kwargs)
    if not thread_sensitive:
        fn = _closing_connections(fn)
    return await sync_to_async(fn, thread_sensitive=thread_sensitive)(*args, **kwargs)


class SuspendedError(RuntimeError):
    """``run_inline`` met an await that needs an event loop (anything but ``in_worker``)."""


def run_inline(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to its end in this thread, without an event loop, and return its value.

    Meant for a worker thread (a sync view): each ``in_worker`` the coroutine
    awaits runs here, at once. Raises ``SuspendedError`` (after closing the
    coroutine) when it awaits something else that would suspend it.
    """
    try:
        awaited = coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise SuspendedError(f"{coroutine.__qualname__} awaited {awaited!r}, which needs an event loop; await "
                         "memory.core.aio.in_worker(...) instead")
