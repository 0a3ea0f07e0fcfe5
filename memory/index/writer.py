"""The search index: the one owner of the rows of ``oam_search_chunks`` (``SearchChunk``).

A message, memory or image is searched through its chunks: one row per chunk
of its text (``memory.core.chunking``) with the embedding, the keyword ``context``
and copies of the record's scope (user, agent, thread), ``status``,
``expires_at``, ``metadata``, ``record_type`` and a memory's validity window
(``valid_from``, ``valid_to``: issue #32), so that a search filters on
one table. Those copies must stay in step with the record; every write that
changes them goes through this module:

* ``index_record`` / ``index_rows`` add a record's chunks (``chunk_rows``
  builds them unsaved, for callers that embed before their transaction);
* ``reindex_state`` copies a record's new status, expiry, metadata, type or
  validity window to its chunks (no re-embedding);
* ``review_settle`` gives the chunks of an approved memory its status: while
  a memory awaits review (``Memory.pending``, ``memory.records.review_rules``) its chunks'
  status is ``pending`` (``chunk_status``), which no search returns, and no
  status copy replaces it (``reindex_state`` keeps it);
* ``unindex`` deletes chunks, and after commit drops their embeddings from
  this process's vector cache (``memory.index.vector_cache``);
* ``keep_history_vectors`` copies a memory's chunk embeddings to its history
  (``HistoryVector``, issue #32) before a content change or a single delete
  replaces or removes them: ``index_record``'s ``made_from``, and
  ``memory.services.erasure.memories_erase``;
* ``refresh_message_contexts`` recomputes the keyword context of messages
  whose neighbours changed;
* fact keys (``add_fact_keys``, ``remove_fact_keys``): a valid memory extracted
  from messages lends its chunks to each source message as extra keys, kept in
  step by the functions above (see "fact keys" below).

Call them inside the transaction that writes the record, so a record and its
chunks commit together. What gets embedded for a chunk is ``embedding_text``;
what a message is indexed under is ``message_chunk_text``. Imported rows are
indexed through ``memory.index.rebuild``, which builds its rows here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import transaction
from django.db.models import Case, QuerySet, Value, When
from django.utils import timezone

from memory.core import ttl as ttl_rules
from memory.core.chunking import chunk_text
from memory.core.ids import stored_id
from memory.core.types import RecordStatus
from memory.index.bulk import batches, rows_insert, rows_update
from memory.index.vector_cache import get_vector_cache
from memory.models import HistoryVector, Memory, Message, SearchChunk
from memory.records.selectors import live_q

#: The record copies ``reindex_state`` may write on a record's chunks.
STATE_FIELDS = ("status", "expires_at", "metadata", "record_type", "valid_from", "valid_to")
#: The status a memory's search chunks carry while the memory awaits review (``Memory.pending``); no search
#: returns such a chunk (``memory.search.query.filtered_chunks``), whatever statuses it asks for.
PENDING_CHUNK_STATUS = "pending"


# --- what is indexed -------------------------------------------------------------------


def message_chunk_text(role: str, content: str) -> str:
    """The text a message is indexed under: ``"<role>: <content>"``."""
    return f"{role}: {content}"


def _when(moment) -> str:
    """``1:56 pm on 8 May, 2023``: the date format that embedded best on LoCoMo."""
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {moment.strftime('%B')}, {moment.year}"


def embedding_text(text: str, timestamp: str | None) -> str:
    """What gets embedded for a chunk: its text, prefixed with the record's event time when known.

    ``"[1:56 pm on 8 May, 2023] Caroline: I went to a support group"``. On
    LoCoMo (bench/locomo_import.py, 1,536 questions) the date prefix lifted
    vector recall@10 from 0.444 to 0.502; ISO-8601 and weekday formats gave
    0.481 and 0.479.
    """
    moment = ttl_rules.parse_timestamp(timestamp)
    return f"[{_when(moment)}] {text}" if moment is not None else text


def image_chunk_texts(description: str | None) -> list[str]:
    """The chunks an image is searched by: its description, chunked; none when it is blank."""
    if description is None or not description.strip():
        return []
    return chunk_text(description)


#: Turns on each side that a message's keyword ``context`` holds, and the
#: words kept from each neighbour. Two each side measured best on LoCoMo
#: (BM25 recall@10: 0 -> 0.610, 1 -> 0.673, 2 -> 0.708, 3 -> 0.666).
CONTEXT_TURNS = 2
CONTEXT_NEIGHBOUR_WORDS = 100


def _clip(text: str, words: int = CONTEXT_NEIGHBOUR_WORDS) -> str:
    parts = text.split()
    return text if len(parts) <= words else " ".join(parts[:words])


def _context(texts: list[str], i: int, own: str) -> str:
    """The keyword context of a chunk ``own`` of the ``i``-th of ``texts`` (clipped turns in seq order):
    ``CONTEXT_TURNS`` turns before, the chunk's own text, ``CONTEXT_TURNS`` turns after."""
    prev = texts[max(0, i - CONTEXT_TURNS) : i]
    nxt = texts[i + 1 : i + 1 + CONTEXT_TURNS]
    return "\n".join([*prev, own, *nxt])


