"""Export and import of one user's memory as JSON Lines (``manage.py export_memory`` / ``import_memory``).

The file is one JSON object per line. The first is the header
(``{"kind": "header", "format": FORMAT, "version": VERSION, "project",
"user_id", "exported_at", "counts"}``); then, in this order, ``thread``,
``message``, ``image`` (bytes base64 in ``data``), ``memory``, ``relation``,
``summary`` and ``memory_version`` lines (the memory history,
``memory.records.history``, deleted memories' included). Ids are public ids (the
caller's, ``memory.core.ids``); datetimes ISO 8601; a ``memory`` line's ``pending``
says it awaits review (``memory.records.review_rules``), and it still does once imported; its ``derived_from``
lists the memories of the export it was inferred from (issue #32: ``MemoryDerivation`` edges; an edge to a
memory outside the export stays out of it). A file never carries vectors:
the importing database embeds with its own embedder (``memory.index.rebuild.stored_record_texts``).

What a user's export holds (``export_lines``): the threads whose ``user_id``
is the user, with all their messages and summaries, their memories and
images scoped to the user or to no user, and their relations between those
(a record of another user filed in the user's thread, and any relation
naming it, stays out: it is that user's); plus the memories and images
scoped to the user in other threads or in none, and the history of all those memories and of the user's deleted
ones.

Import (``import_lines``, ``manage.py import_memory``) is a door like the API: a file is untrusted input (it
is how users move their memory between providers), so it is held to the API's rules and to one user, and
refusals name the line, the field and the rule (``line 7 (message).role: must not hold a control character``).

* **Every field through the API's own checks** (``memory.records.validators``, ``memory.services.parts``,
  ``memory.records.image_rules``; no copy of a rule): ids; a message's role, text and metadata as
  ``add_messages`` (``parse_message``) and its stored content parts (``parse_parts``: they must join to its
  text, and each image part must be an image line of that message); a memory's content, type, status and
  metadata, and its validity window (issue #32), as ``add_memory``; text and metadata limits
  (``MAX_CONTENT_CHARS``, ``MAX_METADATA_DEPTH``, ``MAX_METADATA_BYTES``, no lone surrogate or NUL); image
  bytes as an upload (``validate_image`` under the
  thread's ``ImageInputLimitConfig``: decoded and verified, the declared type must be what the bytes are,
  size and pixel limits; width, height and size are the bytes', not the file's); a relation's labels and
  endpoint types (``check_relation_type``, ``check_record_type``); a thread's ``config`` read back through
  ``MemoryExtractionConfig``, ``ImageInputLimitConfig`` and ``MemorySearchConfig``; a summary's text and
  topics (``MAX_CONTENT_CHARS``, ``MAX_TOPICS`` of ``MAX_TOPIC_CHARS``); a version's action, actor kind and
  snapshots (``memory.records.history``); datetimes (``memory.core.ttl.parse_timestamp``). Each record's
  text is within ``MAX_CONTENT_CHARS``, so the embedding work of a line is bounded as a request's is.
* **One user, one project.** The header's ``user_id`` is the user imported; every thread must be that
  user's, every memory that user's or no user's in a thread of the file (``user_id`` on any other line is
  refused, naming the line). Everything is written into the ``project`` given, under its stored ids.
  A line naming a thread must name one of the file (or, with ``merge``, one of the user's threads the project
  holds); an image's user and agent are its thread's and its message a message line of the file. A memory
  of the user filed in a thread that is not in the file (another user's thread, exported with it) is
  imported in no thread (counted in ``adjusted``; with ``merge``, unless that thread is the user's here): it
  never joins another user's thread of the target project.
* **An import never changes a record the project holds.** A line whose id the project holds already is
  skipped only when it is the same record of the same user (a thread of the user with the same agent; a
  message in the same thread with the same seq, role and text; an image in the same thread and message with
  the same bytes; a memory with the same user, agent, thread, type and text; a relation between the same
  memories with the same label; history versions with the same numbers and actions); any other taken id is
  refused. So importing the same file twice changes nothing the second time (its state there, edits,
  reviews, wins). A memory deleted in the target (its history kept, e.g. rejected in review) is not made
  again. Duplicate ids inside the file are refused (the second line never wins).
* **New records only into the file's own threads**, unless ``merge`` (``--merge``): then new messages,
  images, memories, relations and a summary (when the thread has none) may also be added to threads the
  file's user has in the project (a thread line of the file must match its agent too), a relation may join
  a new memory (not one awaiting review) to the user's existing live, approved memory of the thread (an
  invalidating label then applies the lifecycle rule to it, ``memory.links.rules``), and a memory's
  ``source_message_ids`` may name the user's existing messages. A merged message must take a free ``seq``
  of the thread (a taken one is refused, never renumbered), and the thread's ``next_seq`` follows the
  file's. Never another user's thread or memory, and never a change to an existing record, with or without
  ``merge``.
* **Relations**: both ends are memories of the import (or, with ``merge``, the user's), in the relation's
  thread, of the types the line says; no self-relation, one relation per pair.
* **Derived from** (issue #32): a new memory's ``derived_from`` keeps only memories of the file (with ``merge``,
  also the user's live memories here); others are dropped (``adjusted``), never an edge to another user's
  memory. Whether a memory is flagged (``needs_review``) is not carried: it is this database's review state.
* **Summaries** only for threads the file creates (or, with ``merge``, the user's thread without one),
  ``through_seq`` below the thread's ``next_seq``.
* **Source messages**: a memory's ``source_message_ids`` keep only messages of the file (with ``merge``, also
  the user's messages here); others are dropped (``adjusted``): a memory lends its words to its sources'
  search chunks (fact keys, ``memory.index.writer``), so it may never name another user's message.
* **History is not forgeable.** ``memory_version`` lines are written only for memories the file creates
  (their versions count from 1 without a gap and the last one holds the memory's content and type; their
  scope copies are the memory's) and for memories deleted before the export (their history ends with the
  delete: ``after`` null; the user's, or no user's in a thread of the file); never for a memory the project
  holds. Each version holds the snapshot a restore (``memory.services.memories.memory_restore``) puts back:
  ``after``, or a ``delete``'s or ``reject``'s ``before`` (its ``after`` null); a snapshot holds at least
  ``SNAPSHOT_REQUIRED`` (content, type, status), each field by the API's rule. Every imported version names
  the ``import`` actor (``actor_kind`` "import", id "import_memory"): the file's action, actor and reason are
  kept only as text in ``reason`` (``imported; the file says approve by staff:alice; ...``, cut to
  ``history.REASON_LENGTH``), so history never claims a review, staff's or admin's, done elsewhere.
* **Review state is not the file's to decide.** An imported memory of a type that waits for review when
  extracted (``MemoryExtractionConfig.review_types(extracted=True)``: ``review_memory_types``, guideline and
  preference by default, and those the memory's thread's config adds) is stored pending, whatever the
  file's ``pending`` says, and a version by the ``import`` actor records it (the memory's last imported
  version, when the file carries its history); a memory the file says is pending stays pending. The same
  rule (``_Import._waits``) applies to every snapshot of the imported history (``before``, ``after``): one
  of such a type is stored ``pending: true``, so restoring it puts the memory back in the review queue,
  never live (a ``fact`` whose version 1 is an "approved" guideline). ``trust_review_state``
  (``--trust-review-state``, for an operator moving a database it trusts) keeps the file's ``pending``, its
  snapshots and its versions' actors instead.
* **All or nothing.** The whole file is checked and resolved against the project first, what is new is
  embedded outside any transaction (``progress``), then everything is written in one transaction; a bad
  line, a refused one or a conflict with a concurrent write writes nothing. Extraction is not started (the
  threads keep their extraction watermark).
"""

