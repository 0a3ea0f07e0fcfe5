"""REALTALK: the parser (``memory.dev.realtalk``) and ``manage.py import_realtalk``.

Most tests build a tiny chat of the corpus's shape in a temporary folder (the real chats are never copied
here); the last checks the documented facts of the shared folder when it is there.
"""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from memory.client import AgentMemory
from memory.dev import realtalk
from memory.models import Message, Thread


def turn(dia_id, speaker, text, when, caption=None):
    out = {"clean_text": text, "speaker": speaker, "date_time": when, "img_file": [], "img_url": [], "dia_id": dia_id}
    if caption:
        out.update(img_url=["https://example.org/p.jpg"], blip_caption=caption)
    return out


def chat() -> dict:
    """A chat of REALTALK's shape: two sessions, one crossing midnight, a shared photo, mixed name casing."""
    return {
        "name": {"speaker_1": "Ana", "speaker_2": "bo"},
        "session_2_date_time": "31.12.2023, 10:00:00",
        "session_2": [turn("D2:1", "Ana", "Happy new year eve!", "31.12.2023, 10:00:00"),
                      turn("D2:2", "bo", "same to you", "31.12.2023, 10:05:30")],
        "session_1_date_time": "29.12.2023, 22:42:04",
        "session_1": [turn("D1:1", "Ana", "Hey! How are you?", "29.12.2023, 22:42:04"),
                      turn("D1:2", "bo", "Good, look", "30.12.2023, 00:32:20", caption="a dog on a beach")],
        "events_session_1": {"agent_a": [], "agent_b": []},
        "qa": [{"question": "What does bo share?", "answer": "a photo", "evidence": ["D1:2"], "category": 1},
               {"question": "When?", "answer": "x", "evidence": ["D1:2. D2:2"], "category": 2},
               {"question": "Who?", "answer": "x", "evidence": ["D9:9"], "category": 3}],
    }


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "Chat_7_Ana_Bo.json").write_text(json.dumps(chat()), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(("raw", "iso"), [("29.12.2023, 22:42:04", "2023-12-29T22:42:04"),
                                          ("6.1.2024, 9:05", "2024-01-06T09:05:00")])
def test_parse_datetime(raw, iso):
    assert realtalk.parse_datetime(raw) == iso


@pytest.mark.parametrize("raw", ["", "2023-12-29 22:42", "31.02.2024, 10:00:00", "29.12.2023"])
def test_parse_datetime_rejects_other_text(raw):
    with pytest.raises(ValueError):
        realtalk.parse_datetime(raw)


def test_a_chat_parses_to_sessions_of_dated_turns_in_order(folder):
    (sample,) = realtalk.iter_samples(folder)
    assert sample.sample_id == "realtalk-7" and sample.speakers == ("Ana", "bo")
    assert [s.number for s in sample.sessions] == [1, 2]
    first = sample.sessions[0]
    assert first.timestamp == "2023-12-29T22:42:04"
    assert [t.timestamp for t in first.turns] == ["2023-12-29T22:42:04", "2023-12-30T00:32:20"]  # past midnight
    assert first.turns[1].text == "Good, look [shares a photo: a dog on a beach]"
    assert [q.evidence for q in sample.questions] == [("D1:2",), ("D1:2", "D2:2"), ("D9:9",)]
    assert [bool(q.known_evidence(sample.dia_ids)) for q in sample.questions] == [True, True, False]
    messages = realtalk.session_messages(sample.sample_id, first)
    assert [m["timestamp"] for m in messages] == ["2023-12-29T22:42:04", "2023-12-30T00:32:20"]  # each its own
    assert messages[0]["id"] == "realtalk-7:D1:1" and realtalk.thread_id(sample.sample_id, 1) == "realtalk-7-s1"


def test_a_folder_without_chats_and_a_file_of_another_shape_are_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        list(realtalk.iter_samples(tmp_path))
    bad = tmp_path / "Chat_1_x.json"
    bad.write_text(json.dumps({"qa": []}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a REALTALK chat"):
        list(realtalk.iter_samples(tmp_path))
    with pytest.raises(CommandError, match="not REALTALK data"):
        call_command("import_realtalk", str(tmp_path), verbosity=0)
    with pytest.raises(CommandError, match="REALTALK data not found"):
        call_command("import_realtalk", str(tmp_path / "absent"), verbosity=0)


@pytest.mark.django_db(transaction=True)
def test_import_stores_each_message_with_its_own_time_and_a_rerun_adds_nothing(folder):
    out = StringIO()
    call_command("import_realtalk", str(folder), verbosity=1, stdout=out, stderr=StringIO())
    assert "REALTALK import: 1 sample(s), 2 thread(s) created, 0 already complete, 4 message(s) added" in out.getvalue()
    thread = AgentMemory().get_thread("realtalk-7-s1")
    assert (thread.user_id, thread.agent_id) == ("realtalk-7", "realtalk")
    stored = thread.get_messages(start=0, end=None)
    assert [(m.id, m.role, m.timestamp) for m in stored] == [
        ("realtalk-7:D1:1", "Ana", "2023-12-29T22:42:04"), ("realtalk-7:D1:2", "bo", "2023-12-30T00:32:20")]
    assert stored[1].metadata == {"dia_id": "D1:2", "sample_id": "realtalk-7", "session": 1}
    before = (Thread.objects.count(), Message.objects.count())
    out = StringIO()
    call_command("import_realtalk", str(folder), samples=["realtalk-7"], verbosity=1, stdout=out, stderr=StringIO())
    assert "0 thread(s) created, 2 already complete, 0 message(s) added" in out.getvalue()
    assert (Thread.objects.count(), Message.objects.count()) == before
    with pytest.raises(CommandError, match="realtalk-9"):
        call_command("import_realtalk", str(folder), samples=["realtalk-9"], verbosity=0)


SHARED = realtalk.default_data_path()


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"REALTALK chats not found at {SHARED} (set OAM_REALTALK_PATH)")
def test_the_shared_chats_parse_to_the_documented_facts():
    samples = list(realtalk.iter_samples())
    assert [s.sample_id for s in samples] == ["realtalk-1", "realtalk-2", "realtalk-3", "realtalk-4"]
    assert sum(len(s.sessions) for s in samples) == 81
    assert sum(s.turn_count for s in samples) == 1761
    assert sum(len(s.questions) for s in samples) == 284
    assert all(q.known_evidence(s.dia_ids) for s in samples for q in s.questions)
    assert all(t.timestamp for s in samples for session in s.sessions for t in session.turns)