def refresh_message_contexts(thread_id: str, seq_lo: int, seq_hi: int, *, neighbours: bool = True) -> int:
    """Recompute the keyword ``context`` of messages whose window changed.

    Targets the thread's messages with ``seq`` in ``[seq_lo, seq_hi]`` plus,
    with ``neighbours``, the ``CONTEXT_TURNS`` messages on each side (their
    windows reach into the range). Each chunk's context is: previous turns,
    the chunk's own text, next turns. Call inside the writing transaction
    after messages in the range were added, edited or deleted. Returns the
    number of chunks updated.
    """
    pad = 2 * CONTEXT_TURNS
    base = Message.objects.filter(thread_id=thread_id)
    fields = ("id", "seq", "role", "content")
    before = list(base.filter(seq__lt=seq_lo).order_by("-seq").values_list(*fields)[:pad])[::-1]
    middle = list(base.filter(seq__gte=seq_lo, seq__lte=seq_hi).order_by("seq").values_list(*fields))
    after = list(base.filter(seq__gt=seq_hi).order_by("seq").values_list(*fields)[:pad])
    rows = before + middle + after
    texts = [_clip(message_chunk_text(role, content)) for _, _, role, content in rows]
    reach = CONTEXT_TURNS if neighbours else 0
    first = max(0, len(before) - reach)
    last = len(before) + len(middle) + min(reach, len(after))
    targets = {rows[i][0]: i for i in range(first, last)}
    chunks = list(SearchChunk.objects.filter(source_kind="message", record_id__in=list(targets),
                                             chunk_index__gte=0))  # a fact key keeps its memory's words
    for chunk in chunks:
        chunk.context = _context(texts, targets[chunk.record_id], chunk.text)
    rows_update(SearchChunk, chunks, ["context"], batch_size=500)  # on Oracle: no CASE over a CLOB (bulk)
    return len(chunks)


def appended_message_contexts(thread_id: str, first_seq: int, turns: list[tuple[str, str]],
                              chunk_lists: list[list[str]]) -> tuple[list[list[str]], tuple[int, int] | None]:
    """Contexts of messages about to be appended at ``first_seq``, and the earlier messages whose changed.

    ``turns`` are the new messages' ``(role, content)`` in order, ``chunk_lists``
    their chunks. Returns each new chunk's context (what
    ``refresh_message_contexts`` would compute once they are stored: nothing
    follows them yet) and the ``(seq_lo, seq_hi)`` of the up to
    ``CONTEXT_TURNS`` messages before them, whose windows now reach the new
    ones (None when there are none): refresh those with ``neighbours=False``
    after the insert. Inserting chunks with their final context spares the
    keyword index an update of every new row (its trigger deletes and
    re-inserts the row's terms): on LoCoMo sessions posted by 8 clients this
    was about a third of the server's CPU outside embedding
    (``bench/ingest.py`` with a stub embedder). Call inside the writing
    transaction, after the thread's lock.
    """
    earlier = list(Message.objects.filter(thread_id=thread_id, seq__lt=first_seq).order_by("-seq")
                   .values_list("seq", "role", "content")[:CONTEXT_TURNS])[::-1]
    texts = [_clip(message_chunk_text(role, content)) for _, role, content in earlier]
    texts += [_clip(message_chunk_text(role, content)) for role, content in turns]
    contexts = [[_context(texts, len(earlier) + i, chunk) for chunk in chunks]
                for i, chunks in enumerate(chunk_lists)]
    return contexts, ((earlier[0][0], earlier[-1][0]) if earlier else None)


# --- writing rows ----------------------------------------------------------------------


