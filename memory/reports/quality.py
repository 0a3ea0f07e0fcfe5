"""Memory quality at a glance: the figures the staff quality dashboard plots.

One function per figure, each reading one project (and optionally one thread)
over a ``Window``: a range the dashboard offers (``RANGES``: 1, 7, 30, 90 or
365 days) cut into UTC buckets of an hour, a day or a week, so every query
groups in SQL (``Trunc``) and answers at most ``MAX_BUCKETS`` rows per series
whatever the size of the tables. A figure is a dict ready for JSON:

``{"bucket": "day", "labels": [str, ...], "buckets": [ISO 8601, ...],
"series": [{"key": str, "label": str, "data": [number | None, ...]}, ...], ...}``

with figure-specific totals beside it (see each function). Where the numbers come from:

* ``memories_by_type``: ``oam_memories.created_at`` and ``memory_type`` of the
  memories stored now (a deleted or purged memory is not counted);
* ``extraction_yield``, ``duplicates_skipped``, ``rejected_reasons``: the
  counts an extraction job writes when it commits (``ExtractionJob``,
  migration 0011: ``messages_extracted``, ``memories_created``,
  ``duplicates_skipped``, ``rejected_<reason>``), by ``finished_at``; jobs
  that committed before 0011 have no counts (None): their messages are taken
  from their seq range and they are reported as ``unrecorded_jobs``;
* ``relations``: ``supersedes`` and ``contradicts`` relations by
  ``created_at`` (either orientation: ``relation_type`` or
  ``opposite_relation_type``), and the memory versions a relation
  invalidated (``oam_memory_versions``, ``memory.records.history``);
* ``review_queue_age``: memories awaiting review (``Memory.pending``, the
  review queue of ``memory.records.review_rules``), by age since ``created_at``, now rather
  than over the window; and review rejections (versions with action
  ``REVIEW_REJECT_ACTION``) in ``rejected_reasons``. With no pending memory
  the figure is empty.

Staff read every record of a project (``memory.records.tenancy.staff_project``
decides who may): there is no user restriction here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import BigIntegerField, Count, F, Min, Q, QuerySet, Sum
from django.db.models.functions import Coalesce, Trunc
from django.utils import timezone

from memory.core.errors import InvalidArgument, InvalidType
from memory.extraction.candidates import REJECT_REASONS
from memory.models import MEMORY_TYPES, ExtractionJob, Memory, MemoryVersion, RecordLink

UTC = dt.UTC
#: The ranges the dashboard offers (days) and the bucket each is plotted in.
RANGES: dict[int, str] = {1: "hour", 7: "day", 30: "day", 90: "week", 365: "week"}
DEFAULT_DAYS = 30
#: Buckets of one series at most (365 days in weeks: 54).
MAX_BUCKETS = 60
_STEP = {"hour": dt.timedelta(hours=1), "day": dt.timedelta(days=1), "week": dt.timedelta(weeks=1)}
_LABEL = {"hour": "%m-%d %H:00", "day": "%Y-%m-%d", "week": "w/c %Y-%m-%d"}

#: ``MemoryVersion.action`` of a review's rejection (``memory.services.review.memory_reject``).
REVIEW_REJECT_ACTION = "reject"
#: Age buckets of the review queue: (key, label, upper bound; None: open).
QUEUE_AGES: tuple[tuple[str, str, dt.timedelta | None], ...] = (
    ("lt_1h", "under 1 h", dt.timedelta(hours=1)),
    ("h1_h6", "1–6 h", dt.timedelta(hours=6)),
    ("h6_d1", "6–24 h", dt.timedelta(days=1)),
    ("d1_d3", "1–3 days", dt.timedelta(days=3)),
    ("d3_d7", "3–7 days", dt.timedelta(days=7)),
    ("gt_d7", "over 7 days", None),
)
#: The relation types plotted, with their labels.
RELATIONS = {"supersedes": "supersedes", "contradicts": "contradicts"}
#: Labels of the rejection reasons (``memory.extraction.candidates.REJECT_REASONS``) and of review rejections.
REASON_LABELS = {"not_text": "not text", "unknown_type": "unknown memory type", "no_source": "cites no message",
                 "repeated": "repeated in the reply", "review": "rejected in review"}


@dataclass(frozen=True)
class Window:
    """What a figure reads: one project (pk), optionally one thread (stored id), over ``[start, end)``.

    ``start`` is the first bucket's start (UTC), ``end`` the moment of the
    request; ``bucket`` is ``hour``, ``day`` or ``week`` (weeks start on Monday,
    as SQL's ``TRUNC(..., 'IW')`` and Django's ``Trunc("week")`` do).
    """

    project_id: int
    thread_id: str | None
    days: int
    bucket: str
    start: dt.datetime
    end: dt.datetime

    def buckets(self) -> list[dt.datetime]:
        """The start of every bucket from ``start`` through the one holding ``end``, oldest first."""
        out, at, step = [], self.start, _STEP[self.bucket]
        while at <= self.end and len(out) < MAX_BUCKETS:
            out.append(at)
            at += step
        return out


def _truncate(value: dt.datetime, bucket: str) -> dt.datetime:
    value = value.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    if bucket == "hour":
        return value
    value = value.replace(hour=0)
    return value - dt.timedelta(days=value.weekday()) if bucket == "week" else value


def window(*, project_id: int, thread_id: str | None = None, days: Any = DEFAULT_DAYS,
           now: dt.datetime | None = None) -> Window:
    """The window of the last ``days`` days up to ``now`` (default: the current time), for one project/thread.

    ``days`` must be one of ``RANGES`` (``InvalidArgument`` naming ``days``
    otherwise; ``InvalidType`` for a non-int); ``thread_id`` is a stored id.
    """
    if isinstance(days, bool) or not isinstance(days, int):
        raise InvalidType("days", "must be an int")
    if days not in RANGES:
        raise InvalidArgument("days", f"must be one of {', '.join(map(str, RANGES))}")
    now = now or timezone.now()
    bucket = RANGES[days]
    return Window(project_id=project_id, thread_id=thread_id, days=days, bucket=bucket,
                  start=_truncate(now - dt.timedelta(days=days), bucket), end=now)


# --- shared pieces ------------------------------------------------------------------------------


class UtcBucket(Trunc):
    """``Trunc(field, kind)`` in UTC, spelled with SQLite's own date functions on SQLite.

    Django's ``Trunc`` calls a Python function per row on SQLite
    (``django_datetime_trunc``): over a year of 100,000 memories that was 1.1 s
    of the project dashboard's 1.9 s (``bench/quality_dashboard.py``).
    ``strftime``/``date`` give the same text (``YYYY-MM-DD HH:MM:SS``) for a
    stored UTC value; weeks start on Monday (``'weekday 0', '-6 days'``: the
    Sunday on or after, then back six days). Oracle and others keep Django's
    SQL (``TRUNC``).
    """

    _SQLITE = {"hour": "strftime('%%Y-%%m-%%d %%H:00:00', {})", "day": "(date({}) || ' 00:00:00')",
               "week": "(date({}, 'weekday 0', '-6 days') || ' 00:00:00')"}

    def __init__(self, expression: str, kind: str):
        super().__init__(expression, kind, tzinfo=UTC)

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.lhs)
        return self._SQLITE[self.kind].format(sql), params


def _scoped(model, w: Window) -> QuerySet:
    rows = model.objects.filter(project_id=w.project_id)
    return rows.filter(thread_id=w.thread_id) if w.thread_id is not None else rows


def _in_window(rows: QuerySet, field: str, w: Window) -> QuerySet:
    """``rows`` whose ``field`` lies in the window, annotated with its bucket (``bucket``)."""
    return (rows.filter(**{f"{field}__gte": w.start, f"{field}__lt": w.end})
            .annotate(bucket=UtcBucket(field, w.bucket)))


def _axis(w: Window) -> dict[str, Any]:
    buckets = w.buckets()
    return {"bucket": w.bucket, "days": w.days, "labels": [b.strftime(_LABEL[w.bucket]) for b in buckets],
            "buckets": [b.isoformat() for b in buckets]}


def _spread(w: Window, rows, keys: list[str]) -> dict[str, list]:
    """``{key: [value per bucket]}`` from rows of ``{"bucket": datetime, key: value, ...}`` (missing: 0)."""
    index = {b: i for i, b in enumerate(w.buckets())}
    out = {key: [0] * len(index) for key in keys}
    for row in rows:
        i = index.get(_truncate(row["bucket"], w.bucket))
        if i is not None:
            for key in keys:
                out[key][i] += row[key] or 0
    return out


def _series(key: str, label: str, data: list) -> dict[str, Any]:
    return {"key": key, "label": label, "data": data}


def _jobs(w: Window) -> QuerySet:
    """The window's extraction jobs that committed (status ``done``), bucketed by ``finished_at``."""
    return _in_window(_scoped(ExtractionJob, w).filter(status="done"), "finished_at", w)


