from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from django.db.models import Q

from memory.core import conf
from memory.core.errors import MAX_QUERY_CHARS, InvalidArgument, InvalidType, check_size, check_text
from memory.core.ids import stored_id
from memory.core.types import NOTSET, MemorySearchConfig, NotSet, SearchResult, SearchScope
from memory.core.valid_time import check_instant
from memory.links.rules import check_max_linked_results, check_num_hops
from memory.models import RECORD_TYPES
from memory.records.metadata_filter import compile_filter

# Depth of each ranked list before fusion: fusion needs more than the final
# top k from each arm to find records ranked well by two arms.
ARM_DEPTH = 100


SEARCH_MODES = ("VECTOR", "KEYWORD", "HYBRID")


# Function words dropped from keyword queries: they match almost every turn
# and drown the content words in BM25 (LoCoMo BM25 recall@10 0.502 -> 0.563
# with this list, before stemming).
STOPWORDS = frozenset(
    "a an the and or of to in on at for with is are was were be been being did do does done what when where "
    "who whom whose which why how that this these those it its as by from has have had having i you he she "
    "they we my your his her their our me him them us will would can could should shall may might must about "
    "into than then there here so if not no yes any some all also just very too up out over under again "
    "more most other such only own same both each few".split()
)


MAX_KEYWORD_TERMS = 32


_WORD = re.compile(r"\w+", re.UNICODE)


#: A client search's defaults (SDK ``OracleAgentMemory._default_search_scope``): no ids, exact user and agent,
#: ``exact_thread_match=False``; an omitted agent or thread is unconstrained (``_resolve_scope_exact``).
CLIENT_SCOPE = SearchScope(user_id=None, agent_id=None, thread_id=None, exact_user_match=True,
                           exact_agent_match=True, exact_thread_match=False)


#: An operator's project-wide search (``AgentMemory.search_project``, not in the SDK): an omitted id stays open,
#: a given one matches exactly unless its flag says otherwise.
OPERATOR_SCOPE = SearchScope(exact_user_match=True, exact_agent_match=True, exact_thread_match=True)


_DIMENSIONS = ("user", "agent", "thread")


def _check_scope_values(values: dict[str, Any]) -> None:
    """The given ids are strings or None, the given exact flags bools (TypeError naming the field)."""
    for name, value in values.items():
        if value is NOTSET:
            continue
        if name.startswith("exact_") and not isinstance(value, bool):
            raise InvalidType(name, "must be a bool")
        if name.endswith("_id") and value is not None and not isinstance(value, str):
            raise InvalidType(name, "must be a string or None")


def resolve_scope(
    defaults: SearchScope,
    *,
    client: bool = False,
    user_id: str | None | NotSet = NOTSET,
    agent_id: str | None | NotSet = NOTSET,
    thread_id: str | None | NotSet = NOTSET,
    exact_user_match: bool | NotSet = NOTSET,
    exact_agent_match: bool | NotSet = NOTSET,
    exact_thread_match: bool | NotSet = NOTSET,
    scope: Any = None,
) -> SearchScope:
    """Apply the spec's and the SDK's scope rules (spec: search Notes; SDK ``oracleagentmemory`` 26.8.0).

    ``scope`` is exclusive with the explicit identifier and exact-match
    arguments (ValueError). Either way, every field left unset (``NOTSET``,
    in ``scope`` too) takes its value from ``defaults``:

    * a thread's search (``client=False``): the thread's user, agent and id
      with exact user and agent matching and ``exact_thread_match=False``
      (SDK ``OracleThread._prepare_scope``).
    * a client search (``client=True``, ``defaults`` = ``CLIENT_SCOPE``): the
      user must be given (``user_id=...``, None for records with no user, or
      in ``scope``), else ValueError "client searches require explicit user
      scoping"; an omitted agent or thread is unconstrained; a given one
      takes its exact flag, else the default (agent exact, thread not);
      ``exact_user_match`` resolving to False is a ValueError (SDK
      ``OracleAgentMemory._validate_search_scope``, ``_resolve_scope_exact``).

    Returns a scope with every exact flag a bool.
    """
    explicit = {
        "user_id": user_id, "agent_id": agent_id, "thread_id": thread_id,
        "exact_user_match": exact_user_match, "exact_agent_match": exact_agent_match,
        "exact_thread_match": exact_thread_match,
    }
    if scope is not None:
        if any(v is not NOTSET for v in explicit.values()):
            raise InvalidArgument("scope",
                                  "give either scope or the explicit identifier and exact-match arguments, not both")
        if not isinstance(scope, SearchScope):
            raise InvalidType("scope", "must be a SearchScope")
        explicit = {name: getattr(scope, name) for name in explicit}
    _check_scope_values(explicit)
    if client and explicit["user_id"] is NOTSET:
        raise InvalidArgument("user_id", "client searches require explicit user scoping: pass user_id=..., "
                                         "user_id=None, or scope=SearchScope(user_id=...)")
    resolved: dict[str, Any] = {}
    for dimension in _DIMENSIONS:
        field, exact = f"{dimension}_id", f"exact_{dimension}_match"
        value, flag = explicit[field], explicit[exact]
        resolved[field] = getattr(defaults, field) if value is NOTSET else value
        if client and value is NOTSET and getattr(defaults, field) is None:
            resolved[exact] = False  # an omitted dimension stays open on a client search
        else:
            resolved[exact] = getattr(defaults, exact) if flag is NOTSET else flag
    if client and not resolved["exact_user_match"]:
        raise InvalidArgument("exact_user_match", "client searches require exact user scoping: do not set "
                                                  "exact_user_match=False")
    return SearchScope(**resolved)


