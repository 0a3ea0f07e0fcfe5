from __future__ import annotations

import logging

from django.db.models import Q
from django.utils import timezone

from memory.core.ids import stored_id
from memory.core.types import RecordStatus
from memory.fields import VectorDistance
from memory.links.rules import LINK_CANDIDATES
from memory.links.writes import link_create
from memory.llm.prompts import link_prompt, link_schema
from memory.models import Memory, RecordLink, SearchChunk, Thread
from memory.records.selectors import live_q, memory_live_q

logger = logging.getLogger(__name__)


# --- autonomous linking ----------------------------------------------------------------------






def nearest_memory_chunks(*, thread_id: str, memory_id: str, vector, now, limit: int,
                          restrict: dict[str, str] | None = None):
    """Record ids of the live, valid memory chunks of a thread nearest ``vector``, ``memory_id`` left out (and,
    with ``restrict``, those of other users or agents: chunks carry their record's user and agent).

    Ids are stored ids (the thread's, so of its project only).

    One ranked query (cosine distance in SQL, ``FETCH FIRST`` on Oracle); a
    record split into several chunks may appear more than once.
    """
    return (SearchChunk.objects.filter(live_q(now), source_kind="memory", thread_id=thread_id,
                                       status=RecordStatus.VALID.value, **(restrict or {}))
            .exclude(record_id=memory_id)
            .annotate(distance=VectorDistance("embedding", vector))
            .order_by("distance", "id")
            .values_list("record_id", flat=True)[:limit])


def link_candidates(*, thread_id: str, memory_id: str, limit: int = LINK_CANDIDATES,
                    restrict: dict[str, str] | None = None) -> list[Memory]:
    """The nearest live, valid memories of the thread to ``memory_id`` not yet related to it, nearest first
    (within ``restrict``, ``Tenant.row_filter``, when given).

    Ranked in the database by cosine distance to the memory's first chunk.
    ``thread_id`` and ``memory_id`` are stored ids.
    """
    vector = (SearchChunk.objects.filter(source_kind="memory", record_id=memory_id)
              .order_by("chunk_index").values_list("embedding", flat=True).first())
    if vector is None:
        return []
    related = set()
    for source, target in RecordLink.objects.filter(Q(source_id=memory_id) | Q(target_id=memory_id)) \
            .values_list("source_id", "target_id"):
        related.update((source, target))
    now = timezone.now()
    ids: list[str] = []
    for rid in nearest_memory_chunks(thread_id=thread_id, memory_id=memory_id, vector=vector, now=now,
                                     limit=(limit + len(related)) * 3, restrict=restrict):
        if rid not in related and rid not in ids:
            ids.append(rid)
    rows = {m.pk: m for m in Memory.objects.filter(memory_live_q(now), pk__in=ids, thread_id=thread_id,
                                                   **(restrict or {}))}
    return [rows[rid] for rid in ids if rid in rows][:limit]


def propose_links(thread: Thread, memory_id: str, llm, *, max_candidates: int = LINK_CANDIDATES,
                  restrict: dict[str, str] | None = None) -> list[str]:
    """Let ``llm`` relate a stored memory to its nearest memories of ``thread``; return the new relation ids.

    Spec: add_memory ``autonomous_linking``. ``thread`` is a ``memory.models.Thread``
    row; ``memory_id`` (public) a memory it owns (anything else: no links). The LLM sees
    the memory and up to ``max_candidates`` nearest valid memories not yet
    related to it, and answers JSON valid against ``link_schema``; each proposal
    becomes a relation from the new memory, in its own transaction, with the
    usual lifecycle (a superseded preference becomes invalid). Proposals that
    can no longer be stored (pair related meanwhile, record gone) are skipped.
    No candidates: no LLM call. Raises ``memory.llm.adapters.LlmError`` when the LLM
    fails; relations already made stay. Extraction calls this for each memory
    it stores. ``restrict`` (``Tenant.row_filter`` of a restricted client's
    ``add_memory``): the LLM sees, and links to, memories of that user/agent only.
    """
    memory = Memory.objects.filter(memory_live_q(timezone.now()), pk=stored_id(thread.project_id, memory_id),
                                   thread_id=thread.pk, **(restrict or {})).first()
    if memory is None:
        return []
    candidates = link_candidates(thread_id=thread.pk, memory_id=memory.pk, limit=max_candidates, restrict=restrict)
    if not candidates:
        return []
    labels = [f"M{i}" for i in range(1, len(candidates) + 1)]
    reply = llm.complete_json(link_prompt(memory, candidates), link_schema(labels), schema_name="memory_links",
                              max_tokens=300)
    by_label = dict(zip(labels, candidates))
    created: list[str] = []
    seen: set[str] = set()
    for proposal in reply.get("links", []):
        target = by_label[proposal["candidate"]]
        if target.pk in seen:
            continue
        seen.add(target.pk)
        try:
            created.append(link_create(
                thread=thread, source_record_id=memory.public_id, source_record_type=memory.memory_type,
                target_record_id=target.public_id, target_record_type=target.memory_type,
                relation_type=proposal["relation_type"], metadata={"origin": "autonomous_linking"}, restrict=restrict,
            ))
        except ValueError as exc:
            logger.info("autonomous link %s -> %s skipped: %s", memory.pk, target.pk, exc)
    return created
