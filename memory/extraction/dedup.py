from __future__ import annotations

from collections.abc import Collection

import numpy as np
from django.utils import timezone

from memory.core.ids import public_id
from memory.core.types import RecordStatus, SearchScope
from memory.embedders import get_embedder
from memory.extraction.candidates import Candidate, Decision, JobResult, _last_seconds
from memory.extraction.settings import NEAREST_MEMORIES, duplicate_distance, related_distance
from memory.fields import VectorDistance
from memory.index.writer import PENDING_CHUNK_STATUS
from memory.llm.adapters import Llm, LlmError
from memory.llm.prompts import JUDGE_SCHEMA, JUDGE_SCHEMA_NAME, JUDGE_SYSTEM_PROMPT, RELATIONS
from memory.models import Memory, SearchChunk, Thread
from memory.records.selectors import live_q
from memory.search.request import scope_q


def _nearest(chunks, vector, limit: int):
    """``chunks`` as ``(record_id, distance)`` rows, nearest ``vector`` first (cosine, ranked in SQL)."""
    return (chunks.annotate(distance=VectorDistance("embedding", vector))
            .order_by("distance", "id")
            .values_list("record_id", "distance")[:limit])


def nearest_memories_queryset(*, vector, project_id: int, user_id: str | None, agent_id: str | None, now,
                              limit: int = NEAREST_MEMORIES):
    """Chunks of live, valid memories of this user and agent (any thread of the project), nearest ``vector`` first.

    Rows are ``(record_id, distance)`` with stored record ids; the distance is
    ranked in SQL (``VectorDistance``, cosine) against the stored,
    date-prefixed embeddings.
    """
    scope = SearchScope(user_id=user_id, agent_id=agent_id, exact_user_match=True, exact_agent_match=True,
                        exact_thread_match=False)
    return _nearest(SearchChunk.objects.filter(live_q(now), scope_q(scope, project_id), source_kind="memory",
                                               status=RecordStatus.VALID.value), vector, limit)


def nearest_waiting_queryset(*, vector, thread_id: str, now, limit: int = 1):
    """Chunks of live memories of one thread (``thread_id``, a stored id) that await review (their chunks carry
    ``PENDING_CHUNK_STATUS``), nearest ``vector`` first, as ``nearest_memories_queryset``'s rows.

    What ``decide`` finds a waiting candidate's repeat in. One thread only: a reviewer who rejects a memory
    judges the conversation it came from, so a repeat from another conversation waits on its own.
    """
    return _nearest(SearchChunk.objects.filter(live_q(now), thread_id=thread_id, source_kind="memory",
                                               status=PENDING_CHUNK_STATUS), vector, limit)


def decide(candidates: list[Candidate], *, thread: Thread, llm: Llm, result: JobResult,
           review_types: Collection[str] = ()) -> list[Decision]:
    """Decide for each candidate: new, duplicate, updates or contradicts (see the module docstring).

    Distances compare the plain contents (both sides embedded without the date
    prefix the search index carries), so a fact restated in a later session
    still matches. Candidates are also compared with those accepted before them
    in the same job. A judge call that fails leaves the candidate new, noted.

    ``review_types``: the memory types that wait for review when extracted
    (``MemoryExtractionConfig.review_types(extracted=True)``). A candidate of such a
    type that repeats a valid memory of this thread still awaiting review
    (``nearest_waiting_queryset``) is a duplicate too: a preference said twice before
    a reviewer came waited in the queue twice. Only a candidate that would wait
    itself: one that would be valid at once is not hidden behind a review. Relations
    (updates, contradicts) are judged against valid memories alone, as a relation is
    made at once for a candidate that does not wait and would change a memory no
    reviewer has approved (``supersedes`` invalidates its target).
    """
    if not candidates:
        return []
    embedder = get_embedder()
    vectors = embedder.embed([c.content for c in candidates])
    now = timezone.now()
    shortlists = [[rid for rid, _ in nearest_memories_queryset(vector=v, project_id=thread.project_id,
                                                               user_id=thread.user_id, agent_id=thread.agent_id,
                                                               now=now)]
                  for v in vectors]
    waiting = [[rid for rid, _ in nearest_waiting_queryset(vector=v, thread_id=thread.pk, now=now)]
               if c.memory_type in review_types else [] for c, v in zip(candidates, vectors)]
    ids = list(dict.fromkeys(rid for rids in (*shortlists, *waiting) for rid in rids))
    stored = dict(Memory.objects.filter(pk__in=ids, status=RecordStatus.VALID.value).values_list("pk", "content"))
    ids = [i for i in ids if i in stored]
    stored_vectors = dict(zip(ids, embedder.embed([stored[i] for i in ids]))) if ids else {}
    dup, related = duplicate_distance(), related_distance()
    decisions: list[Decision] = []
    accepted: list[np.ndarray] = []
    for candidate, vector, shortlist, repeats in zip(candidates, vectors, shortlists, waiting):
        if any(1.0 - float(np.dot(vector, other)) < dup for other in accepted):
            decisions.append(Decision(candidate, "duplicate", note="repeats a memory of the same job"))
            continue
        distances = {rid: 1.0 - float(np.dot(vector, stored_vectors[rid])) for rid in (*shortlist, *repeats)
                     if rid in stored_vectors}
        nearest = min(distances, key=distances.get, default=None)
        if nearest is not None and distances[nearest] < dup:
            decisions.append(Decision(candidate, "duplicate", related_memory_id=public_id(nearest),
                                      distance=distances[nearest]))
            continue
        best_id = min((rid for rid in shortlist if rid in distances), key=distances.get, default=None)
        decision = Decision(candidate, "new")
        if best_id is not None and distances[best_id] < related:
            decision = _judge(candidate, public_id(best_id), stored[best_id], distances[best_id], llm, result)
        decisions.append(decision)
        if decision.action != "duplicate":
            accepted.append(vector)
    return decisions


def _judge(candidate: Candidate, memory_id: str, existing: str, distance: float, llm: Llm,
           result: JobResult) -> Decision:
    """Ask the LLM how a candidate relates to a close stored memory."""
    messages = [{"role": "system", "content": JUDGE_SYSTEM_PROMPT},
                {"role": "user", "content": f"EXISTING: {existing}\nNEW: {candidate.content}"}]
    try:
        reply = llm.complete_json(messages, JUDGE_SCHEMA, schema_name=JUDGE_SCHEMA_NAME, max_tokens=20)
    except LlmError as exc:
        return Decision(candidate, "new", related_memory_id=memory_id, distance=distance,
                        note=f"relation unknown: {type(exc).__name__}")
    finally:
        result.llm_calls += 1
        result.llm_seconds += _last_seconds(llm)
    action = RELATIONS[reply["relation"]]
    return Decision(candidate, action, related_memory_id=memory_id, distance=distance)