def window(record) -> dict[str, Any]:
    """The validity window a record's chunks copy (issue #32): a memory's ``valid_from``/``valid_to``; nothing for
    a message or an image (their chunks keep NULL bounds, which every ``valid_at`` passes)."""
    return {name: getattr(record, name) for name in ("valid_from", "valid_to") if hasattr(record, name)}


def chunk_status(record) -> str:
    """The status a record's chunks carry: ``PENDING_CHUNK_STATUS`` while a memory awaits review
    (``Memory.pending``), else the record's own status."""
    return PENDING_CHUNK_STATUS if getattr(record, "pending", False) else record.status


def chunk_rows(
    *,
    project_id: int,
    source_kind: str,
    record_id: str,
    record_type: str,
    chunks: list[str],
    vectors,
    contexts: list[str] | None = None,
    user_id: str | None,
    agent_id: str | None,
    thread_id: str | None,
    status: str,
    expires_at,
    metadata: dict[str, Any],
    now,
    valid_from=None,
    valid_to=None,
) -> list[SearchChunk]:
    """Unsaved chunk rows of one record: ``chunks[i]`` with embedding ``vectors[i]`` (``index_rows`` saves them).

    ``record_id`` is the stored id (``memory.records.tenancy``); ``contexts`` the
    keyword context of each chunk (None: the chunk's own text; messages get
    theirs from ``refresh_message_contexts``). ``valid_from``/``valid_to``: a
    memory's validity window (None for messages and images: no window).
    """
    return [
        SearchChunk(
            project_id=project_id,
            source_kind=source_kind,
            record_id=record_id,
            record_type=record_type,
            chunk_index=i,
            user_id=user_id,
            agent_id=agent_id,
            thread_id=thread_id,
            status=status,
            expires_at=expires_at,
            valid_from=valid_from,
            valid_to=valid_to,
            metadata=metadata,
            text=text,
            context=text if contexts is None else contexts[i],
            embedding=vectors[i],
            created_at=now,
        )
        for i, text in enumerate(chunks)
    ]


def index_rows(rows: list[SearchChunk]) -> None:
    """Insert chunk rows built by ``chunk_rows`` (one bulk insert: ``memory.index.bulk.rows_insert``); the
    memories among them lend their chunks to their source messages (``add_fact_keys``)."""
    if rows:
        rows_insert(SearchChunk, rows)  # on Oracle: INSERT ... VALUES per row, no VECTOR in a UNION ALL (bulk)
        add_fact_keys({row.record_id for row in rows if row.source_kind == "memory"})


def image_chunk_rows(row, chunks: list[str], vectors) -> list[SearchChunk]:
    """Unsaved chunk rows of an ``Image`` row (scope, expiry and metadata copied from it; always valid)."""
    return chunk_rows(
        project_id=row.project_id, source_kind="image", record_id=row.pk, record_type="image", chunks=chunks,
        vectors=vectors, user_id=row.user_id, agent_id=row.agent_id, thread_id=row.thread_id,
        status=RecordStatus.VALID.value,
        expires_at=row.expires_at, metadata=row.metadata, now=timezone.now(),
    )


def index_record(record, source_kind: str, record_type: str, chunks: list[str], vectors, *,
                 scope=None, replace: bool = True, made_from: str | None = None) -> None:
    """Index a saved message, memory or image row under ``chunks`` with ``vectors``.

    ``replace`` deletes the record's chunks first (``unindex``). Scope (user,
    agent) comes from ``scope`` when given (a message takes its thread's),
    else from the record itself; thread, status, expiry and metadata from the
    record (an image is always valid). ``made_from``: the content a memory's
    chunks being replaced were made from (its content before the write); when
    it differs from the new content, their embeddings are kept with the
    history first (``keep_history_vectors``).
    """
    if replace and source_kind == "memory" and made_from is not None and made_from != record.content:
        keep_history_vectors({record.pk: made_from})
    if replace:  # a message's fact keys stay: they are its memories' words, not its own
        unindex(SearchChunk.objects.filter(source_kind=source_kind, record_id=record.pk, chunk_index__gte=0))
    if source_kind == "image":
        index_rows(image_chunk_rows(record, chunks, vectors))
        return
    scope = scope if scope is not None else record
    index_rows(chunk_rows(
        project_id=record.project_id, source_kind=source_kind, record_id=record.pk, record_type=record_type,
        chunks=chunks, vectors=vectors, user_id=scope.user_id, agent_id=scope.agent_id,
        thread_id=record.thread_id, status=chunk_status(record), expires_at=record.expires_at,
        metadata=record.metadata, now=timezone.now(), **window(record),
    ))


