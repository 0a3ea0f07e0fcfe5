"""Search as of an instant (issue #32, recorded time): rank what the store held then.

``search(..., as_of=T)`` (``Thread.search``, ``AgentMemory.search``, ``POST .../search`` with ``as_of``) answers
from the memories rebuilt at ``T`` (``memory.records.as_of``: created later absent, edited later undone, deleted
later present, erased never) and the messages and standalone images that exist now and were created at or before
``T``. Ranking is by vector only, whatever the search mode (no keyword arm: the keyword index holds the current
texts), ``score = 1 - distance``:

* a memory whose content at ``T`` is its current content is compared through its current chunks' embeddings
  (``oam_search_chunks``: nothing is embedded again);
* a memory whose content changed since (or that was deleted since) is compared through the vectors of its chunks
  then, kept with its history (``oam_history_vectors``, ``HistoryVector``: copied from the chunks the change
  replaced, ``memory.index.writer.keep_history_vectors``), read in one query for the request's memories
  (``memory.index.writer.history_vectors``, by stored id, which carries the project, and the SHA-256 of the
  content then): nothing is embedded;
* only a content with no kept vectors (a version left before they were kept, migration 0017; an imported history)
  is chunked and embedded as the index embeds it (``memory.core.chunking.chunk_text``, then
  ``memory.index.writer.embedding_text`` with the memory's event time then) by the process's embedder, once: those
  vectors are kept in a bounded in-process LRU keyed by the embedded text's SHA-256 (``HISTORICAL_VECTORS``, at most
  ``HISTORICAL_CACHE_SIZE`` chunks). ``bench/as_of.py`` measures both, the LRU cold and warm: see docs/search.md,
  "As of";
* messages and images are ranked by their chunks in SQL (exact ``VECTOR_DISTANCE`` over the filtered chunks,
  ``as_of_chunk_queryset``, compiled for Oracle in tests/oracle), those created after ``T`` left out. Message and
  image edits and deletes are not versioned: a message deleted since is absent, an edited one answers with its
  current text.

Supported: the scope arguments, ``record_types``, ``max_results``, ``include_invalid_results`` (the statuses at
``T``), ``valid_at`` (the windows at ``T``), ``token_budget`` and ``soft_token_budget``. Not supported with ``as_of``
(ValueError naming them): ``metadata_filter`` (``memory.records.as_of.reject_metadata_filter``) and ``num_hops``
(relations are not versioned).
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections import OrderedDict
from datetime import datetime

import numpy as np
from django.db.models import Q
from django.utils import timezone

from memory.core.batching import embedding_cost
from memory.core.chunking import chunk_text
from memory.core.errors import MAX_EMBED_CHARS, InvalidArgument
from memory.core.types import SearchResult
from memory.embedders import embed_query, get_embedder
from memory.fields import VectorDistance
from memory.index.writer import content_sha, embedding_text, history_vectors
from memory.models import MEMORY_TYPES, Image, Memory, Message, SearchChunk
from memory.records.as_of import AsOfRecords, answer, erased_since, memories_at, reject_metadata_filter
from memory.records.selectors import image_dto, live_q, message_dto
from memory.search.query import CHUNK_OVERFETCH, filtered_chunks
from memory.search.request import SearchRequest, apply_token_budgets, scope_q

#: Historical chunk vectors kept in this process (LRU).
HISTORICAL_CACHE_SIZE = 20_000


class VectorCache:
    """A bounded LRU of chunk vectors by the SHA-256 of the chunk's text (thread-safe); ``hits``/``misses`` count
    lookups, for the bench."""

    def __init__(self, size: int = HISTORICAL_CACHE_SIZE):
        self.size, self.hits, self.misses = size, 0, 0
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every vector and reset the counters."""
        with self._lock:
            self._vectors.clear()
            self.hits = self.misses = 0

    def vectors(self, texts: list[str]) -> list[np.ndarray]:
        """The embedder's vector of each text, embedding (in one call) only those not cached, within the
        per-request embedding budget (as ``memory.embedders.embed_records`` keeps it: ValueError naming ``as_of``
        over ``MAX_EMBED_CHARS``, before anything is embedded; an outside attack had one as-of search embed 474,556
        characters of old contents in 18.8 s, and unbounded with more memories)."""
        keys = [hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts]
        with self._lock:
            found = {key: self._vectors[key] for key in keys if key in self._vectors}
            for key in found:
                self._vectors.move_to_end(key)
        missing = list(dict.fromkeys(key for key in keys if key not in found))
        if missing:
            by_key = dict(zip(keys, texts, strict=True))
            texts_missing = [by_key[key] for key in missing]
            cost = sum(map(embedding_cost, texts_missing))
            if cost > MAX_EMBED_CHARS:
                raise InvalidArgument("as_of", f"rebuilding this instant needs {cost} characters of old contents "
                                               f"embedded (versions older than the kept vectors), over the "
                                               f"per-request budget of {MAX_EMBED_CHARS} (MAX_EMBED_CHARS): "
                                               f"narrow the scope or the record types")
            fresh = get_embedder().embed(texts_missing)
            with self._lock:
                for key, vector in zip(missing, fresh, strict=True):
                    found[key] = self._vectors[key] = np.asarray(vector, dtype="<f4")
                while len(self._vectors) > self.size:
                    self._vectors.popitem(last=False)
        with self._lock:
            self.hits += len(keys) - len(missing)
            self.misses += len(missing)
        return [found[key] for key in keys]


