"""LoCoMo: parsing helpers (``memory.dev.locomo``), the ``import_locomo`` command and retrieval on real data.

The data file is read from the shared folder (``memory.dev.locomo.default_data_path``)
and never copied here (CC BY-NC). Questions are picked by position, not quoted.
"""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.client import AgentMemory
from memory.dev import locomo
from memory.models import Message, SearchChunk, Thread
from tests.ids import key

DATA = locomo.default_data_path()
needs_data = pytest.mark.skipif(not DATA.is_file(),
                                reason=f"LoCoMo data file not found at {DATA} (set OAM_LOCOMO_PATH)")

# A single-hop (category 4) question of the smallest conversation, by its index in
# the sample's "qa" list, whose one evidence turn all-MiniLM-L6-v2 ranks first.
SINGLE_HOP = ("conv-30", 39)
# Hybrid search measured 0.741 over all ten conversations (bench/locomo_import.py)
# and 0.741 on the 81 questions of conv-30; the baselines of bench/locomo_import.py: 0.444 vector, 0.502 BM25,
# 0.532 RRF.
MIN_RECALL_AT_10 = 0.60


# --- parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "iso"),
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00"),
        ("12:09 am on 13 September, 2023", "2023-09-13T00:09:00"),
        ("12:30 pm on 1 January, 2024", "2024-01-01T12:30:00"),
        ("10:37 am on 27 June, 2023", "2023-06-27T10:37:00"),
    ],
)
def test_parse_session_datetime(raw, iso):
    assert locomo.parse_session_datetime(raw) == iso


@pytest.mark.parametrize(
    "raw", ["", "yesterday", "13:05 pm on 8 May, 2023", "1:56 pm on 8 Mai, 2023", "1:56 pm on 31 February, 2023"]
)
def test_parse_session_datetime_rejects_other_text(raw):
    with pytest.raises(ValueError):
        locomo.parse_session_datetime(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (["D1:3"], ["D1:3"]),
        (["D8:6; D9:17"], ["D8:6", "D9:17"]),
        (["D9:1 D4:4 D4:6"], ["D9:1", "D4:4", "D4:6"]),
        (["D:11:26"], ["D11:26"]),
        (["D30:05"], ["D30:5"]),
        (["D2:1", "D2:1", "D1:7"], ["D2:1", "D1:7"]),
        (["D1:18", "D", "D1:20"], ["D1:18", "D", "D1:20"]),  # unparseable kept, so it cannot resolve
        ([], []),
    ],
)
def test_normalize_evidence(raw, expected):
    assert locomo.normalize_evidence(raw) == expected


def test_turn_text_keeps_photo_caption():
    assert locomo.turn_text({"text": "Look at this!", "blip_caption": "a photo of a red kite"}) == (
        "Look at this! [shares a photo: a photo of a red kite]"
    )
    assert locomo.turn_text({"text": "Plain words.", "img_url": ["x"]}) == "Plain words."
    assert locomo.turn_text({"text": "", "blip_caption": "a cat"}) == "[shares a photo: a cat]"


def _synthetic_sample():
    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_10_date_time": "9:00 am on 2 March, 2023",
            "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Later."}],
            "session_2_date_time": "8:15 pm on 1 March, 2023",
            "session_2": [
                {"speaker": "Ann", "dia_id": "D2:1", "text": "Hi."},
                {"speaker": "Bo", "dia_id": "D2:2", "text": "Hey.", "blip_caption": "a sunset"},
            ],
            "session_11_date_time": "9:00 am on 3 March, 2023",  # no session_11
        },
        "qa": [
            {"question": "q1", "answer": 2022, "evidence": ["D2:1; D10:1"], "category": 1},
            {"question": "q2", "adversarial_answer": "no", "evidence": ["D:2:2"], "category": 5},
            {"question": "q3", "answer": "a", "evidence": ["D2:1", "D3:1"], "category": 4},
        ],
    }