from __future__ import annotations

import base64
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.context.summaries import MAX_TOPIC_CHARS
from memory.core import ttl as ttl_rules
from memory.core.errors import MAX_CONTENT_CHARS, DomainError, InvalidArgument, InvalidType, check_size, check_text
from memory.core.ids import public_id, stored_id
from memory.core.types import MemorySearchConfig, RecordStatus
from memory.core.valid_time import WINDOW_FIELDS, check_instant, check_window
from memory.embedders import get_embedder
from memory.extraction.config import MemoryExtractionConfig
from memory.index import rebuild
from memory.index import writer as index
from memory.links.dependants import derivations_reset
from memory.links.rules import INVALIDATING_RELATIONS, opposite_label, pair_key, set_memory_status
from memory.llm.prompts import MAX_TOPICS
from memory.models import (
    Image,
    Memory,
    MemoryDerivation,
    MemoryVersion,
    Message,
    Project,
    RecordLink,
    Thread,
    ThreadSummary,
)
from memory.records import history
from memory.records.derivations import check_derived_from
from memory.records.image_rules import THREAD_CONFIG_KEY as IMAGE_LIMITS_KEY
from memory.records.image_rules import (
    ImageInputLimitConfig,
    check_description,
    check_mime_type,
    decode_base64,
    validate_image,
)
from memory.records.selectors import memory_live_q
from memory.records.validators import (
    check_bounded_int,
    check_content,
    check_id,
    check_memory_type,
    check_metadata,
    check_record_type,
    check_relation_type,
    check_scope_id,
    check_status,
)
from memory.services.common import lock_thread
from memory.services.parts import parse_message, parse_parts

FORMAT = "oam-memory-export"
VERSION = 1
#: Line kinds in file order (after the header).
KINDS = ("thread", "message", "image", "memory", "relation", "summary", "memory_version")
#: Texts embedded per call during an import.
EMBED_BATCH = 256


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _window_line(row: Memory) -> dict[str, str]:
    """A memory line's validity window (issue #32): ``valid_from``/``valid_to`` (ISO 8601), each only when set,
    so the line of a memory without a window is as before valid time existed."""
    return {name: _when(getattr(row, name)) for name in WINDOW_FIELDS if getattr(row, name) is not None}


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
    derived: dict[str, list[str]] = {}
    for memory_id, source_id in (MemoryDerivation.objects.filter(memory_id__in=memories.values("pk"),
                                                                 source_id__in=memories.values("pk"))
                                 .order_by("id").values_list("memory_id", "source_id")):
        derived.setdefault(memory_id, []).append(public_id(source_id))
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
               "pending": row.pending, **_window_line(row), "derived_from": derived.get(row.pk, [])}
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
    line that is not a JSON object. Blank lines are ignored (line numbers still count them)."""
    lines = []
    for number, text in enumerate(stream, 1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgument(f"line {number}", f"is not JSON: {exc.msg}") from None
        except RecursionError:
            raise InvalidArgument(f"line {number}", "nests too deep to read") from None
        except ValueError:  # Python's own limit on the digits of an int (sys.get_int_max_str_digits)
            raise InvalidArgument(f"line {number}", f"holds a number of more than {sys.get_int_max_str_digits()} "
                                                    "digits") from None
        if not isinstance(value, dict):
            raise InvalidArgument(f"line {number}", "must be a JSON object")
        value["_line"] = number
        lines.append(value)
    return lines


def _parse_when(value: Any, field: str) -> datetime | None:
    """An ISO 8601 datetime of the file (``memory.core.ttl.parse_timestamp``: aware, UTC), or None."""
    if value is None:
        return None
    parsed = ttl_rules.parse_timestamp(value) if isinstance(value, str) else None
    if parsed is None:
        raise InvalidArgument(field, f"must be an ISO 8601 datetime or null, not {value!r}")
    return parsed


def _count(line: dict, name: str, where: str, *, low: int, default: int | None = None) -> int | None:
    value = line.get(name)
    if value is None and default is not None:
        return default
    return check_bounded_int(value, f"{where}.{name}", low=low, sql_count=True)


def _bounded_text(line: dict, name: str, where: str, limit: int) -> str:
    """An optional string field of at most ``limit`` characters ("" when absent)."""
    value = line.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidType(f"{where}.{name}", f"must be a string, not {type(value).__name__}")
    check_text(value, f"{where}.{name}")
    return check_size(value, f"{where}.{name}", limit)


#: The fields a snapshot must hold: ``memory.services.memories.memory_restore`` puts them back.
SNAPSHOT_REQUIRED = ("content", "memory_type", "status")


def _snapshot(value: Any, field: str) -> dict[str, Any] | None:
    """A history snapshot (``memory.records.history.SNAPSHOT_FIELDS``), each field by the API's rule for it, with
    the fields a restore puts back (``SNAPSHOT_REQUIRED``); ``expires_at`` as ``history.snapshot`` writes it.
    None for null."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidType(field, f"must be a snapshot object or null, not {type(value).__name__}")
    unknown = sorted(set(value) - set(history.SNAPSHOT_FIELDS))
    if unknown:
        raise InvalidArgument(field, f"unknown field(s) {unknown}; a snapshot holds "
                                     f"{', '.join(history.SNAPSHOT_FIELDS)}")
    missing = [name for name in SNAPSHOT_REQUIRED if name not in value]
    if missing:
        raise InvalidArgument(f"{field}.{missing[0]}", f"is missing: a snapshot holds {', '.join(SNAPSHOT_REQUIRED)} "
                                                       "(a restore puts them back)")
    checks = {"content": check_content, "memory_type": check_memory_type, "metadata": check_metadata,
              "status": check_status, "timestamp": ttl_rules.check_timestamp}
    for name, check in checks.items():
        if name in value:
            check(value[name], f"{field}.{name}")
    value = dict(value)
    for name in ("expires_at", *WINDOW_FIELDS):
        if name in value:
            value[name] = _when(_parse_when(value[name], f"{field}.{name}"))
    for flag in ("pending", "needs_review"):
        if not isinstance(value.get(flag, False), bool):
            raise InvalidType(f"{field}.{flag}", "must be a bool")
    if value.get("review_cause") is not None:  # a flagged dependant's cause (issue #32): a JSON object
        value["review_cause"] = check_metadata(value["review_cause"], f"{field}.review_cause")
    return value


#: ``Thread.config``'s key of the thread's search settings (``memory.client.common.SEARCH_CONFIG_KEY``).
SEARCH_CONFIG_KEY = "search_config"


