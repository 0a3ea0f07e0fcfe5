from __future__ import annotations

import numpy as np
from django.utils import timezone
from memory.embedders import get_embedder
from memory.fields import VectorDistance
from memory.llm import Llm, LlmError
from memory.models import PENDING_CHUNK_STATUS, Memory, SearchChunk, Thread
from memory.search import scope_q
from memory.selectors import live_q
from memory.tenancy import public_id
from memory.types import RecordStatus, SearchScope
from memory.extraction.candidates import Candidate, Decision, JobResult, _last_seconds
from memory.extraction.config import NEAREST_MEMORIES, duplicate_distance, related_distance
from memory.prompts import RELATIONS, JUDGE_SCHEMA, JUDGE_SCHEMA_NAME, JUDGE_SYSTEM_PROMPT


def nearest_memories_queryset(*, vector, project_id: int, user_id: str | None, agent_id: str | None, now,
                              limit: int = NEAREST_MEMORIES):
    """Chunks of live memories of this user and agent (any thread of the project) that are valid or await
    review, nearest ``vector`` first.

    Rows are ``(record_id, distance)`` with stored record ids; the distance is
    ranked in SQL (``VectorDistance``, cosine) against the stored,
    date-prefixed embeddings. A memory awaiting review (``Memory.pending``, its chunks
    ``PENDING_CHUNK_STATUS``) is here so that ``decide`` finds a repeat of it a duplicate: without it, a
    preference said twice before a reviewer came waited in the review queue twice.
    """
    scope = SearchScope(user_id=user_id, agent_id=agent_id, exact_user_match=True, exact_agent_match=True,
                        exact_thread_match=False)
    return (SearchChunk.objects.filter(live_q(now), scope_q(scope, project_id), source_kind="memory",
                                       status__in=(RecordStatus.VALID.value, PENDING_CHUNK_STATUS))
            .annotate(distance=VectorDistance("embedding", vector))
            .order_by("distance", "id")
            .values_list("record_id", "distance")[:limit])


def decide(candidates: list[Candidate], *, thread: Thread, llm: Llm, result: JobResult) -> list[Decision]:
    """Decide for each candidate: new, duplicate, updates or contradicts (see the module docstring).

    Distances compare the plain contents (both sides embedded without the date
    prefix the search index carries), so a fact restated in a later session
    still matches. Candidates are also compared with those accepted before them
    in the same job. A judge call that fails leaves the candidate new, noted.
    A memory awaiting review counts for duplicates only: a candidate is judged
    (updates, contradicts) against valid memories alone, since a relation is made at
    once for a candidate that does not wait and would change a memory no reviewer
    has approved (``supersedes`` invalidates its target).
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
    ids = list(dict.fromkeys(rid for shortlist in shortlists for rid in shortlist))
    rows = list(Memory.objects.filter(pk__in=ids).values_list("pk", "content", "pending"))
    stored = {pk: content for pk, content, _ in rows}
    waiting = {pk for pk, _, pending in rows if pending}
    ids = [i for i in ids if i in stored]
    stored_vectors = dict(zip(ids, embedder.embed([stored[i] for i in ids]))) if ids else {}
    dup, related = duplicate_distance(), related_distance()
    decisions: list[Decision] = []
    accepted: list[np.ndarray] = []
    for candidate, vector, shortlist in zip(candidates, vectors, shortlists):
        if any(1.0 - float(np.dot(vector, other)) < dup for other in accepted):
            decisions.append(Decision(candidate, "duplicate", note="repeats a memory of the same job"))
            continue
        distances = {rid: 1.0 - float(np.dot(vector, stored_vectors[rid])) for rid in shortlist
                     if rid in stored_vectors}
        best_id = min(distances, key=distances.get, default=None)
        if best_id is not None and distances[best_id] < dup:
            decisions.append(Decision(candidate, "duplicate", related_memory_id=public_id(best_id),
                                      distance=distances[best_id]))
            continue
        best_id = min((rid for rid in distances if rid not in waiting), key=distances.get, default=None)
        best = distances[best_id] if best_id is not None else 2.0
        decision = Decision(candidate, "new")
        if best_id is not None and best < related:
            decision = _judge(candidate, public_id(best_id), stored[best_id], best, llm, result)
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
