from __future__ import annotations

from django.db import connection as default_connection
from django.db.models import Q
from django.utils import timezone

from memory.fields import VectorDistance
from memory.models import STATUSES, SearchChunk
from memory.records.metadata_filter import compile_filter
from memory.records.selectors import live_q, valid_at_q
from memory.search.request import SearchRequest, scope_q

# Chunks fetched per wanted result, so that records split into several chunks
# still leave max_results distinct records after de-duplication.
CHUNK_OVERFETCH = 3


def filtered_chunks(request: SearchRequest, now=None):
    """Chunks that may be returned for ``request``: project, scope, types, status, expiry, metadata filter and
    valid time (``request.valid_at``, issue #32: the chunks' copies of a memory's window; ``valid_at_q``).

    Status: ``valid``, or with ``include_invalid_results`` also ``invalid``; never ``pending`` (the chunks
    of a memory awaiting review, ``memory.records.review_rules``), so no arm (vector, the SQLite vector cache's check,
    keyword) and no context card returns one before it is approved.
    """
    now = now or timezone.now()
    filters = live_q(now) & scope_q(request.scope, request.project_id) & Q(record_type__in=request.record_types)
    filters &= compile_filter(request.metadata_filter)
    filters &= Q(status__in=STATUSES) if request.include_invalid_results else Q(status="valid")
    if request.valid_at is not None:
        filters &= valid_at_q(request.valid_at)
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
               tuple(request.record_types), repr(request.metadata_filter), request.include_invalid_results,
               request.valid_at)
        if request._where is not None and request._where[0] == key:
            sql, params = request._where[1]
            return sql, list(params)
    qs = filtered_chunks(request, now)
    compiler = qs.query.get_compiler(connection=connection)
    sql, params = compiler.compile(qs.query.where)
    if key is not None:
        request._where = (key, (sql, tuple(params)))
    return sql, list(params)


def linked_filter(request: SearchRequest, now=None) -> Q:
    """Which memories graph expansion may reach or pass through: the search's scope, expiry, status and valid
    time (``valid_at``, issue #32: a memory outside its window is not linked either), and never a memory awaiting
    review (``Memory.pending``).

    ``record_types`` and ``metadata_filter`` choose the direct results only.
    """
    q = live_q(now or timezone.now()) & scope_q(request.scope, request.project_id) & Q(pending=False)
    if not request.include_invalid_results:
        q &= Q(status="valid")
    if request.valid_at is not None:
        q &= valid_at_q(request.valid_at)
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
