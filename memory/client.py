"""In-process Python API: ``AgentMemory`` and its ``Thread`` handles.

Method names, parameters, defaults, return values and errors follow the
OracleThread API (``shared/spec/oracle_thread_api.txt``). Every method has an
``_async`` twin that runs the same code in Django's thread-sensitive executor
(the ORM is synchronous).

    >>> client = AgentMemory()
    >>> thread = client.create_thread(thread_id="c4", user_id="u1", agent_id="a1")
    >>> thread.add_memory("Remember this preference", memory_id="mem-thread-docs")
    'mem-thread-docs'
"""

from __future__ import annotations

import functools
from typing import Any, Sequence

from asgiref.sync import sync_to_async
from django.conf import settings

from memory import search as search_engine
from memory import selectors, services
from memory.models import Thread as ThreadRow
from memory.types import (
    NOTSET,
    MemoryRecord,
    MemoryRetentionConfig,
    MemorySearchConfig,
    Message,
    SearchResult,
    SearchScope,
)


def _async_twin(method):
    """Make ``<name>_async`` for a sync method: same arguments, awaited in a worker thread."""

    @functools.wraps(method)
    async def twin(self, *args, **kwargs):
        return await sync_to_async(method, thread_sensitive=True)(self, *args, **kwargs)

    twin.__name__ = f"{method.__name__}_async"
    twin.__qualname__ = f"{method.__qualname__}_async"
    twin.__doc__ = f"Asynchronous twin of :meth:`{method.__name__}` (same arguments, result and errors)."
    return twin


class _WithAsyncTwins:
    """Adds ``<name>_async`` for each name in ``_ASYNC`` to subclasses."""

    _ASYNC: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in cls._ASYNC:
            setattr(cls, f"{name}_async", _async_twin(getattr(cls, name)))