def reindex_state(source_kind: str, record_ids: Iterable[str], **fields: Any) -> int:
    """Copy new record state to the chunks of records ``record_ids`` (stored ids) of ``source_kind``.

    ``fields`` are among ``STATE_FIELDS`` (status, expires_at, metadata,
    record_type, valid_from, valid_to); the embeddings and texts are left alone. A chunk whose
    status is ``pending`` (its memory awaits review) keeps it: only
    ``review_settle`` ends it, so no status change (a relation's
    invalidation, the admin's edit) can make a pending memory searchable.
    Returns the number of chunk rows updated. Raises ``TypeError`` for
    another field.
    """
    unknown = set(fields) - set(STATE_FIELDS)
    if unknown:
        raise TypeError(f"reindex_state() cannot write {sorted(unknown)}; allowed: {STATE_FIELDS}")
    ids = list(record_ids)
    if not ids or not fields:
        return 0
    if "status" in fields:
        fields["status"] = status_copy(fields["status"])
    updated = SearchChunk.objects.filter(source_kind=source_kind, record_id__in=ids).update(**fields)
    if source_kind == "memory" and "status" in fields:  # an invalid memory's words leave its messages' keys
        remove_fact_keys(ids)
        add_fact_keys(ids)
    return updated


def status_copy(status: str) -> Case:
    """The UPDATE value that copies a record's ``status`` to its chunks but leaves ``pending`` ones pending:
    ``CASE WHEN status = 'pending' THEN 'pending' ELSE <status> END``."""
    return Case(When(status=PENDING_CHUNK_STATUS, then=Value(PENDING_CHUNK_STATUS)), default=Value(status))


def review_settle(record) -> int:
    """Give the chunks of a memory that no longer awaits review its status (``record.status``); return how
    many chunk rows changed. Call in the transaction that clears ``record.pending`` (``memory.services.review``)."""
    changed = SearchChunk.objects.filter(source_kind="memory", record_id=record.pk).update(status=chunk_status(record))
    add_fact_keys([record.pk])  # an approved memory lends its words to its source messages now, not before
    return changed


def unindex(qs: QuerySet) -> int:
    """Delete the search chunks of ``qs``; return how many.

    After commit, their embeddings are dropped from this process's vector
    cache (``VectorCache.forget``; other processes skip them as deleted when
    a search meets them). A memory's chunks take the fact keys they lent with
    them (``remove_fact_keys``).
    """
    rows = list(qs.values_list("id", "source_kind", "record_id"))
    if not rows:
        return 0
    ids = [row[0] for row in rows]
    if memory_chunks := {row[0]: row[2] for row in rows if row[1] == "memory"}:
        _remove_fact_keys_of(memory_chunks)
    SearchChunk.objects.filter(id__in=ids).delete()
    transaction.on_commit(lambda: _forget_vectors(ids))
    return len(ids)


def unindex_records(source_kind: str, record_ids: Iterable[str]) -> int:
    """Delete the chunks of records ``record_ids`` (stored ids) of ``source_kind`` (``unindex``)."""
    return unindex(SearchChunk.objects.filter(source_kind=source_kind, record_id__in=list(record_ids)))


def unindex_threads(thread_ids: Iterable[str]) -> int:
    """Delete every chunk scoped to the threads ``thread_ids`` (stored ids) (``unindex``)."""
    return unindex(SearchChunk.objects.filter(thread_id__in=list(thread_ids)))


def _forget_vectors(ids: list[int]) -> None:
    cache = get_vector_cache()
    if cache is not None:
        cache.forget(ids)


def sync_record(record, source_kind: str, record_type: str, chunks: list[str] | None = None, vectors=None, *,
                scope=None, made_from: str | None = None) -> None:
    """Bring a record's chunks in step with it after an update.

    With ``chunks`` (the record was re-embedded): replace them
    (``index_record``; ``made_from`` as there). Without: copy its status, expiry, metadata,
    ``record_type`` and (a memory's) validity window to them (``reindex_state``).
    """
    if chunks is None:
        reindex_state(source_kind, [record.pk], status=record.status, expires_at=record.expires_at,
                      metadata=record.metadata, record_type=record_type, **window(record))
    else:
        index_record(record, source_kind, record_type, chunks, vectors, scope=scope, made_from=made_from)


# --- history vectors (issue #32) -------------------------------------------------------------

