"""In-process Python API: ``AgentMemory`` and its ``Thread`` handles.

Method names, parameters, defaults, return values and errors follow the
OracleThread API (the Oracle AI Agent Memory thread API spec). Every method has an
``_async`` twin that runs the same code in Django's thread-sensitive executor
(the ORM is synchronous; ``memory.aio.in_worker``).

    >>> client = AgentMemory()
    >>> thread = client.create_thread(thread_id="c4", user_id="u1", agent_id="a1")
    >>> thread.add_memory("Remember this preference", memory_id="mem-thread-docs")
    'mem-thread-docs'
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from typing import Any, Sequence

from django.conf import settings

from memory import context, erasure, extraction, links, listing, profiles, selectors, services
from memory.aio import in_worker
from memory import search as search_engine
from memory import history
from memory.history import MemoryVersionRecord
from memory.errors import InvalidArgument, NotFound, OutOfScope
from memory.tenancy import Tenant, get_project, stored_id
from memory.extraction_config import (  # noqa: F401  (re-exported: the SDK's public names)
    DEPRECATED_INLINE_PARAMETERS,
    BackgroundExtractionQueueFullBehavior,
    MemoryExtractionConfig,
    MemoryExtractionImageContext,
    MemoryExtractionMode,
    MemoryLinkExtractionMode,
    resolve_extraction_config,
)
from memory.images import THREAD_CONFIG_KEY as IMAGE_LIMITS_KEY, ImageInputLimitConfig
from memory.llm import Llm, LlmError, as_llm, get_llm
from memory.models import (Image as ImageRow, Memory as MemoryRow, Profile as ProfileRow, Project as ProjectRow,
                           RecordLink as RecordLinkRow, Thread as ThreadRow)
from memory.types import (  # noqa: F401  (re-exported: the SDK's public names)
    NOTSET,
    ContextCard,
    FactRecord,
    GuidelineRecord,
    ImageContent,
    ImageMimeType,
    ImageRecord,
    AgentProfileRecord,
    MemoryRecord,
    MemoryRetentionConfig,
    MemorySearchConfig,
    Message,
    MessageContent,
    MessageRecord,
    OracleContextCard,
    OracleSearchResult,
    OracleSummary,
    PreferenceRecord,
    Record,
    RecordRelation,
    RecordStatus,
    SearchResult,
    SearchScope,
    Summary,
    TextContent,
    TimeToLiveAnchor,
    UserProfileRecord,
)

logger = logging.getLogger(__name__)

#: Thread runtime settings of the SDK's OracleThread, with their defaults (SDK 26.8.0). They are kept in
#: ``Thread.config`` when given at creation (``create_thread``/``update_thread``) or set on one handle
#: (``get_thread``), and reported by ``_to_config()``; the prompts here are bounded by
#: ``MemoryExtractionConfig.memory_extraction_token_limit`` and the context-card rules instead, so
#: these four change no behaviour yet (README "Switching from oracleagentmemory").
THREAD_SETTINGS = {
    "max_message_token_length": 15_000,
    "message_shortening_input_token_limit": 30_000,
    "context_card_token_limit": 100_000,
    "context_card_type_search_concurrency": 5,
}
SEARCH_CONFIG_KEY = "search_config"


def _or(value: Any, default: Any) -> Any:
    """``default`` for an omitted (``NOTSET``) argument, else the value."""
    return default if value is NOTSET else value


def _check_setting(name: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name}: must be an int")
    return value


def _search_config_data(config: MemorySearchConfig) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _check_search_config(value: Any) -> MemorySearchConfig | None:
    if value is NOTSET or value is None:
        return None
    if not isinstance(value, MemorySearchConfig):
        raise TypeError("search_config: must be a MemorySearchConfig")
    return value

#: The search arguments besides the query and scope (spec: search).
_SEARCH_ARGUMENTS = ("max_results", "token_budget", "soft_token_budget", "record_types", "metadata_filter",
                     "include_invalid_results", "num_hops", "max_linked_results")


def _async_twin(method):
    """Make ``<name>_async`` for a sync method: same arguments, awaited in a worker thread."""

    @functools.wraps(method)
    async def twin(self, *args, **kwargs):
        return await in_worker(method, self, *args, **kwargs)

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
    the thread's scope as stored when the handle was made (``thread_id`` the
    caller's id; ``project`` the thread's project). Writes go through
    ``memory.services``; reads through ``memory.selectors``/``memory.search``,
    always in the thread's project.
    """

    _ASYNC = (
        "add_messages", "get_message", "update_message", "delete_message",
        "add_memory", "update_memory", "delete_memory", "get_memory", "list_memories", "search",
        "get_summary", "get_context_card",
        "link_records", "update_record_link", "delete_record_link", "get_record_link",
        "add_image", "update_image", "delete_image", "list_images", "get_image",
    )  # get_messages_async is written out: the SDK's twin takes start/end positionally

    def __init__(self, row: ThreadRow, client: "AgentMemory", *, llm: Any = NOTSET,
                 overrides: dict[str, Any] | None = None):
        self._row = row
        self._client = client
        if row.project_id != client.project.pk or not client.tenant.allows(row):
            raise ValueError(f"thread {row.public_id!r} is not in project {client.project.slug!r} of this client "
                             "or not within its tenant")
        self._llm = client.llm if llm is NOTSET else as_llm(llm)
        self._overrides = dict(overrides or {})
        self.project = client.project
        self.thread_id: str = row.public_id
        self.user_id: str | None = row.user_id
        self.agent_id: str | None = row.agent_id
        self.metadata: dict[str, Any] = dict(row.metadata or {})
        stored = (row.config or {}).get(SEARCH_CONFIG_KEY)
        self.search_config: MemorySearchConfig = (
            self._overrides.get(SEARCH_CONFIG_KEY) or (MemorySearchConfig(**stored) if stored else None)
            or client.search_config)

    def __repr__(self) -> str:
        return f"Thread(thread_id={self.thread_id!r}, user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    @property
    def row(self) -> ThreadRow:
        """The stored ``memory.models.Thread`` row this handle was made from (for the engine's other readers)."""
        return self._row

    @property
    def llm(self) -> Llm | None:
        """The thread's LLM: the one given to the thread or its client, else ``get_llm()`` (None: no LLM)."""
        return get_llm() if self._llm is NOTSET else self._llm

    @property
    def memory_extraction_config(self) -> MemoryExtractionConfig:
        """The thread's extraction settings, field by field: this handle's (``get_thread``), else stored in
        ``Thread.config``, else the client's, else the defaults."""
        config = extraction.thread_config(self._row, default=self._client.memory_extraction_config)
        override = self._overrides.get("memory_extraction_config")
        return override.merged_over(config) if override is not None else config

    @property
    def image_input_limit_config(self) -> ImageInputLimitConfig:
        """The thread's image limits, field by field: this handle's, else stored in ``Thread.config``, else the
        client's, else the defaults."""
        limits = ImageInputLimitConfig.from_thread_config(self._row.config, self._client.image_input_limit_config)
        override = self._overrides.get(IMAGE_LIMITS_KEY)
        return override.merged_over(limits) if override is not None else limits

    def _setting(self, name: str) -> int:
        return self._overrides.get(name, (self._row.config or {}).get(name, THREAD_SETTINGS[name]))

    @property
    def max_message_token_length(self) -> int:
        """SDK runtime setting (default 15,000); see ``THREAD_SETTINGS``."""
        return self._setting("max_message_token_length")

    @property
    def message_shortening_input_token_limit(self) -> int:
        """SDK runtime setting (default 30,000); see ``THREAD_SETTINGS``."""
        return self._setting("message_shortening_input_token_limit")

    @property
    def context_card_token_limit(self) -> int:
        """SDK runtime setting (default 100,000); see ``THREAD_SETTINGS``."""
        return self._setting("context_card_token_limit")

    @property
    def context_card_type_search_concurrency(self) -> int:
        """SDK runtime setting (default 5); see ``THREAD_SETTINGS``."""
        return self._setting("context_card_type_search_concurrency")

    def _to_config(self) -> dict[str, Any]:
        """The thread's settings as a JSON-like dict (SDK: ``OracleThread._to_config``): ids, metadata, the
        resolved extraction, image-limit and search configs and the runtime settings. Never message
        contents (the SDK's ``persist_messages_in_config`` is False for database threads)."""
        return {
            "thread_id": self.thread_id, "user_id": self.user_id, "agent_id": self.agent_id,
            "metadata": dict(self.metadata), "persist_messages_in_config": False,
            "memory_extraction_config": self.memory_extraction_config.to_thread_config(),
            "image_input_limit_config": dataclasses.asdict(self.image_input_limit_config),
            "search_config": _search_config_data(self.search_config),
            **{name: self._setting(name) for name in THREAD_SETTINGS},
        }

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

        The messages are committed first. Then, when extraction is on and due
        (``memory_extraction_config``, an LLM), INLINE extracts before this
        returns and BACKGROUND queues it (``memory.extraction``); a full queue
        raises ``TimeoutError`` under WAIT_THEN_RAISE, the messages stored.
        Extraction failures never raise here.
        """
        services.reject_unknown(store_kwargs, "add_messages")
        with extraction.inflight(self._row.pk):
            ids = services.messages_add(thread=self._row, messages=messages, metadata=metadata, ttl_days=ttl_days,
                                        ttl_anchor=ttl_anchor, retention=self._client.retention_config,
                                        image_limits=self.image_input_limit_config, llm=self.llm)
            extraction.extraction_after_add(thread=self._row, llm=self.llm, config=self.memory_extraction_config,
                                            retention=self._client.retention_config)
        return ids

    def get_messages(self, *, start: Any = NOTSET, end: Any = NOTSET, include_image_bytes: Any = NOTSET,
                     **kwargs: Any) -> list[Message]:
        """Return live messages in chronological order (see ``selectors.message_list`` for start/end).

        Image parts are ``ImageContent`` with ``bytes=None`` unless
        ``include_image_bytes=True`` (one query for all their bytes).
        """
        services.reject_unknown(kwargs, "get_messages")
        return selectors.message_list(thread=self._row, start=start, end=end, window=settings.OAM_MESSAGE_WINDOW,
                                      include_image_bytes=_or(include_image_bytes, False))

    async def get_messages_async(self, start: Any = NOTSET, end: Any = NOTSET, include_image_bytes: Any = NOTSET,
                                 **kwargs: Any) -> list[Message]:
        """Asynchronous twin of :meth:`get_messages` (positional ``start``/``end`` allowed, as the SDK's twin)."""
        return await in_worker(self.get_messages, start=start, end=end, include_image_bytes=include_image_bytes,
                               **kwargs)

    def get_message(self, message_id: str, *, included_image_ids: Any = NOTSET, **kwargs: Any) -> Message:
        """Return one message of this thread. Raises KeyError if absent, expired or another thread's.

        Image parts carry their id, MIME type and description; the bytes of
        those whose ids are in ``included_image_ids`` are loaded (other ids are ignored).
        """
        services.reject_unknown(kwargs, "get_message")
        return selectors.message_get(thread=self._row, message_id=message_id,
                                     included_image_ids=_or(included_image_ids, None))

    def update_message(self, message_id: str, content: Any = NOTSET, metadata: Any = NOTSET,
                       ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET, **kwargs: Any) -> str:
        """Update content, metadata or expiry of a message of this exact thread; return its id.

        Raises KeyError when the message is absent, expired or another thread's.
        New content of a message already extracted is re-extracted (with its
        earlier history as context) when extraction is on: before this returns
        in INLINE mode, queued in BACKGROUND mode; existing memories stay.
        New content replaces the message's images: image parts with bytes are
        new images, an image part with only the id of an attached image keeps
        it, and attached images left out are deleted (``services.message_update``).
        """
        services.reject_unknown(kwargs, "update_message")
        with extraction.inflight(self._row.pk):
            updated = services.message_update(thread=self._row, message_id=message_id, content=content,
                                              metadata=metadata, ttl_days=ttl_days, ttl_anchor=ttl_anchor,
                                              retention=self._client.retention_config,
                                              image_limits=self.image_input_limit_config, llm=self.llm)
            if content is not NOTSET:
                extraction.extraction_after_edit(thread=self._row, message_id=updated, llm=self.llm,
                                                 config=self.memory_extraction_config,
                                                 retention=self._client.retention_config)
        return updated

    def delete_message(self, message_id: str) -> int:
        """Delete a message of this exact thread; return 1, or 0 when absent or another thread's.

        The spec waits for earlier background extraction first; here the
        thread's running extraction is fenced instead (``services.message_delete``):
        it writes nothing and runs again without the message, and the delete
        returns at once (deletes used to wait minutes for a hung LLM).
        """
        return services.message_delete(thread=self._row, message_id=message_id)

    def wait_for_memory_extraction(self, timeout: float | None = 300) -> None:
        """Wait for background extraction this process accepted for the thread before the call (spec).

        Includes work a concurrent ``add_messages``/``update_message`` of this
        process is about to accept; failed extraction counts as finished.
        ``timeout`` in seconds, None to wait without limit. Raises
        ``TimeoutError`` when it expires first; TypeError/ValueError for a bad timeout.
        """
        extraction.wait_for_extraction(thread_id=self._row.pk, timeout=extraction.check_timeout(timeout))

    def extract_pending_messages(self) -> int | None:
        """Extract the messages after the watermark now, whatever the frequency; return the job id or None.

        Not in the spec: the staff pages' "Extract now". Same path as after
        ``add_messages`` (INLINE runs before returning, BACKGROUND queues;
        progress events go to the thread's WebSocket group) with the
        frequency rule set aside. None when extraction is off (no LLM, or
        ``extract_memories`` false) or no message is pending. Raises
        ``TimeoutError`` under WAIT_THEN_RAISE when the queue stays full.
        """
        config = self.memory_extraction_config
        llm = self.llm
        if llm is None or not config.extract_memories:
            return None
        with extraction.inflight(self._row.pk):
            job = extraction.extraction_after_add(
                thread=self._row, llm=llm, config=dataclasses.replace(config, memory_extraction_frequency=-1),
                retention=self._client.retention_config)
        return job.pk if job is not None else None

    async def wait_for_memory_extraction_async(self, timeout: float | None = 300) -> None:
        """Asynchronous twin of :meth:`wait_for_memory_extraction` (same behaviour and errors).

        Waits in a thread of its own rather than the thread-sensitive one, so
        that other ``_async`` calls are not held up meanwhile; that thread's
        database connection is closed after the wait.
        """
        await in_worker(self.wait_for_memory_extraction, timeout, thread_sensitive=False)

    # --- memories ---------------------------------------------------------------

    def add_memory(self, content: str, *, memory_type: Any = NOTSET, user_id: Any = NOTSET, agent_id: Any = NOTSET,
                   thread_id: Any = NOTSET, memory_id: Any = NOTSET, metadata: Any = NOTSET,
                   timestamp: Any = NOTSET, ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET,
                   status: Any = NOTSET, autonomous_linking: Any = NOTSET, memory_id_to_link: Any = NOTSET,
                   link_type: Any = NOTSET, link_id: Any = NOTSET, link_timestamp: Any = NOTSET,
                   link_metadata: Any = NOTSET, **store_kwargs: Any) -> str:
        """Store a manual memory and index it; return its id (``memory_id`` when given).

        ``memory_id_to_link`` with ``link_type`` (a built-in relation) also
        stores a relation from the new memory to that memory of this thread, in
        the same transaction; omitted scopes then inherit from the target
        (``services.memory_add``, ``memory.links.pending_link``). ``autonomous_linking`` (default on when
        the thread has an LLM) then lets the LLM relate the new memory to its
        nearest memories (``memory.links.propose_links``); an LLM failure is
        logged and leaves the memory stored. Raises ValueError for an unknown
        ``memory_type`` (allowed: memory, fact, guideline, preference), a taken
        id, or bad link arguments.
        """
        services.reject_unknown(store_kwargs, "add_memory")
        if autonomous_linking is not NOTSET and not isinstance(autonomous_linking, bool):
            raise TypeError("autonomous_linking: must be a bool")
        tenant = self._client.tenant
        user_id, agent_id = tenant.fill("user_id", user_id), tenant.fill("agent_id", agent_id)
        if tenant.restricted and thread_id is not NOTSET and thread_id is not None and thread_id != self.thread_id:
            try:  # another thread, which must be one of the restricted client's own
                self._client.thread_row(services.check_id(thread_id, "thread_id"))
            except NotFound:
                raise OutOfScope("thread_id", "a restricted client can give only the ids of its own threads") from None
        memory_id = services.memory_add(
            thread=self._row, content=content, memory_type=memory_type, user_id=user_id, agent_id=agent_id,
            thread_id=thread_id, memory_id=memory_id, metadata=_or(metadata, None), timestamp=_or(timestamp, None),
            ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status, retention=self._client.retention_config,
            memory_id_to_link=memory_id_to_link, link_type=link_type, link_id=link_id, link_timestamp=link_timestamp,
            link_metadata=link_metadata, link_restrict=tenant.row_filter(),
        )
        llm = self.llm if autonomous_linking is not False else None
        if llm is not None:
            try:
                links.propose_links(self._row, memory_id, llm, restrict=tenant.row_filter())
            except LlmError as exc:  # spec: "Failure leaves the memory stored."
                logger.warning("autonomous linking of memory %s failed: %s", memory_id, exc)
        return memory_id

    def update_memory(self, memory_id: str, content: Any = NOTSET, metadata: Any = NOTSET, timestamp: Any = NOTSET,
                      ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET, status: Any = NOTSET, **kwargs: Any) -> str:
        """Update a memory-like record owned by this exact thread; return its id.

        Raises KeyError when absent, expired or another thread's.
        """
        services.reject_unknown(kwargs, "update_memory")
        if self._client.tenant.restricted:
            self.get_memory(memory_id)  # another user's/agent's record in this thread is "not found"
        return services.memory_update(thread=self._row, memory_id=memory_id, content=content, metadata=metadata,
                                      timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status,
                                      retention=self._client.retention_config)

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this exact thread; return 1, or 0 when absent.

        Fences the thread's running extraction instead of waiting for it, as
        ``delete_message`` does (``services.memory_delete``).
        """
        if self._client.tenant.restricted:
            try:
                self.get_memory(memory_id)
            except NotFound:
                return 0  # absent, or another user's/agent's record in this thread
        return services.memory_delete(thread=self._row, memory_id=memory_id)

    def get_memory(self, memory_id: str) -> MemoryRecord:
        """Return one memory-like record of this exact thread (KeyError otherwise). Not in the spec.

        A restricted client (``Tenant``) does not see records of another user or
        agent stored in its thread: KeyError, as for an absent one.
        """
        return selectors.memory_get(thread=self._row, memory_id=memory_id, restrict=self._client.tenant.row_filter())

    def memory_records(self, memory_type: str | None = None):
        """This thread's live memory-like records, oldest first, read lazily (``selectors.Records``, for
        paging); a restricted client's as ``get_memory`` says. Not in the spec."""
        return selectors.memory_records(thread=self._row, memory_type=memory_type,
                                        restrict=self._client.tenant.row_filter())

    def list_memories(self, memory_type: str | None = None) -> list[MemoryRecord]:
        """Return this thread's live memory-like records, oldest first (see ``memory_records``). Not in the spec."""
        return list(self.memory_records(memory_type))

    # --- images -------------------------------------------------------------------

    def add_image(self, image: bytes, description: Any = NOTSET, mime_type: Any = NOTSET, image_id: Any = NOTSET,
                  user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
                  metadata: Any = NOTSET, timestamp: Any = NOTSET, ttl_days: Any = NOTSET,
                  ttl_anchor: Any = NOTSET, **store_kwargs: Any) -> str:
        """Store one image owned by this thread; return its id (spec: add_image).

        ``image`` is validated (PNG, JPEG or WEBP; size, pixel count, no
        animation, not corrupt or truncated: ``memory.images``) against the
        thread's ``image_input_limit_config``; ``mime_type`` omitted is
        detected, given must match the bytes. ``description`` omitted or None
        is a caption by the thread's LLM; without an LLM it is refused
        (ValueError naming ``description``, as the SDK). ``user_id``/``agent_id``/``thread_id`` must equal the
        thread's when given. Raises ValueError for a refused image or a
        mismatch (``Conflict`` for a taken ``image_id``), TypeError for
        unknown keywords, ``memory.llm.LlmError`` when captioning fails (nothing stored).
        """
        services.reject_unknown(store_kwargs, "add_image")
        llm = self.llm
        return services.image_add(
            thread=self._row, image=image, description=description, mime_type=_or(mime_type, None),
            image_id=image_id, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
            metadata=_or(metadata, None), timestamp=_or(timestamp, None),
            ttl_days=ttl_days, ttl_anchor=ttl_anchor, retention=self._client.retention_config,
            limits=self.image_input_limit_config, llm=llm, caption_required=True,
        )

    def update_image(self, image_id: str, image: Any = NOTSET, description: Any = NOTSET, mime_type: Any = NOTSET,
                     metadata: Any = NOTSET, timestamp: Any = NOTSET, ttl_days: Any = NOTSET,
                     ttl_anchor: Any = NOTSET, **kwargs: Any) -> str:
        """Update an image owned by this thread; return its id (spec: update_image).

        Omitted values are kept; new ``image`` bytes need ``mime_type``;
        ``description=None`` asks the thread's LLM for a new caption. Raises
        ValueError for expiration settings on an image attached to a message
        (use ``update_message``), KeyError when the image is absent, expired or
        another thread's. See ``services.image_update``.
        """
        services.reject_unknown(kwargs, "update_image")
        return services.image_update(
            thread=self._row, image_id=image_id, image=image, description=description, mime_type=mime_type,
            metadata=metadata, timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor,
            retention=self._client.retention_config, limits=self.image_input_limit_config, llm=self.llm,
        )

    def delete_image(self, image_id: str) -> int:
        """Delete an image owned by this thread; return 1, or 0 when absent or another thread's (spec: delete_image).

        Raises ValueError for an image attached to a message: delete or update the message instead.
        """
        return services.image_delete(thread=self._row, image_id=image_id)

    def list_images(self, image_id: Any = NOTSET, metadata_filter: Any = NOTSET,
                    include_bytes: Any = NOTSET, limit: Any = NOTSET, **kwargs: Any) -> list[ImageRecord]:
        """This thread's live images in store order (spec: list_images).

        Bytes are loaded only with ``include_bytes=True`` and an ``image_id``
        (ValueError without one). ``limit`` omitted: at most 100; None: all.
        See ``selectors.image_list``.
        """
        services.reject_unknown(kwargs, "list_images")
        return selectors.image_list(thread=self._row, image_id=image_id, metadata_filter=_or(metadata_filter, None),
                                    include_bytes=_or(include_bytes, False), limit=limit)

    def get_image(self, image_id: str, include_bytes: bool = False) -> ImageRecord:
        """Return one live image of this thread (KeyError otherwise). Not in the spec."""
        return selectors.image_get(thread=self._row, image_id=image_id, include_bytes=include_bytes)

    # --- relations ----------------------------------------------------------------

    def link_records(self, source_record_id: str, source_record_type: str, target_record_id: str,
                     target_record_type: str, relation_type: str, opposite_relation_type: Any = NOTSET,
                     relation_id: Any = NOTSET, timestamp: Any = NOTSET,
                     metadata: Any = NOTSET, **kwargs: Any) -> str:
        """Create a directed relation between two memory-like records of this thread; return its id.

        Built-in types get their fixed reverse label unless
        ``opposite_relation_type`` is given; custom types default to the same
        label. The target of supersedes/refines/duplicates becomes invalid.
        Raises ValueError for a self-link, an endpoint that is not a live
        memory-like record of this exact thread (or not of the given type), an
        already related pair (either orientation) or a taken ``relation_id``;
        TypeError for unknown keywords. See ``memory.links.link_create``.
        """
        services.reject_unknown(kwargs, "link_records")
        return links.link_create(
            thread=self._row, source_record_id=source_record_id, source_record_type=source_record_type,
            target_record_id=target_record_id, target_record_type=target_record_type, relation_type=relation_type,
            opposite_relation_type=opposite_relation_type, relation_id=relation_id, timestamp=_or(timestamp, None),
            metadata=_or(metadata, None), restrict=self._client.tenant.row_filter(),
        )

    def update_record_link(self, relation_id: str, relation_type: Any = NOTSET, opposite_relation_type: Any = NOTSET,
                           timestamp: Any = NOTSET, metadata: Any = NOTSET, **kwargs: Any) -> int:
        """Update a relation of this thread; return 1, or 0 when there is none (spec: update_record_link).

        Omitted values are preserved; a new built-in ``relation_type`` brings its
        fixed reverse label. See ``memory.links.link_update``.
        """
        services.reject_unknown(kwargs, "update_record_link")
        return links.link_update(thread=self._row, relation_id=relation_id, relation_type=relation_type,
                                 opposite_relation_type=opposite_relation_type, timestamp=timestamp,
                                 metadata=metadata, restrict=self._client.tenant.row_filter())

    def delete_record_link(self, source_record_id: Any = NOTSET, source_record_type: Any = NOTSET,
                           target_record_id: Any = NOTSET, target_record_type: Any = NOTSET,
                           relation_type: Any = NOTSET, relation_id: Any = NOTSET, **kwargs: Any) -> int:
        """Delete a relation of this thread by ``relation_id`` alone or the complete endpoint tuple; return 0 or 1.

        The tuple uses the stored source-to-target orientation. Raises
        ValueError for a mixed or incomplete selector. See ``memory.links.link_delete``.
        """
        services.reject_unknown(kwargs, "delete_record_link")
        return links.link_delete(thread=self._row, source_record_id=source_record_id,
                                 source_record_type=source_record_type, target_record_id=target_record_id,
                                 target_record_type=target_record_type, relation_type=relation_type,
                                 relation_id=relation_id, restrict=self._client.tenant.row_filter())

    def get_record_link(self, relation_id: str) -> RecordRelation:
        """Return one relation of this thread (KeyError otherwise). Not in the spec.

        A restricted client does not see a relation to a record of another user
        or agent stored in its thread (``memory.links.visible``): KeyError, as
        for an absent one; ``update_record_link``/``delete_record_link`` then
        answer 0 and ``link_records`` refuses such an endpoint as unknown.
        """
        return links.link_get(thread=self._row, relation_id=relation_id, restrict=self._client.tenant.row_filter())

    def record_links(self, record_id: str | None = None):
        """This thread's relations, oldest first, read lazily (``selectors.Records``, for paging); with
        ``record_id``, those touching it; a restricted client's as ``get_record_link`` says. Not in the spec."""
        return links.link_list(thread=self._row, record_id=record_id, restrict=self._client.tenant.row_filter())

    # --- search -------------------------------------------------------------------

    def search(self, query: str, *, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
               exact_user_match: Any = NOTSET, exact_agent_match: Any = NOTSET, exact_thread_match: Any = NOTSET,
               max_results: Any = NOTSET, token_budget: Any = NOTSET, soft_token_budget: Any = NOTSET,
               record_types: Any = NOTSET, metadata_filter: Any = NOTSET, num_hops: Any = NOTSET,
               max_linked_results: Any = NOTSET, include_invalid_results: Any = NOTSET, scope: Any = NOTSET,
               **kwargs: Any) -> list[SearchResult]:
        """Search records relevant to ``query``, best first (spec: OracleThread.search).

        Omitted scope fields inherit the thread's: exact user and agent, this
        thread's id with ``exact_thread_match=False``. ``num_hops`` (0-5)
        attaches to each direct memory result the memories reached through
        relations (``SearchResult.linked``, at most ``max_linked_results``,
        default 100, each). Raises ValueError if ``scope`` is combined with
        explicit scope arguments, ``max_results`` < 1, ``num_hops`` is outside
        0-5, ``max_linked_results`` < 0, or ``metadata_filter`` is not a dict or None.
        """
        services.reject_unknown(kwargs, "search")
        return search_engine.run_search(
            query, tenant=self._client.tenant, defaults=self.default_scope, config=self.search_config,
            scope=_or(scope, None),
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, max_results=max_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, record_types=record_types,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            num_hops=num_hops, max_linked_results=max_linked_results,
        )

    # --- summaries and context cards ------------------------------------------------

    def get_summary(self, except_last: Any = NOTSET, token_budget: Any = NOTSET, **kwargs: Any) -> OracleSummary:
        """Return a summary of the thread, or of all but its last ``except_last`` messages (spec: get_summary).

        Whole thread: the durable summary, refreshed with the thread's LLM when
        it does not cover the latest message. ``except_last`` leaves the
        durable summary unchanged. Without an LLM: a transcript of the latest
        messages, at most 4,000 characters. See ``memory.context.summary_get``.
        Raises TypeError for unknown keywords.
        """
        services.reject_unknown(kwargs, "get_summary")
        return context.summary_get(thread=self._row, except_last=except_last, token_budget=token_budget,
                                   llm=self.llm)

    def get_context_card(self, fallback_message_count: Any = NOTSET, max_relevant_results: Any = NOTSET,
                         token_budget: Any = NOTSET, soft_token_budget: Any = NOTSET,
                         max_recent_messages: Any = NOTSET, except_last_messages: Any = NOTSET,
                         min_relevant_results_by_type: Any = NOTSET, metadata_filter: Any = NOTSET,
                         include_invalid_results: Any = NOTSET, **kwargs: Any) -> OracleContextCard:
        """Return a context card: summary, topics, relevant records, recent messages (spec: get_context_card).

        Searches with this thread's default scope (``exact_thread_match=False``).
        Rules and errors: ``memory.context.context_card_build``; unknown
        keywords raise TypeError, a nonzero ``except_last_messages`` with
        ``max_recent_messages`` neither 0 nor equal to it raises ValueError.
        """
        return context.context_card_build(
            thread=self._row, scope=self.default_scope, search_config=self.search_config, llm=self.llm,
            fallback_message_count=fallback_message_count, max_relevant_results=max_relevant_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, max_recent_messages=max_recent_messages,
            except_last_messages=except_last_messages, min_relevant_results_by_type=min_relevant_results_by_type,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            **kwargs,
        )

    # --- memory history (not in the spec; memory.history) ------------------------------------

    def get_memory_history(self, memory_id: str) -> list[MemoryVersionRecord]:
        """The history of a memory-like record of this thread, oldest version first (``memory.history``).

        Each entry says who acted (API key, staff user, extraction job, TTL
        expiry, relation), when, before -> after and why. Answers for a deleted
        memory too, until its user is erased. A restricted client sees only its
        own user's and agent's. Raises KeyError when the thread has no history
        of that id.
        """
        return history.history_list(project_id=self.project.pk, memory_id=memory_id, thread_id=self._row.pk,
                                    restrict=self._client.tenant.row_filter())

    def restore_memory_version(self, memory_id: str, version: int) -> int:
        """Undo: restore version ``version`` of a memory of this thread as a new version; return its number.

        Content, type, metadata, status, expiry and event time come back and the
        search chunks are re-indexed (``services.memory_restore``). Raises
        KeyError for a missing memory or version, ValueError/TypeError for bad arguments.
        """
        return services.memory_restore(thread=self._row, memory_id=memory_id, version=version,
                                       restrict=self._client.tenant.row_filter())

    async def get_memory_history_async(self, memory_id: str) -> list[MemoryVersionRecord]:
        """Asynchronous twin of :meth:`get_memory_history` (same arguments, result and errors)."""
        return await in_worker(self.get_memory_history, memory_id)

    async def restore_memory_version_async(self, memory_id: str, version: int) -> int:
        """Asynchronous twin of :meth:`restore_memory_version` (same arguments, result and errors)."""
        return await in_worker(self.restore_memory_version, memory_id, version)