def scope_q(scope: SearchScope, project_id: int) -> Q:
    """Filter for chunk (or memory) rows of project ``project_id`` in ``scope``.

    The project always applies. Within it, an exact dimension with a value
    (None included) must match; ``scope.thread_id`` is a public id, compared
    with the stored one (``memory.core.ids.stored_id``). ``scope`` is normally
    resolved (``resolve_scope``); an exact flag left unset counts as True for
    a given value, as the spec's defaults have it.
    """
    q = Q(project_id=project_id)
    for column, exact in (("user_id", scope.exact_user_match), ("agent_id", scope.exact_agent_match),
                          ("thread_id", scope.exact_thread_match)):
        value = getattr(scope, column)
        if value is NOTSET or exact is False:
            continue
        if value is None:
            q &= Q(**{f"{column}__isnull": True})
        else:
            q &= Q(**{column: stored_id(project_id, value) if column == "thread_id" else value})
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


#: Most results one search returns (the SDK's ``_MAX_SEARCH_RESULTS``): a caller cannot page a store out.
MAX_SEARCH_RESULTS = 1000


def check_max_results(max_results: Any, default: int) -> int:
    """``max_results``: omitted gives the default (10); given must be an int from 1 to ``MAX_SEARCH_RESULTS``."""
    if max_results is NOTSET:
        return default
    if not isinstance(max_results, int) or isinstance(max_results, bool):
        raise InvalidType("max_results", "must be an int")
    if max_results < 1:
        raise InvalidArgument("max_results", "must be at least 1")
    if max_results > MAX_SEARCH_RESULTS:
        raise InvalidArgument("max_results", f"must be at most {MAX_SEARCH_RESULTS} (the maximum allowed search "
                                             "result count)")
    return max_results


def _check_budget(value: Any, default: int | None, field: str) -> int | None:
    if value is NOTSET:
        value = default
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, "must be an int or None")
    return value if value > 0 else None


#: Characters per token of the budget estimate (the SDK 26.8.0's ``_estimate_text_tokens``).
BUDGET_CHARS_PER_TOKEN = 3.5


def estimate_budget_tokens(text: str) -> int:
    """Tokens of ``text`` as the search and context-card budgets count them: ``max(1, round(len / 3.5))``
    (Python's round: halves to even), the SDK's estimate, so the same budget keeps the same results."""
    return max(1, int(round(len(text) / BUDGET_CHARS_PER_TOKEN)))


def apply_token_budgets(results: list[SearchResult], token_budget: int | None,
                        soft_token_budget: int | None) -> list[SearchResult]:
    """Trim ranked results to the spec's budgets on their formatted text.

    Hard ``token_budget``: keep complete results in rank order while the
    cumulative estimate fits; if the first does not fit, none. Soft
    ``soft_token_budget``: keep results up to and including the one whose
    cumulative estimate reaches the target. ``None`` disables either. Tokens
    are estimated by ``estimate_budget_tokens`` (3.5 characters a token, as the SDK).
    """
    kept, total = [], 0
    for result in results:
        cost = estimate_budget_tokens(result.formatted_content)
        if token_budget is not None and total + cost > token_budget:
            break
        kept.append(result)
        total += cost
        if soft_token_budget is not None and total >= soft_token_budget:
            break
    return kept


def check_mode(mode: Any) -> str:
    """A search mode name (VECTOR, KEYWORD, HYBRID; case-insensitive)."""
    if not isinstance(mode, str) or mode.upper() not in SEARCH_MODES:
        raise InvalidArgument("mode", f"must be one of: {', '.join(SEARCH_MODES)}")
    return mode.upper()