#: Most values in one ``IN`` list (Oracle allows 1,000: ORA-01795).
IN_LIST_MAX = 1000


def content_sha(content: str) -> str:
    """The key of a memory's content among its kept vectors: SHA-256 (hex) of the whole content (UTF-8)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def keep_history_vectors(contents: Mapping[str, str]) -> int:
    """Copy the current chunk embeddings of memories to ``oam_history_vectors`` (``HistoryVector``), keyed by
    ``content_sha`` of the content they were made from: ``contents`` is ``{memory stored id: that content}``
    (the memory's content before the write that replaces or deletes its chunks). Nothing is embedded; a pair
    (memory, content) already kept is left as it is (an existence check under the memory's row lock, which
    every caller holds: no ``ignore_conflicts``, which Oracle lacks), so the vectors of a content are those of
    its chunks when it was first left. Call inside the writing transaction, before the chunks go. Returns the
    number of rows written."""
    shas = {key: content_sha(text) for key, text in contents.items() if key and text is not None}
    if not shas:
        return 0
    keys = list(shas)
    kept: set[tuple[str, str]] = set()
    for batch in batches(keys, IN_LIST_MAX):
        kept.update(HistoryVector.objects.filter(memory_id__in=batch, content_sha__in={shas[k] for k in batch})
                    .values_list("memory_id", "content_sha").distinct().order_by())
    wanted = [key for key in keys if (key, shas[key]) not in kept]
    rows = []
    now = timezone.now()
    for batch in batches(wanted, IN_LIST_MAX):
        rows += [HistoryVector(project_id=project_id, memory_id=record_id, content_sha=shas[record_id],
                               chunk_index=index, embedding=vector, created_at=now)
                 for project_id, record_id, index, vector in SearchChunk.objects.filter(
                     source_kind="memory", record_id__in=batch, chunk_index__gte=0).values_list(
                         "project_id", "record_id", "chunk_index", "embedding").order_by()]
    if rows:
        rows_insert(HistoryVector, rows)  # on Oracle: INSERT ... VALUES per row (memory.index.bulk)
    return len(rows)


def history_vectors(project_id: int, pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], list]:
    """The kept vectors of ``(memory stored id, content_sha)`` pairs of project ``project_id``: ``{pair: [vector,
    ...]}`` in chunk order, the pairs without any left out. A stored id carries its project; the project is
    asked all the same. One query per ``IN_LIST_MAX`` pairs (one for a request's memories)."""
    wanted = sorted(set(pairs))
    found: dict[tuple[str, str], list] = {}
    for batch in batches(wanted, IN_LIST_MAX):
        asked = set(batch)
        for record_id, sha, vector in (HistoryVector.objects.filter(project_id=project_id,
                                                                    memory_id__in=sorted({k for k, _ in batch}),
                                                                    content_sha__in=sorted({s for _, s in batch}))
                                       .order_by("memory_id", "content_sha", "chunk_index")
                                       .values_list("memory_id", "content_sha", "embedding")):
            if (record_id, sha) in asked:
                found.setdefault((record_id, sha), []).append(vector)
    return found


# --- fact keys ---------------------------------------------------------------------------------

#: Most source messages of one memory that get its fact keys (the first ones in ``source_message_ids``): an
#: extraction slice names a few; a bound keeps one memory write's index work bounded.
FACT_KEYS_MAX_SOURCES = 20


def _fact_index(memory_chunk_id: int) -> int:
    """The ``chunk_index`` of the fact key a memory chunk (its row id) lends a message: negative, so it never
    meets the message's own chunks (0, 1, ...) and names the chunk it copies."""
    return -int(memory_chunk_id)


def _source_keys(project_id: int, source_message_ids) -> list[str]:
    ids = [mid for mid in (source_message_ids or []) if isinstance(mid, str)][:FACT_KEYS_MAX_SOURCES]
    return [stored_id(project_id, mid) for mid in ids]


def add_fact_keys(memory_keys: Iterable[str]) -> int:
    """Fact keys (the fact-augmented keys of LongMemEval, Wu et al. 2024, arXiv:2410.10813): each valid,
    live, approved memory (not awaiting review: ``memory.records.review_rules``) among ``memory_keys``
    (stored ids) that names source messages (``Memory.source_message_ids``, at most
    ``FACT_KEYS_MAX_SOURCES``) lends each of its chunks to each source message that is indexed: a chunk row
    of the *message* (``source_kind="message"``, its ``record_id``, ``record_type``, scope, status, expiry and
    metadata copied from the message's first chunk) whose ``text``, ``context`` and ``embedding`` are the
    memory chunk's and whose ``chunk_index`` is ``-<memory chunk id>``. A search then finds the message by
    what was extracted from it, as one more chunk of the message (its best chunk decides the distance).

    Kept in step by this module: ``reindex_state`` copies the message's state to them (they are its chunks);
    ``remove_fact_keys`` takes them away when the memory turns invalid or its chunks are deleted (a content
    change, a delete: ``unindex``); a message's own re-indexing and context refresh leave them alone. A
    memory that merely expires keeps lending them until it is purged (its own chunks stop matching at once).
    Replaces any fact keys the same memory chunks had lent. Returns the number of keys written.
    """
    keys = [key for key in dict.fromkeys(memory_keys) if key]
    if not keys:
        return 0
    now = timezone.now()
    memories = [(pk, _source_keys(project_id, sources)) for pk, project_id, sources in
                Memory.objects.filter(live_q(now), pk__in=keys, status=RecordStatus.VALID.value, pending=False)
                .values_list("pk", "project_id", "source_message_ids").order_by()]
    memories = [(pk, sources) for pk, sources in memories if sources]
    if not memories:
        return 0
    templates = {row.record_id: row for row in SearchChunk.objects.filter(
        source_kind="message", chunk_index=0, record_id__in={s for _, sources in memories for s in sources})}
    chunks: dict[str, list[tuple[int, str, Any]]] = {}
    for chunk_id, record_id, text, vector in SearchChunk.objects.filter(
            source_kind="memory", record_id__in=[pk for pk, _ in memories]).values_list(
                "id", "record_id", "text", "embedding").order_by("record_id", "chunk_index"):
        chunks.setdefault(record_id, []).append((chunk_id, text, vector))
    rows, stale = [], []
    for pk, sources in memories:
        for source in sources:
            if (template := templates.get(source)) is None:
                continue  # deleted, or not indexed
            for chunk_id, text, vector in chunks.get(pk, []):
                stale.append((source, _fact_index(chunk_id)))
                rows.append(SearchChunk(
                    project_id=template.project_id, source_kind="message", record_id=source,
                    record_type=template.record_type, chunk_index=_fact_index(chunk_id), user_id=template.user_id,
                    agent_id=template.agent_id, thread_id=template.thread_id, status=template.status,
                    expires_at=template.expires_at, metadata=template.metadata, text=text, context=text,
                    embedding=vector, created_at=now))
    if stale:
        _unindex_facts(stale)
    if rows:
        rows_insert(SearchChunk, rows)
    return len(rows)


def remove_fact_keys(memory_keys: Iterable[str]) -> int:
    """Delete the fact keys the memories ``memory_keys`` (stored ids) lent their source messages
    (``add_fact_keys``); return how many. Their own chunks stay."""
    keys = [key for key in dict.fromkeys(memory_keys) if key]
    if not keys:
        return 0
    return _remove_fact_keys_of(dict(SearchChunk.objects.filter(source_kind="memory", record_id__in=keys)
                                     .values_list("id", "record_id")))


def _remove_fact_keys_of(memory_chunks: dict[int, str]) -> int:
    """Delete the fact keys lent by the memory chunks ``{chunk id: memory stored id}``."""
    by_memory: dict[str, list[int]] = {}
    for chunk_id, record_id in memory_chunks.items():
        by_memory.setdefault(record_id, []).append(chunk_id)
    pairs = []
    for pk, project_id, sources in Memory.objects.filter(pk__in=list(by_memory)).values_list(
            "pk", "project_id", "source_message_ids").order_by():
        for source in _source_keys(project_id, sources):
            pairs += [(source, _fact_index(chunk_id)) for chunk_id in by_memory[pk]]
    return _unindex_facts(pairs) if pairs else 0


def _unindex_facts(pairs: list[tuple[str, int]]) -> int:
    """Delete the fact keys (message stored id, chunk_index) in ``pairs``, through ``unindex``."""
    messages = sorted({source for source, _ in pairs})
    indexes = sorted({index for _, index in pairs})
    wanted = set(pairs)
    ids = [chunk_id for chunk_id, record_id, index in SearchChunk.objects.filter(
        source_kind="message", record_id__in=messages, chunk_index__in=indexes).values_list(
            "id", "record_id", "chunk_index") if (record_id, index) in wanted]
    return unindex(SearchChunk.objects.filter(id__in=ids)) if ids else 0