# --- memories per type over time --------------------------------------------------------------


def memories_by_type_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", "memory_type", "n"}``: memories created per bucket and type (stored ones)."""
    return (_in_window(_scoped(Memory, w), "created_at", w)
            .values("bucket", "memory_type").annotate(n=Count("pk")).order_by())


def memories_before_query(w: Window) -> QuerySet:
    """Rows ``{"memory_type", "n"}``: the stored memories created before the window, per type."""
    return (_scoped(Memory, w).filter(created_at__lt=w.start)
            .values("memory_type").annotate(n=Count("pk")).order_by())


def memories_by_type(w: Window) -> dict[str, Any]:
    """Memories per type over time: for each type, how many of the stored memories existed at the end of each
    bucket (cumulative by ``created_at``, any status). ``created``: memories created in the window;
    ``total``: stored memories at ``end``."""
    before = {row["memory_type"]: row["n"] for row in memories_before_query(w)}
    rows = list(memories_by_type_query(w))
    series, created = [], 0
    for memory_type in MEMORY_TYPES:
        counts = _spread(w, (r for r in rows if r["memory_type"] == memory_type), ["n"])["n"]
        running, data = before.get(memory_type, 0), []
        for n in counts:
            running += n
            data.append(running)
        created += sum(counts)
        series.append(_series(memory_type, memory_type, data))
    total = sum(s["data"][-1] if s["data"] else 0 for s in series)
    return {**_axis(w), "series": series, "created": created, "total": total}