def test_parse_sample_orders_sessions_and_skips_dates_without_session():
    sample = locomo.parse_sample(_synthetic_sample())
    assert sample.sample_id == "conv-x"
    assert sample.speakers == ("Ann", "Bo")
    assert [s.number for s in sample.sessions] == [2, 10]
    assert [s.timestamp for s in sample.sessions] == ["2023-03-01T20:15:00", "2023-03-02T09:00:00"]
    assert sample.sessions[0].turns[1] == locomo.Turn("D2:2", "Bo", "Hey. [shares a photo: a sunset]")
    assert sample.turn_count == 3
    q1, q2, q3 = sample.questions
    assert (q1.answer, q1.evidence, q1.resolves(sample.dia_ids)) == ("2022", ("D2:1", "D10:1"), True)
    assert (q2.answer, q2.category, q2.evidence) == (None, 5, ("D2:2",))
    assert not q3.resolves(sample.dia_ids)
    assert q3.known_evidence(sample.dia_ids) == ("D2:1",)


def test_session_messages_shape():
    sample = locomo.parse_sample(_synthetic_sample())
    assert locomo.thread_id("conv-x", 2) == "conv-x-s2"
    assert locomo.session_messages("conv-x", sample.sessions[0])[1] == {
        "id": "conv-x:D2:2",
        "role": "Bo",
        "content": "Hey. [shares a photo: a sunset]",
        "timestamp": "2023-03-01T20:15:00",
        "metadata": {"dia_id": "D2:2", "sample_id": "conv-x", "session": 2},
    }


def test_evidence_recall():
    ranked = ["D1:1", "D1:2", "D1:3"]
    assert locomo.evidence_recall(ranked, ["D1:2", "D9:9"], 1) == 0.0
    assert locomo.evidence_recall(ranked, ["D1:2", "D9:9"], 2) == 0.5
    assert locomo.evidence_recall(ranked, ["D1:3"], 20) == 1.0
    assert locomo.evidence_recall(ranked, [], 10) == 0.0


def test_session_recall_ranks_sessions_by_their_best_turn():
    ranked = ["D2:4", None, "D1:1", "D2:9", "D5:2"]
    assert locomo.session_of("D12:3") == "D12" and locomo.session_of(None) is None
    assert locomo.session_of("D3") is None
    assert locomo.ranked_sessions(ranked) == ["D2", "D1", "D5"]
    # A wrong turn of the right session is a session hit (the unit of arXiv 2606.04194), not a turn hit.
    assert locomo.session_recall(ranked, ["D2:1"], 1) == 1.0 and locomo.evidence_recall(ranked, ["D2:1"], 1) == 0.0
    assert locomo.session_recall(ranked, ["D5:1", "D5:7", "D9:1"], 2) == 0.0
    assert locomo.session_recall(ranked, ["D5:1", "D5:7", "D9:1"], 3) == 0.5  # two sessions, one found
    assert locomo.session_recall(ranked, [], 5) == 0.0
    # hit@1 by session reads every turn of the top result (a memory from two sessions), none for no turns
    assert locomo.session_hit(["D1:3", "D5:2"], ["D5:9"]) and not locomo.session_hit(["D1:3"], ["D5:9"])
    assert not locomo.session_hit([None], ["D5:9"]) and not locomo.session_hit([], ["D5:9"])


def test_split_summary_scores_sessions_beside_turns():
    from bench.locomo_import import split_summary

    rows = [{"category": 1, "latency_ms": 10.0, "hit1": False, "recall": {k: 0.0 for k in (1, 5, 10, 20)},
             "session_recall": {1: 1.0, 5: 1.0}, "session_hit1": True},
            {"category": 2, "latency_ms": 30.0, "hit1": True, "recall": {k: 1.0 for k in (1, 5, 10, 20)},
             "session_recall": {1: 0.5, 5: 0.5}, "session_hit1": True},
            {"category": 2, "latency_ms": 20.0, "hit1": False, "recall": {k: 0.0 for k in (1, 5, 10, 20)},
             "session_recall": {1: 0.0, 5: 0.0}, "session_hit1": False}]
    out = split_summary(rows, locomo.CATEGORIES)
    assert out["hit@1"]["rate"] == 0.333 and out["by_session"]["hit@1"]["rate"] == 0.667
    assert out["by_session"]["recall"]["@1"]["mean"] == 0.5
    assert out["per_category"]["1 multi-hop"]["by_session"]["hit@1"]["rate"] == 1.0
    assert out["latency_ms"] == {"p50": 20.0, "p95": 29.0}