def _config(value: Any, field: str) -> dict[str, Any]:
    """A thread's ``config``: a JSON object within the metadata limits whose settings the engine reads back
    (``MemoryExtractionConfig``, ``ImageInputLimitConfig``, ``MemorySearchConfig``) are valid."""
    config = check_metadata(value, field)
    for name in (IMAGE_LIMITS_KEY, SEARCH_CONFIG_KEY):
        if config.get(name) is not None and not isinstance(config[name], dict):
            raise InvalidType(f"{field}.{name}", "must be an object")
    try:
        MemoryExtractionConfig.from_thread_config(config)
        ImageInputLimitConfig.from_thread_config(config)
        if config.get(SEARCH_CONFIG_KEY):
            MemorySearchConfig(**config[SEARCH_CONFIG_KEY])
    except DomainError as exc:
        raise InvalidArgument(f"{field}.{exc.field}", exc.message) from None
    except (TypeError, ValueError) as exc:  # a constructor's own refusal of a name or value
        raise InvalidArgument(field, str(exc)) from None
    return config


def _review_types(thread: Thread | None) -> set[str]:
    """The memory types an import stores pending: those extraction reviews (``MemoryExtractionConfig.review_types``
    with ``extracted=True``, ``memory.records.review_rules``) by default and in the memory's thread's config."""
    types = set(MemoryExtractionConfig().review_types(extracted=True))
    if thread is not None:
        types |= set(MemoryExtractionConfig.from_thread_config(thread.config).review_types(extracted=True))
    return types


#: Values bound in one ``IN (...)`` lookup of an import (SQLite binds at most 32,766 per statement).
IN_BATCH = 900


def _each_in(queryset, field: str, values) -> Iterator:
    """The rows of ``queryset`` whose ``field`` is among ``values``, looked up ``IN_BATCH`` values at a time."""
    values = list(values)
    for start in range(0, len(values), IN_BATCH):
        yield from queryset.filter(**{f"{field}__in": values[start:start + IN_BATCH]})


#: A thread's state in an import: made by it, or one of the file user's threads the project holds already.
NEW, EXISTING = "new", "existing"


