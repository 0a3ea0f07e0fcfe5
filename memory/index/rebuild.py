"""The search index of stored rows rebuilt: how ``manage.py import_memory`` indexes what it imports.

An imported message, memory or image is chunked and embedded exactly as the services do when they write it
(``stored_record_texts``: the same chunks and embedding texts as ``messages_add``, ``memory_prepare`` and
``image_add``), then its chunk rows are written in one bulk insert (``index_stored``, through
``memory.index.writer``, the one writer of ``oam_search_chunks``). The caller embeds between the two, outside
its transaction, and refreshes the imported messages' keyword context (``refresh_message_contexts``).
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from memory.core.chunking import chunk_text
from memory.index.writer import (
    chunk_rows,
    chunk_status,
    embedding_text,
    image_chunk_rows,
    image_chunk_texts,
    index_rows,
    message_chunk_text,
    window,
)
from memory.models import SearchChunk


def stored_record_texts(source_kind: str, record, *, fallback_timestamp: str | None = None
                        ) -> tuple[list[str], list[str]]:
    """The chunks of a stored message, memory or image row and the texts their embeddings are computed from,
    exactly as the services make them when they write it (``messages_add``, ``memory_prepare``, ``image_add``).

    ``fallback_timestamp``: an image part's message timestamp, used when the
    image has none of its own. Raises ValueError for another ``source_kind``.
    """
    if source_kind == "message":
        chunks, stamp = chunk_text(message_chunk_text(record.role, record.content)), record.timestamp
    elif source_kind == "memory":
        chunks, stamp = chunk_text(record.content), record.timestamp
    elif source_kind == "image":
        chunks, stamp = image_chunk_texts(record.description), record.timestamp or fallback_timestamp
    else:
        raise ValueError(f"unknown source kind {source_kind!r}")
    return chunks, [embedding_text(c, stamp) for c in chunks]


def index_stored(items: list[tuple[str, Any, Any, list[str], Any]]) -> None:
    """Index saved rows whose chunks and vectors were computed from ``stored_record_texts``: each item is
    ``(source_kind, row, scope, chunks, vectors)`` (``scope``: a message's thread, else None). Inside the
    caller's transaction; messages' keyword context is refreshed by the caller (``refresh_message_contexts``)."""
    rows: list[SearchChunk] = []
    for source_kind, record, scope, chunks, vectors in items:
        if source_kind == "image":
            rows += image_chunk_rows(record, chunks, vectors)
            continue
        owner = scope if scope is not None else record
        rows += chunk_rows(
            project_id=record.project_id, source_kind=source_kind, record_id=record.pk,
            record_type="message" if source_kind == "message" else record.memory_type, chunks=chunks,
            vectors=vectors, user_id=owner.user_id, agent_id=owner.agent_id, thread_id=record.thread_id,
            status=chunk_status(record), expires_at=record.expires_at, metadata=record.metadata,
            now=timezone.now(), **window(record))
    index_rows(rows)
