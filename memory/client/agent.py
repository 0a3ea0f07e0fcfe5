"""``AgentMemory``: the client of one project (the SDK's ``OracleAgentMemory``); every method has an
``_async`` twin."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from enum import Enum
from memory.core.types import (
    AgentProfileRecord,
    ImageMimeType,
    ImageRecord,
    MemoryRecord,
    MemoryRetentionConfig,
    MemorySearchConfig,
    Message,
    NOTSET,
    NotSet,
    RecordStatus,
    SearchResult,
    SearchScope,
    TimeToLiveAnchor,
    UserProfileRecord,
)
from typing import Any
from memory.extraction.config import DEPRECATED_INLINE_PARAMETERS, MemoryExtractionConfig, resolve_extraction_config
from memory.records.image_rules import THREAD_CONFIG_KEY as IMAGE_LIMITS_KEY, ImageInputLimitConfig
from memory.models import (
    Image as ImageRow,
    Memory as MemoryRow,
    Profile as ProfileRow,
    Project as ProjectRow,
    RecordLink as RecordLinkRow,
    Thread as ThreadRow,
)
from memory.core.errors import InvalidArgument, NotFound
from memory.client.common import SEARCH_CONFIG_KEY, THREAD_SETTINGS
from memory.records.tenancy import Tenant, get_project
from memory.core.ids import stored_id
from memory.llm.adapters import Llm, as_llm
from memory.services import erasure, profiles
from memory.core.aio import in_worker
from memory.records import listing, selectors
from memory.llm import adapters as llm_module
from django.conf import settings
import logging

from memory.records.validators import check_id, reject_unknown
from memory.services.threads import thread_create, thread_delete, thread_update
from memory.services.memories import memory_delete_by_id, memory_update
from memory.extraction.tracker import accepted_threads, check_timeout, detach, thread_config, wait_for_extraction
from memory.search.ranking import run_search
from memory.search.request import CLIENT_SCOPE, OPERATOR_SCOPE, check_mode
from memory.client.common import (
    _given,
    _or,
    _check_setting,
    _search_config_data,
    _check_search_config,
    _SEARCH_ARGUMENTS,
    _WithAsyncTwins,
    SdkLlm,
)
from memory.client.thread import Thread

logger = logging.getLogger(__name__)


class AgentMemory(_WithAsyncTwins):
    """Entry point of the Python API: creates, opens, deletes and searches threads of one project.

    ``project``: a ``memory.models.Project`` or its slug; omitted,
    the ``default`` project (``memory.records.tenancy.get_project``; KeyError for an
    unknown slug). Every thread, record and search of this client and of the
    handles it makes is in that project, and ids are unique within it only.
    ``tenant`` (instead of ``project``): a ``memory.records.tenancy.Tenant``, a project
    with an optional fixed user and agent; such a client sees, writes and
    searches only that user's and agent's threads and records (others are not
    found; naming them raises ``OutOfScope``, a ValueError).
    ``memory_retention_config`` (SDK name; ``retention_config`` is its earlier
    name here, TypeError when both are given) defaults to the settings
    ``OAM_DEFAULT_TTL_DAYS`` and ``OAM_MAX_TTL_DAYS``; ``search_config`` to
    ``MemorySearchConfig()``; ``llm`` (extraction, summaries, context cards) to
    ``memory.llm.adapters.get_llm()``, and None means none (an object with the SDK's ``ILlm.generate()``, such as
    ``oracleagentmemory.Llm``, is wrapped by ``memory.llm.adapters.as_llm``; anything else is a TypeError here); ``memory_extraction_config``
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

    def __init__(self, *, store: object | NotSet = NOTSET, connection: object | NotSet = NOTSET,
                 embedder: object | NotSet = NOTSET, llm: Llm | SdkLlm | None | NotSet = NOTSET,
                 memory_extraction_config: MemoryExtractionConfig | None | NotSet = NOTSET,
                 image_input_limit_config: ImageInputLimitConfig | None | NotSet = NOTSET,
                 schema_policy: object | NotSet = NOTSET, memory_store_id: str | NotSet = NOTSET,
                 table_name_prefix: str | NotSet = NOTSET, schema_owner: str | NotSet = NOTSET,
                 search_strategy: str | Enum | None | NotSet = NOTSET, search_index_sync: object | NotSet = NOTSET,
                 extract_memories: bool | NotSet = NOTSET,
                 memory_extraction_custom_instructions: str | None | NotSet = NOTSET,
                 memory_retention_config: MemoryRetentionConfig | None | NotSet = NOTSET,
                 search_config: MemorySearchConfig | None | NotSet = NOTSET, pruner_llm: None | NotSet = NOTSET,
                 project: str | ProjectRow | None = None, tenant: Tenant | None = None,
                 retention_config: MemoryRetentionConfig | None | NotSet = NOTSET):
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
        inline = _given(
            extract_memories=extract_memories,
            memory_extraction_custom_instructions=memory_extraction_custom_instructions,
        )
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
            search = dataclasses.replace(search, mode=check_mode(mode))
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

    def _thread_settings(self, arguments: dict[str, Any], stacklevel: int = 4) -> dict[str, Any]:
        """Check the thread-level settings of create/get/update_thread; return those given (None: omitted).

        ``arguments``: the calling method's arguments by name (its ``locals()`` on entry): the configs,
        ``extract_memories``, the deprecated inline parameters (``DEPRECATED_INLINE_PARAMETERS``) and the
        runtime settings it takes (``THREAD_SETTINGS``), each ``NOTSET`` when omitted.
        """
        inline = _given(**{name: arguments[name] for name in DEPRECATED_INLINE_PARAMETERS})
        config = resolve_extraction_config(_or(arguments["memory_extraction_config"], None), inline,
                                           stacklevel=stacklevel)
        if arguments["extract_memories"] is not NOTSET:
            config = MemoryExtractionConfig(extract_memories=arguments["extract_memories"]).merged_over(config)
        limits = _or(arguments["image_input_limit_config"], None)
        if limits is not None and not isinstance(limits, ImageInputLimitConfig):
            raise TypeError("image_input_limit_config: must be an ImageInputLimitConfig or None")
        given = {name: arguments[name] for name in THREAD_SETTINGS if arguments.get(name, NOTSET) is not NOTSET}
        return {"memory_extraction_config": config, IMAGE_LIMITS_KEY: limits,
                SEARCH_CONFIG_KEY: _check_search_config(arguments["search_config"]),
                **{name: _check_setting(name, value) for name, value in given.items()}}

    def _check_llm(self, llm: Any, config: MemoryExtractionConfig | None) -> None:
        """The SDK refuses extraction without an LLM: ValueError when ``extract_memories=True`` was asked for
        (here or in the client's config) and the thread would have no LLM. An omitted ``extract_memories``
        with no LLM leaves extraction off (a server without an LLM still stores threads)."""
        if config is None or "extract_memories" not in config.given_fields or not config.extract_memories:
            return
        resolved = _or(llm, self.llm)
        if resolved is NOTSET:
            resolved = llm_module.get_llm()
        if resolved is None:
            raise InvalidArgument("llm", "extract_memories=True needs an LLM; pass llm=... or "
                                         "extract_memories=False")

    def create_thread(self, *, thread_id: str | None | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                      agent_id: str | None | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                      llm: Llm | SdkLlm | None | NotSet = NOTSET, max_message_token_length: int | NotSet = NOTSET,
                      message_shortening_input_token_limit: int | NotSet = NOTSET,
                      memory_extraction_config: MemoryExtractionConfig | None | NotSet = NOTSET,
                      image_input_limit_config: ImageInputLimitConfig | None | NotSet = NOTSET,
                      search_config: MemorySearchConfig | None | NotSet = NOTSET,
                      context_card_token_limit: int | NotSet = NOTSET,
                      context_card_type_search_concurrency: int | NotSet = NOTSET,
                      extract_memories: bool | NotSet = NOTSET, memory_extraction_window: int | NotSet = NOTSET,
                      context_summary_update_frequency: int | NotSet = NOTSET,
                      memory_extraction_frequency: int | NotSet = NOTSET,
                      memory_extraction_token_limit: int | NotSet = NOTSET,
                      memory_extraction_custom_instructions: str | None | NotSet = NOTSET,
                      memory_extraction_inherit_message_metadata: bool | Sequence[str] | NotSet = NOTSET,
                      enable_context_summary: bool | NotSet = NOTSET, **kwargs: Any) -> Thread:
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
        arguments = dict(locals())
        llm = as_llm(llm)  # before anything is stored: TypeError for what is no LLM
        persist = kwargs.pop("persist_messages_in_config", False)
        if not isinstance(persist, bool):
            raise TypeError("persist_messages_in_config: must be a bool")  # accepted; always False here (SDK, DB store)
        reject_unknown(kwargs, "create_thread")
        given = self._thread_settings(arguments)
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
        row = thread_create(project=self.project, thread_id=thread_id, user_id=user_id, agent_id=agent_id,
                                     metadata=_or(metadata, None), config=stored or None)
        return Thread(row, self, llm=llm)

    def get_thread(self, thread_id: str, *, llm: Llm | SdkLlm | None | NotSet = NOTSET,
                   max_message_token_length: int | NotSet = NOTSET,
                   message_shortening_input_token_limit: int | NotSet = NOTSET,
                   memory_extraction_config: MemoryExtractionConfig | None | NotSet = NOTSET,
                   image_input_limit_config: ImageInputLimitConfig | None | NotSet = NOTSET,
                   search_config: MemorySearchConfig | None | NotSet = NOTSET,
                   context_card_token_limit: int | NotSet = NOTSET,
                   context_card_type_search_concurrency: int | NotSet = NOTSET,
                   extract_memories: bool | NotSet = NOTSET, memory_extraction_window: int | NotSet = NOTSET,
                   context_summary_update_frequency: int | NotSet = NOTSET,
                   memory_extraction_frequency: int | NotSet = NOTSET,
                   memory_extraction_token_limit: int | NotSet = NOTSET,
                   memory_extraction_custom_instructions: str | None | NotSet = NOTSET,
                   memory_extraction_inherit_message_metadata: bool | Sequence[str] | NotSet = NOTSET,
                   enable_context_summary: bool | NotSet = NOTSET) -> Thread:
        """Return a handle on a stored thread of this client's project (and tenant); KeyError when there is none.

        The settings (as ``create_thread``'s) apply to this handle only, laid over the stored ones field by
        field; nothing is stored (``update_thread`` stores them).
        """
        arguments = dict(locals())
        llm = as_llm(llm)  # before anything is stored: TypeError for what is no LLM
        overrides = self._thread_settings(arguments)
        self._check_llm(llm, overrides["memory_extraction_config"])
        return Thread(self.thread_row(thread_id), self, llm=llm,
                      overrides={k: v for k, v in overrides.items() if v is not None})

    def update_thread(self, thread_id: str, metadata: dict[str, Any] | None | NotSet = NOTSET,
                      llm: Llm | SdkLlm | None | NotSet = NOTSET, extract_memories: bool | NotSet = NOTSET,
                      max_message_token_length: int | NotSet = NOTSET,
                      message_shortening_input_token_limit: int | NotSet = NOTSET,
                      memory_extraction_window: int | NotSet = NOTSET,
                      context_summary_update_frequency: int | NotSet = NOTSET,
                      memory_extraction_frequency: int | NotSet = NOTSET,
                      memory_extraction_token_limit: int | NotSet = NOTSET,
                      context_card_token_limit: int | NotSet = NOTSET, enable_context_summary: bool | NotSet = NOTSET,
                      memory_extraction_custom_instructions: str | None | NotSet = NOTSET,
                      memory_extraction_inherit_message_metadata: bool | Sequence[str] | NotSet = NOTSET,
                      memory_extraction_config: MemoryExtractionConfig | None | NotSet = NOTSET,
                      image_input_limit_config: ImageInputLimitConfig | None | NotSet = NOTSET,
                      search_config: MemorySearchConfig | None | NotSet = NOTSET, **kwargs: Any) -> Thread:
        """Store a thread's metadata and settings; return a fresh handle (SDK: ``update_thread``).

        ``metadata`` replaces the stored object (omitted: unchanged; None: cleared). The settings are
        ``create_thread``'s, laid over the stored ones field by field; ``llm`` applies to the returned
        handle only. KeyError when the thread is not in this project; TypeError/ValueError for bad values.
        """
        arguments = dict(locals())
        reject_unknown(kwargs, "update_thread")
        llm = as_llm(llm)  # before anything is stored: TypeError for what is no LLM
        given = self._thread_settings(arguments)
        row = self.thread_row(thread_id)
        changes: dict[str, Any] = {}
        config = given.pop("memory_extraction_config")
        if config is not None:
            merged = config.merged_over(thread_config(row, default=self.memory_extraction_config))
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
        row = thread_update(thread=row, metadata=metadata, config_changes=changes or None)
        return Thread(row, self, llm=llm)

    async def update_thread_async(self, thread_id: str, metadata: dict[str, Any] | None | NotSet = NOTSET,
                                  **kwargs: Any) -> Thread:
        """Asynchronous twin of :meth:`update_thread` (settings by keyword, as the SDK's twin)."""
        return await in_worker(self.update_thread, thread_id, metadata, **kwargs)

    # --- client-level records (SDK: OracleAgentMemory) ------------------------------------------------

    def _owner(self, model, record_id: Any, field: str) -> Thread:
        """A handle on the thread owning record ``record_id`` of ``model`` in this project; KeyError when none."""
        key = stored_id(self.project.pk, check_id(record_id, field))
        owner = model.objects.filter(pk=key).values_list("thread_id", flat=True).first()
        if owner is None:
            raise NotFound(field, record_id)
        row = ThreadRow.objects.filter(pk=owner, project=self.project).first()
        if row is None or not self.tenant.allows(row):
            raise NotFound(field, record_id)
        return Thread(row, self)

    def list_threads(self, user_id: str | None, agent_id: str | None | NotSet = NOTSET,
                     metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                     limit: int | None | NotSet = NOTSET) -> list[Thread]:
        """Threads of one user (None: threads with no user), oldest first, as handles (SDK: ``list_threads``,
        which returns ``ThreadRecord``s; a handle has the same ``thread_id``/``user_id``/``agent_id``/``metadata``
        and its settings through ``_to_config()``). ``agent_id`` and ``metadata_filter`` (search grammar)
        filter; ``limit`` as ``memory.records.listing.check_limit``."""
        rows = listing.thread_rows(tenant=self.tenant, user_id=user_id, agent_id=agent_id,
                                   metadata_filter=metadata_filter, limit=limit)
        return [Thread(row, self) for row in rows]

    def list_messages(self, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                      thread_id: str | None | NotSet = NOTSET, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                      limit: int | None | NotSet = NOTSET,
                      include_image_bytes: bool | NotSet = NOTSET) -> list[Message]:
        """Live messages of this project, oldest first, filtered by scope and metadata (``memory.records.listing``)."""
        return listing.messages(tenant=self.tenant, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
                                metadata_filter=metadata_filter, limit=limit, include_image_bytes=include_image_bytes)

    def list_memories(self, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                      thread_id: str | None | NotSet = NOTSET, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                      limit: int | None | NotSet = NOTSET) -> list[MemoryRecord]:
        """Live memory-like records of this project, oldest first, filtered by scope and metadata."""
        return listing.memories(tenant=self.tenant, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
                                metadata_filter=metadata_filter, limit=limit)

    def list_images(self, image_id: str | None | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                    agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                    metadata_filter: dict[str, Any] | None | NotSet = NOTSET, include_bytes: bool | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET) -> list[ImageRecord]:
        """Live standalone images of this project, oldest first (``memory.records.listing.images``)."""
        return listing.images(tenant=self.tenant, image_id=image_id, user_id=user_id, agent_id=agent_id,
                              thread_id=thread_id, metadata_filter=metadata_filter, include_bytes=include_bytes,
                              limit=limit)

    def add_memory(self, content: str, *, memory_type: str | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                   agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                   memory_id: str | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                   timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                   ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, status: RecordStatus | str | NotSet = NOTSET,
                   autonomous_linking: bool | NotSet = NOTSET, memory_id_to_link: str | NotSet = NOTSET,
                   link_type: str | NotSet = NOTSET, link_id: str | NotSet = NOTSET,
                   link_timestamp: str | None | NotSet = NOTSET, link_metadata: dict[str, Any] | None | NotSet = NOTSET,
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

    def update_memory(self, memory_id: str, content: str | NotSet = NOTSET,
                      metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                      ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                      status: RecordStatus | str | NotSet = NOTSET, **kwargs: Any) -> str:
        """Update a live memory-like record of this project by id, whatever thread owns it or none (SDK:
        ``OracleAgentMemory.update_memory``; arguments as ``Thread.update_memory``). Found and scoped as
        ``delete_memory`` finds them (``services.memory_update`` with ``project`` and the tenant's ``allows``):
        a restricted client updates its own user's and agent's records, in any thread. KeyError when there
        is none, it expired, or it is outside a restricted client's user and agent."""
        reject_unknown(kwargs, "update_memory")
        return memory_update(project=self.project, allows=self.tenant.allows, memory_id=memory_id,
                                      content=content, metadata=metadata, timestamp=timestamp, ttl_days=ttl_days,
                                      ttl_anchor=ttl_anchor, status=status, retention=self.retention_config)

    def add_image(self, image: bytes, description: str | None | NotSet = NOTSET,
                  mime_type: ImageMimeType | str | None | NotSet = NOTSET, image_id: str | None | NotSet = NOTSET,
                  user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                  thread_id: str | None | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                  timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                  ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, **store_kwargs: Any) -> str:
        """Store an image in a thread of this project (``Thread.add_image``); ``thread_id`` is required here
        (ValueError without one, KeyError for an unknown thread)."""
        if thread_id is NOTSET or thread_id is None:
            raise InvalidArgument("thread_id", "required: images are stored through a thread here")
        handle = Thread(self.thread_row(thread_id), self)
        return handle.add_image(image, description=description, mime_type=mime_type, image_id=image_id,
                                user_id=user_id, agent_id=agent_id, metadata=metadata, timestamp=timestamp,
                                ttl_days=ttl_days, ttl_anchor=ttl_anchor, **store_kwargs)

    def update_image(self, image_id: str, image: bytes | NotSet = NOTSET, description: str | None | NotSet = NOTSET,
                     mime_type: ImageMimeType | str | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                     **kwargs: Any) -> str:
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
                     target_record_type: str, relation_type: str, opposite_relation_type: str | NotSet = NOTSET,
                     relation_id: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
        """Relate two memory-like records of this project (``Thread.link_records`` on the source's thread:
        both must be of the same thread here; KeyError for an unknown source)."""
        return self._owner(MemoryRow, source_record_id, "source_record_id").link_records(
            source_record_id, source_record_type, target_record_id, target_record_type, relation_type,
            opposite_relation_type=opposite_relation_type, relation_id=relation_id, timestamp=timestamp,
            metadata=metadata)

    def update_record_link(self, relation_id: str, relation_type: str | NotSet = NOTSET,
                           opposite_relation_type: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                           metadata: dict[str, Any] | None | NotSet = NOTSET) -> int:
        """Update a relation of this project by id (``Thread.update_record_link``); 1, or 0 when none."""
        try:
            handle = self._owner(RecordLinkRow, relation_id, "relation_id")
        except NotFound:
            return 0
        return handle.update_record_link(relation_id, relation_type=relation_type,
                                         opposite_relation_type=opposite_relation_type, timestamp=timestamp,
                                         metadata=metadata)

    def delete_record_link(self, source_record_id: str | NotSet = NOTSET, source_record_type: str | NotSet = NOTSET,
                           target_record_id: str | NotSet = NOTSET, target_record_type: str | NotSet = NOTSET,
                           relation_type: str | NotSet = NOTSET, relation_id: str | NotSet = NOTSET) -> int:
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
        timeout = check_timeout(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        for key in accepted_threads(prefix=stored_id(self.project.pk, "")):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            wait_for_extraction(thread_id=key, timeout=left)

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
        A restricted client deletes only threads of its user (agent), and the
        memories in them scoped to another user or agent survive, detached
        from the thread (``services.thread_delete``'s ``spare``).
        """
        key = stored_id(self.project.pk, check_id(thread_id, "thread_id"))
        try:
            self.thread_row(thread_id)  # a user-restricted client may only delete its user's threads
        except NotFound:
            return 0
        deleted = thread_delete(project=self.project, thread_id=thread_id,
                                         spare=self.tenant.row_filter() or None)
        detach(key)
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
        key = stored_id(self.project.pk, check_id(memory_id, "memory_id"))
        owner = MemoryRow.objects.filter(pk=key).values_list("thread_id", flat=True).first()
        if owner is not None:
            wait_for_extraction(thread_id=owner, timeout=300)
        return memory_delete_by_id(project=self.project, memory_id=memory_id, allows=self.tenant.allows)

    def erase_user(self, user_id: str, cascade: bool = True, *, requested_by: str = "python") -> erasure.Erasure:
        """Erase everything this project holds about one end user and return the receipt (GDPR Art. 17).

        Not in the SDK, which returns a count (``delete_user``). Waits first,
        up to 300 s in all, for background extraction this process accepted
        for the user's threads (``TimeoutError`` then, nothing erased); then
        ``memory.services.erasure.subject_erase``: the user's threads with all they
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

        ``cascade=False`` deletes the profile row only (``memory.services.profiles``) and returns 1 when there was
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
        key = check_id(value, f"{subject}_id")
        had_profile = ProfileRow.objects.filter(project=self.project, kind=subject, subject_id=key).exists()
        return int(self._erase(subject, value, True, "python").found or had_profile)

    # --- profiles (SDK: add_user, add_agent, list_users, list_agents) -----------------------------------

    def add_user(self, user_id: str, information: str, metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
        """Store (or replace) a user's profile: free-form ``information`` and ``metadata``; return ``user_id``
        (``memory.services.profiles.profile_add``)."""
        return profiles.profile_add(tenant=self.tenant, kind="user", subject_id=user_id, information=information,
                                    metadata=metadata)

    def add_agent(self, agent_id: str, information: str, metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
        """Store (or replace) an agent's profile; return ``agent_id`` (see ``add_user``)."""
        return profiles.profile_add(tenant=self.tenant, kind="agent", subject_id=agent_id, information=information,
                                    metadata=metadata)

    def list_users(self, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                   limit: int | None | NotSet = NOTSET) -> list[UserProfileRecord]:
        """User profiles of this project, oldest first (``memory.services.profiles.profile_list``)."""
        return profiles.profile_list(tenant=self.tenant, kind="user", metadata_filter=metadata_filter, limit=limit)

    def list_agents(self, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET) -> list[AgentProfileRecord]:
        """Agent profiles of this project, oldest first (``memory.services.profiles.profile_list``)."""
        return profiles.profile_list(tenant=self.tenant, kind="agent", metadata_filter=metadata_filter, limit=limit)

    def _erase(self, subject: str, value: Any, cascade: Any, requested_by: str) -> erasure.Erasure:
        field = f"{subject}_id"
        value = check_id(value, field)
        if cascade:
            deadline = time.monotonic() + 300
            for key in erasure.subject_threads(self.tenant, subject, value):
                wait_for_extraction(thread_id=key, timeout=max(0.0, deadline - time.monotonic()))
        return erasure.subject_erase(tenant=self.tenant, subject=subject, value=value, cascade=cascade,
                                     requested_by=requested_by)

    def search(self, query: str, *, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
               thread_id: str | None | NotSet = NOTSET, exact_user_match: bool | NotSet = NOTSET,
               exact_agent_match: bool | NotSet = NOTSET, exact_thread_match: bool | NotSet = NOTSET,
               max_results: int | NotSet = NOTSET, token_budget: int | None | NotSet = NOTSET,
               soft_token_budget: int | None | NotSet = NOTSET, record_types: list[str] | None | NotSet = NOTSET,
               metadata_filter: dict[str, Any] | None | NotSet = NOTSET, num_hops: int | NotSet = NOTSET,
               max_linked_results: int | NotSet = NOTSET, include_invalid_results: bool | NotSet = NOTSET,
               scope: SearchScope | None | NotSet = NOTSET, **kwargs: Any) -> list[SearchResult]:
        """Search one user's records across threads (SDK: ``OracleAgentMemory.search``); same arguments as
        ``Thread.search``.

        The user must be given (``user_id=...``, ``user_id=None`` for records
        with no user, or ``scope=SearchScope(user_id=...)``) and matched
        exactly: ValueError otherwise. An omitted agent or thread is
        unconstrained; a given agent matches exactly unless
        ``exact_agent_match=False``, a given thread only with
        ``exact_thread_match=True``. See ``memory.search.request.resolve_scope``.
        """
        reject_unknown(kwargs, "search")
        return run_search(
            query, tenant=self.tenant, defaults=CLIENT_SCOPE, client=True, config=self.search_config,
            scope=_or(scope, None),
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, max_results=max_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, record_types=record_types,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            num_hops=num_hops, max_linked_results=max_linked_results,
        )

    def search_project(self, query: str, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                       thread_id: str | None | NotSet = NOTSET, exact_user_match: bool | NotSet = NOTSET,
                       exact_agent_match: bool | NotSet = NOTSET, exact_thread_match: bool | NotSet = NOTSET,
                       scope: SearchScope | None = None, **arguments: Any) -> list[SearchResult]:
        """Not in the SDK: an operator's search across every user, agent and thread of the project (staff pages).

        An omitted id leaves its dimension open; a given one matches exactly
        unless its ``exact_*_match`` is False. Other arguments and errors as
        ``search``. A client restricted to one user or agent (``Tenant``) is
        held to it (``OutOfScope``), as in every search.
        """
        reject_unknown({k: v for k, v in arguments.items() if k not in _SEARCH_ARGUMENTS}, "search_project")
        return run_search(
            query, tenant=self.tenant, defaults=OPERATOR_SCOPE, config=self.search_config, scope=scope,
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, **arguments,
        )