def keyword_terms(query: str) -> list[str]:
    """Content words of a query for the keyword arms: lower-cased word tokens
    (letters, digits, underscore; apostrophes split words like the FTS5
    tokenizer does), stopwords dropped, duplicates removed, at most 32 kept.

    Linear in the query: words are read lazily and reading stops at the
    32nd term (a list membership test per word made a 1 MB query
    cost 152 CPU-seconds).
    """
    seen: dict[str, None] = {}
    for match in _WORD.finditer(query):
        for word in _WORD.findall(match.group().lower()):  # lower() may split a word ("İ" -> "i" + U+0307)
            if word not in STOPWORDS and word not in seen:
                seen[word] = None
                if len(seen) == MAX_KEYWORD_TERMS:
                    return list(seen)
    return list(seen)


@dataclass
class SearchRequest:
    """A validated search: what ``search_records`` needs. ``project_id``: the project searched."""

    query: str
    project_id: int
    scope: SearchScope
    record_types: list[str]
    metadata_filter: dict | None
    include_invalid_results: bool
    max_results: int
    token_budget: int | None
    soft_token_budget: int | None
    mode: str = "HYBRID"
    num_hops: int = 0
    max_linked_results: int = 100
    #: Valid time (issue #32): only memory-like records whose validity window contains this instant (aware UTC);
    #: None, no filter. Messages and images have no window and always pass (``selectors.valid_at_q``).
    valid_at: datetime | None = None
    #: ``filter_sql``'s last compiled WHERE clause, with the inputs it was compiled from.
    _where: tuple | None = field(default=None, init=False, repr=False, compare=False)


def build_request(
    query: Any,
    *,
    project_id: int,
    scope: SearchScope,
    config: MemorySearchConfig,
    max_results: int | NotSet = NOTSET,
    token_budget: int | None | NotSet = NOTSET,
    soft_token_budget: int | None | NotSet = NOTSET,
    record_types: list[str] | None | NotSet = NOTSET,
    metadata_filter: Any = None,
    include_invalid_results: Any = True,
    mode: str | NotSet = NOTSET,
    num_hops: int | NotSet = NOTSET,
    max_linked_results: int | NotSet = NOTSET,
    valid_at: datetime | date | str | None | NotSet = NOTSET,
) -> SearchRequest:
    """Validate search arguments against the spec; defaults come from ``config``.

    ``valid_at`` (issue #32, not in the spec): a datetime, date or ISO-8601 string (no zone: UTC); only memories
    whose validity window ``[valid_from, valid_to)`` contains it are found or linked (a NULL bound is open, so a
    memory without a window always is); messages and images are not filtered. Omitted or None: no filter.
    TypeError/ValueError naming ``valid_at`` for a bad value (``memory.core.valid_time.check_instant``).

    ``mode`` (not in the spec) picks the ranking: VECTOR, KEYWORD or HYBRID;
    omitted, ``config.mode``, else ``settings.OAM_SEARCH_MODE`` (default HYBRID).
    ``num_hops`` (0-5, default 0) and ``max_linked_results`` (>= 0, default
    100) ask for linked memories (``memory.links``).
    """
    if mode is NOTSET:
        mode = config.mode or conf.get("OAM_SEARCH_MODE")
    if not isinstance(query, str):
        raise InvalidType("query", "must be a string")
    check_size(query, "query", MAX_QUERY_CHARS)
    check_text(query, "query")
    if metadata_filter is NOTSET:
        metadata_filter = None
    if metadata_filter is not None and not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    # every rule and bound checked now, even when no SQL runs (a card of an empty thread)
    compile_filter(metadata_filter)
    if not isinstance(include_invalid_results, bool):
        raise InvalidType("include_invalid_results", "must be a bool")
    return SearchRequest(
        query=query,
        project_id=project_id,
        scope=scope,
        record_types=check_record_types(record_types),
        metadata_filter=metadata_filter,
        include_invalid_results=include_invalid_results,
        max_results=check_max_results(max_results, config.max_results),
        token_budget=_check_budget(token_budget, config.token_budget, "token_budget"),
        soft_token_budget=_check_budget(soft_token_budget, config.soft_token_budget, "soft_token_budget"),
        mode=check_mode(mode),
        num_hops=check_num_hops(num_hops),
        max_linked_results=check_max_linked_results(max_linked_results),
        valid_at=check_instant(None if valid_at is NOTSET else valid_at, "valid_at"),
    )


SCOPE_ARGUMENTS = ("user_id", "agent_id", "thread_id", "exact_user_match", "exact_agent_match", "exact_thread_match")