# --- extraction yield per message ----------------------------------------------------------------


def _messages_read():
    """Messages a job read: its recorded count, else (a job from before migration 0011) its seq range."""
    return Coalesce(F("messages_extracted"), F("to_seq") - F("from_seq") + 1, output_field=BigIntegerField())


def extraction_yield_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", "jobs", "messages", "created", "unrecorded"}`` of committed jobs per bucket."""
    return (_jobs(w).values("bucket")
            .annotate(jobs=Count("pk"), messages=Sum(_messages_read()), created=Sum("memories_created"),
                      unrecorded=Count("pk", filter=Q(messages_extracted__isnull=True)))
            .order_by())


def extraction_yield(w: Window) -> dict[str, Any]:
    """Extraction yield per message: memories stored per message read, per bucket (None where no job
    finished), with the messages read. ``jobs``, ``messages``, ``created``: window totals; ``yield``:
    created / messages over the window (None without messages); ``unrecorded_jobs``: jobs from before the
    counts were recorded (their messages are their seq range)."""
    rows = list(extraction_yield_query(w))
    sums = _spread(w, rows, ["jobs", "messages", "created", "unrecorded"])
    ratio = [round(c / m, 3) if m else None for c, m in zip(sums["created"], sums["messages"])]
    messages, created = sum(sums["messages"]), sum(sums["created"])
    return {**_axis(w), "series": [_series("yield", "memories per message", ratio),
                                   _series("messages", "messages read", sums["messages"])],
            "jobs": sum(sums["jobs"]), "messages": messages, "created": created,
            "yield": round(created / messages, 3) if messages else None, "unrecorded_jobs": sum(sums["unrecorded"])}