class Thread(_WithAsyncTwins):
    """A handle on one stored thread (spec: OracleThread).

    Attributes ``thread_id``, ``user_id``, ``agent_id`` and ``metadata`` are
    the thread's scope as stored when the handle was made. Writes go through
    ``memory.services``; reads through ``memory.selectors``/``memory.search``.
    """

    _ASYNC = (
        "add_messages", "get_messages", "get_message", "update_message", "delete_message",
        "add_memory", "update_memory", "delete_memory", "get_memory", "list_memories", "search",
    )

    def __init__(self, row: ThreadRow, client: "AgentMemory"):
        self._row = row
        self._client = client
        self.thread_id: str = row.pk
        self.user_id: str | None = row.user_id
        self.agent_id: str | None = row.agent_id
        self.metadata: dict[str, Any] = dict(row.metadata or {})
        self.search_config: MemorySearchConfig = client.search_config

    def __repr__(self) -> str:
        return f"Thread(thread_id={self.thread_id!r}, user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    @property
    def default_scope(self) -> SearchScope:
        """Exact user and agent, this thread's id, ``exact_thread_match=False`` (spec: search Notes)."""
        return SearchScope(user_id=self.user_id, agent_id=self.agent_id, thread_id=self.thread_id,
                           exact_user_match=True, exact_agent_match=True, exact_thread_match=False)

    # --- messages ---------------------------------------------------------------

    def add_messages(self, messages: Sequence[Any], metadata: Any = NOTSET, ttl_days: Any = NOTSET,
                     ttl_anchor: Any = NOTSET, **store_kwargs: Any) -> list[str]:
        """Append messages (``Message`` objects or ``{"role", "content", "id"?}`` dicts); return their ids.

        ``metadata``, ``ttl_days`` and ``ttl_anchor`` are one value for the
        batch or a list with one per message. The batch is atomic. Raises
        ValueError/TypeError for bad input, TypeError for unknown keywords.
        """
        services.reject_unknown(store_kwargs, "add_messages")
        return services.messages_add(thread=self._row, messages=messages, metadata=metadata, ttl_days=ttl_days,
                                     ttl_anchor=ttl_anchor, retention=self._client.retention_config)

    def get_messages(self, start: Any = NOTSET, end: Any = NOTSET, include_image_bytes: bool = False,
                     **kwargs: Any) -> list[Message]:
        """Return live messages in chronological order (see ``selectors.message_list`` for start/end)."""
        services.reject_unknown(kwargs, "get_messages")
        return selectors.message_list(thread=self._row, start=start, end=end, window=settings.OAM_MESSAGE_WINDOW)

    def get_message(self, message_id: str, included_image_ids: list[str] | None = None, **kwargs: Any) -> Message:
        """Return one message of this thread. Raises KeyError if absent, expired or another thread's."""
        services.reject_unknown(kwargs, "get_message")
        return selectors.message_get(thread=self._row, message_id=message_id)

    def update_message(self, message_id: str, content: Any = NOTSET, metadata: Any = NOTSET,
                       ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET, **kwargs: Any) -> str:
        """Update content, metadata or expiry of a message of this exact thread; return its id.

        Raises KeyError when the message is absent, expired or another thread's.
        """
        services.reject_unknown(kwargs, "update_message")
        return services.message_update(thread=self._row, message_id=message_id, content=content, metadata=metadata,
                                       ttl_days=ttl_days, ttl_anchor=ttl_anchor,
                                       retention=self._client.retention_config)

    def delete_message(self, message_id: str) -> int:
        """Delete a message of this exact thread; return 1, or 0 when absent or another thread's."""
        return services.message_delete(thread=self._row, message_id=message_id)

    # --- memories ---------------------------------------------------------------

    def add_memory(self, content: str, memory_type: Any = NOTSET, user_id: Any = NOTSET, agent_id: Any = NOTSET,
                   thread_id: Any = NOTSET, memory_id: Any = NOTSET, metadata: dict[str, Any] | None = None,
                   timestamp: str | None = None, ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET,
                   status: Any = NOTSET, autonomous_linking: Any = NOTSET, **store_kwargs: Any) -> str:
        """Store a manual memory and index it; return its id (``memory_id`` when given).

        ``autonomous_linking`` only acts when the thread has an LLM; without one
        it is accepted and has nothing to do. Raises ValueError for an unknown
        ``memory_type`` (allowed: memory, fact, guideline, preference) or a taken id.
        """
        services.reject_unknown(store_kwargs, "add_memory")
        if autonomous_linking is not NOTSET and not isinstance(autonomous_linking, bool):
            raise TypeError("autonomous_linking: must be a bool")
        return services.memory_add(
            thread=self._row, content=content, memory_type=memory_type, user_id=user_id, agent_id=agent_id,
            thread_id=thread_id, memory_id=memory_id, metadata=metadata, timestamp=timestamp, ttl_days=ttl_days,
            ttl_anchor=ttl_anchor, status=status, retention=self._client.retention_config,
        )

    def update_memory(self, memory_id: str, content: Any = NOTSET, metadata: Any = NOTSET, timestamp: Any = NOTSET,
                      ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET, status: Any = NOTSET, **kwargs: Any) -> str:
        """Update a memory-like record owned by this exact thread; return its id.

        Raises KeyError when absent, expired or another thread's.
        """
        services.reject_unknown(kwargs, "update_memory")
        return services.memory_update(thread=self._row, memory_id=memory_id, content=content, metadata=metadata,
                                      timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status,
                                      retention=self._client.retention_config)

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this exact thread; return 1, or 0 when absent."""
        return services.memory_delete(thread=self._row, memory_id=memory_id)

    def get_memory(self, memory_id: str) -> MemoryRecord:
        """Return one memory-like record of this exact thread (KeyError otherwise). Not in the spec."""
        return selectors.memory_get(thread=self._row, memory_id=memory_id)

    def list_memories(self, memory_type: str | None = None) -> list[MemoryRecord]:
        """Return this thread's live memory-like records, oldest first. Not in the spec."""
        return selectors.memory_list(thread=self._row, memory_type=memory_type)

    # --- search -------------------------------------------------------------------

    def search(self, query: str, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
               exact_user_match: Any = NOTSET, exact_agent_match: Any = NOTSET, exact_thread_match: Any = NOTSET,
               max_results: Any = NOTSET, token_budget: Any = NOTSET, soft_token_budget: Any = NOTSET,
               record_types: Any = NOTSET, metadata_filter: dict[str, Any] | None = None,
               include_invalid_results: bool = True, scope: SearchScope | None = None,
               **kwargs: Any) -> list[SearchResult]:
        """Search records relevant to ``query``, best first (spec: OracleThread.search).

        Omitted scope fields inherit the thread's: exact user and agent, this
        thread's id with ``exact_thread_match=False``. Raises ValueError if
        ``scope`` is combined with explicit scope arguments, ``max_results`` < 1,
        or ``metadata_filter`` is not a dict or None.
        """
        services.reject_unknown(kwargs, "search")
        resolved = search_engine.resolve_scope(
            self.default_scope, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
            exact_user_match=exact_user_match, exact_agent_match=exact_agent_match,
            exact_thread_match=exact_thread_match, scope=scope,
        )
        request = search_engine.build_request(
            query, scope=resolved, config=self.search_config, max_results=max_results, token_budget=token_budget,
            soft_token_budget=soft_token_budget, record_types=record_types, metadata_filter=metadata_filter,
            include_invalid_results=include_invalid_results,
        )
        return search_engine.search_records(request)


