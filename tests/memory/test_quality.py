"""The quality dashboard's figures (``memory.reports.quality``) on the real SQLite test database.

Rows are made through the client (memories, relations, a real extraction with a
scripted LLM) or, where a figure needs a time or a count the client cannot
give, written directly (``created_at``/``finished_at`` moved into buckets, job
counts). ``NOW`` is fixed, so the buckets are known: with ``days=7`` the
window is the eight days 2026-11-23 .. 2026-11-30 (UTC), the last one partial.
"""

from __future__ import annotations

import datetime as dt

import pytest

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.core.errors import InvalidArgument, InvalidType
from memory.core.ids import stored_id
from memory.extraction.candidates import REJECT_REASONS, Slice, SourceMessage, parse_candidates
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob, Memory, MemoryVersion, Project, RecordLink
from memory.reports import quality

NOW = dt.datetime(2026, 11, 30, 15, 30, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def at(days_ago: float, hour: int = 12) -> dt.datetime:
    """Noon (or ``hour``) UTC of the day ``days_ago`` days before ``NOW``'s."""
    day = NOW.replace(hour=hour, minute=0) - dt.timedelta(days=days_ago)
    return day


def set_created(thread, memory_id: str, when: dt.datetime) -> None:
    Memory.objects.filter(pk=stored_id(thread.row.project_id, memory_id)).update(created_at=when)


def figure(project, days=7, thread=None, name=None):
    data = quality.dashboard(project=project, thread=thread, days=days, now=NOW)
    return data["figures"][name] if name else data


def series(fig, key):
    return next(s["data"] for s in fig["series"] if s["key"] == key)


@pytest.fixture
def project(db):
    return Project.objects.create(slug="q-main")


@pytest.fixture
def other(db):
    """Another project with a memory and a job inside the window: never counted in ``project``'s figures."""
    row = Project.objects.create(slug="q-other")
    thread = AgentMemory(project=row, llm=None).create_thread(thread_id="t-o", user_id="u", agent_id="a")
    mid = thread.add_memory("Other project fact", memory_type="fact")
    set_created(thread, mid, at(1))
    ExtractionJob.objects.create(thread=thread.row, project=row, from_seq=1, to_seq=9, status="done",
                                 finished_at=at(1), memories_created=5, messages_extracted=9, duplicates_skipped=4,
                                 rejected_not_text=3)
    return row


def make_thread(project, thread_id="t-q"):
    return AgentMemory(project=project, llm=None).create_thread(thread_id=thread_id, user_id="u1", agent_id="a1")


# --- the window ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("days, bucket, count, first", [
    (1, "hour", 25, dt.datetime(2026, 11, 29, 15, tzinfo=dt.UTC)),
    (7, "day", 8, dt.datetime(2026, 11, 23, tzinfo=dt.UTC)),
    (30, "day", 31, dt.datetime(2026, 10, 31, tzinfo=dt.UTC)),
    (90, "week", 14, dt.datetime(2026, 8, 31, tzinfo=dt.UTC)),   # 2026-09-01 is a Tuesday: its week's Monday
    (365, "week", 54, dt.datetime(2025, 11, 24, tzinfo=dt.UTC)),
])
def test_a_window_is_cut_into_whole_utc_buckets_up_to_now(days, bucket, count, first):
    w = quality.window(project_id=1, days=days, now=NOW)
    buckets = w.buckets()
    assert (w.bucket, len(buckets), buckets[0]) == (bucket, count, first)
    assert buckets[-1] <= NOW < buckets[-1] + {"hour": dt.timedelta(hours=1), "day": DAY, "week": 7 * DAY}[bucket]
    assert len(buckets) <= quality.MAX_BUCKETS
    if bucket == "week":
        assert all(b.weekday() == 0 for b in buckets)


@pytest.mark.parametrize("days, error", [(5, InvalidArgument), (0, InvalidArgument), (3650, InvalidArgument),
                                         ("7", InvalidType), (True, InvalidType), (7.0, InvalidType)])
def test_only_the_offered_ranges_are_accepted(days, error):
    with pytest.raises(error, match="days"):
        quality.window(project_id=1, days=days, now=NOW)


def test_a_thread_of_another_project_is_refused(project, other):
    foreign = AgentMemory(project=other, llm=None).get_thread("t-o").row
    with pytest.raises(InvalidArgument, match="thread"):
        quality.dashboard(project=project, thread=foreign, now=NOW)


# --- memories per type over time ------------------------------------------------------------------------


