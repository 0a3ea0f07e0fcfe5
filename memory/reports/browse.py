"""Reads for the staff pages: thread lists with counts, a thread's records as stored.

The spec's reads (``memory.records.selectors``) hide expired records and return the
public value types. Staff need to see everything a thread holds, expired and
invalid records included (flagged), with counts and last activity, so these
reads return model rows, annotated, in one query per region. Nothing here
writes; edits go through ``memory.client`` / ``memory.services``.

Counts and "last activity" are correlated subqueries (portable SQL: SQLite
and Oracle; the Oracle form is compiled offline in tests/oracle/test_browse_sql.py).

Every read is for one project: ``thread_browse`` takes it, the others a thread
row of it; record ids given are public (``memory.records.tenancy``), rows are returned
as stored (``row.public_id`` for display).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, DateTimeField, IntegerField, Max, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Greatest, Substr
from django.utils import timezone

from memory.context.summaries import transcript
from memory.core.errors import NotFound
from memory.core.ids import stored_id
from memory.models import (
    MEMORY_TYPES,
    Image,
    Memory,
    MemoryVersion,
    Message,
    Project,
    RecordLink,
    Thread,
    ThreadSummary,
)
from memory.records.history import version_dto
from memory.records.metadata_filter import compile_filter
from memory.records.selectors import live_q

#: Rows per page of the staff thread list.
THREADS_PER_PAGE = 25
#: Messages per page of a thread's timeline.
MESSAGES_PER_PAGE = 200
#: Messages shown in the transcript fallback of the summary region (the spec's card default).
FALLBACK_MESSAGES = 5


def _count_of(model, *, now, **filters) -> Coalesce:
    """``COUNT(*)`` of live ``model`` rows correlated with the outer thread, 0 when none."""
    rows = (model.objects.filter(live_q(now), **filters).order_by().values(*filters)
            .annotate(n=Count("pk")).values("n"))
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def thread_browse(*, project: Project, q: str = "", user_id: str = "", agent_id: str = "",
                  metadata_filter: Any = None, now=None) -> QuerySet[Thread]:
    """Threads of ``project`` for the staff list, most recently active first; every row reachable by paging.

    Filters (all optional, ANDed): ``q`` is a case-insensitive substring of the
    (public) thread, user or agent id; ``user_id``/``agent_id`` match exactly;
    ``metadata_filter`` is the spec's metadata-filter grammar
    (``memory.records.metadata_filter``) applied to the thread's metadata. Each row is
    annotated with ``message_count`` and ``memory_count`` (live records: not
    expired; memories owned by the thread) and ``last_activity`` (the later of
    the thread's own update time, which every ``add_messages`` moves, and its
    memories' latest update). The order (``-last_activity``, ``id``) is total,
    so pages neither repeat nor skip rows. Raises ValueError
    (``InvalidArgument``) for a bad ``metadata_filter``.
    """
    now = now or timezone.now()
    qs = Thread.objects.filter(project=project)
    if q:
        # The public id is the stored id after its project prefix, which has one length within a project.
        prefix = len(stored_id(project.pk, ""))
        qs = qs.annotate(public=Substr("id", prefix + 1)).filter(
            Q(public__icontains=q) | Q(user_id__icontains=q) | Q(agent_id__icontains=q))
    if user_id:
        qs = qs.filter(user_id=user_id)
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    if metadata_filter:
        qs = qs.filter(compile_filter(metadata_filter, "metadata"))
    latest_memory = (Memory.objects.filter(thread_id=OuterRef("pk")).order_by().values("thread_id")
                     .annotate(m=Max("updated_at")).values("m"))
    return qs.annotate(
        message_count=_count_of(Message, now=now, thread_id=OuterRef("pk")),
        memory_count=_count_of(Memory, now=now, thread_id=OuterRef("pk")),
        last_activity=Greatest("updated_at", Coalesce(Subquery(latest_memory, output_field=DateTimeField()),
                                                      "updated_at")),
    ).order_by("-last_activity", "id")


def project_browse(*, projects: QuerySet[Project]) -> QuerySet[Project]:
    """``projects`` (the ones a staff user may see: ``memory.records.tenancy.staff_projects``), by slug, each with its
    ``thread_count`` (the staff project list)."""
    threads = (Thread.objects.filter(project=OuterRef("pk")).order_by().values("project")
               .annotate(n=Count("pk")).values("n"))
    return projects.annotate(thread_count=Coalesce(Subquery(threads, output_field=IntegerField()), 0)
                                    ).order_by("slug")


@dataclass
class ThreadOverview:
    """What the thread page shows above its regions: the row and its counts."""

    thread: Thread
    message_count: int
    expired_messages: int
    memory_count: int
    relation_count: int
    image_count: int = 0


def thread_overview(thread: Thread, *, now=None) -> ThreadOverview:
    """The thread row (re-read) with its counts (live and expired messages, live memories, relations, live
    standalone images). Raises KeyError (``NotFound``) when the thread is gone.
    """
    now = now or timezone.now()
    fresh = Thread.objects.filter(pk=thread.pk).first()
    if fresh is None:
        raise NotFound("thread_id", thread.public_id)
    thread = fresh
    messages = Message.objects.filter(thread_id=thread.pk).aggregate(
        live=Count("pk", filter=live_q(now)), total=Count("pk"))
    return ThreadOverview(
        thread=thread,
        message_count=messages["live"],
        expired_messages=messages["total"] - messages["live"],
        memory_count=Memory.objects.filter(live_q(now), thread_id=thread.pk).count(),
        relation_count=RecordLink.objects.filter(thread_id=thread.pk).count(),
        image_count=standalone_images(thread).filter(live_q(now)).count(),
    )


def timeline(thread: Thread) -> QuerySet[Message]:
    """Every stored message of the thread in order (``seq``), expired ones included; page it.

    Each message's image parts come prefetched (``message.images.all``, without their bytes).
    """
    images = Prefetch("images", queryset=Image.objects.order_by("created_at", "id"))
    return Message.objects.filter(thread_id=thread.pk).order_by("seq").prefetch_related(images)


def image_data(thread: Thread, image_id: str) -> Image:
    """One image of this thread with its bytes loaded; KeyError (``NotFound``) otherwise."""
    row = Image.objects.with_bytes().filter(pk=stored_id(thread.project_id, image_id), thread_id=thread.pk).first()
    if row is None:
        raise NotFound("image_id", image_id)
    return row


def standalone_images(thread: Thread) -> QuerySet[Image]:
    """The thread's images not attached to a message (spec: add_image), expired ones included, oldest first.

    Bytes are not loaded (``Image.objects`` defers ``data``); an attached image
    shows in its message instead (``timeline``).
    """
    return Image.objects.filter(thread_id=thread.pk, message__isnull=True).order_by("created_at", "id")


def standalone_image_row(thread: Thread, image_id: str) -> Image:
    """One standalone image of this thread, expired or not, without bytes; KeyError (``NotFound``) otherwise."""
    row = standalone_images(thread).filter(pk=stored_id(thread.project_id, image_id)).first()
    if row is None:
        raise NotFound("image_id", image_id)
    return row


def memories(thread: Thread) -> QuerySet[Memory]:
    """Every memory-like record the thread owns (its ``thread_id``), expired ones included, oldest first."""
    return Memory.objects.filter(thread_id=thread.pk).order_by("created_at", "id")


def message_row(thread: Thread, message_id: str) -> Message:
    """One stored message of this thread, expired or not; KeyError (``NotFound``) otherwise."""
    row = Message.objects.filter(pk=stored_id(thread.project_id, message_id), thread_id=thread.pk).first()
    if row is None:
        raise NotFound("message_id", message_id)
    return row


def memory_row(thread: Thread, memory_id: str) -> Memory:
    """One stored memory owned by this thread, expired or not; KeyError (``NotFound``) otherwise."""
    row = Memory.objects.filter(pk=stored_id(thread.project_id, memory_id), thread_id=thread.pk).first()
    if row is None:
        raise NotFound("memory_id", memory_id)
    return row


def relation_row(thread: Thread, relation_id: str) -> RecordLink:
    """One relation of this thread; KeyError (``NotFound``) otherwise."""
    row = RecordLink.objects.filter(pk=stored_id(thread.project_id, relation_id), thread_id=thread.pk).first()
    if row is None:
        raise NotFound("relation_id", relation_id)
    return row


@dataclass
class MemoryGroup:
    """The thread's memories of one type, in creation order."""

    memory_type: str
    items: list[Memory] = field(default_factory=list)


def group_by_type(rows: list[Memory]) -> list[MemoryGroup]:
    """Group memories by type in the spec's type order (memory, fact, guideline, preference); all four kept."""
    groups = {t: MemoryGroup(memory_type=t) for t in MEMORY_TYPES}
    for row in rows:
        groups.setdefault(row.memory_type, MemoryGroup(memory_type=row.memory_type)).items.append(row)
    return list(groups.values())


@dataclass
class RelationView:
    """A relation with its endpoints' rows (None when an endpoint is gone or another thread's)."""

    link: RecordLink
    source: Memory | None
    target: Memory | None


def relation_view(thread: Thread, relation_id: str) -> RelationView:
    """One relation of this thread with both endpoint memories (None when gone); KeyError (``NotFound``) otherwise."""
    row = relation_row(thread, relation_id)
    ends = Memory.objects.in_bulk([row.source_id, row.target_id])
    return RelationView(link=row, source=ends.get(row.source_id), target=ends.get(row.target_id))


def relations(thread: Thread, by_id: dict[str, Memory]) -> list[RelationView]:
    """The thread's relations, oldest first, each with its endpoint rows looked up in ``by_id`` (by stored id)."""
    rows = RecordLink.objects.filter(thread_id=thread.pk).order_by("created_at", "id")
    return [RelationView(link=row, source=by_id.get(row.source_id), target=by_id.get(row.target_id)) for row in rows]


@dataclass
class SummaryView:
    """The summary region: the durable summary when there is one, else the transcript fallback.

    ``durable`` is the ``ThreadSummary`` row (content, topics, ``through_seq``,
    ``revision``); ``fallback`` is the transcript an agent gets without an
    LLM (``memory.context.summaries.transcript``, last ``FALLBACK_MESSAGES`` messages,
    at most 4,000 characters); ``behind`` counts live messages after the
    durable summary's ``through_seq``.
    """

    durable: ThreadSummary | None
    fallback: str
    behind: int


def summary_view(thread: Thread, *, now=None) -> SummaryView:
    """Read the thread's summary without calling an LLM (rendering a page never refreshes it)."""
    now = now or timezone.now()
    durable = ThreadSummary.objects.filter(thread_id=thread.pk).first()
    last_seq = thread.next_seq - 1
    if durable is not None and durable.content:
        behind = Message.objects.filter(live_q(now), thread_id=thread.pk, seq__gt=durable.through_seq).count()
        return SummaryView(durable=durable, fallback="", behind=behind)
    text = transcript(thread, through_seq=last_seq, max_messages=FALLBACK_MESSAGES) if last_seq > 0 else ""
    return SummaryView(durable=None, fallback=text, behind=0)


#: Versions the staff timeline shows per memory (the newest) and reads per page at most.
TIMELINE_VERSIONS = 20
TIMELINE_MAX_ROWS = 5000


def memory_timelines(thread: Thread, memory_keys: list[str]) -> dict[str, list]:
    """The newest ``TIMELINE_VERSIONS`` history entries (``memory.records.history.MemoryVersionRecord``, oldest first)
    of each memory (stored ids) written while it was this thread's; at most ``TIMELINE_MAX_ROWS`` rows read."""
    out: dict[str, list] = {}
    rows = (MemoryVersion.objects.filter(project_id=thread.project_id, thread_id=thread.pk, memory_id__in=memory_keys)
            .order_by("memory_id", "-version")[:TIMELINE_MAX_ROWS])
    for row in rows:
        entries = out.setdefault(row.memory_id, [])
        if len(entries) < TIMELINE_VERSIONS:
            entries.append(version_dto(row))
    return {k: list(reversed(v)) for k, v in out.items()}