@needs_data
def test_record_turns_of_a_message_and_of_a_memory():
    from memory.core.types import FactRecord, MessageRecord

    message = MessageRecord(role="Caroline", content="I went to a support group.", metadata={"dia_id": "D1:3"})
    fact = FactRecord(id="f", content="Caroline went to a support group.",
                      source_message_ids=["conv-26:D1:3", "conv-26:D1:5", "not-a-locomo-id"])
    assert locomo.record_turns(message) == ["D1:3"]
    assert locomo.record_turns(fact) == ["D1:3", "D1:5"]  # the turns it came from, in order
    assert locomo.record_turns(FactRecord(id="g", content="no sources")) == []
    assert locomo.record_turns(MessageRecord(role="user", content="x")) == [None]
    # What --mixed scores: the turns of the first k results, a memory standing for its sources.
    seen = [t for record in (fact, message) for t in locomo.record_turns(record)]
    assert locomo.evidence_recall(seen, ["D1:5", "D2:1"], len(seen)) == 0.5


def test_benchmark_reports_the_issue_targets_and_the_report_gap():
    from bench.locomo_import import MAX_REPORT_GAP, TARGETS, targets

    def split(recall, hit, session=None):
        out = {"recall": {"@10": {"mean": recall}}, "hit@1": {"rate": hit}}
        if session is not None:
            out["by_session"] = {"hit@1": {"rate": session}}
        return out

    assert TARGETS == {"locomo": {"recall@10": 0.85, "hit@1": 0.60, "session hit@1": 0.80},  # issue #31's
                       "realtalk": {"recall@10": 0.80, "hit@1": 0.55}} and MAX_REPORT_GAP == 0.03
    today = targets({"tuning": split(0.81, 0.546, 0.767), "report": split(0.806, 0.514, 0.745),
                     "all": split(0.808, 0.53, 0.756)})
    assert today["recall@10"] == {"all": 0.808, "target": 0.85, "met": False, "report_gap": 0.004,
                                  "report_gap_max": 0.03, "report_gap_met": True}
    assert today["hit@1"]["report_gap"] == 0.032 and not today["hit@1"]["report_gap_met"]
    assert today["session hit@1"]["all"] == 0.756 and not today["session hit@1"]["met"]
    assert today["met"] is False
    done = targets({"tuning": split(0.87, 0.62, 0.82), "report": split(0.86, 0.61, 0.81),
                    "all": split(0.865, 0.615, 0.815)})
    assert done["met"] is True
    overfit = targets({"tuning": split(0.97, 0.80, 0.9), "report": split(0.90, 0.72, 0.9),
                       "all": split(0.935, 0.76, 0.9)})
    assert overfit["recall@10"]["met"] and not overfit["recall@10"]["report_gap_met"] and overfit["met"] is False
    assert targets({"all": split(0.86, 0.61, 0.81)}) == {  # one half alone (--samples): no gap to judge
        "recall@10": {"all": 0.86, "target": 0.85, "met": True},
        "hit@1": {"all": 0.61, "target": 0.60, "met": True},
        "session hit@1": {"all": 0.81, "target": 0.80, "met": True}, "met": True}
    real = targets({"all": split(0.79, 0.56)}, "realtalk")  # REALTALK has no session target
    assert set(real) == {"recall@10", "hit@1", "met"} and real["hit@1"]["met"] and not real["met"]


