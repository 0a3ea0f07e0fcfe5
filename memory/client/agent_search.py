"""``AgentMemory``'s reads across threads (SDK: search, list_messages, list_memories, list_images; not in
the SDK: search_project), as the mixin ``AgentSearch``."""

from __future__ import annotations

from typing import Any

from memory.client.common import (
    _SEARCH_ARGUMENTS,
    _extensions,
    _or,
)
from memory.core.types import (
    NOTSET,
    ImageRecord,
    MemoryRecord,
    Message,
    NotSet,
    SearchResult,
    SearchScope,
)
from memory.records import listing
from memory.records.validators import reject_unknown
from memory.search.ranking import run_search
from memory.search.request import CLIENT_SCOPE, OPERATOR_SCOPE


class AgentSearch:
    """A project's records found by query (search) or by scope and metadata (the lists).

    The client's state (``project``, ``tenant``, ``llm``, the configs) is ``AgentMemory``'s, which mixes
    this class in (``memory.client.agent``).
    """

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
        ``exact_thread_match=True``. See ``memory.search.request.resolve_scope``. ``valid_at`` and ``as_of`` (issue
        #32, in ``kwargs``): as ``Thread.search``.
        """
        extensions = _extensions(kwargs, "valid_at", "as_of")
        valid_at = extensions.get("valid_at", NOTSET)
        reject_unknown(kwargs, "search")
        return run_search(
            query, tenant=self.tenant, defaults=CLIENT_SCOPE, client=True, config=self.search_config,
            scope=_or(scope, None),
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, max_results=max_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, record_types=record_types,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            num_hops=num_hops, max_linked_results=max_linked_results, valid_at=valid_at,
            as_of=extensions.get("as_of"),
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

    def list_messages(self, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                      thread_id: str | None | NotSet = NOTSET, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                      limit: int | None | NotSet = NOTSET,
                      include_image_bytes: bool | NotSet = NOTSET) -> list[Message]:
        """Live messages of this project, oldest first, filtered by scope and metadata (``memory.records.listing``)."""
        return listing.messages(tenant=self.tenant, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
                                metadata_filter=metadata_filter, limit=limit, include_image_bytes=include_image_bytes)

    def list_memories(self, user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                      thread_id: str | None | NotSet = NOTSET, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                      limit: int | None | NotSet = NOTSET, **kwargs: Any) -> list[MemoryRecord]:
        """Live memory-like records of this project, oldest first, filtered by scope and metadata and, with
        ``valid_at=`` (issue #32, not in the SDK, so in ``kwargs``: a datetime, date or ISO-8601 string), to
        those whose validity window ``[valid_from, valid_to)`` contains that instant (``memory.records.listing``).
        ``as_of=`` (issue #32, recorded time, in ``kwargs`` too): the memories as the store held them at that
        instant, an ``AsOfRecords`` list (``listing.memories_as_of``; ``metadata_filter`` is not combined with it).
        TypeError for another keyword."""
        window = _extensions(kwargs, "valid_at", "as_of")
        reject_unknown(kwargs, "list_memories")
        if window.get("as_of") is not None:
            return listing.memories_as_of(tenant=self.tenant, user_id=user_id, agent_id=agent_id,
                                          thread_id=thread_id, metadata_filter=metadata_filter, limit=limit, **window)
        window.pop("as_of", None)
        return listing.memories(tenant=self.tenant, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
                                metadata_filter=metadata_filter, limit=limit, **window)

    def list_images(self, image_id: str | None | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                    agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                    metadata_filter: dict[str, Any] | None | NotSet = NOTSET, include_bytes: bool | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET) -> list[ImageRecord]:
        """Live standalone images of this project, oldest first (``memory.records.listing.images``)."""
        return listing.images(tenant=self.tenant, image_id=image_id, user_id=user_id, agent_id=agent_id,
                              thread_id=thread_id, metadata_filter=metadata_filter, include_bytes=include_bytes,
                              limit=limit)