def test_memories_per_type_are_cumulative_per_bucket_and_scoped(project, other):
    thread, second = make_thread(project), make_thread(project, "t-q2")
    placed = [("fact", 20), ("fact", 6), ("fact", 6), ("preference", 3), ("guideline", 0)]
    for i, (memory_type, days_ago) in enumerate(placed):
        set_created(thread, thread.add_memory(f"memory number {i}", memory_type=memory_type), at(days_ago))
    set_created(second, second.add_memory("second thread fact", memory_type="fact"), at(2))

    fig = figure(project, name="memories_by_type")
    assert fig["labels"][0] == "2026-11-23" and len(fig["labels"]) == 8
    #                          23 24 25 26 27 28 29 30
    assert series(fig, "fact") == [1, 3, 3, 3, 3, 4, 4, 4]  # one from before the window, two on the 24th, t-q2's
    assert series(fig, "preference") == [0, 0, 0, 0, 1, 1, 1, 1]
    assert series(fig, "guideline") == [0, 0, 0, 0, 0, 0, 0, 1]
    assert series(fig, "memory") == [0] * 8
    assert (fig["total"], fig["created"]) == (6, 5)

    one = figure(project, thread=thread.row, name="memories_by_type")
    assert series(one, "fact") == [1, 3, 3, 3, 3, 3, 3, 3] and one["total"] == 5


@pytest.mark.parametrize("days", [1, 7, 90])
def test_sql_buckets_are_the_python_buckets_at_their_edges(project, days):
    """``UtcBucket`` (SQLite's date functions here) puts each time where ``Window.buckets`` expects it: hour and
    day edges, a Sunday's last microsecond and a Monday's first (2026-11-29 is a Sunday)."""
    thread = make_thread(project)
    edges = [NOW - dt.timedelta(minutes=31), NOW.replace(minute=0),
             NOW.replace(minute=0) - dt.timedelta(microseconds=1),
             dt.datetime(2026, 11, 29, 23, 59, 59, 999999, tzinfo=dt.UTC), dt.datetime(2026, 11, 30, tzinfo=dt.UTC),
             dt.datetime(2026, 11, 23, 0, 0, 0, 1, tzinfo=dt.UTC), dt.datetime(2026, 9, 6, 12, tzinfo=dt.UTC)]
    for i, when in enumerate(edges):
        set_created(thread, thread.add_memory(f"edge memory {i}", memory_type="fact"), when)
    w = quality.window(project_id=project.pk, days=days, now=NOW)
    rows = list(quality.memories_by_type_query(w))
    expected: dict[dt.datetime, int] = {}
    for when in edges:
        if w.start <= when < w.end:
            start = max(b for b in w.buckets() if b <= when)
            expected[start] = expected.get(start, 0) + 1
    assert {row["bucket"]: row["n"] for row in rows} == expected
    assert sum(expected.values()) == {1: 5, 7: 6, 90: 7}[days]


def test_a_memory_created_after_now_is_not_counted(project):
    thread = make_thread(project)
    set_created(thread, thread.add_memory("from the future", memory_type="fact"), NOW + dt.timedelta(hours=1))
    assert figure(project, name="memories_by_type")["total"] == 0


# --- extraction: yield, duplicates, rejections -------------------------------------------------------


def job(thread, *, finished, status="done", **counts):
    defaults = {"from_seq": 1, "to_seq": 4}
    return ExtractionJob.objects.create(thread=thread.row, project_id=thread.row.project_id, status=status,
                                        finished_at=finished, **{**defaults, **counts})


def test_extraction_yield_is_memories_per_message_read_per_bucket(project, other):
    thread = make_thread(project)
    job(thread, finished=at(6), messages_extracted=4, memories_created=2)
    job(thread, finished=at(6, hour=18), messages_extracted=6, memories_created=1)
    job(thread, finished=at(2), from_seq=11, to_seq=15, memories_created=1)  # before 0011: 5 messages by seq range
    job(thread, finished=at(1), status="failed", messages_extracted=8, memories_created=0)  # not committed
    job(thread, finished=at(30), messages_extracted=8, memories_created=8)  # before the window

    fig = figure(project, name="extraction_yield")
    assert series(fig, "yield") == [None, 0.3, None, None, None, 0.2, None, None]
    assert series(fig, "messages") == [0, 10, 0, 0, 0, 5, 0, 0]
    assert (fig["jobs"], fig["messages"], fig["created"], fig["yield"], fig["unrecorded_jobs"]) == (3, 15, 4, 0.267, 1)


