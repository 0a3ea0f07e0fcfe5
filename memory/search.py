"""Search over every record kind on ``oam_search_chunks``: vector, keyword or hybrid.

Flow (ARCHITECTURE.md, "search"): resolve the scope by the spec's rules →
the same SQL filter (scope, record types, status, expiry, metadata filter)
for every ranked list ("arm") → one result per record → fusion → token
budgets → relations followed for ``num_hops`` (``memory.links``) →
``SearchResult`` list, best first.

Arms, each ranked in the database:

* ``vector``: ``VectorDistance`` (cosine) between the query embedding and the
  chunk embeddings (which carry the record's date, ``services.embedding_text``).
* ``text``: BM25 (SQLite FTS5) / ``SCORE`` (Oracle Text ``CONTAINS``) on the
  chunk's own words.
* ``context``: the same on the chunk's ``context``: a message with the two
  turns on each side.

HYBRID (the default) fuses all three by weighted reciprocal rank fusion
(Cormack, Clarke and Büttcher, SIGIR 2009): ``score = Σ w / (k + rank)`` with
``k = 10`` and weights vector 1, text 1, context 2. Measured on LoCoMo
(bench/locomo_import.py, 1,536 questions, per-user scope): evidence recall@10
0.742 against 0.444 for vectors alone, 0.502 for plain BM25 and 0.532 for
plain RRF (k=60) of the two (shared/data/locomo/SOURCE.md).

Two rules on top of the fusion (issue #16): in HYBRID a keyword match whose
BM25 carries no evidence (``MIN_BM25_EVIDENCE``) gets no rank credit, so a
turn is not lifted by words every turn has, its neighbours' included; and a
memory never outranks the memory that superseded, refined or duplicated it
(``after_replacements``).

Projects (issue #12): a search runs in one project (``SearchRequest.project_id``).
``filtered_chunks`` is the one place that filters chunks, and it always adds
``project_id``; the vector arm (SQLite cache, SQL ranking, Oracle's approximate
SQL), both keyword arms and graph expansion compile their WHERE clause from it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from django.conf import settings
from django.db import connection as default_connection
from django.db.models import Q
from django.utils import timezone

from memory.embedders import get_embedder
from memory.errors import MAX_QUERY_CHARS, InvalidArgument, InvalidType, check_size, check_sql_count, check_text
from memory.fields import VectorDistance
from memory.links import INVALIDATING_RELATIONS, attach_linked, check_max_linked_results, check_num_hops
from memory.metadata_filter import compile_filter
from memory.models import RECORD_TYPES, Image, Memory, Message, RecordLink, SearchChunk
from memory.selectors import image_dto, live_q, memory_dto, message_dto
from memory.tenancy import Tenant, stored_id
from memory.types import NOTSET, MemorySearchConfig, SearchResult, SearchScope
from memory.vector_cache import get_vector_cache, in_transaction_now, rounding_bound

# Chunks fetched per wanted result, so that records split into several chunks
# still leave max_results distinct records after de-duplication.
CHUNK_OVERFETCH = 3
# Depth of each ranked list before fusion: fusion needs more than the final
# top k from each arm to find records ranked well by two arms.
ARM_DEPTH = 100
SEARCH_MODES = ("VECTOR", "KEYWORD", "HYBRID")
#: Arm weights and RRF constant. Split: chosen on ALL ten LoCoMo conversations before the tuning/report split
#: existed (issue #16), so the report half is not unseen for them. Checked on the TUNING half only
#: (bench/locomo_import.py --reuse, HYBRID, recall@10): context weight 2 -> 0.750, 1 -> 0.729, 0.75 -> 0.720,
#: and the context arm limited to turns the text or vector arm found -> 0.749; kept at 2.
ARM_WEIGHTS = {"vector": 1.0, "text": 1.0, "context": 2.0}
RRF_K = 10
#: Name of the keyword index (migration 0004): the FTS5 table on SQLite; the
#: Oracle Text indexes are ``<name>_1`` (text) and ``<name>_2`` (context).
KEYWORD_INDEX = "oam_search_chunks_fts"

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
    user_id: Any = NOTSET,
    agent_id: Any = NOTSET,
    thread_id: Any = NOTSET,
    exact_user_match: Any = NOTSET,
    exact_agent_match: Any = NOTSET,
    exact_thread_match: Any = NOTSET,
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
            raise InvalidArgument("scope", "give either scope or the explicit identifier and exact-match arguments, not both")
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
    with the stored one (``memory.tenancy.stored_id``). ``scope`` is normally
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
    32nd term (issue #13: a list membership test per word made a 1 MB query
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
    #: ``filter_sql``'s last compiled WHERE clause, with the inputs it was compiled from.
    _where: tuple | None = field(default=None, init=False, repr=False, compare=False)


def build_request(
    query: Any,
    *,
    project_id: int,
    scope: SearchScope,
    config: MemorySearchConfig,
    max_results: Any = NOTSET,
    token_budget: Any = NOTSET,
    soft_token_budget: Any = NOTSET,
    record_types: Any = NOTSET,
    metadata_filter: Any = None,
    include_invalid_results: Any = True,
    mode: Any = NOTSET,
    num_hops: Any = NOTSET,
    max_linked_results: Any = NOTSET,
) -> SearchRequest:
    """Validate search arguments against the spec; defaults come from ``config``.

    ``mode`` (not in the spec) picks the ranking: VECTOR, KEYWORD or HYBRID;
    omitted, ``config.mode``, else ``settings.OAM_SEARCH_MODE`` (default HYBRID).
    ``num_hops`` (0-5, default 0) and ``max_linked_results`` (>= 0, default
    100) ask for linked memories (``memory.links``).
    """
    if mode is NOTSET:
        mode = config.mode or settings.OAM_SEARCH_MODE
    if not isinstance(query, str):
        raise InvalidType("query", "must be a string")
    check_size(query, "query", MAX_QUERY_CHARS)
    check_text(query, "query")
    if metadata_filter is NOTSET:
        metadata_filter = None
    if metadata_filter is not None and not isinstance(metadata_filter, dict):
        raise InvalidArgument("metadata_filter", "must be a dict or None")
    compile_filter(metadata_filter)  # every rule and bound checked now, even when no SQL runs (a card of an empty thread)
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
    )


SCOPE_ARGUMENTS = ("user_id", "agent_id", "thread_id", "exact_user_match", "exact_agent_match", "exact_thread_match")


def run_search(query: Any, *, tenant: Tenant, defaults: SearchScope, config: MemorySearchConfig,
               scope: Any = None, client: bool = False, **arguments: Any) -> list[SearchResult]:
    """Resolve the scope against ``defaults``, keep it within ``tenant``, validate, and search the tenant's
    project: the body of every public search.

    ``arguments`` are the spec's search arguments (``NOTSET`` when omitted):
    the scope ones go to ``resolve_scope`` (``client``: the client-search rules), the rest to ``build_request``.
    A restricted tenant's user and agent fill what the search leaves unset first (``Tenant.fill_scope``: a
    user-restricted client need not name its user). Errors as those two raise them; ``Tenant.limit_scope``
    raises ``OutOfScope`` (ValueError) for a scope beyond a restricted tenant's user or agent.
    """
    if isinstance(query, str) and not query.strip():
        raise InvalidArgument("query", "must not be empty")  # SDK 26.8.0: ValueError for an empty query
    scope_arguments = {name: arguments.pop(name) for name in SCOPE_ARGUMENTS if name in arguments}
    scope, scope_arguments = tenant.fill_scope(scope, scope_arguments)
    resolved = tenant.limit_scope(resolve_scope(defaults, client=client, scope=scope, **scope_arguments))
    return search_records(build_request(query, project_id=tenant.project.pk, scope=resolved, config=config,
                                        **arguments))


def filtered_chunks(request: SearchRequest, now=None):
    """Chunks that may be returned for ``request``: project, scope, types, status, expiry and metadata filter."""
    now = now or timezone.now()
    filters = live_q(now) & scope_q(request.scope, request.project_id) & Q(record_type__in=request.record_types)
    filters &= compile_filter(request.metadata_filter)
    if not request.include_invalid_results:
        filters &= Q(status="valid")
    return SearchChunk.objects.filter(filters)


def chunk_queryset(request: SearchRequest, query_vector, now=None, limit: int | None = None):
    """The vector arm: filtered chunks ranked by cosine distance (also compiled for Oracle in tests)."""
    limit = limit or request.max_results * CHUNK_OVERFETCH
    return (
        filtered_chunks(request, now)
        .annotate(distance=VectorDistance("embedding", query_vector))
        .order_by("distance", "id")
        .values_list("source_kind", "record_id", "distance")[:limit]
    )


def filter_sql(request: SearchRequest, now=None, connection=None) -> tuple[str, list]:
    """The WHERE clause (SQL, params) of ``filtered_chunks`` compiled for ``connection``.

    Columns are qualified with the table name, so hand-written statements over
    ``oam_search_chunks`` filter exactly as the ORM arm does.

    With ``now`` given, the clause is kept on the request and reused while
    ``now``, the connection and every field it is compiled from are the same:
    a HYBRID search's vector arm and two keyword arms compile it once instead
    of three times (the ORM's compile, about 0.3 ms, was a tenth of a LoCoMo
    search's time outside the embedding; bench/tenancy_cost.py).
    """
    connection = connection or default_connection
    key = None
    if now is not None:
        key = (now, connection.alias, connection.vendor, request.project_id, request.scope,
               tuple(request.record_types), repr(request.metadata_filter), request.include_invalid_results)
        if request._where is not None and request._where[0] == key:
            sql, params = request._where[1]
            return sql, list(params)
    qs = filtered_chunks(request, now)
    compiler = qs.query.get_compiler(connection=connection)
    sql, params = compiler.compile(qs.query.where)
    if key is not None:
        request._where = (key, (sql, tuple(params)))
    return sql, list(params)


def vector_sql(request: SearchRequest, query_vector, limit: int, *, connection=None,
               now=None) -> tuple[str, list]:
    """Oracle's vector arm: rows of (source_kind, record_id, distance), approximate, best first.

    ``ORDER BY VECTOR_DISTANCE(embedding, :q, COSINE) FETCH APPROX FIRST n ROWS
    ONLY WITH TARGET ACCURACY a`` (``settings.OAM_VECTOR_TARGET_ACCURACY``,
    default 95) lets Oracle use the HNSW/IVF index of migration 0002, whose
    metric is COSINE too (shared/reference/oracle.md section 3). Django can
    only emit ``FETCH FIRST``, an exact scan, hence hand-written SQL. The
    ORDER BY holds the distance expression alone, as the approximate form
    requires, and the filters are ``filter_sql``'s (the optimizer pre- or
    in-filters them on HNSW, post-filters on IVF).
    """
    connection = connection or default_connection
    if connection.vendor != "oracle":
        raise NotImplementedError("vector_sql is Oracle's approximate form; SQLite uses memory.vector_cache")
    where_sql, where_params = filter_sql(request, now, connection)
    quote = connection.ops.quote_name
    table = quote(SearchChunk._meta.db_table)
    kind, rid, emb = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id", "embedding"))
    field = SearchChunk._meta.get_field("embedding")
    bind = field.get_db_prep_value(query_vector, connection)
    accuracy = int(settings.OAM_VECTOR_TARGET_ACCURACY)
    if not 0 < accuracy <= 100:
        raise ValueError("OAM_VECTOR_TARGET_ACCURACY must be within 1..100")
    distance = f"VECTOR_DISTANCE({emb}, %s, COSINE)"
    sql = (
        f"SELECT {kind}, {rid}, {distance} AS {quote('distance')} FROM {table} WHERE ({where_sql}) "
        f"ORDER BY {distance} FETCH APPROX FIRST {int(limit)} ROWS ONLY WITH TARGET ACCURACY {accuracy}"
    )
    return sql, [bind, *where_params, bind]


def vector_arm(request: SearchRequest, query_vector, now=None, limit: int | None = None) -> list[tuple]:
    """The vector arm: up to ``limit`` rows of (source_kind, record_id, cosine distance), best first.

    * Oracle: ``vector_sql`` (the vector index, approximate).
    * SQLite with ``memory.vector_cache`` on: exact KNN, candidates from the
      in-memory copy, filters and distances from SQL (``_cached_vector_rows``).
    * Otherwise: ``chunk_queryset``, every filtered chunk ranked in SQL.
    """
    now = now or timezone.now()
    limit = limit or request.max_results * CHUNK_OVERFETCH
    connection = default_connection
    if connection.vendor == "oracle":
        sql, params = vector_sql(request, query_vector, limit, connection=connection, now=now)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [(k, r, float(d)) for k, r, d in cursor.fetchall()]
    if connection.vendor == "sqlite":
        cache = get_vector_cache()
        snapshot = cache.snapshot(connection) if cache is not None else None
        if snapshot is not None:
            rows = _cached_vector_rows(cache, snapshot, request, query_vector, now, limit)
            if rows is not None:
                return rows
    return list(chunk_queryset(request, query_vector, now, limit=limit))


#: First candidate count of the cached vector arm, per wanted row and at least.
CANDIDATES_PER_ROW = 2
MIN_CANDIDATES = 200
#: Largest candidate set tried before ranking the filtered rows in SQL instead.
MAX_CANDIDATES = 50_000


def _cached_vector_rows(cache, snapshot, request: SearchRequest, query_vector, now, limit: int) -> list[tuple] | None:
    """Exact top ``limit`` filtered chunks using the vector cache; None to fall back to SQL ranking.

    Candidates are the ``K`` nearest cached chunks of the request's project whatever the other filters, plus
    every chunk within twice the float32 rounding bound of the ``K``-th
    (``memory.vector_cache.rounding_bound``: ties and near-duplicates). One
    SQL statement returns, for each candidate that still exists, its true
    distance and whether it passes the filters, and ranks the filtered chunks
    newer than the snapshot (rows written since the last refresh, or inside
    this transaction). The answer is exact for that statement's view of the
    table when the ``limit``-th passing candidate is no farther than any chunk
    left out can be, or every live chunk was a candidate. Otherwise ``K`` is
    raised to what the observed pass rate needs (once); a filter that passes
    too few candidates (a single thread in a large store, say) returns None,
    and SQL ranks the filtered rows, which are then few. Also None for a zero
    query vector (every SQL distance is NULL) and when a candidate's true
    distance disagrees with the cache (reused ids: the cache is dropped; or a
    vector whose float32 norm is zero or overflows, seen differently by
    numpy and sqlite-vec).
    Distances are floats, or None for a zero chunk vector (ranked first, as in SQL).
    """
    vec = np.asarray(query_vector, dtype="<f4")
    if not np.any(vec):
        return None
    blob = vec.tobytes()
    where_sql, where_params = filter_sql(request, now)
    table = default_connection.ops.quote_name(SearchChunk._meta.db_table)
    in_transaction = in_transaction_now(default_connection)
    bound = rounding_bound(snapshot.matrix.shape[1])
    candidates = max(MIN_CANDIDATES, limit * CANDIDATES_PER_ROW)

    def key(row):  # (distance, chunk id) as SQLite orders them: NULL first
        return (row[3] is not None, row[3] if row[3] is not None else 0.0, row[0])

    for _ in range(2):
        ids, scores, floor = snapshot.candidates(vec, candidates, margin=2 * bound, project_id=request.project_id)
        with default_connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, source_kind, record_id, vec_distance_cosine(embedding, %s), "
                f"CASE WHEN ({where_sql}) THEN 1 ELSE 0 END FROM {table} "
                f"WHERE id IN (SELECT value FROM json_each(%s)) "
                f"UNION ALL SELECT * FROM (SELECT id, source_kind, record_id, "
                f"vec_distance_cosine(embedding, %s) AS distance, 2 FROM {table} "
                f"WHERE id > %s AND ({where_sql}) ORDER BY distance, id LIMIT %s)",
                [blob, *where_params, json.dumps(ids.tolist()), blob, snapshot.max_id, *where_params, limit],
            )
            rows = cursor.fetchall()
        found = [row for row in rows if row[4] != 2]
        newer = [row for row in rows if row[4] == 2]
        cached = dict(zip(ids.tolist(), (1.0 - scores.astype(np.float64)).tolist()))
        for chunk_id, _, _, distance, _ in found:
            expected = cached[chunk_id]
            if (distance is None) != (expected == -np.inf):
                return None  # a vector float32 cannot normalise (zero or overflowing norm) seen two ways
            if distance is not None and abs(distance - expected) > bound:
                cache.clear()  # the id names another vector now: reload on the next refresh
                return None
        if len(found) < ids.size and not in_transaction:
            cache.mark_dead(snapshot, set(ids.tolist()) - {row[0] for row in found})
        passed = sorted((row for row in found if row[4]), key=key)
        if floor == -np.inf:
            break  # every live cached chunk was a candidate
        if len(passed) >= limit:
            farthest = passed[limit - 1][3]
            if farthest is None or farthest <= 1.0 - floor - bound:
                break  # every chunk left out is farther (cosine distance > 1 - floor - bound)
        rate = len(passed) / max(len(found), 1)
        wanted = max(int(limit / rate * 2), 2 * candidates) if rate else MAX_CANDIDATES + 1
        if wanted > MAX_CANDIDATES:
            return None
        candidates = wanted
    else:
        return None
    rows = sorted(passed[:limit] + newer, key=key)[:limit]
    return [(kind, record_id, None if distance is None else float(distance))
            for _, kind, record_id, distance, _ in rows]


def keyword_sql(request: SearchRequest, column: str, terms: list[str], limit: int, *, connection=None,
                now=None) -> tuple[str, list]:
    """SQL for a keyword arm over ``column`` ("text" or "context"): rows of (source_kind, record_id, rank).

    The WHERE clause is the one the ORM compiles for ``filtered_chunks`` on the
    same connection, so both arms filter identically; only the match differs:

    * SQLite: ``<fts> MATCH '<column> : ("t1" OR "t2")'`` cross-joined on
      rowid (FTS first), ranked by ``bm25()`` (smaller is better).
    * Oracle: ``CONTAINS(<column>, '{t1} ACCUM {t2}', 1) > 0`` ranked by
      ``SCORE(1)`` descending, ``FETCH FIRST n ROWS ONLY``. Terms are word
      characters only and wrapped in braces, Oracle Text's escape for reserved
      words, so a query cannot inject operators.
    """
    if column not in ("text", "context"):
        raise ValueError("column must be 'text' or 'context'")
    if not terms:
        raise ValueError("terms must not be empty")
    connection = connection or default_connection
    where_sql, where_params = filter_sql(request, now, connection)
    quote = connection.ops.quote_name
    table = quote(SearchChunk._meta.db_table)
    kind, rid, col = (f"{table}.{quote(name)}" for name in ("source_kind", "record_id", column))
    limit = int(limit)
    if connection.vendor == "sqlite":
        fts = KEYWORD_INDEX
        match = f"{column} : (" + " OR ".join(f'"{t}"' for t in terms) + ")"
        weights = "1.0, 0.0" if column == "text" else "0.0, 1.0"
        sql = (
            # CROSS JOIN makes SQLite drive from the FTS matches; with a plain
            # JOIN it may scan the scoped chunks and probe the FTS index once
            # per row (1.7 s instead of a few ms per query on LoCoMo).
            f"SELECT {kind}, {rid}, bm25({fts}, {weights}) AS rank FROM {fts} "
            f"CROSS JOIN {table} ON {table}.{quote('id')} = {fts}.rowid "
            f"WHERE {fts} MATCH %s AND ({where_sql}) ORDER BY rank LIMIT {limit}"
        )
    elif connection.vendor == "oracle":
        match = " ACCUM ".join("{" + t + "}" for t in terms)
        sql = (
            f"SELECT {kind}, {rid}, SCORE(1) AS {quote('rank')} FROM {table} "
            f"WHERE CONTAINS({col}, %s, 1) > 0 AND ({where_sql}) "
            f"ORDER BY SCORE(1) DESC FETCH FIRST {limit} ROWS ONLY"
        )
    else:
        raise NotImplementedError(f"keyword search is not available on {connection.vendor}")
    return sql, [match, *where_params]


def _dedupe(rows) -> list[tuple[str, str]]:
    """Records in first-seen order from ranked chunk rows (kind, record_id, ...)."""
    seen: dict[tuple[str, str], None] = {}
    for row in rows:
        seen.setdefault((row[0], row[1]), None)
    return list(seen)


#: Smallest BM25 score (its magnitude; FTS5's ``bm25()`` is negative) that counts as keyword evidence on
#: SQLite. FTS5 clamps the IDF of a term found in half the indexed chunks or more to 1e-6, so a chunk that
#: matches only such terms (the role "user" in a store of user turns) scores about 1e-6 per term: no evidence,
#: and reciprocal rank fusion must not give it a rank's credit (issue #16: "My receipt" ranked first for
#: "what food does the user like?" on a fresh two-turn thread, on the length of a clamped "user" match).
#: Applied in HYBRID only, where the vector arm still ranks every record: KEYWORD mode keeps such matches (in
#: a store of one or two records every term is that common). Not tuned on LoCoMo (no split): a constant of
#: FTS5's clamp, far below the score of any term found in fewer than half the chunks.
MIN_BM25_EVIDENCE = 1e-3


def _keyword_arm(request: SearchRequest, column: str, terms: list[str], now) -> list[tuple[str, str]]:
    sql, params = keyword_sql(request, column, terms, ARM_DEPTH, now=now)
    with default_connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    if request.mode == "HYBRID" and default_connection.vendor == "sqlite":
        rows = [row for row in rows if row[2] is not None and -row[2] >= MIN_BM25_EVIDENCE]
    return _dedupe(rows)


def fuse(arms: dict[str, list[tuple[str, str]]], weights: dict[str, float] = ARM_WEIGHTS,
         k: int = RRF_K) -> list[tuple[tuple[str, str], float]]:
    """Weighted reciprocal rank fusion: records by ``Σ weight / (k + rank)``, rank from 1, best first."""
    scores: dict[tuple[str, str], float] = {}
    for name, ranked in arms.items():
        weight = weights[name]
        for rank, key in enumerate(ranked, 1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def after_replacements(ranked: list[tuple[tuple[str, str], float]]) -> list[tuple[tuple[str, str], float]]:
    """Move each memory that a ranked memory replaces to just after its replacement (issue #16).

    A replacement is the source of a ``supersedes``, ``refines`` or ``duplicates`` relation
    (``memory.links.INVALIDATING_RELATIONS``; the target is invalid while it lasts). A superseded memory
    therefore never outranks its replacement, and falls out of the top results when its replacement ranks
    last among them; it keeps its place when its replacement is not among the candidates. A moved memory's
    score becomes at most the score of the result before it, so scores still decrease. One query, only
    when memories are among the candidates; chains (C supersedes B supersedes A) end C, B, A.
    """
    memory_ids = {record_id for (kind, record_id), _ in ranked if kind == "memory"}
    if len(memory_ids) < 2:
        return ranked
    replaced_by: dict[str, set[str]] = {}
    for source, target in RecordLink.objects.filter(target_id__in=memory_ids, source_id__in=memory_ids,
                                                    relation_type__in=INVALIDATING_RELATIONS).values_list(
                                                        "source_id", "target_id").order_by():
        if source != target:
            replaced_by.setdefault(target, set()).add(source)
    if not replaced_by:
        return ranked
    order = list(ranked)
    moved: set[tuple[str, str]] = set()
    for _ in range(len(order) * len(replaced_by) + 1):  # bounded: a cycle of relations cannot loop forever
        position = {key: i for i, (key, _) in enumerate(order)}
        for target, sources in replaced_by.items():
            i = position[("memory", target)]
            j = max(position[("memory", source)] for source in sources)
            if i < j:
                order.insert(j, order.pop(i))  # lands just after its last-ranked replacement
                moved.add(("memory", target))
                break
        else:
            break
    for i in range(1, len(order)):
        key, score = order[i]
        if key in moved and score > order[i - 1][1]:
            order[i] = (key, order[i - 1][1])
    return order


def search_records(request: SearchRequest) -> list[SearchResult]:
    """Run a validated search; results ordered by decreasing relevance.

    ``SearchResult.distance`` is always the cosine distance of the record's
    best chunk; ``score`` is the ranking score (fused RRF score in HYBRID and
    KEYWORD modes, ``1 - distance`` in VECTOR mode). With ``num_hops`` the
    direct memory results that survive the token budgets carry their
    ``linked`` memories.
    """
    now = timezone.now()
    query_vector = get_embedder().embed([request.query])[0]
    depth = max(ARM_DEPTH, request.max_results * CHUNK_OVERFETCH)
    distances: dict[tuple[str, str], float] = {}
    arms: dict[str, list[tuple[str, str]]] = {}
    if request.mode in ("VECTOR", "HYBRID"):
        for kind, record_id, distance in vector_arm(request, query_vector, now, limit=depth):
            distances.setdefault((kind, record_id), float(distance))
        arms["vector"] = list(distances)
    terms = keyword_terms(request.query) if request.mode in ("KEYWORD", "HYBRID") else []
    if terms:
        arms["text"] = _keyword_arm(request, "text", terms, now)
        arms["context"] = _keyword_arm(request, "context", terms, now)
    if request.mode == "VECTOR":
        ranked = [(key, 1.0 - dist) for key, dist in distances.items()]
    else:
        ranked = fuse(arms)
    ranked = after_replacements(ranked)[: request.max_results]
    missing = [key for key, _ in ranked if key not in distances]
    if missing:
        distances.update(_distances(missing, query_vector))

    by_kind: dict[str, list[str]] = {}
    for (kind, record_id), _ in ranked:
        by_kind.setdefault(kind, []).append(record_id)
    records = {}
    # Unordered: the ranking orders the results (a message's default order would join its thread and sort).
    if ids := by_kind.get("message"):
        for row in Message.objects.filter(live_q(now), pk__in=ids).order_by():
            records[("message", row.pk)] = message_dto(row)
    if ids := by_kind.get("memory"):
        for row in Memory.objects.filter(live_q(now), pk__in=ids).order_by():
            records[("memory", row.pk)] = memory_dto(row)
    if ids := by_kind.get("image"):
        for row in Image.objects.filter(live_q(now), pk__in=ids).order_by():  # bytes stay deferred
            records[("image", row.pk)] = image_dto(row)
    results = [
        SearchResult(record=records[key], distance=distances.get(key, 1.0), score=score)
        for key, score in ranked
        if key in records
    ]
    results = apply_token_budgets(results, request.token_budget, request.soft_token_budget)
    if request.num_hops and request.max_linked_results:
        attach_linked(results, node_filter=linked_filter(request, now), num_hops=request.num_hops,
                      max_linked_results=request.max_linked_results, project_id=request.project_id)
    return results


def linked_filter(request: SearchRequest, now=None) -> Q:
    """Which memories graph expansion may reach or pass through: the search's scope, expiry and status.

    ``record_types`` and ``metadata_filter`` choose the direct results only.
    """
    q = live_q(now or timezone.now()) & scope_q(request.scope, request.project_id)
    if not request.include_invalid_results:
        q &= Q(status="valid")
    return q


def _distances(keys: list[tuple[str, str]], query_vector) -> dict[tuple[str, str], float]:
    """Cosine distance of each record's best chunk, for records found by keyword only."""
    q = Q()
    for kind, record_id in keys:
        q |= Q(source_kind=kind, record_id=record_id)
    best: dict[tuple[str, str], float] = {}
    rows = (SearchChunk.objects.filter(q).annotate(distance=VectorDistance("embedding", query_vector))
            .values_list("source_kind", "record_id", "distance"))
    for kind, record_id, distance in rows:
        key = (kind, record_id)
        best[key] = min(best.get(key, 2.0), float(distance))
    return best
