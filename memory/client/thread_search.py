"""``Thread``'s reads for a prompt (spec: search, get_summary, get_context_card), as the mixin
``ThreadSearch``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory.client.common import _extensions, _or
from memory.context import summaries
from memory.core.types import NOTSET, NotSet, OracleContextCard, OracleSummary, SearchResult, SearchScope
from memory.records.validators import reject_unknown
from memory.search.ranking import run_search
from memory.services.cards import context_card_get


class ThreadSearch:
    """A thread's search over its scope, its summary and its context card.

    The handle's state (``_row``, ``_client``, ``llm``, the resolved configs) is ``Thread``'s, which mixes
    this class in (``memory.client.thread``).
    """

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

        ``valid_at=`` (issue #32, not in the spec, so in ``kwargs``): a datetime, date or ISO-8601 string (no zone:
        UTC); only memory-like records whose validity window ``[valid_from, valid_to)`` contains it are returned or
        linked (a memory without a window always is; messages and images are not filtered). TypeError/ValueError
        naming ``valid_at`` for a bad value (``memory.search.request.build_request``).

        ``as_of=`` (issue #32, recorded time, in ``kwargs`` too): a datetime, date or ISO-8601 string, not in the
        future: rank what the store held then (memories as they were, messages and images created by then), an
        ``AsOfRecords`` list (``memory.search.as_of``: vector ranking; ValueError naming ``metadata_filter`` or
        ``num_hops`` when given with it).
        """
        extensions = _extensions(kwargs, "valid_at", "as_of")
        valid_at = extensions.get("valid_at", NOTSET)
        reject_unknown(kwargs, "search")
        return run_search(
            query, tenant=self._client.tenant, defaults=self.default_scope, config=self.search_config,
            scope=_or(scope, None),
            user_id=user_id, agent_id=agent_id, thread_id=thread_id, exact_user_match=exact_user_match,
            exact_agent_match=exact_agent_match, exact_thread_match=exact_thread_match, max_results=max_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, record_types=record_types,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            num_hops=num_hops, max_linked_results=max_linked_results, valid_at=valid_at,
            as_of=extensions.get("as_of"),
        )

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
        ``valid_at=`` (issue #32, not in the spec, so in ``kwargs``) goes to every search of the card, as
        ``search`` takes it.

        Every card returned is logged (``memory.services.cards``). ``as_of=`` (issue #32, in ``kwargs``: a datetime,
        date or ISO-8601 string) answers instead the card this service returned for the thread with the same
        effective parameters at the latest time at or before it, equal to it (``content`` byte for byte), never a
        re-render: KeyError naming ``as_of`` when none was served then (or it was erased since), ValueError when
        the log is off (``OAM_CONTEXT_CARD_LOG_DAYS`` = 0).
        """
        as_of = _extensions(kwargs, "as_of").get("as_of", NOTSET)
        return context_card_get(
            thread=self._row, scope=self.default_scope, search_config=self.search_config, llm=self.llm,
            fallback_message_count=fallback_message_count, max_relevant_results=max_relevant_results,
            token_budget=token_budget, soft_token_budget=soft_token_budget, max_recent_messages=max_recent_messages,
            except_last_messages=except_last_messages, min_relevant_results_by_type=min_relevant_results_by_type,
            metadata_filter=_or(metadata_filter, None), include_invalid_results=_or(include_invalid_results, True),
            as_of=as_of, **kwargs,
        )
