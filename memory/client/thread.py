"""``Thread``: one conversation thread of ``AgentMemory`` (the SDK's ``OracleThread``); every method has an
``_async`` twin."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dataclasses
from collections.abc import Mapping
from typing import Any, Sequence
from memory.records.image_rules import THREAD_CONFIG_KEY as IMAGE_LIMITS_KEY, ImageInputLimitConfig
from memory.core.types import (
    ImageMimeType,
    ImageRecord,
    MemoryRecord,
    MemorySearchConfig,
    Message,
    MessageContent,
    NOTSET,
    NotSet,
    OracleContextCard,
    OracleSummary,
    RecordRelation,
    RecordStatus,
    SearchResult,
    SearchScope,
    TimeToLiveAnchor,
)
from memory.llm.adapters import Llm, LlmError, as_llm
from memory.extraction.config import MemoryExtractionConfig
from memory.records.history import MemoryVersionRecord
from memory.core.errors import NotFound, OutOfScope
from memory.client.common import SEARCH_CONFIG_KEY, THREAD_SETTINGS
from memory.models import Thread as ThreadRow
from memory.context import cards, summaries
from memory.records import history, selectors
from memory.core.aio import in_worker
from memory.llm import adapters as llm_module
from django.conf import settings
import logging

from memory.extraction.tracker import check_timeout, inflight, thread_config, wait_for_extraction
from memory.records.validators import check_id, reject_unknown
from memory.services.messages import message_delete, message_update, messages_add
from memory.services.memories import memory_add, memory_delete, memory_restore, memory_update
from memory.services.images import image_add, image_delete, image_update
from memory.links.writes import link_create, link_delete, link_get, link_list, link_update
from memory.search.ranking import run_search
from memory.services.extraction import extraction_after_add, extraction_after_edit
from memory.links.autonomous import propose_links
from memory.client.common import (
    _or,
    _search_config_data,
    _WithAsyncTwins,
    SdkLlm,
)

if TYPE_CHECKING:
    from memory.client.agent import AgentMemory

logger = logging.getLogger(__name__)


class Thread(_WithAsyncTwins):
    """A handle on one stored thread (spec: OracleThread).

    Attributes ``thread_id``, ``user_id``, ``agent_id`` and ``metadata`` are
    the thread's scope as stored when the handle was made (``thread_id`` the
    caller's id; ``project`` the thread's project). Writes go through
    ``memory.services``; reads through ``memory.records.selectors``/``memory.search``,
    always in the thread's project.
    """

    _ASYNC = (
        "add_messages", "get_message", "update_message", "delete_message",
        "add_memory", "update_memory", "delete_memory", "get_memory", "list_memories", "search",
        "get_summary", "get_context_card",
        "link_records", "update_record_link", "delete_record_link", "get_record_link",
        "add_image", "update_image", "delete_image", "list_images", "get_image",
    )  # get_messages_async is written out: the SDK's twin takes start/end positionally

    def __init__(self, row: ThreadRow, client: "AgentMemory", *, llm: Llm | SdkLlm | None | NotSet = NOTSET,
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
        return llm_module.get_llm() if self._llm is NOTSET else self._llm

    @property
    def memory_extraction_config(self) -> MemoryExtractionConfig:
        """The thread's extraction settings, field by field: this handle's (``get_thread``), else stored in
        ``Thread.config``, else the client's, else the defaults."""
        config = thread_config(self._row, default=self._client.memory_extraction_config)
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

    def add_messages(self, messages: Sequence[Any],
                     metadata: dict[str, Any] | None | list[dict[str, Any] | None] | NotSet = NOTSET,
                     ttl_days: int | None | list[int | None] | NotSet = NOTSET,
                     ttl_anchor: TimeToLiveAnchor | str | list[TimeToLiveAnchor | str] | NotSet = NOTSET,
                     **store_kwargs: Any) -> list[str]:
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
        reject_unknown(store_kwargs, "add_messages")
        with inflight(self._row.pk):
            ids = messages_add(thread=self._row, messages=messages, metadata=metadata, ttl_days=ttl_days,
                                        ttl_anchor=ttl_anchor, retention=self._client.retention_config,
                                        image_limits=self.image_input_limit_config, llm=self.llm)
            extraction_after_add(thread=self._row, llm=self.llm, config=self.memory_extraction_config,
                                            retention=self._client.retention_config)
        return ids

    def get_messages(self, *, start: int | None | NotSet = NOTSET, end: int | None | NotSet = NOTSET,
                     include_image_bytes: bool | NotSet = NOTSET, **kwargs: Any) -> list[Message]:
        """Return live messages in chronological order (see ``selectors.message_list`` for start/end).

        Image parts are ``ImageContent`` with ``bytes=None`` unless
        ``include_image_bytes=True`` (one query for all their bytes).
        """
        reject_unknown(kwargs, "get_messages")
        return selectors.message_list(thread=self._row, start=start, end=end, window=settings.OAM_MESSAGE_WINDOW,
                                      include_image_bytes=_or(include_image_bytes, False))

    async def get_messages_async(self, start: int | None | NotSet = NOTSET, end: int | None | NotSet = NOTSET,
                                 include_image_bytes: bool | NotSet = NOTSET, **kwargs: Any) -> list[Message]:
        """Asynchronous twin of :meth:`get_messages` (positional ``start``/``end`` allowed, as the SDK's twin)."""
        return await in_worker(self.get_messages, start=start, end=end, include_image_bytes=include_image_bytes,
                               **kwargs)

    def get_message(self, message_id: str, *, included_image_ids: list[str] | None | NotSet = NOTSET,
                    **kwargs: Any) -> Message:
        """Return one message of this thread. Raises KeyError if absent, expired or another thread's.

        Image parts carry their id, MIME type and description; the bytes of
        those whose ids are in ``included_image_ids`` are loaded (other ids are ignored).
        """
        reject_unknown(kwargs, "get_message")
        return selectors.message_get(thread=self._row, message_id=message_id,
                                     included_image_ids=_or(included_image_ids, None))

    def update_message(self, message_id: str,
                       content: str | Sequence[MessageContent | Mapping[str, Any]] | NotSet = NOTSET,
                       metadata: dict[str, Any] | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                       ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, **kwargs: Any) -> str:
        """Update content, metadata or expiry of a message of this exact thread; return its id.

        Raises KeyError when the message is absent, expired or another thread's.
        New content of a message already extracted is re-extracted (with its
        earlier history as context) when extraction is on: before this returns
        in INLINE mode, queued in BACKGROUND mode; existing memories stay.
        New content replaces the message's images: image parts with bytes are
        new images, an image part with only the id of an attached image keeps
        it, and attached images left out are deleted (``services.message_update``).
        """
        reject_unknown(kwargs, "update_message")
        with inflight(self._row.pk):
            updated = message_update(thread=self._row, message_id=message_id, content=content,
                                              metadata=metadata, ttl_days=ttl_days, ttl_anchor=ttl_anchor,
                                              retention=self._client.retention_config,
                                              image_limits=self.image_input_limit_config, llm=self.llm)
            if content is not NOTSET:
                extraction_after_edit(thread=self._row, message_id=updated, llm=self.llm,
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
        return message_delete(thread=self._row, message_id=message_id)

    def wait_for_memory_extraction(self, timeout: float | None = 300) -> None:
        """Wait for background extraction this process accepted for the thread before the call (spec).

        Includes work a concurrent ``add_messages``/``update_message`` of this
        process is about to accept; failed extraction counts as finished.
        ``timeout`` in seconds, None to wait without limit. Raises
        ``TimeoutError`` when it expires first; TypeError/ValueError for a bad timeout.
        """
        wait_for_extraction(thread_id=self._row.pk, timeout=check_timeout(timeout))

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
        with inflight(self._row.pk):
            job = extraction_after_add(
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

    def add_memory(self, content: str, *, memory_type: str | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                   agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                   memory_id: str | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                   timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                   ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, status: RecordStatus | str | NotSet = NOTSET,
                   autonomous_linking: bool | NotSet = NOTSET, memory_id_to_link: str | NotSet = NOTSET,
                   link_type: str | NotSet = NOTSET, link_id: str | NotSet = NOTSET,
                   link_timestamp: str | None | NotSet = NOTSET, link_metadata: dict[str, Any] | None | NotSet = NOTSET,
                   **store_kwargs: Any) -> str:
        """Store a manual memory and index it; return its id (``memory_id`` when given).

        ``memory_id_to_link`` with ``link_type`` (a built-in relation) also
        stores a relation from the new memory to that memory of this thread, in
        the same transaction; omitted scopes then inherit from the target
        (``services.memory_add``, ``memory.links.writes.pending_link``). ``autonomous_linking`` (default on when
        the thread has an LLM) then lets the LLM relate the new memory to its
        nearest memories (``memory.links.autonomous.propose_links``); an LLM failure is
        logged and leaves the memory stored. Raises ValueError for an unknown
        ``memory_type`` (allowed: memory, fact, guideline, preference), a taken
        id, or bad link arguments.

        With the thread's ``review_added_memories`` (``MemoryExtractionConfig``, default False) a memory of
        a ``review_memory_types`` type is stored awaiting review (``memory.records.review_rules``): no read returns it,
        and no relation is made from it (ValueError naming ``memory_id_to_link`` for link arguments),
        until it is approved.
        """
        reject_unknown(store_kwargs, "add_memory")
        if autonomous_linking is not NOTSET and not isinstance(autonomous_linking, bool):
            raise TypeError("autonomous_linking: must be a bool")
        tenant = self._client.tenant
        user_id, agent_id = tenant.fill("user_id", user_id), tenant.fill("agent_id", agent_id)
        if tenant.restricted and thread_id is not NOTSET and thread_id is not None and thread_id != self.thread_id:
            try:  # another thread, which must be one of the restricted client's own
                self._client.thread_row(check_id(thread_id, "thread_id"))
            except NotFound:
                raise OutOfScope("thread_id", "a restricted client can give only the ids of its own threads") from None
        memory_id = memory_add(
            thread=self._row, content=content, memory_type=memory_type, user_id=user_id, agent_id=agent_id,
            thread_id=thread_id, memory_id=memory_id, metadata=_or(metadata, None), timestamp=_or(timestamp, None),
            ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status, retention=self._client.retention_config,
            memory_id_to_link=memory_id_to_link, link_type=link_type, link_id=link_id, link_timestamp=link_timestamp,
            link_metadata=link_metadata, link_restrict=tenant.row_filter(),
            review_types=self.memory_extraction_config.review_types(extracted=False),
        )
        llm = self.llm if autonomous_linking is not False else None
        if llm is not None:
            try:
                propose_links(self._row, memory_id, llm, restrict=tenant.row_filter())
            except LlmError as exc:  # spec: "Failure leaves the memory stored."
                logger.warning("autonomous linking of memory %s failed: %s", memory_id, exc)
        return memory_id

    def update_memory(self, memory_id: str, content: str | NotSet = NOTSET,
                      metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                      ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                      status: RecordStatus | str | NotSet = NOTSET, **kwargs: Any) -> str:
        """Update a memory-like record owned by this exact thread; return its id.

        Raises KeyError when absent, expired or another thread's.
        """
        reject_unknown(kwargs, "update_memory")
        if self._client.tenant.restricted:
            self.get_memory(memory_id)  # another user's/agent's record in this thread is "not found"
        return memory_update(thread=self._row, memory_id=memory_id, content=content, metadata=metadata,
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
        return memory_delete(thread=self._row, memory_id=memory_id)

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

    def add_image(self, image: bytes, description: str | None | NotSet = NOTSET,
                  mime_type: ImageMimeType | str | None | NotSet = NOTSET, image_id: str | None | NotSet = NOTSET,
                  user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                  thread_id: str | None | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                  timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                  ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, **store_kwargs: Any) -> str:
        """Store one image owned by this thread; return its id (spec: add_image).

        ``image`` is validated (PNG, JPEG or WEBP; size, pixel count, no
        animation, not corrupt or truncated: ``memory.records.image_rules``) against the
        thread's ``image_input_limit_config``; ``mime_type`` omitted is
        detected, given must match the bytes. ``description`` omitted or None
        is a caption by the thread's LLM; without an LLM it is refused
        (ValueError naming ``description``, as the SDK). ``user_id``/``agent_id``/``thread_id`` must equal the
        thread's when given. Raises ValueError for a refused image or a
        mismatch (``Conflict`` for a taken ``image_id``), TypeError for
        unknown keywords, ``memory.llm.adapters.LlmError`` when captioning fails (nothing stored).
        """
        reject_unknown(store_kwargs, "add_image")
        llm = self.llm
        return image_add(
            thread=self._row, image=image, description=description, mime_type=_or(mime_type, None),
            image_id=image_id, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
            metadata=_or(metadata, None), timestamp=_or(timestamp, None),
            ttl_days=ttl_days, ttl_anchor=ttl_anchor, retention=self._client.retention_config,
            limits=self.image_input_limit_config, llm=llm, caption_required=True,
        )

    def update_image(self, image_id: str, image: bytes | NotSet = NOTSET, description: str | None | NotSet = NOTSET,
                     mime_type: ImageMimeType | str | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                     **kwargs: Any) -> str:
        """Update an image owned by this thread; return its id (spec: update_image).

        Omitted values are kept; new ``image`` bytes need ``mime_type``;
        ``description=None`` asks the thread's LLM for a new caption. Raises
        ValueError for expiration settings on an image attached to a message
        (use ``update_message``), KeyError when the image is absent, expired or
        another thread's. See ``services.image_update``.
        """
        reject_unknown(kwargs, "update_image")
        return image_update(
            thread=self._row, image_id=image_id, image=image, description=description, mime_type=mime_type,
            metadata=metadata, timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor,
            retention=self._client.retention_config, limits=self.image_input_limit_config, llm=self.llm,
        )

    def delete_image(self, image_id: str) -> int:
        """Delete an image owned by this thread; return 1, or 0 when absent or another thread's (spec: delete_image).

        Raises ValueError for an image attached to a message: delete or update the message instead.
        """
        return image_delete(thread=self._row, image_id=image_id)

    def list_images(self, image_id: str | None | NotSet = NOTSET,
                    metadata_filter: dict[str, Any] | None | NotSet = NOTSET, include_bytes: bool | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET, **kwargs: Any) -> list[ImageRecord]:
        """This thread's live images in store order (spec: list_images).

        Bytes are loaded only with ``include_bytes=True`` and an ``image_id``
        (ValueError without one). ``limit`` omitted: at most 100; None: all.
        See ``selectors.image_list``.
        """
        reject_unknown(kwargs, "list_images")
        return selectors.image_list(thread=self._row, image_id=image_id, metadata_filter=_or(metadata_filter, None),
                                    include_bytes=_or(include_bytes, False), limit=limit)

    def get_image(self, image_id: str, include_bytes: bool = False) -> ImageRecord:
        """Return one live image of this thread (KeyError otherwise). Not in the spec."""
        return selectors.image_get(thread=self._row, image_id=image_id, include_bytes=include_bytes)

    # --- relations ----------------------------------------------------------------

    def link_records(self, source_record_id: str, source_record_type: str, target_record_id: str,
                     target_record_type: str, relation_type: str, opposite_relation_type: str | NotSet = NOTSET,
                     relation_id: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET, **kwargs: Any) -> str:
        """Create a directed relation between two memory-like records of this thread; return its id.

        Built-in types get their fixed reverse label unless
        ``opposite_relation_type`` is given; custom types default to the same
        label. The target of supersedes/refines/duplicates becomes invalid.
        Raises ValueError for a self-link, an endpoint that is not a live
        memory-like record of this exact thread (or not of the given type), an
        already related pair (either orientation) or a taken ``relation_id``;
        TypeError for unknown keywords. See ``memory.links.writes.link_create``.
        """
        reject_unknown(kwargs, "link_records")
        return link_create(
            thread=self._row, source_record_id=source_record_id, source_record_type=source_record_type,
            target_record_id=target_record_id, target_record_type=target_record_type, relation_type=relation_type,
            opposite_relation_type=opposite_relation_type, relation_id=relation_id, timestamp=_or(timestamp, None),
            metadata=_or(metadata, None), restrict=self._client.tenant.row_filter(),
        )

    def update_record_link(self, relation_id: str, relation_type: str | NotSet = NOTSET,
                           opposite_relation_type: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                           metadata: dict[str, Any] | None | NotSet = NOTSET, **kwargs: Any) -> int:
        """Update a relation of this thread; return 1, or 0 when there is none (spec: update_record_link).

        Omitted values are preserved; a new built-in ``relation_type`` brings its
        fixed reverse label. See ``memory.links.writes.link_update``.
        """
        reject_unknown(kwargs, "update_record_link")
        return link_update(thread=self._row, relation_id=relation_id, relation_type=relation_type,
                                 opposite_relation_type=opposite_relation_type, timestamp=timestamp,
                                 metadata=metadata, restrict=self._client.tenant.row_filter())

    def delete_record_link(self, source_record_id: str | NotSet = NOTSET, source_record_type: str | NotSet = NOTSET,
                           target_record_id: str | NotSet = NOTSET, target_record_type: str | NotSet = NOTSET,
                           relation_type: str | NotSet = NOTSET, relation_id: str | NotSet = NOTSET,
                           **kwargs: Any) -> int:
        """Delete a relation of this thread by ``relation_id`` alone or the complete endpoint tuple; return 0 or 1.

        The tuple uses the stored source-to-target orientation. Raises
        ValueError for a mixed or incomplete selector. See ``memory.links.writes.link_delete``.
        """
        reject_unknown(kwargs, "delete_record_link")
        return link_delete(thread=self._row, source_record_id=source_record_id,
                                 source_record_type=source_record_type, target_record_id=target_record_id,
                                 target_record_type=target_record_type, relation_type=relation_type,
                                 relation_id=relation_id, restrict=self._client.tenant.row_filter())

    def get_record_link(self, relation_id: str) -> RecordRelation:
        """Return one relation of this thread (KeyError otherwise). Not in the spec.

        A restricted client does not see a relation to a record of another user
        or agent stored in its thread (``memory.links.writes.visible``): KeyError, as
        for an absent one; ``update_record_link``/``delete_record_link`` then
        answer 0 and ``link_records`` refuses such an endpoint as unknown.
        """
        return link_get(thread=self._row, relation_id=relation_id, restrict=self._client.tenant.row_filter())

    def record_links(self, record_id: str | None = None):
        """This thread's relations, oldest first, read lazily (``selectors.Records``, for paging); with
        ``record_id``, those touching it; a restricted client's as ``get_record_link`` says. Not in the spec."""
        return link_list(thread=self._row, record_id=record_id, restrict=self._client.tenant.row_filter())

    # --- search -------------------------------------------------------------------

    def search(self, query: str, *, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
               thread_id: str | None | NotSet = NOTSET, exact_user_match: bool | NotSet = NOTSET,
               exact_agent_match: bool | NotSet = NOTSET, exact_thread_match: bool | NotSet = NOTSET,
               max_results: int | NotSet = NOTSET, token_budget: int | None | NotSet = NOTSET,
               soft_token_budget: int | None | NotSet = NOTSET, record_types: list[str] | None | NotSet = NOTSET,
               metadata_filter: dict[str, Any] | None | NotSet = NOTSET, num_hops: int | NotSet = NOTSET,
               max_linked_results: int | NotSet = NOTSET, include_invalid_results: bool | NotSet = NOTSET,
               scope: SearchScope | None | NotSet = NOTSET, **kwargs: Any) -> list[SearchResult]:
        """Search records relevant to ``query``, best first (spec: OracleThread.search).

        Omitted scope fields inherit the thread's: exact user and agent, this
        thread's id with ``exact_thread_match=False``. ``num_hops`` (0-5)
        attaches to each direct memory result the memories reached through
        relations (``SearchResult.linked``, at most ``max_linked_results``,
        default 100, each). Raises ValueError if ``scope`` is combined with
        explicit scope arguments, ``max_results`` < 1, ``num_hops`` is outside
        0-5, ``max_linked_results`` < 0, or ``metadata_filter`` is not a dict or None.
        """
        reject_unknown(kwargs, "search")
        return run_search(
            query, tenant=self._client.tenant, defaults=self.default_scope, config=self.search_config,
            scope=_or(scope, None),
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, max_results=max_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, record_types=record_types,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            num_hops=num_hops, max_linked_results=max_linked_results,
        )

    # --- summaries and context cards ------------------------------------------------

    def get_summary(self, except_last: int | NotSet = NOTSET, token_budget: int | None | NotSet = NOTSET,
                    **kwargs: Any) -> OracleSummary:
        """Return a summary of the thread, or of all but its last ``except_last`` messages (spec: get_summary).

        Whole thread: the durable summary, refreshed with the thread's LLM when
        it does not cover the latest message. ``except_last`` leaves the
        durable summary unchanged. Without an LLM: a transcript of the latest
        messages, at most 4,000 characters. See ``memory.context.summaries.summary_get``.
        Raises TypeError for unknown keywords.
        """
        reject_unknown(kwargs, "get_summary")
        return summaries.summary_get(thread=self._row, except_last=except_last, token_budget=token_budget,
                                   llm=self.llm)

    def get_context_card(self, fallback_message_count: int | NotSet = NOTSET,
                         max_relevant_results: int | NotSet = NOTSET, token_budget: int | None | NotSet = NOTSET,
                         soft_token_budget: int | None | NotSet = NOTSET, max_recent_messages: int | NotSet = NOTSET,
                         except_last_messages: int | NotSet = NOTSET,
                         min_relevant_results_by_type: Mapping[str, int] | None | NotSet = NOTSET,
                         metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                         include_invalid_results: bool | NotSet = NOTSET, **kwargs: Any) -> OracleContextCard:
        """Return a context card: summary, topics, relevant records, recent messages (spec: get_context_card).

        Searches with this thread's default scope (``exact_thread_match=False``).
        Rules and errors: ``memory.context.cards.context_card_build``; unknown
        keywords raise TypeError, a nonzero ``except_last_messages`` with
        ``max_recent_messages`` neither 0 nor equal to it raises ValueError.
        """
        return cards.context_card_build(
            thread=self._row, scope=self.default_scope, search_config=self.search_config, llm=self.llm,
            fallback_message_count=fallback_message_count, max_relevant_results=max_relevant_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, max_recent_messages=max_recent_messages,
            except_last_messages=except_last_messages, min_relevant_results_by_type=min_relevant_results_by_type,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            **kwargs,
        )

    # --- memory history (not in the spec; memory.records.history) ------------------------------------

    def get_memory_history(self, memory_id: str, *, unreviewed: bool = True) -> list[MemoryVersionRecord]:
        """The history of a memory-like record of this thread, oldest version first (``memory.records.history``).

        Each entry says who acted (API key, staff user, extraction job, TTL
        expiry, relation), when, before -> after and why. Answers for a deleted
        memory too, until its user is erased. A restricted client sees only its
        own user's and agent's. ``unreviewed=False``: none for a memory awaiting
        review or rejected in review (what an API read key gets). Raises
        KeyError when the thread has no history of that id.
        """
        return history.history_list(project_id=self.project.pk, memory_id=memory_id, thread_id=self._row.pk,
                                    restrict=self._client.tenant.row_filter(), unreviewed=unreviewed)

    def restore_memory_version(self, memory_id: str, version: int) -> int:
        """Undo: restore version ``version`` of a memory of this thread as a new version; return its number.

        Content, type, metadata, status, expiry and event time come back and the
        search chunks are re-indexed (``services.memory_restore``). Raises
        KeyError for a missing memory or version, ValueError/TypeError for bad arguments.
        """
        return memory_restore(thread=self._row, memory_id=memory_id, version=version,
                                       restrict=self._client.tenant.row_filter())

    async def get_memory_history_async(self, memory_id: str, *, unreviewed: bool = True) -> list[MemoryVersionRecord]:
        """Asynchronous twin of :meth:`get_memory_history` (same arguments, result and errors)."""
        return await in_worker(self.get_memory_history, memory_id, unreviewed=unreviewed)

    async def restore_memory_version_async(self, memory_id: str, version: int) -> int:
        """Asynchronous twin of :meth:`restore_memory_version` (same arguments, result and errors)."""
        return await in_worker(self.restore_memory_version, memory_id, version)
