"""``AgentMemory``: the client of one project (the SDK's ``OracleAgentMemory``); every method has an
``_async`` twin.

The class holds the client's state (project, tenant, LLM, configs) and its waits; its methods come
from one mixin per group of the SDK: ``agent_threads``, ``agent_records``, ``agent_search`` and
``agent_subjects`` (this package).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from enum import Enum
from typing import Any

from django.conf import settings

from memory.client.agent_records import AgentRecords
from memory.client.agent_search import AgentSearch
from memory.client.agent_subjects import AgentSubjects
from memory.client.agent_threads import AgentThreads
from memory.client.common import (
    SdkLlm,
    _check_search_config,
    _given,
    _or,
    _WithAsyncTwins,
)
from memory.core.aio import in_worker
from memory.core.errors import InvalidArgument, NotFound
from memory.core.ids import stored_id
from memory.core.types import (
    NOTSET,
    MemoryRetentionConfig,
    MemorySearchConfig,
    NotSet,
)
from memory.extraction.config import MemoryExtractionConfig
from memory.extraction.tracker import accepted_threads, check_timeout, wait_for_extraction
from memory.llm.adapters import Llm, as_llm
from memory.models import (
    Project as ProjectRow,
)
from memory.models import (
    Thread as ThreadRow,
)
from memory.records import selectors
from memory.records.image_rules import ImageInputLimitConfig
from memory.records.tenancy import Tenant, get_project
from memory.search.request import check_mode

logger = logging.getLogger(__name__)


class AgentMemory(AgentThreads, AgentRecords, AgentSearch, AgentSubjects, _WithAsyncTwins):
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
    ``oracleagentmemory.Llm``, is wrapped by ``memory.llm.adapters.as_llm``; anything else is a TypeError here);
    ``memory_extraction_config`` (client level; ``extract_memories`` and ``memory_extraction_custom_instructions``
    are laid over it field by field) is the base every thread's own config is laid
    over, field by field; ``image_input_limit_config`` likewise for image limits.

    The SDK's storage arguments are accepted and ignored (typed ``object`` where the SDK's type has no
    counterpart here), the database being Django's (``settings.DATABASES``: SQLite here, Oracle when configured):
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