class _Import:
    """One import: the file checked line by line (``_read``), resolved against the project (``_resolve``),
    embedded (``_embed``) and written (``_write``). Every refusal is an ``InvalidArgument`` whose field names
    the line (``line 7 (message).role``). See the module docstring for the rules."""

    def __init__(self, lines: list[dict[str, Any]], *, project: Project, merge: bool, trust_review_state: bool):
        self.project, self.merge, self.trust = project, merge, trust_review_state
        self.created: Counter = Counter()
        self.skipped: Counter = Counter()
        self.adjusted: Counter = Counter()
        self.threads: dict[str, tuple[str, Thread]] = {}  # public id -> (NEW | EXISTING, row)
        self.by_kind = self._read(lines)

    def key(self, public: str) -> str:
        return stored_id(self.project.pk, public)

    @staticmethod
    def refuse(line: dict, name: str, message: str) -> InvalidArgument:
        return InvalidArgument(f"{line['_where']}.{name}", message)

    def _skip_same(self, line: dict, kind: str, stored: tuple, given: tuple, differs: str) -> None:
        """A line whose record id is taken here: skipped (counted) when the stored record is the same
        (``stored == given``), else refused naming ``differs``: an import never changes a record."""
        if stored != given:
            raise self.refuse(line, "id", f"{kind} {line['_v']['id']!r} exists already {differs}: an import never "
                                          "changes a record")
        line["_state"] = "skip"
        self.skipped[kind] += 1

    def _waits(self, memory_type: str, thread: Thread | None) -> bool:
        """The import's review rule: a memory (or a history snapshot) of ``memory_type`` in ``thread`` is stored
        pending whatever the file says (``_review_types``), unless the operator trusts the file."""
        return not self.trust and memory_type in _review_types(thread)

    # --- the file alone -------------------------------------------------------------------------------

    def _read(self, lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
        if not lines or lines[0].get("kind") != "header":
            raise InvalidArgument("line 1", "must be the export header")
        header = lines[0]
        version = header.get("version")
        if header.get("format") != FORMAT or type(version) is not int or version != VERSION:  # not True, not 1.0
            raise InvalidArgument("line 1 (header)", f"not a {FORMAT} file of version {VERSION}")
        self.user = check_id(header.get("user_id"), "line 1 (header).user_id")
        by_kind: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
        seen: dict[tuple, int] = {}
        for position, line in enumerate(lines[1:], 2):
            number = line.get("_line", position)
            for name in [name for name in line if name.startswith("_")]:
                del line[name]  # the import's own notes on a line start with "_": none comes from the file
            kind = line.get("kind")
            if not isinstance(kind, str) or kind not in by_kind:
                raise InvalidArgument(f"line {number}.kind", f"must be one of: {', '.join(KINDS)}, not {kind!r}")
            where = f"line {number} ({kind})"
            line["_where"], line["_n"] = where, number
            v = line["_v"] = getattr(self, f"_read_{kind}")(line, where)
            # duplicates inside the file are refused (the second line never silently wins)
            if kind == "memory_version":
                field, name, shown = "version", (kind, v["memory_id"], v["version"]), f"version {v['version']}"
            else:
                field = "thread_id" if kind == "summary" else "id"
                name, shown = (kind, v[field]), repr(v[field])
            if name in seen:
                raise self.refuse(line, field, f"{shown} is also on line {seen[name]}")
            seen[name] = number
            by_kind[kind].append(line)
        return by_kind

    def _owner(self, line: dict, where: str, *, optional: bool) -> str | None:
        """The line's ``user_id``: the file's user (or, when ``optional``, no user); anything else is refused."""
        value = line.get("user_id")
        if value is None and optional:
            return None
        if value != self.user:
            raise InvalidArgument(f"{where}.user_id", f"is {value!r}, not the file's user {self.user!r} (line 1): "
                                                     "a file holds one user's records")
        return value

    def _read_thread(self, line: dict, where: str) -> dict[str, Any]:
        self._owner(line, where, optional=False)
        return {"id": check_id(line.get("id"), f"{where}.id"),
                "agent_id": check_scope_id(line.get("agent_id"), f"{where}.agent_id"),
                "metadata": check_metadata(line.get("metadata"), f"{where}.metadata"),
                "config": _config(line.get("config"), f"{where}.config"),
                "next_seq": _count(line, "next_seq", where, low=1) if line.get("next_seq") is not None else None,
                "extracted_through_seq": _count(line, "extracted_through_seq", where, low=0, default=0),
                "created_at": _parse_when(line.get("created_at"), f"{where}.created_at") or timezone.now()}

    def _read_message(self, line: dict, where: str) -> dict[str, Any]:
        content = line.get("content")
        if not isinstance(content, str):
            raise InvalidType(f"{where}.content", f"must be a string (the message's text), not "
                                                  f"{type(content).__name__}")
        parsed = parse_message({"role": line.get("role"), "content": content, "id": line.get("id"),
                                "timestamp": line.get("timestamp"), "metadata": line.get("metadata")}, 0, field=where)
        if parsed.id is None:
            raise InvalidType(f"{where}.id", "must be a string, not NoneType")
        parts, image_parts = line.get("parts"), []
        if parts is not None:
            if not isinstance(parts, list):
                raise InvalidType(f"{where}.parts", "must be a list of content parts or null")
            text, parts, images = parse_parts(parts, f"{where}.parts")
            if any(image.image is not None for image in images):
                raise InvalidArgument(f"{where}.parts", "an image part carries no bytes here: they are on the "
                                                        "image's own line")
            if text != content:
                raise InvalidArgument(f"{where}.parts", "its text parts must join (one per line) to content")
            image_parts = [image.part["id"] for image in images]
        return {"id": parsed.id, "thread_id": check_id(line.get("thread_id"), f"{where}.thread_id"),
                "seq": _count(line, "seq", where, low=1), "role": parsed.role, "content": content, "parts": parts,
                "image_parts": image_parts, "timestamp": parsed.timestamp, "metadata": parsed.metadata,
                "status": check_status(line.get("status") or "valid", f"{where}.status"),
                "expires_at": _parse_when(line.get("expires_at"), f"{where}.expires_at"),
                "created_at": _parse_when(line.get("created_at"), f"{where}.created_at") or timezone.now()}

    def _read_image(self, line: dict, where: str) -> dict[str, Any]:
        message = line.get("message_id")
        return {"id": check_id(line.get("id"), f"{where}.id"),
                "thread_id": check_id(line.get("thread_id"), f"{where}.thread_id"),
                "message_id": None if message is None else check_id(message, f"{where}.message_id"),
                "user_id": line.get("user_id"), "agent_id": line.get("agent_id"),
                "data": decode_base64(line.get("data"), f"{where}.data"),
                "mime_type": check_mime_type(line.get("mime_type"), f"{where}.mime_type"),
                "description": check_description(line.get("description"), f"{where}.description"),
                "metadata": check_metadata(line.get("metadata"), f"{where}.metadata"),
                "timestamp": ttl_rules.check_timestamp(line.get("timestamp"), f"{where}.timestamp"),
                "expires_at": _parse_when(line.get("expires_at"), f"{where}.expires_at"),
                "created_at": _parse_when(line.get("created_at"), f"{where}.created_at") or timezone.now()}

    def _read_memory(self, line: dict, where: str) -> dict[str, Any]:
        sources = line.get("source_message_ids")
        if sources is not None and not isinstance(sources, list):
            raise InvalidType(f"{where}.source_message_ids", "must be a list of message ids or null")
        pending = line.get("pending")
        if pending is not None and not isinstance(pending, bool):
            raise InvalidType(f"{where}.pending", "must be a bool or null")
        derived = check_derived_from(line.get("derived_from"), f"{where}.derived_from")
        thread = line.get("thread_id")
        return {"id": check_id(line.get("id"), f"{where}.id"),
                "memory_type": check_memory_type(line.get("memory_type"), f"{where}.memory_type"),
                "content": check_content(line.get("content"), f"{where}.content"),
                "user_id": self._owner(line, where, optional=True),
                "agent_id": check_scope_id(line.get("agent_id"), f"{where}.agent_id"),
                "thread_id": None if thread is None else check_id(thread, f"{where}.thread_id"),
                "timestamp": ttl_rules.check_timestamp(line.get("timestamp"), f"{where}.timestamp"),
                "metadata": check_metadata(line.get("metadata"), f"{where}.metadata"),
                "status": check_status(line.get("status") or "valid", f"{where}.status"),
                "expires_at": _parse_when(line.get("expires_at"), f"{where}.expires_at"),
                "source_message_ids": [check_id(mid, f"{where}.source_message_ids[{i}]")
                                       for i, mid in enumerate(sources or [])],
                "pending": pending is True,
                "derived_from": derived,
                "created_at": _parse_when(line.get("created_at"), f"{where}.created_at") or timezone.now(),
                **self._read_window(line, where)}

    @staticmethod
    def _read_window(line: dict, where: str) -> dict[str, datetime | None]:
        """A memory line's validity window (issue #32) by ``add_memory``'s rules (``memory.core.valid_time``):
        each bound null/absent or ISO 8601, ``valid_to`` not before ``valid_from``."""
        window = {name: check_instant(line.get(name), f"{where}.{name}") for name in WINDOW_FIELDS}
        try:
            check_window(window["valid_from"], window["valid_to"])
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}.valid_to", exc.message) from None
        return window

    def _read_relation(self, line: dict, where: str) -> dict[str, Any]:
        relation_type = check_relation_type(line.get("relation_type"), f"{where}.relation_type")
        opposite = line.get("opposite_relation_type")
        return {"id": check_id(line.get("id"), f"{where}.id"),
                "thread_id": check_id(line.get("thread_id"), f"{where}.thread_id"),
                "source_id": check_id(line.get("source_id"), f"{where}.source_id"),
                "source_type": check_record_type(line.get("source_type"), f"{where}.source_type"),
                "target_id": check_id(line.get("target_id"), f"{where}.target_id"),
                "target_type": check_record_type(line.get("target_type"), f"{where}.target_type"),
                "relation_type": relation_type,
                "opposite_relation_type": opposite_label(relation_type) if opposite is None
                else check_relation_type(opposite, f"{where}.opposite_relation_type"),
                "metadata": check_metadata(line.get("metadata"), f"{where}.metadata"),
                "timestamp": ttl_rules.check_timestamp(line.get("timestamp"), f"{where}.timestamp"),
                "created_at": _parse_when(line.get("created_at"), f"{where}.created_at") or timezone.now()}

    def _read_summary(self, line: dict, where: str) -> dict[str, Any]:
        topics = line.get("topics") or []
        if not isinstance(topics, list) or len(topics) > MAX_TOPICS:
            raise InvalidArgument(f"{where}.topics", f"must be a list of at most {MAX_TOPICS} strings")
        for i, topic in enumerate(topics):
            _bounded_text({"t": topic}, "t", f"{where}.topics[{i}]", MAX_TOPIC_CHARS)
        return {"thread_id": check_id(line.get("thread_id"), f"{where}.thread_id"),
                "content": _bounded_text(line, "content", where, MAX_CONTENT_CHARS), "topics": topics,
                "through_seq": _count(line, "through_seq", where, low=0, default=0),
                "revision": _count(line, "revision", where, low=0, default=0)}

    def _read_memory_version(self, line: dict, where: str) -> dict[str, Any]:
        action, kind = line.get("action"), line.get("actor_kind")
        if action not in history.ACTIONS:
            raise InvalidArgument(f"{where}.action", f"must be one of: {', '.join(history.ACTIONS)}")
        if kind not in history.ACTOR_KINDS:
            raise InvalidArgument(f"{where}.actor_kind", f"must be one of: {', '.join(history.ACTOR_KINDS)}")
        relation, thread = line.get("relation_id"), line.get("thread_id")
        return {"memory_id": check_id(line.get("memory_id"), f"{where}.memory_id"),
                "version": _count(line, "version", where, low=1), "action": action, "actor_kind": kind,
                "actor_id": _bounded_text(line, "actor_id", where, history.ACTOR_ID_LENGTH),
                "reason": _bounded_text(line, "reason", where, history.REASON_LENGTH),
                "relation_id": None if relation is None else check_id(relation, f"{where}.relation_id"),
                "thread_id": None if thread is None else check_id(thread, f"{where}.thread_id"),
                "user_id": check_scope_id(line.get("user_id"), f"{where}.user_id"),
                "agent_id": check_scope_id(line.get("agent_id"), f"{where}.agent_id"),
                "before": _snapshot(line.get("before"), f"{where}.before"),
                "after": _snapshot(line.get("after"), f"{where}.after"),
                "created_at": _parse_when(line.get("created_at"), f"{where}.created_at") or timezone.now()}

    # --- the file against the project -----------------------------------------------------------------

    def _thread(self, line: dict, public: str, name: str = "thread_id") -> tuple[str, Thread]:
        """The thread a line names: one of the file (``NEW``, or ``EXISTING`` when the project holds it as the
        same user's already) or, with ``--merge`` only, another thread of the file's user (``EXISTING``)."""
        if public in self.threads:
            return self.threads[public]
        row = Thread.objects.filter(pk=self.key(public)).first()
        if row is None:
            raise self.refuse(line, name, f"no thread {public!r} in the file or in project {self.project.slug!r}")
        if row.user_id != self.user:
            raise self.refuse(line, name, f"thread {public!r} is another user's (the file holds the records of user "
                                          f"{self.user!r})")
        if not self.merge:
            raise self.refuse(line, name, f"thread {public!r} exists already and is not in the file: adding to it "
                                          "needs --merge")
        self.threads[public] = (EXISTING, row)
        return self.threads[public]

    def _attach(self, line: dict, state: str, public: str, name: str = "thread_id") -> None:
        """A new record into an existing thread (or onto an existing memory): only with ``--merge``."""
        if state == EXISTING and not self.merge:
            raise self.refuse(line, name, f"thread {public!r} exists already: adding new records to it needs --merge "
                                          "(the same user's threads only)")

    def _resolve(self) -> None:
        self._resolve_threads()
        self._resolve_messages()
        self._resolve_images()
        self._resolve_memories()
        self._resolve_relations()
        self._resolve_summaries()
        self._resolve_versions()

    def _resolve_threads(self) -> None:
        lines = self.by_kind["thread"]
        have = Thread.objects.in_bulk([self.key(line["_v"]["id"]) for line in lines])
        self.new_threads: list[Thread] = []
        for line in lines:
            v = line["_v"]
            row = have.get(self.key(v["id"]))
            if row is not None:
                if row.user_id != self.user:
                    raise self.refuse(line, "id", f"thread {v['id']!r} exists already and is another user's")
                if row.agent_id != v["agent_id"]:
                    raise self.refuse(line, "agent_id", f"thread {v['id']!r} exists already with another agent")
                self.threads[v["id"]] = (EXISTING, row)
                self.skipped["thread"] += 1
                continue
            row = Thread(id=self.key(v["id"]), project=self.project, user_id=self.user, agent_id=v["agent_id"],
                         metadata=v["metadata"], config=v["config"], next_seq=v["next_seq"] or 1,
                         extracted_through_seq=v["extracted_through_seq"], created_at=v["created_at"])
            line["_row"] = row
            self.threads[v["id"]] = (NEW, row)
            self.new_threads.append(row)

    def _resolve_messages(self) -> None:
        lines = self.by_kind["message"]
        have = Message.objects.only("id", "thread_id", "seq", "role", "content").in_bulk(
            [self.key(line["_v"]["id"]) for line in lines])
        self.messages: dict[str, dict] = {}  # public id -> line, every message of the file
        self.new_messages: list[Message] = []
        seqs: dict[tuple[str, int], int] = {}
        top: dict[str, tuple[int, dict]] = {}  # thread pk -> (highest seq, its line)
        for line in lines:
            v = line["_v"]
            state, thread = self._thread(line, v["thread_id"])
            self.messages[v["id"]] = line
            row = have.get(self.key(v["id"]))
            if row is not None:
                if row.thread_id != thread.pk:
                    raise self.refuse(line, "id", f"message {v['id']!r} exists already in another thread")
                self._skip_same(line, "message", (row.seq, row.role, row.content), (v["seq"], v["role"], v["content"]),
                                "with another seq, role or content")
                continue
            self._attach(line, state, v["thread_id"])
            if (thread.pk, v["seq"]) in seqs:
                raise self.refuse(line, "seq", f"{v['seq']} is also the seq of line {seqs[thread.pk, v['seq']]} in "
                                               f"thread {v['thread_id']!r}")
            seqs[thread.pk, v["seq"]] = line["_n"]
            if v["seq"] > top.get(thread.pk, (0, None))[0]:
                top[thread.pk] = (v["seq"], line)
            line["_state"] = "new"
            line["_row"] = row = Message(
                id=self.key(v["id"]), project=self.project, thread_id=thread.pk, seq=v["seq"], role=v["role"],
                content=v["content"], parts=v["parts"], timestamp=v["timestamp"],
                event_at=ttl_rules.parse_timestamp(v["timestamp"]), metadata=v["metadata"], status=v["status"],
                expires_at=v["expires_at"], created_at=v["created_at"])
            self.new_messages.append(row)
        self.raise_seq: dict[str, int] = {}  # an existing thread's pk -> the next_seq the merge needs
        for line in self.by_kind["thread"]:
            row = line.get("_row")
            if row is None:
                continue
            high, where = top.get(row.pk, (0, None))
            if line["_v"]["next_seq"] is None:
                row.next_seq = high + 1
            elif row.next_seq <= high:
                raise self.refuse(line, "next_seq", f"is {row.next_seq}; it must be greater than the seq of every "
                                                    f"message of the thread ({where['_where']} has seq {high})")
            if row.extracted_through_seq >= row.next_seq:
                raise self.refuse(line, "extracted_through_seq", f"must be less than next_seq ({row.next_seq})")
        for public, (state, thread) in self.threads.items():
            if state != EXISTING:
                continue
            wanted = [seq for (pk, seq) in seqs if pk == thread.pk]
            taken = min(_each_in(Message.objects.filter(thread_id=thread.pk).values_list("seq", "id"), "seq", wanted),
                        default=None)
            if taken is not None:
                line = next(m for m in lines if m.get("_state") == "new" and m["_v"]["seq"] == taken[0]
                            and m["_v"]["thread_id"] == public)
                raise self.refuse(line, "seq", f"seq {taken[0]} of thread {public!r} is message "
                                               f"{public_id(taken[1])!r}'s here")
            if wanted:
                self.raise_seq[thread.pk] = max(wanted) + 1

    def _resolve_images(self) -> None:
        lines = self.by_kind["image"]
        keys = [self.key(line["_v"]["id"]) for line in lines]
        have = {row.pk: row for row in _each_in(Image.objects.with_bytes(), "pk", keys)}
        self.images: dict[str, dict] = {}
        self.new_images: list[Image] = []
        for line in lines:
            v = line["_v"]
            state, thread = self._thread(line, v["thread_id"])
            self.images[v["id"]] = line
            if (v["user_id"], v["agent_id"]) != (thread.user_id, thread.agent_id):
                raise self.refuse(line, "user_id", f"an image has its thread's user and agent "
                                                   f"({thread.user_id!r}, {thread.agent_id!r})")
            message_key = None
            if v["message_id"] is not None:
                message = self.messages.get(v["message_id"])
                if message is None or message["_v"]["thread_id"] != v["thread_id"]:
                    raise self.refuse(line, "message_id", f"{v['message_id']!r} is not a message of thread "
                                                          f"{v['thread_id']!r} in this file")
                if v["id"] not in message["_v"]["image_parts"]:
                    raise self.refuse(line, "message_id", f"message {v['message_id']!r} ({message['_where']}) has "
                                                          f"no image part {v['id']!r}")
                message_key = self.key(v["message_id"])
            row = have.get(self.key(v["id"]))
            if row is not None:
                self._skip_same(line, "image", (row.thread_id, row.message_id, bytes(row.data)),
                                (thread.pk, message_key, v["data"]), "with other bytes or in another thread or message")
                continue
            self._attach(line, state, v["thread_id"])
            valid = validate_image(v["data"], v["mime_type"], limits=ImageInputLimitConfig.from_thread_config(
                thread.config), field=f"{line['_where']}.data", mime_field=f"{line['_where']}.mime_type")
            line["_state"] = "new"
            line["_row"] = row = Image(
                id=self.key(v["id"]), project=self.project, thread_id=thread.pk, message_id=message_key,
                user_id=thread.user_id, agent_id=thread.agent_id, mime_type=valid.mime_type.value,
                description=v["description"], data=valid.data, size_bytes=valid.size_bytes, width=valid.width,
                height=valid.height, metadata=v["metadata"], timestamp=v["timestamp"],
                event_at=ttl_rules.parse_timestamp(v["timestamp"]), expires_at=v["expires_at"],
                created_at=v["created_at"])
            self.new_images.append(row)
        for line in self.by_kind["message"]:
            for part in line["_v"]["image_parts"]:
                image = self.images.get(part)
                if image is None or image["_v"]["message_id"] != line["_v"]["id"]:
                    raise self.refuse(line, "parts", f"image part {part!r} has no image line of this message in "
                                                     "the file")

    def _resolve_memories(self) -> None:
        lines = self.by_kind["memory"]
        keys = [self.key(line["_v"]["id"]) for line in lines]
        have = Memory.objects.in_bulk(keys)
        gone = set(_each_in(MemoryVersion.objects.values_list("memory_id", flat=True), "memory_id", keys))
        self.memories: dict[str, dict] = {}
        self.new_memories: list[Memory] = []
        self.forced: list[Memory] = []  # stored pending though the file said reviewed
        for line in lines:
            v = line["_v"]
            self.memories[v["id"]] = line
            state, thread = None, None
            if v["thread_id"] is not None:
                try:
                    state, thread = self._thread(line, v["thread_id"])
                except InvalidArgument:
                    if v["user_id"] is None:
                        raise
                    self.adjusted["memory in no thread (its thread is not in the file)"] += 1
            if v["user_id"] is None and thread is None:
                raise self.refuse(line, "thread_id", "a memory of no user must be in a thread of the file")
            thread_key = thread.pk if thread is not None else None
            key = self.key(v["id"])
            row = have.get(key)
            if row is not None:
                if row.user_id != v["user_id"]:
                    raise self.refuse(line, "id", f"memory {v['id']!r} exists already and is another user's")
                self._skip_same(line, "memory", (row.agent_id, row.thread_id, row.memory_type, row.content),
                                (v["agent_id"], thread_key, v["memory_type"], v["content"]),
                                "with another agent, thread, type or content")
                line["_row"] = row
                continue
            if key in gone:  # deleted here (e.g. rejected in review): its history stays, the memory is not remade
                if MemoryVersion.objects.filter(memory_id=key).exclude(user_id=v["user_id"]).exists():
                    raise self.refuse(line, "id", f"memory {v['id']!r} has another user's history here")
                line["_state"] = "gone"
                self.skipped["memory"] += 1
                continue
            if thread is not None:
                self._attach(line, state, v["thread_id"])
            told = v["pending"]
            pending = told or self._waits(v["memory_type"], thread)
            line["_state"], line["_thread"] = "new", thread
            line["_row"] = row = Memory(
                id=key, project=self.project, memory_type=v["memory_type"], content=v["content"],
                user_id=v["user_id"], agent_id=v["agent_id"], thread_id=thread_key, timestamp=v["timestamp"],
                event_at=ttl_rules.parse_timestamp(v["timestamp"]), metadata=v["metadata"], status=v["status"],
                expires_at=v["expires_at"], source_message_ids=v["source_message_ids"], created_at=v["created_at"],
                pending=pending, valid_from=v["valid_from"], valid_to=v["valid_to"])
            if pending and not told:
                self.forced.append(row)
                self.adjusted["memory made pending (awaits review)"] += 1
            self.new_memories.append(row)
        # Source messages: those of this file; with --merge also the user's own messages here. Any other id is
        # dropped: a memory lends its words to its sources' search chunks (fact keys, memory.index.writer).
        named = {mid for row in self.new_memories for mid in row.source_message_ids} - set(self.messages)
        own = set()
        if named and self.merge:
            own = {public_id(pk) for pk in _each_in(Message.objects.filter(
                thread__project=self.project, thread__user_id=self.user).values_list("pk", flat=True), "pk",
                [self.key(mid) for mid in named])}
        for row in self.new_memories:
            kept = [mid for mid in row.source_message_ids if mid in self.messages or mid in own]
            self.adjusted["source message id dropped (not in the file)"] += len(row.source_message_ids) - len(kept)
            row.source_message_ids = kept
        self._resolve_derivations()

    def _resolve_derivations(self) -> None:
        """``derived_from`` of the new memories (issue #32): memories of the file that are (or will be) here, and
        with ``merge`` the user's live memories here; any other id is dropped (``adjusted``)."""
        wanted = {line["_v"]["id"]: line["_v"]["derived_from"] for line in self.by_kind["memory"]
                  if line.get("_state") == "new" and line["_v"]["derived_from"]}
        of_file = {mid for mid, line in self.memories.items() if line.get("_state") != "gone"}
        named = {mid for sources in wanted.values() for mid in sources} - of_file
        own = set()
        if named and self.merge:
            own = {public_id(pk) for pk in _each_in(Memory.objects.filter(
                memory_live_q(timezone.now()), project=self.project, user_id=self.user).values_list("pk", flat=True),
                "pk", [self.key(mid) for mid in named])}
        self.new_derivations: list[MemoryDerivation] = []
        for mid, sources in wanted.items():
            row = self.memories[mid]["_row"]
            kept = [source for source in sources if source != mid and (source in of_file or source in own)]
            self.adjusted["derived_from id dropped (not in the file)"] += len(sources) - len(kept)
            self.new_derivations += [MemoryDerivation(project=self.project, memory_id=row.pk,
                                                      source_id=self.key(source), thread_id=row.thread_id,
                                                      created_at=row.created_at) for source in kept]

    def _endpoint(self, line: dict, end: str, thread: Thread) -> tuple[str, Memory]:
        v = line["_v"]
        public = v[f"{end}_id"]
        memory = self.memories.get(public)
        if memory is not None and memory["_state"] in ("new", "skip"):
            state, row = (NEW if memory["_state"] == "new" else EXISTING), memory["_row"]
        elif memory is None and self.merge:
            state, row = EXISTING, Memory.objects.filter(  # live and approved, as link_records' ends
                memory_live_q(timezone.now()), Q(user_id=self.user) | Q(user_id__isnull=True), pk=self.key(public),
                project=self.project).first()
        else:
            row = None
        if row is None:
            also = f" nor one of user {self.user!r}'s memories here" if self.merge else ""
            raise self.refuse(line, f"{end}_id", f"{public!r} is not a memory of this import{also}")
        if row.thread_id != thread.pk:
            raise self.refuse(line, f"{end}_id", f"memory {public!r} is not in thread {v['thread_id']!r}: a relation "
                                                 "joins two memories of its thread")
        if row.memory_type != v[f"{end}_type"]:
            raise self.refuse(line, f"{end}_type", f"is {v[f'{end}_type']!r}, but memory {public!r} is a "
                                                   f"{row.memory_type!r}")
        return state, row

    def _resolve_relations(self) -> None:
        lines = self.by_kind["relation"]
        have = RecordLink.objects.in_bulk([self.key(line["_v"]["id"]) for line in lines])
        pairs: dict[str, str] = {}
        self.new_relations: list[RecordLink] = []
        self.invalidate: list[tuple[str, str]] = []  # (existing target, relation): the lifecycle rule applies
        for line in lines:
            v = line["_v"]
            state, thread = self._thread(line, v["thread_id"])
            (source_state, source), (target_state, target) = (self._endpoint(line, "source", thread),
                                                              self._endpoint(line, "target", thread))
            if source.pk == target.pk:
                raise self.refuse(line, "target_id", "a record cannot be related to itself")
            pair = pair_key(source.pk, target.pk)
            if pair in pairs:
                raise self.refuse(line, "target_id", f"the pair is related on {pairs[pair]} already")
            pairs[pair] = line["_where"]
            row = have.get(self.key(v["id"]))
            if row is not None:
                self._skip_same(line, "relation", (row.thread_id, row.source_id, row.target_id, row.relation_type),
                                (thread.pk, source.pk, target.pk, v["relation_type"]),
                                "between other records or of another type")
                continue
            taken = RecordLink.objects.filter(pair_key=pair).values_list("pk", flat=True).first()
            if taken is not None:
                raise self.refuse(line, "target_id", f"memories {v['source_id']!r} and {v['target_id']!r} are "
                                                     f"related by relation {public_id(taken)!r} already")
            self._attach(line, state, v["thread_id"])  # an endpoint is in the relation's thread: new in a new one
            if EXISTING in (source_state, target_state) and (source.pending or target.pending):
                raise self.refuse(line, "source_id" if source.pending else "target_id",
                                  "a memory awaiting review cannot be related to a memory the project holds: it has "
                                  "no effect on others before it is approved (memory.records.review_rules)")
            row = RecordLink(
                id=self.key(v["id"]), project=self.project, thread_id=thread.pk, source_id=source.pk,
                source_type=source.memory_type, target_id=target.pk, target_type=target.memory_type,
                relation_type=v["relation_type"], opposite_relation_type=v["opposite_relation_type"], pair_key=pair,
                metadata=v["metadata"], timestamp=v["timestamp"], created_at=v["created_at"])
            self.new_relations.append(row)
            if target_state == EXISTING and v["relation_type"] in INVALIDATING_RELATIONS:
                self.invalidate.append((target.pk, row.pk))

    def _resolve_summaries(self) -> None:
        self.new_summaries: list[ThreadSummary] = []
        for line in self.by_kind["summary"]:
            v = line["_v"]
            state, thread = self._thread(line, v["thread_id"])
            if state == EXISTING and ThreadSummary.objects.filter(thread_id=thread.pk).exists():
                self.skipped["summary"] += 1
                continue
            self._attach(line, state, v["thread_id"])
            next_seq = max(thread.next_seq, self.raise_seq.get(thread.pk, 0))
            if v["through_seq"] >= next_seq:
                raise self.refuse(line, "through_seq", f"must be less than its thread's next_seq ({next_seq})")
            self.new_summaries.append(ThreadSummary(
                thread_id=thread.pk, project=self.project, content=v["content"], topics=v["topics"],
                through_seq=v["through_seq"], revision=v["revision"]))

    def _resolve_versions(self) -> None:
        groups: dict[str, list[dict]] = {}
        for line in self.by_kind["memory_version"]:
            groups.setdefault(line["_v"]["memory_id"], []).append(line)
        keys = [self.key(public) for public in groups]
        here = {(memory_id, version): action for memory_id, version, action in
                _each_in(MemoryVersion.objects.values_list("memory_id", "version", "action"), "memory_id", keys)}
        live = set(_each_in(Memory.objects.values_list("pk", flat=True), "pk", keys))
        with_history = {memory_id for memory_id, _ in here}
        self.new_versions: list[MemoryVersion] = []
        self.file_history: set[str] = set()  # the new memories whose history the file carries
        for public, group in groups.items():
            group.sort(key=lambda line: line["_v"]["version"])
            for expected, line in enumerate(group, 1):
                if line["_v"]["version"] != expected:
                    raise self.refuse(line, "version", f"the history of memory {public!r} counts from 1 without a "
                                                       f"gap: this is version {line['_v']['version']}, expected "
                                                       f"{expected}")
            key, memory, last = self.key(public), self.memories.get(public), group[-1]
            if memory is None and key in live:
                raise self.refuse(group[0], "memory_id", f"memory {public!r} exists here and is not in the file: a "
                                                         "file carries the history of its own memories only")
            if memory is not None and memory["_state"] == "new":
                row, after = memory["_row"], last["_v"]["after"]
                if not isinstance(after, dict) or after.get("content") != row.content or after.get(
                        "memory_type", row.memory_type) != row.memory_type:
                    raise self.refuse(last, "after", f"the last version of memory {public!r} must hold its content "
                                                     f"and type ({memory['_where']})")
                scope = {"thread_id": row.thread_id, "user_id": row.user_id, "agent_id": row.agent_id}
                thread, pending = memory["_thread"], row.pending
                self.file_history.add(row.pk)
            elif memory is not None or key in with_history:  # the project holds it, or its history
                for line in group:
                    if here.get((key, line["_v"]["version"])) != line["_v"]["action"]:
                        raise self.refuse(line, "version", f"memory {public!r} exists here already: its history is "
                                                           "not imported")
                self.skipped["memory_version"] += len(group)
                continue
            else:  # the history of a memory deleted before the export
                if last["_v"]["after"] is not None:
                    raise self.refuse(last, "after", f"memory {public!r} is not in the file, so its history must "
                                                     "end with its deletion (after: null)")
                scope, thread = self._version_scope(group[0])
                pending = False
            for line in group:
                self.new_versions.append(self._version(line, key, scope, thread,
                                                       pending=pending and line is last))

    def _version(self, line: dict, key: str, scope: dict[str, Any], thread: Thread | None, *,
                 pending: bool) -> MemoryVersion:
        """One imported version. A restore puts back its ``after`` (a delete's or reject's ``before``), so that
        snapshot must be there. Unless the operator trusts the file, the import's review rule applies to each
        snapshot (``_waits``: pending, as the memory would be; ``pending``: the new memory's last version says
        it waits), and the import is the actor: what the file claims (action, actor, reason) is kept as text in
        ``reason`` only, so no history claims a review done elsewhere."""
        v = line["_v"]
        gone = v["action"] in ("delete", "reject")
        if v["before" if gone else "after"] is None:
            raise self.refuse(line, "before" if gone else "after", f"a {v['action']} version must hold the snapshot a "
                                                                   "restore of it puts back, not null")
        if gone and v["after"] is not None:
            raise self.refuse(line, "after", f"must be null: a {v['action']} leaves no memory")
        before, after = v["before"], v["after"]
        kind, actor_id, reason = v["actor_kind"], v["actor_id"], v["reason"]
        if not self.trust:
            made = []
            for name, snap in (("before", before), ("after", after)):
                if snap is not None and not snap.get("pending") and (
                        self._waits(snap["memory_type"], thread) or (name == "after" and pending)):
                    made.append(name)
            before, after = ({**snap, "pending": True} if name in made else snap
                             for name, snap in (("before", before), ("after", after)))
            claimed = f"{v['action']} by {v['actor_kind']}" + (f":{v['actor_id']}" if v["actor_id"] else "")
            reason = f"imported; the file says {claimed}"
            if made:
                reason += f"; made pending ({' and '.join(made)}: awaits review here)"
            if v["reason"]:
                reason += f"; its reason: {v['reason']}"
            kind, actor_id, reason = "import", "import_memory", reason[:history.REASON_LENGTH]
        return MemoryVersion(
            project=self.project, memory_id=key, version=v["version"], action=v["action"], actor_kind=kind,
            actor_id=actor_id, reason=reason, relation_id=self.key(v["relation_id"]) if v["relation_id"] else None,
            before=before, after=after, created_at=v["created_at"], **scope)

    def _version_scope(self, line: dict) -> tuple[dict[str, Any], Thread | None]:
        """The scope copies of a deleted memory's history: its user (the file's, or none in a thread of the
        file) and its thread (one of the file's; a thread that is not is left out, as a detached memory's)."""
        v = line["_v"]
        if v["user_id"] not in (None, self.user):
            raise self.refuse(line, "user_id", f"is {v['user_id']!r}, not the file's user {self.user!r} (line 1)")
        state, thread = self.threads.get(v["thread_id"], (None, None)) if v["thread_id"] else (None, None)
        if v["user_id"] is None and thread is None:
            raise self.refuse(line, "thread_id", "a version of no user must name a thread of the file")
        if thread is not None:
            self._attach(line, state, v["thread_id"])
        return {"thread_id": thread.pk if thread else None, "user_id": v["user_id"], "agent_id": v["agent_id"]}, thread

    # --- embedding and writing ------------------------------------------------------------------------

    def _embed(self, progress: Callable[[int, int], None] | None) -> list[tuple[str, Any, list[str], list]]:
        """Chunk and embed the new messages, memories and images outside any transaction (a file carries no
        vectors). Each record's text is within ``MAX_CONTENT_CHARS`` (checked above), so is its work."""
        stamps = {self.key(public): line["_v"]["timestamp"] for public, line in self.messages.items()}
        work: list[tuple[str, Any, list[str], list[str]]] = []
        for row in self.new_messages:
            work.append(("message", row, *rebuild.stored_record_texts("message", row)))
        for row in self.new_memories:
            work.append(("memory", row, *rebuild.stored_record_texts("memory", row)))
        for row in self.new_images:
            fallback = stamps.get(row.message_id) if row.message_id else None
            work.append(("image", row, *rebuild.stored_record_texts("image", row, fallback_timestamp=fallback)))
        texts = [text for _, _, _, embed in work for text in embed]
        vectors: list = []
        for start in range(0, len(texts), EMBED_BATCH):
            vectors += list(get_embedder().embed(texts[start:start + EMBED_BATCH]))
            if progress is not None:
                progress(min(start + EMBED_BATCH, len(texts)), len(texts))
        items, offset = [], 0
        for kind, row, chunks, embed in work:
            items.append((kind, row, chunks, vectors[offset:offset + len(embed)]))
            offset += len(embed)
        return items

    def _write(self, items: list[tuple[str, Any, list[str], list]]) -> None:
        with transaction.atomic():
            Thread.objects.bulk_create(self.new_threads)
            for pk, next_seq in self.raise_seq.items():  # a merge: the thread's next message follows the file's
                locked = lock_thread(pk)
                if locked.next_seq < next_seq:
                    locked.next_seq = next_seq
                    locked.save(update_fields=["next_seq", "updated_at"])
            Message.objects.bulk_create(self.new_messages, batch_size=500)
            for row in self.new_images:
                row.save(force_insert=True)
            Memory.objects.bulk_create(self.new_memories, batch_size=500)
            derivations_reset([row.pk for row in self.new_memories])  # a new memory starts with no edges
            MemoryDerivation.objects.bulk_create(self.new_derivations, batch_size=500)
            scopes = {row.pk: row for _, row in self.threads.values()}
            rebuild.index_stored([(kind, row, scopes.get(row.thread_id) if kind == "message" else None, chunks,
                                   vectors) for kind, row, chunks, vectors in items])
            written: dict[str, list[int]] = {}
            for row in self.new_messages:
                written.setdefault(row.thread_id, []).append(row.seq)
            for thread_id, seqs in written.items():
                index.refresh_message_contexts(thread_id, min(seqs), max(seqs))
            RecordLink.objects.bulk_create(self.new_relations)
            ThreadSummary.objects.bulk_create(self.new_summaries)
            MemoryVersion.objects.bulk_create(self.new_versions, batch_size=500)
            with history.acting("import", "import_memory", "imported: a memory of a type that is reviewed waits "
                                                           "for review (the file said it did not)"):
                for row in self.forced:  # a memory with the file's history: its last imported version says so
                    if row.pk not in self.file_history:
                        history.record(row, "create", None, history.snapshot(row))
            with history.acting("import", "import_memory", "imported relation"):
                for target, relation in self.invalidate:
                    set_memory_status([target], RecordStatus.INVALID.value, relation_id=relation)
        for kind, rows in (("thread", self.new_threads), ("message", self.new_messages), ("image", self.new_images),
                           ("memory", self.new_memories), ("relation", self.new_relations),
                           ("summary", self.new_summaries), ("memory_version", self.new_versions)):
            self.created[kind] += len(rows)


def import_lines(lines: list[dict[str, Any]], *, project: Project, merge: bool = False,
                 trust_review_state: bool = False,
                 progress: Callable[[int, int], None] | None = None) -> dict[str, Counter]:
    """Load one user's export into ``project``, all or nothing, by the rules of the module docstring; return
    ``{"created": Counter, "skipped": Counter, "adjusted": Counter}`` (lines per kind; ``adjusted``: what the
    import changed on its way in, such as memories made pending).

    ``merge``: new records may be added to threads (and relations to memories) the file's user has in
    ``project`` already. ``trust_review_state``: a memory's ``pending`` is the file's, not the review rule's.
    Every line is checked, then resolved against ``project``, before anything is embedded
    (``progress(done, total)`` after each batch) or written (one transaction). Raises ``InvalidArgument`` (a
    ``ValueError``) naming the line and the field for a bad or out-of-scope line; a database conflict (a
    concurrent write) raises ``DatabaseError`` and writes nothing.
    """
    job = _Import(lines, project=project, merge=merge, trust_review_state=trust_review_state)
    job._resolve()
    job._write(job._embed(progress))
    return {"created": job.created, "skipped": job.skipped, "adjusted": job.adjusted}