def test_duplicates_and_rejections_are_summed_per_bucket(project, other):
    thread = make_thread(project)
    job(thread, finished=at(5), memories_created=3, duplicates_skipped=2, rejected_not_text=1, rejected_repeated=2)
    job(thread, finished=at(5, hour=20), memories_created=1, duplicates_skipped=1, rejected_no_source=1)
    job(thread, finished=at(0, hour=9), memories_created=0, duplicates_skipped=4, rejected_unknown_type=1)
    job(thread, finished=at(3))  # no counts recorded: counts nothing
    memory_id = stored_id(project.pk, "rejected-in-review")
    for when in (at(1), at(1, hour=14)):
        MemoryVersion.objects.create(project=project, memory_id=memory_id, version=int(when.hour), action="reject",
                                     actor_kind="staff", thread_id=thread.row.pk, created_at=when)

    dups = figure(project, name="duplicates_skipped")
    assert series(dups, "duplicates") == [0, 0, 3, 0, 0, 0, 0, 4]
    assert series(dups, "created") == [0, 0, 4, 0, 0, 0, 0, 0]
    assert (dups["created"], dups["duplicates"]) == (4, 7)

    rejected = figure(project, name="rejected_reasons")
    assert [s["key"] for s in rejected["series"]] == [*REJECT_REASONS, "review"]
    assert series(rejected, "not_text") == [0, 0, 1, 0, 0, 0, 0, 0]
    assert series(rejected, "review") == [0, 0, 0, 0, 0, 0, 2, 0]
    assert rejected["totals"] == {"not_text": 1, "unknown_type": 1, "no_source": 1, "repeated": 2, "review": 2}
    assert rejected["total"] == 7


def test_a_real_extraction_records_what_the_dashboard_plots(project):
    """Two inline jobs with a scripted LLM: the first reads three messages and refuses two items (one not text,
    one repeated), the second reads one and skips a duplicate of a stored memory."""
    first = {"memories": [
        {"memory_type": "preference", "content": "Ann loves green tea.", "source_message_ids": ["m1"]},
        {"memory_type": "memory", "content": "%% !! --", "source_message_ids": ["m1"]},
        {"memory_type": "fact", "content": "Ann loves  green tea.", "source_message_ids": ["m2"]},
        {"memory_type": "guideline", "content": "Answer Ann in French.", "source_message_ids": ["m3"]},
    ]}
    second = {"memories": [{"memory_type": "preference", "content": "Ann loves green tea.",
                            "source_message_ids": ["m1"]}]}
    llm = ScriptedLlm([first, second])
    # no review queue here: a pending preference is not a stored memory the second job's duplicate check sees
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, review_memory_types=())
    thread = AgentMemory(project=project, llm=llm).create_thread(
        thread_id="t-x", user_id="u1", agent_id="a1", memory_extraction_config=config)
    thread.add_messages([{"role": "user", "content": "I'm Ann and I love green tea."},
                         {"role": "assistant", "content": "Noted!"},
                         {"role": "user", "content": "Always answer me in French."}])
    thread.add_messages([{"role": "user", "content": "Green tea, as I said."}])

    jobs = list(ExtractionJob.objects.filter(project=project).order_by("id").values(
        "status", "messages_extracted", "memories_created", "duplicates_skipped", "rejected_not_text",
        "rejected_unknown_type", "rejected_no_source", "rejected_repeated"))
    assert jobs == [
        {"status": "done", "messages_extracted": 3, "memories_created": 2, "duplicates_skipped": 0,
         "rejected_not_text": 1, "rejected_unknown_type": 0, "rejected_no_source": 0, "rejected_repeated": 1},
        {"status": "done", "messages_extracted": 1, "memories_created": 0, "duplicates_skipped": 1,
         "rejected_not_text": 0, "rejected_unknown_type": 0, "rejected_no_source": 0, "rejected_repeated": 0},
    ]
    data = quality.dashboard(project=project, thread=thread.row, days=1)["figures"]
    assert (data["extraction_yield"]["messages"], data["extraction_yield"]["created"]) == (4, 2)
    assert data["extraction_yield"]["yield"] == 0.5
    assert data["duplicates_skipped"]["duplicates"] == 1
    assert data["rejected_reasons"]["totals"]["not_text"] == 1 and data["rejected_reasons"]["total"] == 2
    assert data["memories_by_type"]["total"] == 2


