"""Export and import of one user's memory as JSON Lines (``manage.py export_memory`` / ``import_memory``).

The file is one JSON object per line. The first is the header
(``{"kind": "header", "format": FORMAT, "version": VERSION, "project",
"user_id", "exported_at", "counts"}``); then, in this order, ``thread``,
``message``, ``image`` (bytes base64 in ``data``), ``memory``, ``relation``,
``summary`` and ``memory_version`` lines (the memory history,
``memory.records.history``, deleted memories' included). Ids are public ids (the
caller's, ``memory.core.ids``); datetimes ISO 8601; a ``memory`` line's ``pending``
says it awaits review (``memory.records.review_rules``), and it still does once imported. A file never carries vectors:
the importing database embeds with its own embedder (``memory.index.rebuild.stored_record_texts``).

What a user's export holds (``export_lines``): the threads whose ``user_id``
is the user, with all their messages and summaries, their memories and
images scoped to the user or to no user, and their relations between those
(a record of another user filed in the user's thread, and any relation
naming it, stays out: it is that user's); plus the memories and images
scoped to the user in other threads or in none, and the history of all those memories and of the user's deleted
ones.

Import (``import_lines``) checks the whole file first, embeds what is new
outside any transaction, then writes everything in one transaction: a bad
line or a conflict writes nothing. It is idempotent: a record whose id the
target project holds already is left as it is and counted as ``skipped``, so
importing the same file twice changes nothing the second time. Extraction is
not started (the threads keep their extraction watermark).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory.core import ttl as ttl_rules
from memory.core.errors import InvalidArgument
from memory.core.ids import public_id, stored_id
from memory.embedders import get_embedder
from memory.index import rebuild
from memory.index import writer as index
from memory.links.rules import pair_key
from memory.models import Image, Memory, MemoryVersion, Message, Project, RecordLink, Thread, ThreadSummary
from memory.records import history
from memory.records.validators import check_id, check_memory_type, check_status

FORMAT = "oam-memory-export"
VERSION = 1
#: Line kinds in file order (after the header).
KINDS = ("thread", "message", "image", "memory", "relation", "summary", "memory_version")
#: Texts embedded per call during an import.
EMBED_BATCH = 256


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _parse_when(value: Any, field: str) -> datetime | None:
    if value is None:
        return None
    parsed = parse_datetime(value) if isinstance(value, str) else None
    if parsed is None:
        raise InvalidArgument(field, f"must be an ISO 8601 datetime or null, not {value!r}")
    return parsed


# --- export ----------------------------------------------------------------------------------


def _scope(project: Project, user_id: str) -> tuple[list[str], Q]:
    """The user's threads, and what selects the user's own memories, images and history in the project:
    those scoped to the user, and those in the user's threads scoped to no user. A record of another user
    filed in one of these threads is that user's, not this one's: it stays out."""
    threads = list(Thread.objects.filter(project=project, user_id=user_id).order_by("created_at", "id")
                   .values_list("pk", flat=True))
    return threads, Q(user_id=user_id) | (Q(thread_id__in=threads) & Q(user_id__isnull=True))


def export_lines(*, project: Project, user_id: Any) -> Iterator[dict[str, Any]]:
    """The lines of one user's export (see the module docstring), header first, read lazily in batches.

    Raises ValueError/TypeError for a bad user id.
    """
    user_id = check_id(user_id, "user_id")
    threads, scoped = _scope(project, user_id)
    memories = Memory.objects.filter(scoped, project=project).order_by("created_at", "id")
    images = Image.objects.with_bytes().filter(scoped, project=project).order_by("created_at", "id")
    messages = Message.objects.filter(thread_id__in=threads).order_by("thread_id", "seq")
    others = ~scoped & Q(thread_id__in=threads)  # another user's records filed in this user's threads
    relations = RecordLink.objects.filter(project=project, thread_id__in=threads)
    for foreign in (Memory.objects.filter(others, project=project).values("pk"),
                    Image.objects.filter(others, project=project).values("pk")):  # subqueries, any size
        relations = relations.exclude(source_id__in=foreign).exclude(target_id__in=foreign)
    relations = relations.order_by("created_at", "id")
    summaries = ThreadSummary.objects.filter(thread_id__in=threads).order_by("thread_id")
    versions = MemoryVersion.objects.filter(scoped, project=project).order_by("memory_id", "version")
    counts = {"thread": len(threads), "message": messages.count(), "image": images.count(),
              "memory": memories.count(), "relation": relations.count(), "summary": summaries.count(),
              "memory_version": versions.count()}
    yield {"kind": "header", "format": FORMAT, "version": VERSION, "project": project.slug, "user_id": user_id,
           "exported_at": timezone.now().isoformat(), "counts": counts}
    for row in Thread.objects.filter(pk__in=threads).order_by("created_at", "id"):
        yield {"kind": "thread", "id": row.public_id, "user_id": row.user_id, "agent_id": row.agent_id,
               "metadata": row.metadata, "config": row.config, "next_seq": row.next_seq,
               "extracted_through_seq": row.extracted_through_seq, "created_at": _when(row.created_at)}
    for row in messages.iterator(chunk_size=500):
        yield {"kind": "message", "id": row.public_id, "thread_id": public_id(row.thread_id), "seq": row.seq,
               "role": row.role, "content": row.content, "parts": row.parts, "timestamp": row.timestamp,
               "metadata": row.metadata, "status": row.status, "expires_at": _when(row.expires_at),
               "created_at": _when(row.created_at)}
    for row in images.iterator(chunk_size=50):
        yield {"kind": "image", "id": row.public_id, "thread_id": public_id(row.thread_id),
               "message_id": public_id(row.message_id) if row.message_id else None, "user_id": row.user_id,
               "agent_id": row.agent_id, "mime_type": row.mime_type, "description": row.description,
               "data": base64.b64encode(bytes(row.data)).decode("ascii"), "width": row.width,
               "height": row.height, "metadata": row.metadata, "timestamp": row.timestamp,
               "expires_at": _when(row.expires_at), "created_at": _when(row.created_at)}
    for row in memories.iterator(chunk_size=500):
        yield {"kind": "memory", "id": row.public_id, "memory_type": row.memory_type, "content": row.content,
               "user_id": row.user_id, "agent_id": row.agent_id,
               "thread_id": public_id(row.thread_id) if row.thread_id else None, "timestamp": row.timestamp,
               "metadata": row.metadata, "status": row.status, "expires_at": _when(row.expires_at),
               "source_message_ids": row.source_message_ids, "created_at": _when(row.created_at),
               "pending": row.pending}
    for row in relations.iterator(chunk_size=500):
        yield {"kind": "relation", "id": row.public_id, "thread_id": public_id(row.thread_id),
               "source_id": public_id(row.source_id), "source_type": row.source_type,
               "target_id": public_id(row.target_id), "target_type": row.target_type,
               "relation_type": row.relation_type, "opposite_relation_type": row.opposite_relation_type,
               "metadata": row.metadata, "timestamp": row.timestamp, "created_at": _when(row.created_at)}
    for row in summaries:
        yield {"kind": "summary", "thread_id": public_id(row.thread_id), "content": row.content,
               "topics": row.topics, "through_seq": row.through_seq, "revision": row.revision}
    for row in versions.iterator(chunk_size=500):
        yield {"kind": "memory_version", "memory_id": public_id(row.memory_id), "version": row.version,
               "action": row.action, "actor_kind": row.actor_kind, "actor_id": row.actor_id, "reason": row.reason,
               "relation_id": public_id(row.relation_id) if row.relation_id else None,
               "thread_id": public_id(row.thread_id) if row.thread_id else None, "user_id": row.user_id,
               "agent_id": row.agent_id, "before": row.before, "after": row.after,
               "created_at": _when(row.created_at)}


def export_to(stream, *, project: Project, user_id: Any) -> Counter:
    """Write ``export_lines`` to a text ``stream``, one JSON object per line; return the lines per kind."""
    written: Counter = Counter()
    for line in export_lines(project=project, user_id=user_id):
        stream.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        written[line["kind"]] += 1
    return written


# --- import ----------------------------------------------------------------------------------


def read_lines(stream) -> list[dict[str, Any]]:
    """Parse a JSON Lines text stream into objects; ValueError (``InvalidArgument``, field ``line N``) for a
    line that is not a JSON object. Blank lines are ignored."""
    lines = []
    for number, text in enumerate(stream, 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"line {number}", f"is not JSON: {exc.msg}") from None
        if not isinstance(value, dict):
            raise InvalidArgument(f"line {number}", "must be a JSON object")
        lines.append(value)
    return lines


def _need(line: dict, name: str, types: type | tuple, where: str, *, optional: bool = False) -> Any:
    value = line.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, types) or isinstance(value, bool) and types is int:
        raise InvalidArgument(f"{where}.{name}", f"missing or of the wrong type ({type(value).__name__})")
    return value


def _check(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    if not lines or lines[0].get("kind") != "header":
        raise InvalidArgument("line 1", "must be the export header")
    header = lines[0]
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise InvalidArgument("header", f"not a {FORMAT} file of version {VERSION}")
    by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for number, line in enumerate(lines[1:], 2):
        kind = line.get("kind")
        if kind not in by_kind:
            raise InvalidArgument(f"line {number}", f"unknown kind {kind!r}")
        where = f"line {number} ({kind})"
        line["_where"] = where
        if kind in ("thread", "message", "image", "memory", "relation"):
            check_id(_need(line, "id", str, where), f"{where}.id")
        if kind in ("message", "image", "relation", "summary"):
            _need(line, "thread_id", str, where)
        by_kind[kind].append(line)
    for line in by_kind["message"]:
        _need(line, "seq", int, line["_where"])
        _need(line, "role", str, line["_where"])
        _need(line, "content", str, line["_where"])
    for line in by_kind["memory"]:
        _need(line, "content", str, line["_where"])
        _need(line, "memory_type", str, line["_where"])
    for line in by_kind["image"]:
        try:
            line["_bytes"] = base64.b64decode(_need(line, "data", str, line["_where"]), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidArgument(f"{line['_where']}.data", "is not base64") from None
    for line in by_kind["memory_version"]:
        _need(line, "memory_id", str, line["_where"])
        _need(line, "version", int, line["_where"])
    return by_kind


def import_lines(lines: list[dict[str, Any]], *, project: Project,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Counter]:
    """Load an export into ``project``, all or nothing; return ``{"created": Counter, "skipped": Counter}`` by kind.

    Records whose id ``project`` holds already are skipped (idempotent).
    New messages, memories and images are embedded with this database's
    embedder before the transaction (``progress(done, total)`` after each
    batch), then every row and its search chunks are written in one
    transaction (``memory.index.rebuild.index_stored``), and each imported thread's
    keyword contexts are rebuilt. Memory history is written as it was (the
    import's own actor is not added). Raises ValueError (``InvalidArgument``)
    naming the line for a bad file; a database conflict (e.g. a message seq
    taken by another message) raises and writes nothing.
    """
    by_kind = _check(lines)
    pid = project.pk
    key = lambda public: stored_id(pid, public)  # noqa: E731
    created: Counter = Counter()
    skipped: Counter = Counter()

    def new(kind: str, model, lines_of_kind: list[dict]) -> list[dict]:
        existing = set(model.objects.filter(pk__in=[key(line["id"]) for line in lines_of_kind])
                       .values_list("pk", flat=True))
        fresh = [line for line in lines_of_kind if key(line["id"]) not in existing]
        skipped[kind] += len(lines_of_kind) - len(fresh)
        return fresh

    threads = new("thread", Thread, by_kind["thread"])
    messages = new("message", Message, by_kind["message"])
    images = new("image", Image, by_kind["image"])
    memories = new("memory", Memory, by_kind["memory"])
    relations = new("relation", RecordLink, by_kind["relation"])

    thread_rows = {key(line["id"]): Thread(
        id=key(line["id"]), project=project, user_id=line.get("user_id"), agent_id=line.get("agent_id"),
        metadata=line.get("metadata") or {}, config=line.get("config") or {}, next_seq=line.get("next_seq") or 1,
        extracted_through_seq=line.get("extracted_through_seq") or 0,
        created_at=_parse_when(line.get("created_at"), f"{line['_where']}.created_at") or timezone.now(),
    ) for line in threads}
    message_rows = [Message(
        id=key(line["id"]), project=project, thread_id=key(line["thread_id"]), seq=line["seq"], role=line["role"],
        content=line["content"], parts=line.get("parts"), timestamp=line.get("timestamp"),
        event_at=_parse_when_stamp(line.get("timestamp")), metadata=line.get("metadata") or {},
        status=line.get("status") or "valid", expires_at=_parse_when(line.get("expires_at"), line["_where"]),
        created_at=_parse_when(line.get("created_at"), line["_where"]) or timezone.now(),
    ) for line in messages]
    image_rows = [Image(
        id=key(line["id"]), project=project, thread_id=key(line["thread_id"]),
        message_id=key(line["message_id"]) if line.get("message_id") else None, user_id=line.get("user_id"),
        agent_id=line.get("agent_id"), mime_type=line.get("mime_type") or "", description=line.get("description"),
        data=line["_bytes"], size_bytes=len(line["_bytes"]), width=line.get("width") or 0,
        height=line.get("height") or 0, metadata=line.get("metadata") or {}, timestamp=line.get("timestamp"),
        event_at=_parse_when_stamp(line.get("timestamp")),
        expires_at=_parse_when(line.get("expires_at"), line["_where"]),
        created_at=_parse_when(line.get("created_at"), line["_where"]) or timezone.now(),
    ) for line in images]
    memory_rows = [Memory(
        id=key(line["id"]), project=project, memory_type=line["memory_type"], content=line["content"],
        user_id=line.get("user_id"), agent_id=line.get("agent_id"),
        thread_id=key(line["thread_id"]) if line.get("thread_id") else None, timestamp=line.get("timestamp"),
        event_at=_parse_when_stamp(line.get("timestamp")), metadata=line.get("metadata") or {},
        status=line.get("status") or "valid", expires_at=_parse_when(line.get("expires_at"), line["_where"]),
        source_message_ids=list(line.get("source_message_ids") or []),
        created_at=_parse_when(line.get("created_at"), line["_where"]) or timezone.now(),
        pending=line.get("pending") is True,  # awaits review in the new project too (memory.records.review_rules)
    ) for line in memories]
    for row in [*memory_rows, *message_rows]:
        check_status(row.status)
    for row in memory_rows:
        check_memory_type(row.memory_type)

    # Embed outside the transaction: the index is rebuilt from the rows (a file carries no vectors).
    stamps = {line["id"]: line.get("timestamp") for line in by_kind["message"]}
    work: list[tuple[str, Any, list[str], list[str]]] = []
    for row in message_rows:
        work.append(("message", row, *rebuild.stored_record_texts("message", row)))
    for row in memory_rows:
        work.append(("memory", row, *rebuild.stored_record_texts("memory", row)))
    for row in image_rows:
        fallback = stamps.get(public_id(row.message_id)) if row.message_id else None
        work.append(("image", row, *rebuild.stored_record_texts("image", row, fallback_timestamp=fallback)))
    texts = [text for _, _, _, embed in work for text in embed]
    vectors: list = []
    for start in range(0, len(texts), EMBED_BATCH):
        vectors += list(get_embedder().embed(texts[start:start + EMBED_BATCH]))
        if progress is not None:
            progress(min(start + EMBED_BATCH, len(texts)), len(texts))

    with transaction.atomic():
        Thread.objects.bulk_create(list(thread_rows.values()))
        created["thread"] += len(thread_rows)
        Message.objects.bulk_create(message_rows, batch_size=500)
        created["message"] += len(message_rows)
        for row in image_rows:
            row.save(force_insert=True)
        created["image"] += len(image_rows)
        Memory.objects.bulk_create(memory_rows, batch_size=500)
        created["memory"] += len(memory_rows)
        scopes = {t.pk: t for t in Thread.objects.filter(pk__in={m.thread_id for m in message_rows})}
        items, offset = [], 0
        for kind, row, chunks, embed in work:
            items.append((kind, row, scopes.get(row.thread_id) if kind == "message" else None, chunks,
                          vectors[offset:offset + len(embed)]))
            offset += len(embed)
        rebuild.index_stored(items)
        for thread_id in {m.thread_id for m in message_rows}:
            seqs = Message.objects.filter(thread_id=thread_id).values_list("seq", flat=True)
            index.refresh_message_contexts(thread_id, min(seqs), max(seqs))
        RecordLink.objects.bulk_create([RecordLink(
            id=key(line["id"]), project=project, thread_id=key(line["thread_id"]),
            source_id=key(line["source_id"]), source_type=line.get("source_type") or "memory",
            target_id=key(line["target_id"]), target_type=line.get("target_type") or "memory",
            relation_type=line.get("relation_type") or "", opposite_relation_type=line.get("opposite_relation_type")
            or "", pair_key=pair_key(key(line["source_id"]), key(line["target_id"])),
            metadata=line.get("metadata") or {}, timestamp=line.get("timestamp"),
            created_at=_parse_when(line.get("created_at"), line["_where"]) or timezone.now(),
        ) for line in relations])
        created["relation"] += len(relations)
        for line in by_kind["summary"]:
            thread_key = key(line["thread_id"])
            if ThreadSummary.objects.filter(thread_id=thread_key).exists():
                skipped["summary"] += 1
                continue
            ThreadSummary.objects.create(thread_id=thread_key, project=project, content=line.get("content") or "",
                                         topics=line.get("topics") or [], through_seq=line.get("through_seq") or 0,
                                         revision=line.get("revision") or 0)
            created["summary"] += 1
        versions = by_kind["memory_version"]
        have = set(MemoryVersion.objects.filter(memory_id__in={key(v["memory_id"]) for v in versions})
                   .values_list("memory_id", "version"))
        fresh = [v for v in versions if (key(v["memory_id"]), v["version"]) not in have]
        skipped["memory_version"] += len(versions) - len(fresh)
        MemoryVersion.objects.bulk_create([MemoryVersion(
            project=project, memory_id=key(v["memory_id"]), version=v["version"],
            action=v.get("action") if v.get("action") in history.ACTIONS else "update",
            actor_kind=v.get("actor_kind") or "import", actor_id=(v.get("actor_id") or "")[:200],
            reason=(v.get("reason") or "")[:500], relation_id=key(v["relation_id"]) if v.get("relation_id") else None,
            thread_id=key(v["thread_id"]) if v.get("thread_id") else None, user_id=v.get("user_id"),
            agent_id=v.get("agent_id"), before=v.get("before"), after=v.get("after"),
            created_at=_parse_when(v.get("created_at"), v["_where"]) or timezone.now(),
        ) for v in fresh], batch_size=500)
        created["memory_version"] += len(fresh)
    return {"created": created, "skipped": skipped}


def _parse_when_stamp(value: Any):
    return ttl_rules.parse_timestamp(value) if isinstance(value, str) else None
