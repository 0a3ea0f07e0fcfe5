"""``AgentMemory``'s threads (SDK: create_thread, get_thread, update_thread, list_threads, delete_thread),
as the mixin ``AgentThreads``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.client.common import (
    SEARCH_CONFIG_KEY,
    THREAD_SETTINGS,
    SdkLlm,
    _check_search_config,
    _check_setting,
    _given,
    _or,
    _search_config_data,
)
from memory.client.thread import Thread
from memory.core.aio import in_worker
from memory.core.errors import InvalidArgument, NotFound
from memory.core.ids import stored_id
from memory.core.types import (
    NOTSET,
    MemorySearchConfig,
    NotSet,
)
from memory.extraction.config import DEPRECATED_INLINE_PARAMETERS, MemoryExtractionConfig, resolve_extraction_config
from memory.extraction.tracker import detach, thread_config
from memory.llm import adapters as llm_module
from memory.llm.adapters import Llm, as_llm
from memory.records import listing
from memory.records.image_rules import THREAD_CONFIG_KEY as IMAGE_LIMITS_KEY
from memory.records.image_rules import ImageInputLimitConfig
from memory.records.validators import check_id, reject_unknown
from memory.services.threads import thread_create, thread_delete, thread_update


class AgentThreads:
    """A project's threads: create, open, update, list and delete them, with their settings.

    The client's state (``project``, ``tenant``, ``llm``, the configs) is ``AgentMemory``'s, which mixes
    this class in (``memory.client.agent``).
    """

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