class AgentMemory(_WithAsyncTwins):
    """Entry point of the Python API: creates, opens, deletes and searches threads of one project.

    ``project``: a ``memory.models.Project`` or its slug; omitted,
    the ``default`` project (``memory.tenancy.get_project``; KeyError for an
    unknown slug). Every thread, record and search of this client and of the
    handles it makes is in that project, and ids are unique within it only.
    ``tenant`` (instead of ``project``): a ``memory.tenancy.Tenant``, a project
    with an optional fixed user and agent; such a client sees, writes and
    searches only that user's and agent's threads and records (others are not
    found; naming them raises ``OutOfScope``, a ValueError).
    ``memory_retention_config`` (SDK name; ``retention_config`` is its earlier
    name here, TypeError when both are given) defaults to the settings
    ``OAM_DEFAULT_TTL_DAYS`` and ``OAM_MAX_TTL_DAYS``; ``search_config`` to
    ``MemorySearchConfig()``; ``llm`` (extraction, summaries, context cards) to
    ``memory.llm.get_llm()``, and None means none (an object with the SDK's ``ILlm.generate()``, such as
    ``oracleagentmemory.Llm``, is wrapped by ``memory.llm.as_llm``; anything else is a TypeError here); ``memory_extraction_config``
    (client level; ``extract_memories`` and ``memory_extraction_custom_instructions``
    are laid over it field by field) is the base every thread's own config is laid
    over, field by field; ``image_input_limit_config`` likewise for image limits.

    The SDK's storage arguments are accepted and ignored, the database being
    Django's (``settings.DATABASES``: SQLite here, Oracle when configured):
    ``store``, ``connection``, ``schema_policy``, ``memory_store_id``,
    ``table_name_prefix``, ``schema_owner``, ``search_index_sync``. ``embedder``
    is accepted and ignored too: every vector is the site's embedder's
    (``memory.embedders``), so stored and query vectors stay comparable.
    ``search_strategy`` (VECTOR, HYBRID, KEYWORD, or an enum with that value)
    sets the search mode when ``search_config`` sets none. ``pruner_llm`` is
    refused (ValueError) unless None: no pruning search here.
    """

    _ASYNC = ("create_thread", "get_thread", "delete_thread", "search", "search_project",
              "delete_memory", "delete_user", "delete_agent", "erase_user", "erase_agent",
              "list_threads", "list_messages", "list_memories", "list_images",
              "add_memory", "update_memory", "add_image", "update_image", "delete_image",
              "link_records", "update_record_link", "delete_record_link", "close",
              "add_user", "add_agent", "list_users", "list_agents")

    def __init__(self, *, store: Any = NOTSET, connection: Any = NOTSET, embedder: Any = NOTSET, llm: Any = NOTSET,
                 memory_extraction_config: Any = NOTSET, image_input_limit_config: Any = NOTSET,
                 schema_policy: Any = NOTSET, memory_store_id: Any = NOTSET, table_name_prefix: Any = NOTSET,
                 schema_owner: Any = NOTSET, search_strategy: Any = NOTSET, search_index_sync: Any = NOTSET,
                 extract_memories: Any = NOTSET, memory_extraction_custom_instructions: Any = NOTSET,
                 memory_retention_config: Any = NOTSET, search_config: Any = NOTSET, pruner_llm: Any = NOTSET,
                 project: Any = None, tenant: Tenant | None = None, retention_config: Any = NOTSET):
        if project is not None and not isinstance(project, (str, ProjectRow)):
            raise TypeError("project: must be a Project, a project slug or None")
        if tenant is not None and (project is not None or not isinstance(tenant, Tenant)):
            raise TypeError("tenant: must be a Tenant, and comes without project")
        if pruner_llm is not NOTSET and pruner_llm is not None:
            raise InvalidArgument("pruner_llm", "not supported: there is no pruning search here")
        self._tenant = tenant
        self._project = tenant.project if tenant is not None else project  # resolved on first use (async callers)
        self.llm = as_llm(llm)  # omitted: get_llm() when needed; None: no LLM; SDK ILlm: wrapped
        image_input_limit_config = _or(image_input_limit_config, None)
        if image_input_limit_config is not None and not isinstance(image_input_limit_config, ImageInputLimitConfig):
            raise TypeError("image_input_limit_config: must be an ImageInputLimitConfig or None")
        self.image_input_limit_config = image_input_limit_config
        memory_extraction_config = _or(memory_extraction_config, None)
        if memory_extraction_config is not None and not isinstance(memory_extraction_config, MemoryExtractionConfig):
            raise TypeError("memory_extraction_config: must be a MemoryExtractionConfig or None")
        inline = {name: value for name, value in (
            ("extract_memories", extract_memories),
            ("memory_extraction_custom_instructions", memory_extraction_custom_instructions)) if value is not NOTSET}
        if inline:
            memory_extraction_config = MemoryExtractionConfig(**inline).merged_over(memory_extraction_config)
        self.memory_extraction_config = memory_extraction_config
        if memory_retention_config is not NOTSET and retention_config is not NOTSET:
            raise TypeError("pass memory_retention_config or retention_config (its earlier name), not both")
        retention = _or(memory_retention_config, _or(retention_config, None))
        if retention is not None and not isinstance(retention, MemoryRetentionConfig):
            raise TypeError("memory_retention_config: must be a MemoryRetentionConfig or None")
        self.retention_config = retention or MemoryRetentionConfig(
            default_ttl_days=settings.OAM_DEFAULT_TTL_DAYS, max_ttl_days=settings.OAM_MAX_TTL_DAYS
        )
        search = _check_search_config(search_config) or MemorySearchConfig()
        if search_strategy is not NOTSET and search_strategy is not None and search.mode is None:
            mode = getattr(search_strategy, "value", search_strategy)
            search = dataclasses.replace(search, mode=search_engine.check_mode(mode))
        self.search_config = search
        self._closed = False

    @property
    def memory_retention_config(self) -> MemoryRetentionConfig:
        """The retention rules (SDK name of ``retention_config``)."""
        return self.retention_config

    @property
    def project(self) -> ProjectRow:
        """The client's ``memory.models.Project`` (read from the database on first use; KeyError if unknown)."""
        if not isinstance(self._project, ProjectRow):
            self._project = get_project(self._project)
        return self._project

    @property
    def tenant(self) -> Tenant:
        """Who this client acts for: its project, with the fixed user and agent of a restricted client."""
        if self._tenant is None:
            self._tenant = Tenant(project=self.project)
        return self._tenant

    def thread_row(self, thread_id: Any, *, field: str = "thread_id") -> ThreadRow:
        """The stored thread ``thread_id`` of this client's project, within its tenant's restriction.

        Raises KeyError (``NotFound``, naming ``field``) when there is none or
        it is another user's or agent's than a restricted client's: a
        restricted client cannot tell another user's thread from none.
        """
        row = selectors.thread_get(project=self.project, thread_id=thread_id)
        if not self.tenant.allows(row):
            raise NotFound(field, thread_id)
        return row

    def _thread_settings(self, *, memory_extraction_config: Any, image_input_limit_config: Any, search_config: Any,
                         inline: dict[str, Any], extract_memories: Any, settings_given: dict[str, Any],
                         stacklevel: int = 4) -> dict[str, Any]:
        """Check the thread-level settings of create/get/update_thread; return those given (None: omitted)."""
        config = resolve_extraction_config(_or(memory_extraction_config, None), inline, stacklevel=stacklevel)
        if extract_memories is not NOTSET:
            config = MemoryExtractionConfig(extract_memories=extract_memories).merged_over(config)
        limits = _or(image_input_limit_config, None)
        if limits is not None and not isinstance(limits, ImageInputLimitConfig):
            raise TypeError("image_input_limit_config: must be an ImageInputLimitConfig or None")
        return {"memory_extraction_config": config, IMAGE_LIMITS_KEY: limits,
                SEARCH_CONFIG_KEY: _check_search_config(search_config),
                **{name: _check_setting(name, value) for name, value in settings_given.items() if value is not NOTSET}}

    def _check_llm(self, llm: Any, config: MemoryExtractionConfig | None) -> None:
        """The SDK refuses extraction without an LLM: ValueError when ``extract_memories=True`` was asked for
        (here or in the client's config) and the thread would have no LLM. An omitted ``extract_memories``
        with no LLM leaves extraction off (a server without an LLM still stores threads)."""
        if config is None or "extract_memories" not in config.given_fields or not config.extract_memories:
            return
        resolved = _or(llm, self.llm)
        if resolved is NOTSET:
            resolved = get_llm()
        if resolved is None:
            raise InvalidArgument("llm", "extract_memories=True needs an LLM; pass llm=... or "
                                         "extract_memories=False")

    def create_thread(self, *, thread_id: Any = NOTSET, user_id: Any = NOTSET, agent_id: Any = NOTSET,
                      metadata: Any = NOTSET, llm: Any = NOTSET, max_message_token_length: Any = NOTSET,
                      message_shortening_input_token_limit: Any = NOTSET, memory_extraction_config: Any = NOTSET,
                      image_input_limit_config: Any = NOTSET, search_config: Any = NOTSET,
                      context_card_token_limit: Any = NOTSET, context_card_type_search_concurrency: Any = NOTSET,
                      extract_memories: Any = NOTSET, memory_extraction_window: Any = NOTSET,
                      context_summary_update_frequency: Any = NOTSET, memory_extraction_frequency: Any = NOTSET,
                      memory_extraction_token_limit: Any = NOTSET, memory_extraction_custom_instructions: Any = NOTSET,
                      memory_extraction_inherit_message_metadata: Any = NOTSET,
                      enable_context_summary: Any = NOTSET, **kwargs: Any) -> Thread:
        """Create and return a thread (SDK: ``OracleAgentMemory.create_thread``). Omitted ids are generated UUIDs.

        ``llm``: the thread's LLM (omitted: the client's; None: none).
        ``memory_extraction_config``, or the deprecated inline parameters
        (``memory_extraction_window``, ... : ``DEPRECATED_INLINE_PARAMETERS``, each
        warning with DeprecationWarning), with ``extract_memories`` laid over
        either, is laid over the client's config field by field and stored in
        ``Thread.config`` so the thread keeps it wherever it is opened (the
        client's is stored when the thread gives none). ``image_input_limit_config``
        (omitted fields: the client's, else the SDK defaults), ``search_config``
        and the runtime settings (``THREAD_SETTINGS``) are stored there too when
        given. Raises ValueError when ``thread_id`` is taken, both config forms
        are given, or ``extract_memories=True`` is asked for without an LLM;
        TypeError for unknown keywords or mistyped settings.
        """
        llm = as_llm(llm)  # before anything is stored: TypeError for what is no LLM
        inline = {name: value for name, value in (
            ("memory_extraction_window", memory_extraction_window),
            ("context_summary_update_frequency", context_summary_update_frequency),
            ("memory_extraction_frequency", memory_extraction_frequency),
            ("memory_extraction_token_limit", memory_extraction_token_limit),
            ("enable_context_summary", enable_context_summary),
            ("memory_extraction_custom_instructions", memory_extraction_custom_instructions),
            ("memory_extraction_inherit_message_metadata", memory_extraction_inherit_message_metadata),
        ) if value is not NOTSET}
        inline.update({name: kwargs.pop(name) for name in DEPRECATED_INLINE_PARAMETERS if name in kwargs})
        persist = kwargs.pop("persist_messages_in_config", False)
        if not isinstance(persist, bool):
            raise TypeError("persist_messages_in_config: must be a bool")  # accepted; always False here (SDK, DB store)
        services.reject_unknown(kwargs, "create_thread")
        given = self._thread_settings(
            memory_extraction_config=memory_extraction_config, image_input_limit_config=image_input_limit_config,
            search_config=search_config, inline=inline, extract_memories=extract_memories,
            settings_given={"max_message_token_length": max_message_token_length,
                            "message_shortening_input_token_limit": message_shortening_input_token_limit,
                            "context_card_token_limit": context_card_token_limit,
                            "context_card_type_search_concurrency": context_card_type_search_concurrency})
        own = given.pop("memory_extraction_config")
        config = own.merged_over(self.memory_extraction_config) if own is not None else self.memory_extraction_config
        self._check_llm(llm, config)
        stored = config.to_thread_config(given_only=True) if config is not None else {}
        limits = given.pop(IMAGE_LIMITS_KEY)
        if limits is not None:
            stored[IMAGE_LIMITS_KEY] = limits.merged_over(self.image_input_limit_config).to_thread_config()
        search = given.pop(SEARCH_CONFIG_KEY)
        if search is not None:
            stored[SEARCH_CONFIG_KEY] = _search_config_data(search)
        stored.update(given)
        user_id, agent_id = self.tenant.fill("user_id", user_id), self.tenant.fill("agent_id", agent_id)
        row = services.thread_create(project=self.project, thread_id=thread_id, user_id=user_id, agent_id=agent_id,
                                     metadata=_or(metadata, None), config=stored or None)
        return Thread(row, self, llm=llm)

    def get_thread(self, thread_id: str, *, llm: Any = NOTSET, max_message_token_length: Any = NOTSET,
                   message_shortening_input_token_limit: Any = NOTSET, memory_extraction_config: Any = NOTSET,
                   image_input_limit_config: Any = NOTSET, search_config: Any = NOTSET,
                   context_card_token_limit: Any = NOTSET, context_card_type_search_concurrency: Any = NOTSET,
                   extract_memories: Any = NOTSET, memory_extraction_window: Any = NOTSET,
                   context_summary_update_frequency: Any = NOTSET, memory_extraction_frequency: Any = NOTSET,
                   memory_extraction_token_limit: Any = NOTSET, memory_extraction_custom_instructions: Any = NOTSET,
                   memory_extraction_inherit_message_metadata: Any = NOTSET,
                   enable_context_summary: Any = NOTSET) -> Thread:
        """Return a handle on a stored thread of this client's project (and tenant); KeyError when there is none.

        The settings (as ``create_thread``'s) apply to this handle only, laid over the stored ones field by
        field; nothing is stored (``update_thread`` stores them).
        """
        llm = as_llm(llm)  # before anything is stored: TypeError for what is no LLM
        inline = {name: value for name, value in (
            ("memory_extraction_window", memory_extraction_window),
            ("context_summary_update_frequency", context_summary_update_frequency),
            ("memory_extraction_frequency", memory_extraction_frequency),
            ("memory_extraction_token_limit", memory_extraction_token_limit),
            ("enable_context_summary", enable_context_summary),
            ("memory_extraction_custom_instructions", memory_extraction_custom_instructions),
            ("memory_extraction_inherit_message_metadata", memory_extraction_inherit_message_metadata),
        ) if value is not NOTSET}
        overrides = self._thread_settings(
            memory_extraction_config=memory_extraction_config, image_input_limit_config=image_input_limit_config,
            search_config=search_config, inline=inline, extract_memories=extract_memories,
            settings_given={"max_message_token_length": max_message_token_length,
                            "message_shortening_input_token_limit": message_shortening_input_token_limit,
                            "context_card_token_limit": context_card_token_limit,
                            "context_card_type_search_concurrency": context_card_type_search_concurrency})
        self._check_llm(llm, overrides["memory_extraction_config"])
        return Thread(self.thread_row(thread_id), self, llm=llm,
                      overrides={k: v for k, v in overrides.items() if v is not None})

    def update_thread(self, thread_id: str, metadata: Any = NOTSET, llm: Any = NOTSET, extract_memories: Any = NOTSET,
                      max_message_token_length: Any = NOTSET, message_shortening_input_token_limit: Any = NOTSET,
                      memory_extraction_window: Any = NOTSET, context_summary_update_frequency: Any = NOTSET,
                      memory_extraction_frequency: Any = NOTSET, memory_extraction_token_limit: Any = NOTSET,
                      context_card_token_limit: Any = NOTSET, enable_context_summary: Any = NOTSET,
                      memory_extraction_custom_instructions: Any = NOTSET,
                      memory_extraction_inherit_message_metadata: Any = NOTSET,
                      memory_extraction_config: Any = NOTSET, image_input_limit_config: Any = NOTSET,
                      search_config: Any = NOTSET, **kwargs: Any) -> Thread:
        """Store a thread's metadata and settings; return a fresh handle (SDK: ``update_thread``).

        ``metadata`` replaces the stored object (omitted: unchanged; None: cleared). The settings are
        ``create_thread``'s, laid over the stored ones field by field; ``llm`` applies to the returned
        handle only. KeyError when the thread is not in this project; TypeError/ValueError for bad values.
        """
        services.reject_unknown(kwargs, "update_thread")
        llm = as_llm(llm)  # before anything is stored: TypeError for what is no LLM
        inline = {name: value for name, value in (
            ("memory_extraction_window", memory_extraction_window),
            ("context_summary_update_frequency", context_summary_update_frequency),
            ("memory_extraction_frequency", memory_extraction_frequency),
            ("memory_extraction_token_limit", memory_extraction_token_limit),
            ("enable_context_summary", enable_context_summary),
            ("memory_extraction_custom_instructions", memory_extraction_custom_instructions),
            ("memory_extraction_inherit_message_metadata", memory_extraction_inherit_message_metadata),
        ) if value is not NOTSET}
        given = self._thread_settings(
            memory_extraction_config=memory_extraction_config, image_input_limit_config=image_input_limit_config,
            search_config=search_config, inline=inline, extract_memories=extract_memories,
            settings_given={"max_message_token_length": max_message_token_length,
                            "message_shortening_input_token_limit": message_shortening_input_token_limit,
                            "context_card_token_limit": context_card_token_limit})
        row = self.thread_row(thread_id)
        changes: dict[str, Any] = {}
        config = given.pop("memory_extraction_config")
        if config is not None:
            merged = config.merged_over(extraction.thread_config(row, default=self.memory_extraction_config))
            self._check_llm(llm, merged)
            changes.update(merged.to_thread_config(given_only=True))
        limits = given.pop(IMAGE_LIMITS_KEY)
        if limits is not None:
            current = ImageInputLimitConfig.from_thread_config(row.config, self.image_input_limit_config)
            changes[IMAGE_LIMITS_KEY] = limits.merged_over(current).to_thread_config()
        search = given.pop(SEARCH_CONFIG_KEY)
        if search is not None:
            changes[SEARCH_CONFIG_KEY] = _search_config_data(search)
        changes.update(given)
        row = services.thread_update(thread=row, metadata=metadata, config_changes=changes or None)
        return Thread(row, self, llm=llm)

    async def update_thread_async(self, thread_id: str, metadata: Any = NOTSET, **kwargs: Any) -> Thread:
        """Asynchronous twin of :meth:`update_thread` (settings by keyword, as the SDK's twin)."""
        return await in_worker(self.update_thread, thread_id, metadata, **kwargs)

    # --- client-level records (SDK: OracleAgentMemory) ------------------------------------------------

    def _owner(self, model, record_id: Any, field: str) -> Thread:
        """A handle on the thread owning record ``record_id`` of ``model`` in this project; KeyError when none."""
        key = stored_id(self.project.pk, services.check_id(record_id, field))
        owner = model.objects.filter(pk=key).values_list("thread_id", flat=True).first()
        if owner is None:
            raise NotFound(field, record_id)
        row = ThreadRow.objects.filter(pk=owner, project=self.project).first()
        if row is None or not self.tenant.allows(row):
            raise NotFound(field, record_id)
        return Thread(row, self)

    def list_threads(self, user_id: Any, agent_id: Any = NOTSET, metadata_filter: Any = NOTSET,
                     limit: Any = NOTSET) -> list[Thread]:
        """Threads of one user (None: threads with no user), oldest first, as handles (SDK: ``list_threads``,
        which returns ``ThreadRecord``s; a handle has the same ``thread_id``/``user_id``/``agent_id``/``metadata``
        and its settings through ``_to_config()``). ``agent_id`` and ``metadata_filter`` (search grammar)
        filter; ``limit`` as ``memory.listing.check_limit``."""
        rows = listing.thread_rows(tenant=self.tenant, user_id=user_id, agent_id=agent_id,
                                   metadata_filter=metadata_filter, limit=limit)
        return [Thread(row, self) for row in rows]

    def list_messages(self, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
                      metadata_filter: Any = NOTSET, limit: Any = NOTSET,
                      include_image_bytes: Any = NOTSET) -> list[Message]:
        """Live messages of this project, oldest first, filtered by scope and metadata (``memory.listing``)."""
        return listing.messages(tenant=self.tenant, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
                                metadata_filter=metadata_filter, limit=limit, include_image_bytes=include_image_bytes)

    def list_memories(self, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
                      metadata_filter: Any = NOTSET, limit: Any = NOTSET) -> list[MemoryRecord]:
        """Live memory-like records of this project, oldest first, filtered by scope and metadata."""
        return listing.memories(tenant=self.tenant, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
                                metadata_filter=metadata_filter, limit=limit)

    def list_images(self, image_id: Any = NOTSET, user_id: Any = NOTSET, agent_id: Any = NOTSET,
                    thread_id: Any = NOTSET, metadata_filter: Any = NOTSET, include_bytes: Any = NOTSET,
                    limit: Any = NOTSET) -> list[ImageRecord]:
        """Live standalone images of this project, oldest first (``memory.listing.images``)."""
        return listing.images(tenant=self.tenant, image_id=image_id, user_id=user_id, agent_id=agent_id,
                              thread_id=thread_id, metadata_filter=metadata_filter, include_bytes=include_bytes,
                              limit=limit)

    def add_memory(self, content: str, *, memory_type: Any = NOTSET, user_id: Any = NOTSET, agent_id: Any = NOTSET,
                   thread_id: Any = NOTSET, memory_id: Any = NOTSET, metadata: Any = NOTSET, timestamp: Any = NOTSET,
                   ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET, status: Any = NOTSET,
                   autonomous_linking: Any = NOTSET, memory_id_to_link: Any = NOTSET, link_type: Any = NOTSET,
                   link_id: Any = NOTSET, link_timestamp: Any = NOTSET, link_metadata: Any = NOTSET,
                   **store_kwargs: Any) -> str:
        """Store a memory in a thread of this project (SDK: ``OracleAgentMemory.add_memory``); see
        ``Thread.add_memory``. ``thread_id`` names the thread and is required here (every memory of this
        service is stored through a thread: ValueError without one; KeyError for an unknown thread);
        ``user_id``/``agent_id`` omitted inherit the thread's."""
        if thread_id is NOTSET or thread_id is None:
            raise InvalidArgument("thread_id", "required: memories are stored through a thread here")
        handle = Thread(self.thread_row(thread_id), self)
        return handle.add_memory(
            content, memory_type=memory_type, user_id=user_id, agent_id=agent_id, memory_id=memory_id,
            metadata=metadata, timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status,
            autonomous_linking=autonomous_linking, memory_id_to_link=memory_id_to_link, link_type=link_type,
            link_id=link_id, link_timestamp=link_timestamp, link_metadata=link_metadata, **store_kwargs)

    def update_memory(self, memory_id: str, content: Any = NOTSET, metadata: Any = NOTSET, timestamp: Any = NOTSET,
                      ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET, status: Any = NOTSET, **kwargs: Any) -> str:
        """Update a live memory-like record of this project by id, whatever thread owns it or none (SDK:
        ``OracleAgentMemory.update_memory``; arguments as ``Thread.update_memory``). Found and scoped as
        ``delete_memory`` finds them (``services.memory_update`` with ``project`` and the tenant's ``allows``):
        a restricted client updates its own user's and agent's records, in any thread. KeyError when there
        is none, it expired, or it is outside a restricted client's user and agent."""
        services.reject_unknown(kwargs, "update_memory")
        return services.memory_update(project=self.project, allows=self.tenant.allows, memory_id=memory_id,
                                      content=content, metadata=metadata, timestamp=timestamp, ttl_days=ttl_days,
                                      ttl_anchor=ttl_anchor, status=status, retention=self.retention_config)

    def add_image(self, image: bytes, description: Any = NOTSET, mime_type: Any = NOTSET, image_id: Any = NOTSET,
                  user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET, metadata: Any = NOTSET,
                  timestamp: Any = NOTSET, ttl_days: Any = NOTSET, ttl_anchor: Any = NOTSET,
                  **store_kwargs: Any) -> str:
        """Store an image in a thread of this project (``Thread.add_image``); ``thread_id`` is required here
        (ValueError without one, KeyError for an unknown thread)."""
        if thread_id is NOTSET or thread_id is None:
            raise InvalidArgument("thread_id", "required: images are stored through a thread here")
        handle = Thread(self.thread_row(thread_id), self)
        return handle.add_image(image, description=description, mime_type=mime_type, image_id=image_id,
                                user_id=user_id, agent_id=agent_id, metadata=metadata, timestamp=timestamp,
                                ttl_days=ttl_days, ttl_anchor=ttl_anchor, **store_kwargs)

    def update_image(self, image_id: str, image: Any = NOTSET, description: Any = NOTSET, mime_type: Any = NOTSET,
                     metadata: Any = NOTSET, timestamp: Any = NOTSET, ttl_days: Any = NOTSET,
                     ttl_anchor: Any = NOTSET, **kwargs: Any) -> str:
        """Update an image of this project by id, through its thread (``Thread.update_image``)."""
        return self._owner(ImageRow, image_id, "image_id").update_image(
            image_id, image=image, description=description, mime_type=mime_type, metadata=metadata,
            timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, **kwargs)

    def delete_image(self, image_id: str) -> int:
        """Delete an image of this project by id (``Thread.delete_image``); 1, or 0 when there is none."""
        try:
            handle = self._owner(ImageRow, image_id, "image_id")
        except NotFound:
            return 0
        return handle.delete_image(image_id)

    def link_records(self, source_record_id: str, source_record_type: str, target_record_id: str,
                     target_record_type: str, relation_type: str, opposite_relation_type: Any = NOTSET,
                     relation_id: Any = NOTSET, timestamp: Any = NOTSET, metadata: Any = NOTSET) -> str:
        """Relate two memory-like records of this project (``Thread.link_records`` on the source's thread:
        both must be of the same thread here; KeyError for an unknown source)."""
        return self._owner(MemoryRow, source_record_id, "source_record_id").link_records(
            source_record_id, source_record_type, target_record_id, target_record_type, relation_type,
            opposite_relation_type=opposite_relation_type, relation_id=relation_id, timestamp=timestamp,
            metadata=metadata)

    def update_record_link(self, relation_id: str, relation_type: Any = NOTSET, opposite_relation_type: Any = NOTSET,
                           timestamp: Any = NOTSET, metadata: Any = NOTSET) -> int:
        """Update a relation of this project by id (``Thread.update_record_link``); 1, or 0 when none."""
        try:
            handle = self._owner(RecordLinkRow, relation_id, "relation_id")
        except NotFound:
            return 0
        return handle.update_record_link(relation_id, relation_type=relation_type,
                                         opposite_relation_type=opposite_relation_type, timestamp=timestamp,
                                         metadata=metadata)

    def delete_record_link(self, source_record_id: Any = NOTSET, source_record_type: Any = NOTSET,
                           target_record_id: Any = NOTSET, target_record_type: Any = NOTSET,
                           relation_type: Any = NOTSET, relation_id: Any = NOTSET) -> int:
        """Delete a relation of this project by ``relation_id`` alone or the complete endpoint tuple
        (``Thread.delete_record_link`` on its thread); 1, or 0 when there is none."""
        try:
            if relation_id is not NOTSET:
                handle = self._owner(RecordLinkRow, relation_id, "relation_id")
            elif source_record_id is NOTSET:
                raise InvalidArgument("relation_id", "give relation_id alone, or the complete endpoint tuple")
            else:
                handle = self._owner(MemoryRow, source_record_id, "source_record_id")
        except NotFound:
            return 0
        return handle.delete_record_link(source_record_id=source_record_id, source_record_type=source_record_type,
                                         target_record_id=target_record_id, target_record_type=target_record_type,
                                         relation_type=relation_type, relation_id=relation_id)

    def wait_for_memory_extraction(self, timeout: float | None = 300.0) -> None:
        """Wait for background extraction this process accepted for this project's threads before the call
        (SDK: the client-level wait); ``timeout`` seconds in all (None: no limit). TimeoutError when it
        expires first; TypeError/ValueError for a bad timeout."""
        timeout = extraction.check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        for key in extraction.accepted_threads(prefix=stored_id(self.project.pk, "")):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            extraction.wait_for_extraction(thread_id=key, timeout=left)

    async def wait_for_memory_extraction_async(self, timeout: float | None = 300.0) -> None:
        """Asynchronous twin of :meth:`wait_for_memory_extraction` (waits in a thread of its own)."""
        await in_worker(self.wait_for_memory_extraction, timeout, thread_sensitive=False)

    def close(self, timeout: float | None = 300.0) -> None:
        """Stop using this client (SDK: ``close``): wait, up to ``timeout`` seconds, for the background
        extraction it accepted (``wait_for_memory_extraction``), then return even if some is unfinished.
        Idempotent. Background work runs in Dramatiq workers here, so nothing else needs stopping."""
        if self._closed:
            return
        try:
            self.wait_for_memory_extraction(timeout)
        except TimeoutError:
            logger.warning("close(): background extraction still running after %s s", timeout)
        self._closed = True

    def delete_thread(self, thread_id: str) -> int:
        """Delete a thread with its messages and memories; return 1, or 0 when absent.

        Does not wait for the thread's extraction: a running job finds its
        rows gone at its commit and writes nothing (``services.thread_delete``).
        """
        key = stored_id(self.project.pk, services.check_id(thread_id, "thread_id"))
        try:
            self.thread_row(thread_id)  # a user-restricted client may only delete its user's threads
        except NotFound:
            return 0
        deleted = services.thread_delete(project=self.project, thread_id=thread_id)
        extraction.detach(key)
        return deleted

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this project by id, whatever thread owns it or none (SDK:
        ``OracleAgentMemory.delete_memory``); return 1, or 0 when there is none.

        Waits first, up to 300 s, for background extraction this process
        accepted for its thread (``TimeoutError`` then, nothing deleted). An
        expired record is deleted too; a restricted client deletes only its
        own user's and agent's (another counts as none). See
        ``services.memory_delete_by_id``.
        """
        key = stored_id(self.project.pk, services.check_id(memory_id, "memory_id"))
        owner = MemoryRow.objects.filter(pk=key).values_list("thread_id", flat=True).first()
        if owner is not None:
            extraction.wait_for_extraction(thread_id=owner, timeout=300)
        return services.memory_delete_by_id(project=self.project, memory_id=memory_id, allows=self.tenant.allows)

    def erase_user(self, user_id: str, cascade: bool = True, *, requested_by: str = "python") -> erasure.Erasure:
        """Erase everything this project holds about one end user and return the receipt (GDPR Art. 17).

        Not in the SDK, which returns a count (``delete_user``). Waits first,
        up to 300 s in all, for background extraction this process accepted
        for the user's threads (``TimeoutError`` then, nothing erased); then
        ``memory.erasure.subject_erase``: the user's threads with all they
        hold, every record still scoped to the user, the storage scrubbed, a
        stored ``ErasureReceipt``. ``cascade=False`` erases nothing (the SDK
        then deletes only a profile row; there are none here). A restricted
        client may erase only its own user (``OutOfScope``).
        """
        return self._erase("user", user_id, cascade, requested_by)

    def erase_agent(self, agent_id: str, cascade: bool = True, *, requested_by: str = "python") -> erasure.Erasure:
        """``erase_user`` for an agent: its threads and every record scoped to it (not in the SDK)."""
        return self._erase("agent", agent_id, cascade, requested_by)

    def delete_user(self, user_id: str, cascade: bool = True) -> int:
        """Delete a user's profile and, with ``cascade``, everything held about the user (SDK:
        ``OracleAgentMemory.delete_user``); return 1 or 0.

        ``cascade=False`` deletes the profile row only (``memory.profiles``) and returns 1 when there was
        one. With ``cascade`` (``erase_user``, whose receipt this does not return): 1 when a profile or
        anything else was erased (the SDK counts the profile row only; a user exists here through the
        records scoped to it too), else 0. Raises ``TimeoutError`` as ``erase_user``; ValueError/TypeError
        for a bad id.
        """
        return self._delete_subject("user", user_id, cascade)

    def delete_agent(self, agent_id: str, cascade: bool = True) -> int:
        """Delete an agent's profile and, with ``cascade``, everything held about the agent (SDK:
        ``OracleAgentMemory.delete_agent``); return 1 or 0 (see ``delete_user``)."""
        return self._delete_subject("agent", agent_id, cascade)

    def _delete_subject(self, subject: str, value: Any, cascade: Any) -> int:
        if not isinstance(cascade, bool):
            raise InvalidArgument("cascade", "must be a bool")
        if not cascade:
            return profiles.profile_delete(tenant=self.tenant, kind=subject, subject_id=value)
        key = services.check_id(value, f"{subject}_id")
        had_profile = ProfileRow.objects.filter(project=self.project, kind=subject, subject_id=key).exists()
        return int(self._erase(subject, value, True, "python").found or had_profile)

    # --- profiles (SDK: add_user, add_agent, list_users, list_agents) -----------------------------------

    def add_user(self, user_id: str, information: str, metadata: Any = NOTSET) -> str:
        """Store (or replace) a user's profile: free-form ``information`` and ``metadata``; return ``user_id``
        (``memory.profiles.profile_add``)."""
        return profiles.profile_add(tenant=self.tenant, kind="user", subject_id=user_id, information=information,
                                    metadata=metadata)

    def add_agent(self, agent_id: str, information: str, metadata: Any = NOTSET) -> str:
        """Store (or replace) an agent's profile; return ``agent_id`` (see ``add_user``)."""
        return profiles.profile_add(tenant=self.tenant, kind="agent", subject_id=agent_id, information=information,
                                    metadata=metadata)

    def list_users(self, metadata_filter: Any = NOTSET, limit: Any = NOTSET) -> list[UserProfileRecord]:
        """User profiles of this project, oldest first (``memory.profiles.profile_list``)."""
        return profiles.profile_list(tenant=self.tenant, kind="user", metadata_filter=metadata_filter, limit=limit)

    def list_agents(self, metadata_filter: Any = NOTSET, limit: Any = NOTSET) -> list[AgentProfileRecord]:
        """Agent profiles of this project, oldest first (``memory.profiles.profile_list``)."""
        return profiles.profile_list(tenant=self.tenant, kind="agent", metadata_filter=metadata_filter, limit=limit)

    def _erase(self, subject: str, value: Any, cascade: Any, requested_by: str) -> erasure.Erasure:
        field = f"{subject}_id"
        value = services.check_id(value, field)
        if cascade:
            deadline = time.monotonic() + 300
            for key in erasure.subject_threads(self.tenant, subject, value):
                extraction.wait_for_extraction(thread_id=key, timeout=max(0.0, deadline - time.monotonic()))
        return erasure.subject_erase(tenant=self.tenant, subject=subject, value=value, cascade=cascade,
                                     requested_by=requested_by)

    def search(self, query: str, *, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
               exact_user_match: Any = NOTSET, exact_agent_match: Any = NOTSET, exact_thread_match: Any = NOTSET,
               max_results: Any = NOTSET, token_budget: Any = NOTSET, soft_token_budget: Any = NOTSET,
               record_types: Any = NOTSET, metadata_filter: Any = NOTSET, num_hops: Any = NOTSET,
               max_linked_results: Any = NOTSET, include_invalid_results: Any = NOTSET, scope: Any = NOTSET,
               **kwargs: Any) -> list[SearchResult]:
        """Search one user's records across threads (SDK: ``OracleAgentMemory.search``); same arguments as
        ``Thread.search``.

        The user must be given (``user_id=...``, ``user_id=None`` for records
        with no user, or ``scope=SearchScope(user_id=...)``) and matched
        exactly: ValueError otherwise. An omitted agent or thread is
        unconstrained; a given agent matches exactly unless
        ``exact_agent_match=False``, a given thread only with
        ``exact_thread_match=True``. See ``memory.search.resolve_scope``.
        """
        services.reject_unknown(kwargs, "search")
        return search_engine.run_search(
            query, tenant=self.tenant, defaults=search_engine.CLIENT_SCOPE, client=True, config=self.search_config,
            scope=_or(scope, None),
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, max_results=max_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, record_types=record_types,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            num_hops=num_hops, max_linked_results=max_linked_results,
        )

    def search_project(self, query: str, user_id: Any = NOTSET, agent_id: Any = NOTSET, thread_id: Any = NOTSET,
                       exact_user_match: Any = NOTSET, exact_agent_match: Any = NOTSET,
                       exact_thread_match: Any = NOTSET, scope: SearchScope | None = None,
                       **arguments: Any) -> list[SearchResult]:
        """Not in the SDK: an operator's search across every user, agent and thread of the project (staff pages).

        An omitted id leaves its dimension open; a given one matches exactly
        unless its ``exact_*_match`` is False. Other arguments and errors as
        ``search``. A client restricted to one user or agent (``Tenant``) is
        held to it (``OutOfScope``), as in every search.
        """
        services.reject_unknown({k: v for k, v in arguments.items() if k not in _SEARCH_ARGUMENTS}, "search_project")
        return search_engine.run_search(
            query, tenant=self.tenant, defaults=search_engine.OPERATOR_SCOPE, config=self.search_config, scope=scope,
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, **arguments,
        )


#: The SDK's class names (``oracleagentmemory.core``): an application switches by changing its imports.
OracleThread = Thread
OracleAgentMemory = AgentMemory