def test_every_reject_reason_is_told_apart():
    targets = [SourceMessage(ref="m1", id="x1", seq=1, role="user", text="hi", timestamp=None, metadata={})]
    reply = {"memories": [
        {"memory_type": "fact", "content": "Ann likes tea", "source_message_ids": ["m1"]},
        {"memory_type": "fact", "content": "?? !!", "source_message_ids": ["m1"]},
        {"memory_type": "opinion", "content": "Ann likes coffee", "source_message_ids": ["m1"]},
        {"memory_type": "fact", "content": "Ann likes cake", "source_message_ids": ["m9"]},
        {"memory_type": "fact", "content": "ann  LIKES tea", "source_message_ids": ["m1"]},
    ]}
    reasons: dict[str, int] = {}
    found, rejected = parse_candidates(reply, Slice(targets=targets), reasons)
    assert [c.content for c in found] == ["Ann likes tea"] and rejected == 4
    assert reasons == {"not_text": 1, "unknown_type": 1, "no_source": 1, "repeated": 1}
    assert parse_candidates(reply, Slice(targets=targets))[1] == 4  # the count alone, as before


# --- contradictions and supersessions ---------------------------------------------------------------------


def test_supersessions_contradictions_and_invalidations_per_bucket(project, other):
    thread = make_thread(project)
    a, b, c, d = (thread.add_memory(f"User fact {n}", memory_type="fact") for n in "abcd")
    supersedes = thread.link_records(b, "fact", a, "fact", "supersedes")
    contradicts = thread.link_records(c, "fact", b, "fact", "contradicts")
    reversed_ = thread.link_records(c, "fact", d, "fact", "is_superseded_by",  # d supersedes c, stored reversed
                                    opposite_relation_type="supersedes")
    thread.link_records(d, "fact", a, "fact", "supports")  # not plotted
    for relation_id, when in ((supersedes, at(4)), (contradicts, at(4, hour=8)), (reversed_, at(0, hour=1))):
        RecordLink.objects.filter(pk=stored_id(project.pk, relation_id)).update(created_at=when)
    invalidations = MemoryVersion.objects.filter(project=project, action="invalidate", relation_id__isnull=False)
    assert invalidations.count() == 1  # a, by the supersedes relation (c by "is_superseded_by" is a custom type)
    invalidations.update(created_at=at(4))

    fig = figure(project, name="relations")
    assert series(fig, "supersedes") == [0, 0, 0, 1, 0, 0, 0, 1]
    assert series(fig, "contradicts") == [0, 0, 0, 1, 0, 0, 0, 0]
    assert series(fig, "invalidated") == [0, 0, 0, 1, 0, 0, 0, 0]
    assert (fig["supersedes"], fig["contradicts"], fig["invalidated"]) == (2, 1, 1)


# --- review queue age -------------------------------------------------------------------------------------


def test_the_review_queue_is_pending_memories_by_age_and_type(project, other):
    thread = make_thread(project)
    ages = [("guideline", dt.timedelta(minutes=10)), ("guideline", dt.timedelta(hours=1)),
            ("preference", dt.timedelta(hours=5)), ("guideline", dt.timedelta(hours=30)),
            ("preference", dt.timedelta(days=10))]
    for i, (memory_type, age) in enumerate(ages):
        memory_id = thread.add_memory(f"Pending number {i}", memory_type=memory_type)
        Memory.objects.filter(pk=stored_id(project.pk, memory_id)).update(pending=True,
                                                                          created_at=NOW - age)
    set_created(thread, thread.add_memory("Approved long ago", memory_type="guideline"), NOW - 20 * DAY)

    fig = figure(project, days=1, name="review_queue_age")  # the queue now, whatever the range
    assert fig["labels"] == ["under 1 h", "1–6 h", "6–24 h", "1–3 days", "3–7 days", "over 7 days"]
    assert series(fig, "guideline") == [1, 1, 0, 1, 0, 0]  # exactly 1 h old: "1–6 h"
    assert series(fig, "preference") == [0, 1, 0, 0, 0, 1]
    assert (fig["total"], fig["oldest"], fig["oldest_hours"]) == (5, (NOW - 10 * DAY).isoformat(), 240.0)
    assert figure(project, days=365, name="review_queue_age")["series"] == fig["series"]


def test_an_empty_project_plots_zeros_not_errors(project):
    data = figure(project, days=30)
    assert set(data["figures"]) == set(quality.FIGURES)
    for name, fig in data["figures"].items():
        assert all(len(s["data"]) == len(fig["labels"]) for s in fig["series"]), name
        assert not any(v for s in fig["series"] for v in s["data"]), name
    assert data["figures"]["review_queue_age"]["oldest"] is None
    assert data["figures"]["extraction_yield"]["yield"] is None
