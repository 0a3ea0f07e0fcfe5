from __future__ import annotations

from django.db import connection as default_connection
from django.db.models import Q

from memory.core.ids import public_id, stored_id
from memory.core.types import LinkedRecord, SearchResult
from memory.models import MEMORY_TYPES, Memory, RecordLink
from memory.records.selectors import memory_dto

# Roots per graph query: stays under Oracle's 1,000-expression IN-list limit.
_ROOTS_PER_QUERY = 500

#: What differs by vendor in ``linked_sql``: (opening keyword, separator, path type, position of a part in a path).
GRAPH_SPELLINGS = {
    "oracle": ("WITH", "CHR(31 USING NCHAR_CS)", "NVARCHAR2(2000)", "INSTR({path}, {part})"),
    "sqlite": ("WITH RECURSIVE", "char(31)", "TEXT", "INSTR({path}, {part})"),
    "postgresql": ("WITH RECURSIVE", "chr(31)", "TEXT", "strpos({path}, {part})"),
}


# --- graph expansion (search num_hops) -------------------------------------------------------


def linked_sql(root_ids: list[str], *, thread_ids: list[str], num_hops: int, limit: int, node_filter: Q,
               connection=None) -> tuple[str, list]:
    """SQL walking relations from ``root_ids``: rows (root_id, node_id, hops, rel_id, rel_type, from_id).

    One recursive query, the same text on every vendor but for the keyword
    that opens it (``WITH RECURSIVE`` on SQLite and PostgreSQL; Oracle's recursive subquery
    factoring is a plain ``WITH`` with a column list) and three spellings
    (separator character, path type, ``INSTR``/``strpos``: ``GRAPH_SPELLINGS``):

    * ``edges``: each relation of ``thread_ids`` (the roots' owner threads: a
      relation never leaves its thread) twice, source -> target labelled
      ``relation_type`` and target -> source labelled ``opposite_relation_type``.
      The thread filter keeps what the recursive step reads small (SQLite
      materializes ``edges`` there).
    * ``walk``: anchor = the first hop from each root; recursive member = one
      more hop while ``hops < num_hops`` (depth bound). ``walk_path`` lists the
      records on the path between separators; a record already on it is not
      entered again (cycle guard), so the root is never its own neighbour.
      Every record entered must match ``node_filter`` (scope, expiry, status),
      compiled by the ORM on ``connection``: the walk does not pass through
      records the search would hide.
    * ``firsts``/``ranked``: for each (root, record) the shortest path (ties:
      lowest relation id), then at most ``limit`` records per root, nearest
      first (then by record id).
    """
    if not root_ids or not thread_ids:
        raise ValueError("root_ids and thread_ids must not be empty")
    connection = connection or default_connection
    quote = connection.ops.quote_name
    qs = Memory.objects.filter(node_filter)
    where_sql, where_params = qs.query.get_compiler(connection=connection).compile(qs.query.where)
    where_sql = where_sql or "1 = 1"
    links, mem = quote(RecordLink._meta.db_table), quote(Memory._meta.db_table)
    col = {name: f"{links}.{quote(name)}" for name in ("id", "thread_id", "source_id", "target_id",
                                                       "relation_type", "opposite_relation_type")}
    mem_id = f"{mem}.{quote('id')}"
    if connection.vendor not in GRAPH_SPELLINGS:
        raise NotImplementedError(f"graph expansion is not available on {connection.vendor}")
    opening, sep, path_type, find = GRAPH_SPELLINGS[connection.vendor]
    roots = ", ".join(["%s"] * len(root_ids))
    seen = find.format(path="w.walk_path", part=f"{sep} || e.dst || {sep}")  # 0: e.dst is not on the path yet
    threads = f"{col['thread_id']} IN ({', '.join(['%s'] * len(thread_ids))})"
    sql = (
        f"{opening} edges (src, dst, rel_id, rel_type) AS ("
        f"SELECT {col['source_id']}, {col['target_id']}, {col['id']}, {col['relation_type']} FROM {links} "
        f"WHERE {threads} "
        f"UNION ALL "
        f"SELECT {col['target_id']}, {col['source_id']}, {col['id']}, {col['opposite_relation_type']} FROM {links} "
        f"WHERE {threads}"
        f"), "
        f"walk (root_id, node_id, hops, rel_id, rel_type, from_id, walk_path) AS ("
        f"SELECT e.src, e.dst, 1, e.rel_id, e.rel_type, e.src, "
        f"CAST({sep} || e.src || {sep} || e.dst || {sep} AS {path_type}) "
        f"FROM edges e JOIN {mem} ON {mem_id} = e.dst "
        f"WHERE e.src IN ({roots}) AND ({where_sql}) "
        f"UNION ALL "
        f"SELECT w.root_id, e.dst, w.hops + 1, e.rel_id, e.rel_type, w.node_id, "
        f"CAST(w.walk_path || e.dst || {sep} AS {path_type}) "
        f"FROM walk w JOIN edges e ON e.src = w.node_id JOIN {mem} ON {mem_id} = e.dst "
        f"WHERE w.hops < %s AND {seen} = 0 AND ({where_sql})"
        f"), "
        f"firsts AS ("
        f"SELECT root_id, node_id, hops, rel_id, rel_type, from_id, "
        f"ROW_NUMBER() OVER (PARTITION BY root_id, node_id ORDER BY hops, rel_id, from_id) AS rn FROM walk"
        f"), "
        f"ranked AS ("
        f"SELECT root_id, node_id, hops, rel_id, rel_type, from_id, "
        f"ROW_NUMBER() OVER (PARTITION BY root_id ORDER BY hops, node_id) AS pos FROM firsts WHERE rn = 1"
        f") "
        f"SELECT root_id, node_id, hops, rel_id, rel_type, from_id FROM ranked WHERE pos <= %s "
        f"ORDER BY root_id, pos"
    )
    params = [*thread_ids, *thread_ids, *root_ids, *where_params, int(num_hops), *where_params, int(limit)]
    return sql, params