# --- duplicates skipped -------------------------------------------------------------------------------


def duplicates_skipped_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", "created", "duplicates"}``: memories stored and candidates skipped as duplicates."""
    return (_jobs(w).values("bucket")
            .annotate(created=Sum("memories_created"), duplicates=Sum("duplicates_skipped"))
            .order_by())


def duplicates_skipped(w: Window) -> dict[str, Any]:
    """What became of the candidates extraction accepted, per bucket: stored as memories, or skipped because
    they restated a stored memory (or one of the same job). ``duplicates``, ``created``: window totals."""
    sums = _spread(w, list(duplicates_skipped_query(w)), ["created", "duplicates"])
    return {**_axis(w), "series": [_series("created", "stored", sums["created"]),
                                   _series("duplicates", "skipped as duplicates", sums["duplicates"])],
            "created": sum(sums["created"]), "duplicates": sum(sums["duplicates"])}


# --- contradictions and supersessions -------------------------------------------------------------------


def _relation_q(relation_type: str) -> Q:
    return Q(relation_type=relation_type) | Q(opposite_relation_type=relation_type)


def relations_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", "supersedes", "contradicts"}``: relations of those types created per bucket."""
    wanted = Q()
    for relation_type in RELATIONS:
        wanted |= _relation_q(relation_type)
    return (_in_window(_scoped(RecordLink, w).filter(wanted), "created_at", w).values("bucket")
            .annotate(**{t: Count("pk", filter=_relation_q(t)) for t in RELATIONS}).order_by())


def invalidations_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", "n"}``: memory versions a relation invalidated (``memory.records.history``) per bucket."""
    return (_in_window(_scoped(MemoryVersion, w).filter(action="invalidate", relation_id__isnull=False),
                       "created_at", w)
            .values("bucket").annotate(n=Count("pk")).order_by())


def relations(w: Window) -> dict[str, Any]:
    """Contradictions and supersessions per bucket: relations created (either orientation), and memories a
    relation made invalid. ``supersedes``, ``contradicts``, ``invalidated``: window totals."""
    sums = _spread(w, list(relations_query(w)), list(RELATIONS))
    invalidated = _spread(w, list(invalidations_query(w)), ["n"])["n"]
    series = [_series(t, label, sums[t]) for t, label in RELATIONS.items()]
    series.append(_series("invalidated", "memories invalidated by a relation", invalidated))
    return {**_axis(w), "series": series, **{t: sum(sums[t]) for t in RELATIONS}, "invalidated": sum(invalidated)}


# --- review queue age -----------------------------------------------------------------------------------


def _age_q(now: dt.datetime, low: dt.timedelta | None, high: dt.timedelta | None) -> Q:
    """Memories created between ``low`` and ``high`` ago (``low`` inclusive; None: open)."""
    q = Q()
    if low is not None:
        q &= Q(created_at__lte=now - low)
    if high is not None:
        q &= Q(created_at__gt=now - high)
    return q


def review_queue_query(w: Window) -> QuerySet:
    """Rows ``{"memory_type", <age key>: n, ..., "oldest"}``: pending memories by type and age at ``end``."""
    bounds, low = {}, None
    for key, _, high in QUEUE_AGES:
        bounds[key] = _age_q(w.end, low, high)
        low = high
    return (_scoped(Memory, w).filter(pending=True).values("memory_type")
            .annotate(oldest=Min("created_at"), **{k: Count("pk", filter=q) for k, q in bounds.items()})
            .order_by())