def test_whole_file_parses_to_the_documented_facts():
    samples = list(locomo.iter_samples(DATA))
    assert len(samples) == 10
    assert sum(len(s.sessions) for s in samples) == 272
    assert sum(s.turn_count for s in samples) == 5882
    assert sum(len(s.questions) for s in samples) == 1986
    assert sum(q.resolves(s.dia_ids) for s in samples for q in s.questions) == 1979
    turns = [t for s in samples for session in s.sessions for t in session.turns]
    assert sum("[shares a photo: " in t.text for t in turns) == 1226
    assert all(session.timestamp for s in samples for session in s.sessions)
    scored = [q for s in samples for q in s.questions if q.category <= 4 and q.known_evidence(s.dia_ids)]
    assert len(scored) == 1536


def test_missing_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="not found"):
        call_command("import_locomo", str(tmp_path / "absent.json"), verbosity=0)


@needs_data
def test_unknown_sample_is_a_command_error():
    with pytest.raises(CommandError, match="conv-nope"):
        call_command("import_locomo", samples=["conv-nope"], verbosity=0)


@pytest.mark.parametrize("bad", [0, -2])
def test_sessions_below_one_is_a_command_error(bad):
    with pytest.raises(CommandError, match="--sessions"):
        call_command("import_locomo", sessions=bad, verbosity=0)


@needs_data
@pytest.mark.slow
def test_sessions_imports_only_the_first_sessions(db):
    """``--sessions 1`` stores the first session's thread and turns and nothing of the later sessions."""
    by_size = sorted(locomo.iter_samples(DATA), key=lambda s: s.turn_count)
    sample = by_size[1]  # not the module fixture's sample
    out = StringIO()
    call_command("import_locomo", samples=[sample.sample_id], sessions=1, verbosity=1, stdout=out, stderr=StringIO())
    first = sample.sessions[0]
    assert f"1 thread(s) created, 0 already complete, {len(first.turns)} message(s) added" in out.getvalue()
    assert list(Thread.objects.filter(user_id=sample.sample_id).values_list("metadata__session", flat=True)) == [
        first.number]
    assert Message.objects.filter(thread__user_id=sample.sample_id).count() == len(first.turns)


# --- importing one conversation ------------------------------------------------------------


@pytest.fixture(scope="module")
def smallest():
    """The sample with the fewest turns (computed, not assumed)."""
    return min(locomo.iter_samples(DATA), key=lambda s: s.turn_count)


@pytest.fixture(scope="module")
def imported(django_db_setup, django_db_blocker, smallest):
    """Import the smallest conversation once for this module (committed), remove it afterwards."""
    out, err = StringIO(), StringIO()
    with django_db_blocker.unblock():
        call_command("import_locomo", samples=[smallest.sample_id], verbosity=1, stdout=out, stderr=err)
    yield {"sample": smallest, "stdout": out.getvalue(), "stderr": err.getvalue()}
    with django_db_blocker.unblock():
        client = AgentMemory()
        for session in smallest.sessions:
            client.delete_thread(locomo.thread_id(smallest.sample_id, session.number))


@needs_data
@pytest.mark.slow
def test_import_stores_every_session_and_turn(imported, db):
    sample = imported["sample"]
    sid = sample.sample_id
    assert f"{len(sample.sessions)} thread(s) created" in imported["stdout"]
    assert f"{sample.turn_count} message(s) added" in imported["stdout"]
    assert "turns/s" in imported["stdout"]
    assert f"{sample.turn_count}/{sample.turn_count}" in imported["stderr"]  # the progress bar

    assert Thread.objects.filter(user_id=sid).count() == len(sample.sessions)
    assert Message.objects.filter(thread__user_id=sid).count() == sample.turn_count
    assert SearchChunk.objects.filter(user_id=sid, record_type="message").count() >= sample.turn_count

    client = AgentMemory()
    for session in sample.sessions:
        thread = client.get_thread(f"{sid}-s{session.number}")
        assert (thread.user_id, thread.agent_id) == (sid, "locomo")
        stored = thread.get_messages(start=0, end=None)
        assert [m.id for m in stored] == [f"{sid}:{t.dia_id}" for t in session.turns]
        assert [m.role for m in stored] == [t.speaker for t in session.turns]
        assert {m.role for m in stored} <= set(sample.speakers)
        assert [m.content for m in stored] == [t.text for t in session.turns]
        assert {m.timestamp for m in stored} == {locomo.parse_session_datetime(session.date_time)}
        assert [m.metadata for m in stored] == [
            {"dia_id": t.dia_id, "sample_id": sid, "session": session.number} for t in session.turns
        ]


