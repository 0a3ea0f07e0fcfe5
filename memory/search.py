"""Search over every record kind in one query on ``oam_search_chunks``.

Flow (ARCHITECTURE.md, "search"): resolve the scope by the spec's rules →
embed the query → one SQL query over the chunks filtered by scope, record
types, status, expiry and metadata filter, ranked by ``VectorDistance`` in the
database → one result per record (its best chunk) → token budgets →
``SearchResult`` list, best first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from memory.chunking import estimate_tokens
from memory.embedders import get_embedder
from memory.errors import InvalidArgument, InvalidType
from memory.fields import VectorDistance
from memory.metadata_filter import compile_filter
from memory.models import RECORD_TYPES, Memory, Message, SearchChunk
from memory.selectors import live_q, memory_dto, message_dto
from memory.types import NOTSET, MemorySearchConfig, SearchResult, SearchScope

# Chunks fetched per wanted result, so that records split into several chunks
# still leave max_results distinct records after de-duplication.
CHUNK_OVERFETCH = 3


def resolve_scope(
    defaults: SearchScope,
    *,
    user_id: Any = NOTSET,
    agent_id: Any = NOTSET,
    thread_id: Any = NOTSET,
    exact_user_match: Any = NOTSET,
    exact_agent_match: Any = NOTSET,
    exact_thread_match: Any = NOTSET,
    scope: Any = None,
) -> SearchScope:
    """Apply the spec's scope rules (search: Notes).

    ``scope`` is exclusive with the explicit identifier and exact-match
    arguments (ValueError). Omitted arguments inherit ``defaults``: for a
    thread, its user, agent and thread ids with exact user and agent matching
    and ``exact_thread_match=False``.
    """
    explicit = {
        "user_id": user_id, "agent_id": agent_id, "thread_id": thread_id,
        "exact_user_match": exact_user_match, "exact_agent_match": exact_agent_match,
        "exact_thread_match": exact_thread_match,
    }
    given = {k: v for k, v in explicit.items() if v is not NOTSET}
    if scope is not None:
        if given:
            raise InvalidArgument("scope", "give either scope or the explicit identifier and exact-match arguments, not both")
        if not isinstance(scope, SearchScope):
            raise InvalidType("scope", "must be a SearchScope")
        return scope
    for name in ("exact_user_match", "exact_agent_match", "exact_thread_match"):
        if name in given and not isinstance(given[name], bool):
            raise InvalidType(name, "must be a bool")
    for name in ("user_id", "agent_id", "thread_id"):
        if name in given and given[name] is not None and not isinstance(given[name], str):
            raise InvalidType(name, "must be a string or None")
    return SearchScope(**{**defaults.__dict__, **given})


def scope_q(scope: SearchScope) -> Q:
    """Filter for chunk scope columns: an exact dimension with a value (None included) must match."""
    q = Q()
    for column, exact in (("user_id", scope.exact_user_match), ("agent_id", scope.exact_agent_match),
                          ("thread_id", scope.exact_thread_match)):
        value = getattr(scope, column)
        if value is NOTSET or not exact:
            continue
        q &= Q(**{f"{column}__isnull": True}) if value is None else Q(**{column: value})
    return q


def check_record_types(record_types: Any) -> list[str]:
    """Validate ``record_types``: a list of known type names (None/omitted means all)."""
    if record_types is NOTSET or record_types is None:
        return list(RECORD_TYPES)
    if isinstance(record_types, str) or not isinstance(record_types, (list, tuple, set, frozenset)):
        raise InvalidType("record_types", "must be a list of record type names")
    unknown = [t for t in record_types if t not in RECORD_TYPES]
    if unknown:
        raise InvalidArgument("record_types", f"unknown type(s) {unknown}; allowed: {', '.join(RECORD_TYPES)}")
    if not record_types:
        raise InvalidArgument("record_types", "must not be empty")
    return list(record_types)


def check_max_results(max_results: Any, default: int) -> int:
    """``max_results``: omitted gives the default (10); given must be an int of at least 1."""
    if max_results is NOTSET:
        return default
    if not isinstance(max_results, int) or isinstance(max_results, bool):
        raise InvalidType("max_results", "must be an int")
    if max_results < 1:
        raise InvalidArgument("max_results", "must be at least 1")
    return max_results


def _check_budget(value: Any, default: int | None, field: str) -> int | None:
    if value is NOTSET:
        value = default
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, "must be an int or None")
    return value if value > 0 else None


def apply_token_budgets(results: list[SearchResult], token_budget: int | None,
                        soft_token_budget: int | None) -> list[SearchResult]:
    """Trim ranked results to the spec's budgets on their formatted text.

    Hard ``token_budget``: keep complete results in rank order while the
    cumulative estimate fits; if the first does not fit, none. Soft
    ``soft_token_budget``: keep results up to and including the one whose
    cumulative estimate reaches the target. ``None`` disables either. Tokens
    are estimated by ``memory.chunking.estimate_tokens``.
    """
    kept, total = [], 0
    for result in results:
        cost = estimate_tokens(result.formatted_content)
        if token_budget is not None and total + cost > token_budget:
            break
        kept.append(result)
        total += cost
        if soft_token_budget is not None and total >= soft_token_budget:
            break
    return kept


@dataclass
class SearchRequest:
    """A validated search: what ``search_records`` needs."""

    query: str
    scope: SearchScope
    record_types: list[str]
    metadata_filter: dict | None
    include_invalid_results: bool
    max_results: int
    token_budget: int | None
    soft_token_budget: int | None


def build_request(
    query: Any,
    *,
    scope: SearchScope,
    config: MemorySearchConfig,
    max_results: Any = NOTSET,
    token_budget: Any = NOTSET,
    soft_token_budget: Any = NOTSET,
    record_types: Any = NOTSET,
    metadata_filter: Any = None,
    include_invalid_results: Any = True,
) -> SearchRequest:
    """Validate search arguments against the spec; defaults come from ``config``."""
    if not isinstance(query, str):
        raise InvalidType("query", "must be a string")
    if metadata_filter is NOTSET:
        metadata_filter = None
    if metadata_filter is not None and not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    if not isinstance(include_invalid_results, bool):
        raise InvalidType("include_invalid_results", "must be a bool")
    return SearchRequest(
        query=query,
        scope=scope,
        record_types=check_record_types(record_types),
        metadata_filter=metadata_filter,
        include_invalid_results=include_invalid_results,
        max_results=check_max_results(max_results, config.max_results),
        token_budget=_check_budget(token_budget, config.token_budget, "token_budget"),
        soft_token_budget=_check_budget(soft_token_budget, config.soft_token_budget, "soft_token_budget"),
    )


def chunk_queryset(request: SearchRequest, query_vector, now=None):
    """The ranked chunk query for ``request`` (also compiled for Oracle in tests)."""
    now = now or timezone.now()
    filters = live_q(now) & scope_q(request.scope) & Q(record_type__in=request.record_types)
    filters &= compile_filter(request.metadata_filter)
    if not request.include_invalid_results:
        filters &= Q(status="valid")
    limit = request.max_results * CHUNK_OVERFETCH
    return (
        SearchChunk.objects.filter(filters)
        .annotate(distance=VectorDistance("embedding", query_vector))
        .order_by("distance", "id")
        .values_list("source_kind", "record_id", "distance")[:limit]
    )


def search_records(request: SearchRequest) -> list[SearchResult]:
    """Run a validated search; results ordered by decreasing relevance (increasing distance)."""
    now = timezone.now()
    query_vector = get_embedder().embed([request.query])[0]
    best: dict[tuple[str, str], float] = {}
    for kind, record_id, distance in chunk_queryset(request, query_vector, now):
        best.setdefault((kind, record_id), float(distance))
        if len(best) == request.max_results:
            break
    by_kind: dict[str, list[str]] = {}
    for kind, record_id in best:
        by_kind.setdefault(kind, []).append(record_id)
    records = {}
    if ids := by_kind.get("message"):
        for row in Message.objects.filter(live_q(now), pk__in=ids):
            records[("message", row.pk)] = message_dto(row)
    if ids := by_kind.get("memory"):
        for row in Memory.objects.filter(live_q(now), pk__in=ids):
            records[("memory", row.pk)] = memory_dto(row)
    results = [
        SearchResult(record=records[key], distance=dist, score=1.0 - dist)
        for key, dist in best.items()
        if key in records
    ]
    return apply_token_budgets(results, request.token_budget, request.soft_token_budget)