def review_queue_age(w: Window) -> dict[str, Any]:
    """The review queue now: pending memories per age bucket (``QUEUE_AGES``), one series per type.

    Not over the window: the queue as it is at ``end``. ``total``: pending
    memories; ``oldest``: ISO creation time of the oldest (None when empty);
    ``oldest_hours``: its age in hours.
    """
    rows = {row["memory_type"]: row for row in review_queue_query(w)}
    series = [_series(t, t, [rows[t][k] if t in rows else 0 for k, _, _ in QUEUE_AGES]) for t in MEMORY_TYPES]
    oldest = min((row["oldest"] for row in rows.values() if row["oldest"] is not None), default=None)
    return {"bucket": "age", "labels": [label for _, label, _ in QUEUE_AGES], "buckets": [k for k, _, _ in QUEUE_AGES],
            "series": series, "total": sum(sum(s["data"]) for s in series),
            "oldest": oldest.isoformat() if oldest else None,
            "oldest_hours": round((w.end - oldest).total_seconds() / 3600, 1) if oldest else None}


# --- rejected-candidate reasons ---------------------------------------------------------------------------


def rejected_reasons_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", <reason>: n, ...}``: extraction candidates refused per reason (``REJECT_REASONS``)."""
    return (_jobs(w).values("bucket").annotate(**{r: Sum(f"rejected_{r}") for r in REJECT_REASONS}).order_by())


def review_rejections_query(w: Window) -> QuerySet:
    """Rows ``{"bucket", "n"}``: memories rejected in review (versions with ``REVIEW_REJECT_ACTION``)."""
    return (_in_window(_scoped(MemoryVersion, w).filter(action=REVIEW_REJECT_ACTION), "created_at", w)
            .values("bucket").annotate(n=Count("pk")).order_by())


def rejected_reasons(w: Window) -> dict[str, Any]:
    """Why candidates were rejected, per bucket: one series per extraction reason, and review rejections.
    ``totals``: ``{reason: n}`` over the window; ``total``: their sum."""
    sums = _spread(w, list(rejected_reasons_query(w)), list(REJECT_REASONS))
    sums["review"] = _spread(w, list(review_rejections_query(w)), ["n"])["n"]
    totals = {reason: sum(data) for reason, data in sums.items()}
    return {**_axis(w), "series": [_series(r, REASON_LABELS[r], data) for r, data in sums.items()],
            "totals": totals, "total": sum(totals.values())}


#: The dashboard's figures, in the order it shows them.
FIGURES: dict[str, Callable[[Window], dict[str, Any]]] = {
    "memories_by_type": memories_by_type,
    "extraction_yield": extraction_yield,
    "duplicates_skipped": duplicates_skipped,
    "relations": relations,
    "review_queue_age": review_queue_age,
    "rejected_reasons": rejected_reasons,
}


def dashboard(*, project: Any, thread: Any = None, days: Any = DEFAULT_DAYS,
              now: dt.datetime | None = None) -> dict[str, Any]:
    """Every figure for a project (a ``Project`` row) or one of its threads (a ``Thread`` row of it).

    Returns ``{"days", "bucket", "start", "end", "thread_id", "figures": {name: figure}}`` (times ISO 8601,
    ``thread_id`` public or None). Raises what ``window`` raises for a bad ``days``. Nine queries, each
    grouped in SQL and bounded by the window's buckets.
    """
    if thread is not None and thread.project_id != project.pk:
        raise InvalidArgument("thread", "belongs to another project")
    w = window(project_id=project.pk, thread_id=thread.pk if thread is not None else None, days=days, now=now)
    return {"days": w.days, "bucket": w.bucket, "start": w.start.isoformat(), "end": w.end.isoformat(),
            "thread_id": thread.public_id if thread is not None else None,
            "figures": {name: figure(w) for name, figure in FIGURES.items()}}