class AgentMemory(_WithAsyncTwins):
    """Entry point of the Python API: creates, opens, deletes and searches threads.

    ``retention_config`` defaults to the settings ``OAM_DEFAULT_TTL_DAYS`` and
    ``OAM_MAX_TTL_DAYS``; ``search_config`` to ``MemorySearchConfig()``.
    """

    _ASYNC = ("create_thread", "get_thread", "delete_thread", "search")

    def __init__(self, *, retention_config: MemoryRetentionConfig | None = None,
                 search_config: MemorySearchConfig | None = None):
        self.retention_config = retention_config or MemoryRetentionConfig(
            default_ttl_days=settings.OAM_DEFAULT_TTL_DAYS, max_ttl_days=settings.OAM_MAX_TTL_DAYS
        )
        self.search_config = search_config or MemorySearchConfig()

    def create_thread(self, thread_id: Any = NOTSET, user_id: Any = NOTSET, agent_id: Any = NOTSET,
                      metadata: dict[str, Any] | None = None, **kwargs: Any) -> Thread:
        """Create and return a thread. Omitted ids are generated UUIDs.

        Raises ValueError when ``thread_id`` is taken, TypeError for unknown keywords.
        """
        services.reject_unknown(kwargs, "create_thread")
        row = services.thread_create(thread_id=thread_id, user_id=user_id, agent_id=agent_id, metadata=metadata)
        return Thread(row, self)

    def get_thread(self, thread_id: str) -> Thread:
        """Return a handle on a stored thread; KeyError when there is none."""
        return Thread(selectors.thread_get(thread_id), self)

    def delete_thread(self, thread_id: str) -> int:
        """Delete a thread with its messages and memories; return 1, or 0 when absent."""
        return services.thread_delete(thread_id=thread_id)

    def search(self, query: str, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
               exact_user_match: Any = NOTSET, exact_agent_match: Any = NOTSET, exact_thread_match: Any = NOTSET,
               max_results: Any = NOTSET, token_budget: Any = NOTSET, soft_token_budget: Any = NOTSET,
               record_types: Any = NOTSET, metadata_filter: dict[str, Any] | None = None,
               include_invalid_results: bool = True, scope: SearchScope | None = None,
               **kwargs: Any) -> list[SearchResult]:
        """Search across threads. Omitted ids leave their dimension open; given ids match exactly
        unless their ``exact_*_match`` is False. Same arguments and errors as ``Thread.search``.
        """
        services.reject_unknown(kwargs, "search")
        resolved = search_engine.resolve_scope(
            SearchScope(), user_id=user_id, agent_id=agent_id, thread_id=thread_id,
            exact_user_match=exact_user_match, exact_agent_match=exact_agent_match,
            exact_thread_match=exact_thread_match, scope=scope,
        )
        request = search_engine.build_request(
            query, scope=resolved, config=self.search_config, max_results=max_results, token_budget=token_budget,
            soft_token_budget=soft_token_budget, record_types=record_types, metadata_filter=metadata_filter,
            include_invalid_results=include_invalid_results,
        )
        return search_engine.search_records(request)