def attach_linked(results: list[SearchResult], *, node_filter: Q, num_hops: int, max_linked_results: int,
                  project_id: int, connection=None) -> list[SearchResult]:
    """Fill ``result.linked`` of each direct memory-like result with the memories reached from it.

    Spec: search ``num_hops``/``max_linked_results``. Message (and other
    non-memory) results keep an empty ``linked``. Each reached record appears
    once per direct result, at its fewest hops, with the relation that led
    there and its label as traversed. ``node_filter`` is a ``Memory`` filter
    (project, scope, expiry, status); ``results`` are of project ``project_id``
    (public ids). Returns ``results``.
    """
    direct = [r.record for r in results if r.record_type in MEMORY_TYPES and r.record.thread_id is not None]
    if not direct or num_hops < 1 or max_linked_results < 1:
        return results
    connection = connection or default_connection
    rows = []
    for start in range(0, len(direct), _ROOTS_PER_QUERY):
        batch = direct[start:start + _ROOTS_PER_QUERY]
        sql, params = linked_sql([stored_id(project_id, r.id) for r in batch],
                                 thread_ids=sorted({stored_id(project_id, r.thread_id) for r in batch}),
                                 num_hops=num_hops, limit=max_linked_results, node_filter=node_filter,
                                 connection=connection)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows += cursor.fetchall()
    records = {row.pk: memory_dto(row) for row in Memory.objects.filter(pk__in={r[1] for r in rows})}
    linked: dict[str, list[LinkedRecord]] = {}
    for root_id, node_id, hops, rel_id, rel_type, from_id in rows:
        if node_id in records:
            linked.setdefault(public_id(root_id), []).append(LinkedRecord(
                record=records[node_id], relation_type=rel_type, relation_id=public_id(rel_id), hops=int(hops),
                from_record_id=public_id(from_id),
            ))
    for result in results:
        if result.record_type in MEMORY_TYPES:
            result.linked = linked.get(result.record.id, [])
    return results