#: This process's historical vectors (module docstring).
HISTORICAL_VECTORS = VectorCache()


def _cosine(query: np.ndarray, vectors: list[np.ndarray]) -> float:
    """The smallest cosine distance between ``query`` and ``vectors`` (2.0 for none)."""
    if not vectors:
        return 2.0
    matrix = np.vstack(vectors).astype("<f4")
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    return float(np.min(1.0 - (matrix @ query) / np.where(norms == 0, 1.0, norms)))


def check_as_of_request(request: SearchRequest) -> None:
    """The arguments a search cannot combine with ``as_of`` (module docstring): ValueError naming them."""
    reject_metadata_filter(request.metadata_filter)
    if request.num_hops:
        raise InvalidArgument("num_hops", "cannot be combined with as_of (issue #32): relations are not versioned")


def memory_distances(request: SearchRequest, at: datetime, query_vector) -> list[tuple[SearchResult, str]]:
    """The memories of the request's scope and types as they were at ``at``, each with its distance to the query
    (results, unranked, with their stored ids)."""
    types = [name for name in request.record_types if name in MEMORY_TYPES]
    if not types:
        return []
    found = memories_at(project_id=request.project_id, at=at, scope=scope_q(request.scope, request.project_id),
                        memory_types=set(types), valid_at=request.valid_at,
                        include_invalid=request.include_invalid_results)
    keys = [item.key for item in found]
    current = dict(Memory.objects.filter(pk__in=keys).values_list("pk", "content")) if keys else {}
    same = [item.key for item in found if current.get(item.key) == item.record.content]
    stored: dict[str, list[np.ndarray]] = {}
    if same:
        for record_id, vector in (SearchChunk.objects.filter(source_kind="memory", record_id__in=same)
                                  .values_list("record_id", "embedding")):
            stored.setdefault(record_id, []).append(vector)
    older = [item for item in found if item.key not in stored]
    kept = history_vectors(request.project_id, [(item.key, content_sha(item.record.content)) for item in older])
    for item in older:
        if (vectors := kept.get((item.key, content_sha(item.record.content)))) is not None:
            stored[item.key] = vectors
    older = [item for item in older if item.key not in stored]  # versions left before the vectors were kept
    chunks = [[embedding_text(text, item.event_time) for text in chunk_text(item.record.content) or
               [item.record.content]] for item in older]  # what the index embedded (the event time's prefix)
    vectors = iter(HISTORICAL_VECTORS.vectors([text for texts in chunks for text in texts]))
    for item, texts in zip(older, chunks, strict=True):
        stored[item.key] = [next(vectors) for _ in texts]
    return [(SearchResult(record=item.record, distance=(d := _cosine(query_vector, stored[item.key])),
                          score=1.0 - d), item.key) for item in found]


def as_of_chunk_queryset(request: SearchRequest, at: datetime, query_vector, now, limit: int):
    """Message and image chunks of the request's scope whose record was created at or before ``at``, ranked by
    cosine distance (also compiled for Oracle in tests/oracle)."""
    messages = Message.objects.filter(project_id=request.project_id, created_at__lte=at).values("pk")
    images = Image.objects.filter(project_id=request.project_id, created_at__lte=at).values("pk")
    recorded = (Q(source_kind="message", record_id__in=messages) | Q(source_kind="image", record_id__in=images))
    return (filtered_chunks(request, now).filter(recorded)
            .annotate(distance=VectorDistance("embedding", query_vector))
            .order_by("distance", "id").values_list("source_kind", "record_id", "distance")[:limit])


def other_distances(request: SearchRequest, at: datetime, query_vector, now) -> list[tuple[SearchResult, str]]:
    """The messages and standalone images the search may return as of ``at``, with their best chunk's distance."""
    types = [name for name in request.record_types if name in ("message", "image")]
    if not types:
        return []
    narrowed = dataclasses.replace(request, record_types=types, metadata_filter=None)
    best: dict[tuple[str, str], float] = {}
    for kind, record_id, distance in as_of_chunk_queryset(narrowed, at, query_vector, now,
                                                          request.max_results * CHUNK_OVERFETCH):
        best.setdefault((kind, record_id), float(distance))
    results = []
    for kind, model, dto in (("message", Message, message_dto), ("image", Image, image_dto)):
        ids = [record_id for key_kind, record_id in best if key_kind == kind]
        for row in model.objects.filter(live_q(now), pk__in=ids).order_by() if ids else ():
            distance = best[(kind, row.pk)]
            results.append((SearchResult(record=dto(row), distance=distance, score=1.0 - distance), row.pk))
    return results


def search_as_of(request: SearchRequest, at: datetime) -> AsOfRecords:
    """Run a validated search as of ``at`` (module docstring); results best first, within the budgets, as an
    ``AsOfRecords`` list (``erased_since``: the scope's user or agent was erased after ``at``)."""
    check_as_of_request(request)
    now = timezone.now()
    query_vector = np.asarray(embed_query(request.query), dtype="<f4")
    scored = memory_distances(request, at, query_vector) + other_distances(request, at, query_vector, now)
    scored.sort(key=lambda pair: (pair[0].distance, pair[1]))
    results = apply_token_budgets([result for result, _ in scored[: request.max_results]], request.token_budget,
                                  request.soft_token_budget)
    scope = request.scope
    erased = erased_since(project_id=request.project_id, at=at, user_id=scope.user_id, agent_id=scope.agent_id)
    return answer(results, at, erased)
