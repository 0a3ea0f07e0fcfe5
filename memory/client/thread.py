"""``Thread``: one conversation thread of ``AgentMemory`` (the SDK's ``OracleThread``); every method has an
``_async`` twin.

The class holds the handle's state (the stored row, the client, the LLM, the resolved configs); its methods
come from one mixin per group of the spec: ``thread_messages``, ``thread_memories``, ``thread_images``,
``thread_links`` and ``thread_search`` (this package).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from memory.client.common import SEARCH_CONFIG_KEY, THREAD_SETTINGS, SdkLlm, _search_config_data, _WithAsyncTwins
from memory.client.thread_images import ThreadImages
from memory.client.thread_links import ThreadLinks
from memory.client.thread_memories import ThreadMemories
from memory.client.thread_messages import ThreadMessages
from memory.client.thread_search import ThreadSearch
from memory.core.types import NOTSET, MemorySearchConfig, NotSet, SearchScope
from memory.extraction.config import MemoryExtractionConfig
from memory.extraction.tracker import thread_config
from memory.llm import adapters as llm_module
from memory.llm.adapters import Llm, as_llm
from memory.models import Thread as ThreadRow
from memory.records.image_rules import THREAD_CONFIG_KEY as IMAGE_LIMITS_KEY
from memory.records.image_rules import ImageInputLimitConfig

if TYPE_CHECKING:
    from memory.client.agent import AgentMemory


class Thread(ThreadMessages, ThreadMemories, ThreadImages, ThreadLinks, ThreadSearch, _WithAsyncTwins):
    """A handle on one stored thread (spec: OracleThread).

    Attributes ``thread_id``, ``user_id``, ``agent_id`` and ``metadata`` are
    the thread's scope as stored when the handle was made (``thread_id`` the
    caller's id; ``project`` the thread's project). Writes go through
    ``memory.services``; reads through ``memory.records.selectors``/``memory.search``,
    always in the thread's project.
    """

    _ASYNC = (
        "add_messages", "get_message", "get_recent_messages", "update_message", "delete_message",
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
