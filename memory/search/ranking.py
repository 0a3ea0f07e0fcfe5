"""Ranking a validated search: the arms, their fusion, HYBRID's candidate pool and second stage, the results.

``run_search`` is the body of every public search (scope resolved and kept within the tenant, then
``search_records``). ``search_records`` ranks by mode: VECTOR by cosine distance (``vector_arm``), KEYWORD by
the weighted reciprocal rank fusion of the two keyword arms (``fuse``), HYBRID by the second stage
(``memory.search.second_stage``) over ``candidate_pool`` (every arm's best records with their scores and the
columns the signals read), then the optional cross-encoder (``cross_encoded``). Every mode then puts replaced
memories after their replacements (``after_replacements``), reads the results' rows, applies the token
budgets and follows relations (``memory.links.graph``). The package docstring (``memory.search``) gives the
measurements behind the constants.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from django.db import connection as default_connection
from django.utils import timezone

from memory.core import conf, telemetry
from memory.core.errors import InvalidArgument
from memory.core.types import MemorySearchConfig, SearchResult, SearchScope
from memory.embedders import embed_query
from memory.index.writer import message_chunk_text
from memory.links.graph import attach_linked
from memory.links.rules import INVALIDATING_RELATIONS
from memory.models import Image, Memory, Message, RecordLink
from memory.records.as_of import check_as_of
from memory.records.selectors import image_dto, live_q, memory_dto, message_dto
from memory.records.tenancy import Tenant
from memory.rerankers import get_reranker
from memory.search import second_stage
from memory.search.as_of import search_as_of
from memory.search.backends import backend_for, keyword_sql
from memory.search.query import CHUNK_OVERFETCH, _distances, linked_filter
from memory.search.request import (
    ARM_DEPTH,
    SCOPE_ARGUMENTS,
    SearchRequest,
    apply_token_budgets,
    build_request,
    keyword_terms,
    resolve_scope,
)
from memory.search.second_stage import POOL_DEPTH, Candidate

#: Arm weights and RRF constant. Split: chosen on ALL ten LoCoMo conversations before the tuning/report split
#: existed, so the report half is not unseen for them. Checked on the TUNING half only
#: (bench/locomo_import.py --reuse, HYBRID, recall@10): context weight 2 -> 0.750, 1 -> 0.729, 0.75 -> 0.720,
#: and the context arm limited to turns the text or vector arm found -> 0.749; kept at 2. Re-checked
#: (2026-12-02) with the second stage on, TUNING half, (recall@10 + hit@1) / 2 (bench/locomo_tune.py's pool):
#: RRF_K 5 / 10 / 20 / 60 -> 0.6787 / 0.6780 / 0.6767 / 0.6645; context 1 / 2 / 3 -> 0.6710 / 0.6780 /
#: 0.6794; vector 0.5 / 1.5 -> 0.6724 / 0.6742; text 0.5 / 1.5 -> 0.6795 / 0.6719. The best neighbours gain
#: at most 0.0015 (noise on 760 questions) and each loses on the report half, so all are kept.
ARM_WEIGHTS = {"vector": 1.0, "text": 1.0, "context": 2.0}


RRF_K = 10


def run_search(query: Any, *, tenant: Tenant, defaults: SearchScope, config: MemorySearchConfig,
               scope: Any = None, client: bool = False, **arguments: Any) -> list[SearchResult]:
    """Resolve the scope against ``defaults``, keep it within ``tenant``, validate, and search the tenant's
    project: the body of every public search.

    ``arguments`` are the spec's search arguments (``NOTSET`` when omitted):
    the scope ones go to ``resolve_scope`` (``client``: the client-search rules), the rest to ``build_request``.
    A restricted tenant's user and agent fill what the search leaves unset first (``Tenant.fill_scope``: a
    user-restricted client need not name its user). Errors as those two raise them; ``Tenant.limit_scope``
    raises ``OutOfScope`` (ValueError) for a scope beyond a restricted tenant's user or agent.

    ``as_of`` (issue #32, recorded time; omitted or None: now): the search as the store stood then
    (``memory.search.as_of.search_as_of``: an ``AsOfRecords`` list); ValueError naming ``as_of`` for a bad or
    future instant.

    Traced as one ``search_memory`` span (``memory.core.telemetry``; ``_traced`` says what it carries).
    """
    with telemetry.memory_span(telemetry.SEARCH_MEMORY, store_id=tenant.project.slug) as span:
        if isinstance(query, str) and not query.strip():
            raise InvalidArgument("query", "must not be empty")  # SDK 26.8.0: ValueError for an empty query
        at = check_as_of(arguments.pop("as_of", None))
        scope_arguments = {name: arguments.pop(name) for name in SCOPE_ARGUMENTS if name in arguments}
        scope, scope_arguments = tenant.fill_scope(scope, scope_arguments)
        resolved = tenant.limit_scope(resolve_scope(defaults, client=client, scope=scope, **scope_arguments))
        request = build_request(query, project_id=tenant.project.pk, scope=resolved, config=config, **arguments)
        if at is not None:
            return search_as_of(request, at)
        if not span.is_recording():
            return search_records(request)
        explain: dict[tuple[str, str], dict[str, Any]] | None = {} if telemetry.search_scores() else None
        results = search_records(request, explain=explain)
        _traced(span, request, results, explain)
        return results


def _traced(span, request: SearchRequest, results: list[SearchResult],
            explain: dict[tuple[str, str], dict[str, Any]] | None) -> None:
    """A search's span attributes (``memory.core.telemetry``): ``gen_ai.memory.record.count`` (results returned),
    the request (``oam.search.mode``, ``max_results``, ``record_types``, ``num_hops``, ``include_invalid_results``,
    ``exact_{user,agent,thread}_match``, ``filtered``: a metadata filter was given, not what it says), the scope's
    agent (``gen_ai.agent.id``) and thread (``gen_ai.conversation.id``) when one is given; with content capture
    the user (``user.id``), the query and the results (``gen_ai.memory.records``); with ``OAM_OTEL_SEARCH_SCORES``
    one event per result (``telemetry.result_events``)."""
    scope = request.scope
    telemetry.set_attributes(span, {
        telemetry.RECORD_COUNT: len(results),
        "oam.search.mode": request.mode,
        "oam.search.max_results": request.max_results,
        "oam.search.record_types": list(request.record_types),
        "oam.search.num_hops": request.num_hops,
        "oam.search.include_invalid_results": request.include_invalid_results,
        "oam.search.filtered": request.metadata_filter is not None,
        "oam.search.exact_user_match": scope.exact_user_match,
        "oam.search.exact_agent_match": scope.exact_agent_match,
        "oam.search.exact_thread_match": scope.exact_thread_match,
        telemetry.AGENT_ID: scope.agent_id if isinstance(scope.agent_id, str) else None,
        telemetry.CONVERSATION_ID: scope.thread_id if isinstance(scope.thread_id, str) else None,
    })
    telemetry.set_user(span, scope.user_id)
    if telemetry.capture_content():
        telemetry.set_content(span, query=request.query, records=telemetry.result_records(results))
    if explain is not None:
        telemetry.result_events(span, results, explain)


def vector_arm(request: SearchRequest, query_vector, now=None, limit: int | None = None) -> list[tuple]:
    """The vector arm: up to ``limit`` rows of (source_kind, record_id, cosine distance), best first.

    The database's backend answers it (``memory.search.backends``): Oracle's
    vector index; SQLite's vector cache, else every filtered chunk ranked in SQL.
    """
    now = now or timezone.now()
    limit = limit or request.max_results * CHUNK_OVERFETCH
    return backend_for(default_connection).vector_rows(request, query_vector, now, limit, default_connection)


def _dedupe(rows) -> list[tuple[str, str]]:
    """Records in first-seen order from ranked chunk rows (kind, record_id, ...)."""
    seen: dict[tuple[str, str], None] = {}
    for row in rows:
        seen.setdefault((row[0], row[1]), None)
    return list(seen)


def keyword_strengths(request: SearchRequest, column: str, terms: list[str], now,
                      limit: int) -> dict[tuple[str, str], float]:
    """A keyword arm with its scores: (kind, record_id) -> strength (higher is better, the best chunk's), in
    rank order, up to ``limit`` chunks read; only the matches that count as evidence (``keyword_evidence``)."""
    sql, params = keyword_sql(request, column, terms, limit, now=now)
    with default_connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    backend = backend_for(default_connection)
    strengths: dict[tuple[str, str], float] = {}
    for kind, record_id, rank in backend.keyword_evidence(request, rows):
        strengths.setdefault((kind, record_id), backend.keyword_strength(rank))
    return strengths


def fuse(arms: dict[str, list[tuple[str, str]]], weights: dict[str, float] = ARM_WEIGHTS,
         k: int = RRF_K) -> list[tuple[tuple[str, str], float]]:
    """Weighted reciprocal rank fusion: records by ``Σ weight / (k + rank)``, rank from 1, best first."""
    scores: dict[tuple[str, str], float] = {}
    for name, ranked in arms.items():
        weight = weights[name]
        for rank, key in enumerate(ranked, 1):
            scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


#: The columns of a message and of a memory the second stage reads for each candidate: ``Candidate`` field ->
#: model column. ``candidate_pool`` reads them by name, so their order is free.
MESSAGE_COLUMNS = {"role": "role", "content": "content", "when": "event_at", "thread_id": "thread_id", "seq": "seq",
                   "status": "status"}
MEMORY_COLUMNS = {"content": "content", "when": "event_at", "status": "status", "thread_id": "thread_id"}


def candidate_pool(request: SearchRequest, query_vector, now) -> tuple[list[Candidate], dict]:
    """The first stage of HYBRID search: up to ``POOL_DEPTH`` records from each arm, with their scores and the
    columns the second stage reads.

    Returns (candidates in fused order, {key: cosine distance} of the vector arm's records). Queries: the
    three arms, then one read of the message candidates' ``MESSAGE_COLUMNS`` and one of the memory
    candidates' ``MEMORY_COLUMNS`` (images: none; they get the arms' signals only). Columns, not model rows:
    on LoCoMo's pools of ~200 messages the rows cost 4.6 ms a search (their metadata decoded, a model built
    each), the columns 1.2 ms; ``search_records`` then reads whole rows for its results only.
    """
    depth = max(POOL_DEPTH, request.max_results * CHUNK_OVERFETCH)
    distances: dict[tuple[str, str], float] = {}
    for kind, record_id, distance in vector_arm(request, query_vector, now, limit=depth):
        distances.setdefault((kind, record_id), float(distance) if distance is not None else 1.0)
    arms: dict[str, list[tuple[str, str]]] = {"vector": list(distances)}
    strengths: dict[str, dict[tuple[str, str], float]] = {}
    if terms := keyword_terms(request.query):
        for arm in ("text", "context"):
            strengths[arm] = keyword_strengths(request, arm, terms, now, depth)
            arms[arm] = list(strengths[arm])
    fused = fuse(arms)
    ids: dict[str, list[str]] = {}
    for kind, record_id in (key for key, _ in fused):
        ids.setdefault(kind, []).append(record_id)
    columns = {"message": MESSAGE_COLUMNS, "memory": MEMORY_COLUMNS}
    rows = {kind: ({row["pk"]: row for row in model.objects.filter(live_q(now), pk__in=ids[kind])
                    .order_by().values("pk", *columns[kind].values())} if ids.get(kind) else {})
            for kind, model in (("message", Message), ("memory", Memory))}
    ranks = {name: {key: i for i, key in enumerate(ranked, 1)} for name, ranked in arms.items()}
    candidates = []
    for key, fused_score in fused:
        kind, record_id = key
        c = Candidate(key=key, rrf=fused_score,
                      ranks={name: r[key] for name, r in ranks.items() if key in r},
                      similarity=1.0 - distances[key] if key in distances else None,
                      text_bm25=strengths.get("text", {}).get(key, 0.0),
                      context_bm25=strengths.get("context", {}).get(key, 0.0))
        if (row := rows.get(kind, {}).get(record_id)) is not None:  # a message or a memory (images: none)
            for name, column in columns[kind].items():
                setattr(c, name, row[column])
        candidates.append(c)
    return candidates, distances


def aliased_pool(request: SearchRequest, query_vector, now) -> tuple[list[Candidate], dict, str]:
    """``candidate_pool``, then again under the speakers' own names when the query calls one of them by
    another name the pool shows they go by (``second_stage.speaker_aliases``: REALTALK's "Emi" is Kate to
    the person she talks to, and its questions ask about Kate). Returns (candidates, distances, the query
    the second stage ranks with). The second pass (a new embedding and the three arms again) runs only for
    such a query: asked with "Kate", the keyword arm fills the pool with the turns that greet Kate, not the
    ones where she speaks.
    """
    candidates, distances = candidate_pool(request, query_vector, now)
    aliases = second_stage.speaker_aliases(request.query, candidates)
    if not aliases:
        return candidates, distances, request.query
    query = second_stage.with_aliases(request.query, aliases)
    candidates, distances = candidate_pool(dataclasses.replace(request, query=query), embed_query(query), now)
    return candidates, distances, query


def after_replacements(ranked: list[tuple[tuple[str, str], float]]) -> list[tuple[tuple[str, str], float]]:
    """Move each memory that a ranked memory replaces to just after its replacement.

    A replacement is the source of a ``supersedes``, ``refines`` or ``duplicates`` relation
    (``memory.links.rules.INVALIDATING_RELATIONS``; the target is invalid while it lasts). A superseded memory
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


def cross_encoded(ranked: list[tuple[tuple[str, str], float]], candidates: list[Candidate],
                  query: str) -> list[tuple[tuple[str, str], float]]:
    """HYBRID's order after the optional cross-encoder (``memory.rerankers``): the reranker reads the query
    with each of the first ``conf.rerank_depth()`` records (``OAM_RERANK_DEPTH``; a message as ``"<role>:
    <content>"``, the text it is indexed under; a memory its content; an image nothing) and
    ``second_stage.with_cross_encoder`` adds its scores. ``ranked`` unchanged when the depth is 0 (the
    default). Raises ValueError when the reranker returns another number of scores than texts."""
    reranker = get_reranker()
    if reranker is None or not ranked:
        return ranked
    by_key = {c.key: c for c in candidates}
    texts: list[str | None] = []
    for key, _ in ranked[: conf.rerank_depth()]:
        c = by_key[key]
        texts.append(message_chunk_text(c.role, c.content) if c.role is not None else (c.content or None))
    readable = [t for t in texts if t is not None]
    scores = np.asarray(reranker.score(query, readable), dtype=float).ravel().tolist()
    if len(scores) != len(readable):
        raise ValueError(f"{type(reranker).__name__}.score gave {len(scores)} scores for {len(readable)} texts")
    read = iter(scores)
    return second_stage.with_cross_encoder(ranked, [next(read) if t is not None else None for t in texts])


def search_records(request: SearchRequest,
                   explain: dict[tuple[str, str], dict[str, Any]] | None = None) -> list[SearchResult]:
    """Run a validated search; results ordered by decreasing relevance.

    ``SearchResult.distance`` is always the cosine distance of the record's
    best chunk; ``score`` is the ranking score (the second stage's weighted sum in HYBRID, with the
    cross-encoder's share when it is on; the fused RRF score in KEYWORD mode; ``1 - distance`` in VECTOR
    mode). With ``num_hops`` the
    direct memory results that survive the token budgets carry their
    ``linked`` memories.

    ``explain`` (a dict, filled when given; the ranking is the same either way): what the arms said of each
    ranked record, for the "why was this recalled" span events (``memory.core.telemetry.result_events``), by
    ``(kind, public id)`` (kind: message, memory, image): ``_arm_scores``.
    """
    now = timezone.now()
    query_vector = embed_query(request.query)
    depth = max(ARM_DEPTH, request.max_results * CHUNK_OVERFETCH)
    distances: dict[tuple[str, str], float] = {}
    candidates: list[Candidate] = []
    strengths: dict[str, dict[tuple[str, str], float]] = {}
    if request.mode == "HYBRID":
        candidates, distances, query = aliased_pool(request, query_vector, now)
        ranked = cross_encoded(second_stage.rank(candidates, query, now), candidates, query)
    elif request.mode == "VECTOR":
        for kind, record_id, distance in vector_arm(request, query_vector, now, limit=depth):
            distances.setdefault((kind, record_id), float(distance))
        ranked = [(key, 1.0 - dist) for key, dist in distances.items()]
    else:
        terms = keyword_terms(request.query)
        if terms:
            strengths = {arm: keyword_strengths(request, arm, terms, now, ARM_DEPTH) for arm in ("text", "context")}
        ranked = fuse({arm: list(found) for arm, found in strengths.items()})
    ranked = after_replacements(ranked)[: request.max_results]
    if explain is not None:
        arm_scores = _arm_scores(request.mode, ranked, candidates, distances, strengths)
    missing = [key for key, _ in ranked if key not in distances]
    if missing:
        distances.update(_distances(missing, query_vector))

    by_kind: dict[str, list[str]] = {}
    for (kind, record_id), _ in ranked:
        by_kind.setdefault(kind, []).append(record_id)
    records = {}
    # The results' whole rows, one read per kind. Unordered: the ranking orders the results (a message's
    # default order would join its thread and sort).
    for kind, model, dto in (("message", Message, message_dto), ("memory", Memory, memory_dto)):
        if ids := by_kind.get(kind):
            # pending=False: a chunk approved meanwhile is found only once its memory is (memory.records.review_rules)
            awaiting = {"pending": False} if kind == "memory" else {}
            for row in model.objects.filter(live_q(now), pk__in=ids, **awaiting).order_by():
                records[(kind, row.pk)] = dto(row)
    if ids := by_kind.get("image"):
        for row in Image.objects.filter(live_q(now), pk__in=ids).order_by():  # bytes stay deferred
            records[("image", row.pk)] = image_dto(row)
    results = [
        SearchResult(record=records[key], distance=distances.get(key, 1.0), score=score)
        for key, score in ranked
        if key in records
    ]
    if explain is not None:  # a record already explained (an earlier search of a context card) keeps its entry
        for key, _ in ranked:
            if key in records:
                explain.setdefault((key[0], records[key].id), arm_scores[key])
    results = apply_token_budgets(results, request.token_budget, request.soft_token_budget)
    if request.num_hops and request.max_linked_results:
        attach_linked(results, node_filter=linked_filter(request, now), num_hops=request.num_hops,
                      max_linked_results=request.max_linked_results, project_id=request.project_id)
    return results


def _arm_scores(mode: str, ranked: list[tuple[tuple[str, str], float]], candidates: list[Candidate],
                distances: dict[tuple[str, str], float],
                strengths: dict[str, dict[tuple[str, str], float]]) -> dict[tuple[str, str], dict[str, Any]]:
    """What the ranking kept per arm for each ranked record, by its key (kind, stored id); names as the span events
    show them (after ``oam.search.``), a value only where the arm reached the record:

    * HYBRID (from its ``Candidate``): ``rrf`` (the fused score), ``vector.rank``/``text.rank``/``context.rank``
      (rank from 1 in each arm of the pool), ``vector.similarity`` (1 - cosine distance), ``text.bm25`` and
      ``context.bm25`` (keyword strength, higher is better), ``signal.<name>`` (the second stage's signals,
      each in [0, 1], before their weights: ``second_stage.WEIGHTS``);
    * VECTOR: ``vector.rank``, ``vector.similarity``;
    * KEYWORD: ``rrf``, ``text.rank``/``context.rank`` and ``text.bm25``/``context.bm25``.

    The cross-encoder's own score (``OAM_RERANK_DEPTH``) is not kept by the ranking, so not here.
    """
    wanted = {key for key, _ in ranked}
    scores: dict[tuple[str, str], dict[str, Any]] = {key: {} for key in wanted}
    if mode == "HYBRID":
        for c in candidates:
            if c.key not in wanted:
                continue
            data = scores[c.key]
            data["rrf"] = c.rrf
            data.update((f"{arm}.rank", rank) for arm, rank in c.ranks.items())
            data["vector.similarity"] = c.similarity
            if "text" in c.ranks:
                data["text.bm25"] = c.text_bm25
            if "context" in c.ranks:
                data["context.bm25"] = c.context_bm25
            data.update((f"signal.{name}", value) for name, value in c.signals.items())
        return scores
    if mode == "VECTOR":
        for rank, (key, distance) in enumerate(distances.items(), 1):
            if key in wanted:
                scores[key].update({"vector.rank": rank, "vector.similarity": 1.0 - distance})
        return scores
    for key, score in ranked:
        scores[key]["rrf"] = score
    for arm, found in strengths.items():
        for rank, (key, strength) in enumerate(found.items(), 1):
            if key in wanted:
                scores[key].update({f"{arm}.rank": rank, f"{arm}.bm25": strength})
    return scores