@needs_data
@pytest.mark.slow
def test_second_import_adds_nothing(imported, db):
    sample = imported["sample"]
    before = (Thread.objects.count(), Message.objects.count(), SearchChunk.objects.count())
    out, err = StringIO(), StringIO()
    call_command("import_locomo", str(DATA), samples=[sample.sample_id], verbosity=1, stdout=out, stderr=err)
    assert f"0 thread(s) created, {len(sample.sessions)} already complete, 0 message(s) added" in out.getvalue()
    assert (Thread.objects.count(), Message.objects.count(), SearchChunk.objects.count()) == before

    out, err = StringIO(), StringIO()
    call_command("import_locomo", samples=[sample.sample_id], verbosity=0, stdout=out, stderr=err)
    assert (out.getvalue(), err.getvalue()) == ("", "")


@needs_data
@pytest.mark.slow
def test_import_resumes_a_session_whose_batch_never_landed(imported, db):
    """A run stopped between create_thread and add_messages leaves an empty thread; a rerun fills it."""
    sample = imported["sample"]
    session = sample.sessions[-1]
    tid = locomo.thread_id(sample.sample_id, session.number)
    Message.objects.filter(thread_id=key(tid)).delete()
    SearchChunk.objects.filter(thread_id=key(tid)).delete()
    out = StringIO()
    call_command("import_locomo", samples=[sample.sample_id], verbosity=1, stdout=out, stderr=StringIO())
    assert f"{len(session.turns)} message(s) added" in out.getvalue()
    assert Message.objects.filter(thread_id=key(tid)).count() == len(session.turns)


def _ranked_dia_ids(client, sample_id, question, k):
    results = client.search(question, user_id=sample_id, record_types=["message"], max_results=k)
    return [r.record.metadata["dia_id"] for r in results]


@needs_data
@pytest.mark.slow
def test_search_finds_the_evidence_of_a_single_hop_question(imported, db):
    sample = imported["sample"]
    sample_id, index = SINGLE_HOP
    assert sample.sample_id == sample_id, "the data file changed: pick SINGLE_HOP again"
    question = sample.questions[index]
    assert question.category == 4 and len(question.evidence) == 1
    ranked = _ranked_dia_ids(AgentMemory(), sample.sample_id, question.question, 10)
    assert question.evidence[0] in ranked


@needs_data
@pytest.mark.slow
def test_http_search_scoped_to_the_user_returns_the_evidence_turn(imported, db):
    """POST /api/search for a LoCoMo question, scoped to its user."""
    from django.test import Client

    from threads.auth import api_key_create

    sample = imported["sample"]
    question = sample.questions[SINGLE_HOP[1]]
    _, key = api_key_create(name="locomo-test")
    response = Client().post(
        "/api/search",
        {"query": question.question, "user_id": sample.sample_id, "record_types": ["message"], "max_results": 10},
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200, response.content
    hits = response.json()
    assert 0 < len(hits) <= 10
    assert all(h["record"]["thread_id"].startswith(f"{sample.sample_id}-s") for h in hits)
    assert locomo.message_id(sample.sample_id, question.evidence[0]) in [h["record_id"] for h in hits]


@needs_data
@pytest.mark.slow
def test_recall_at_10_over_the_conversation(imported, db):
    """Evidence recall@10 over categories 1-4 of one conversation, hybrid search (the default)."""
    sample = imported["sample"]
    client = AgentMemory()
    scores = []
    for question in sample.questions:
        evidence = question.known_evidence(sample.dia_ids)
        if question.category <= 4 and evidence:
            ranked = _ranked_dia_ids(client, sample.sample_id, question.question, 10)
            scores.append(locomo.evidence_recall(ranked, evidence, 10))
    recall = sum(scores) / len(scores)
    assert recall >= MIN_RECALL_AT_10, f"recall@10 = {recall:.3f} over {len(scores)} questions"
