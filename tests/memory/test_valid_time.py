"""Valid time (issue #32): a memory's validity window ``[valid_from, valid_to)``, set by ``add_memory`` and
``update_memory``, shown on the record, versioned in history, filtered by ``valid_at`` (search, lists, context
cards), closed by a ``supersedes`` relation, carried by export and import. Records without a window behave as
before."""

import asyncio
import datetime as dt

import pytest

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.core.types import MemoryRecord
from memory.llm.scripted import ScriptedLlm
from memory.models import ExtractionJob, Memory, MemoryVersion, SearchChunk
from tests.ids import key

UTC = dt.timezone.utc


def window(memory_id):
    """(valid_from, valid_to) of the memory row and the set of its chunks' copies."""
    row = Memory.objects.get(pk=key(memory_id))
    chunks = set(SearchChunk.objects.filter(source_kind="memory", record_id=key(memory_id))
                 .values_list("valid_from", "valid_to"))
    assert chunks == {(row.valid_from, row.valid_to)}, "the chunks' copies are in step with the row"
    return row.valid_from, row.valid_to


def found(results):
    return {result.record_id for result in results}


# --- the window on the record ------------------------------------------------------------------


def test_a_window_given_as_strings_datetimes_or_dates_is_stored_in_utc_and_shown_in_iso(thread):
    a = thread.add_memory("Lives in Lyon", valid_from="2024-01-01", valid_to="2026-07-01T00:00:00+02:00")
    b = thread.add_memory("Works at Acme", valid_from=dt.datetime(2025, 3, 2, 9, 30))  # naive: UTC
    c = thread.add_memory("Is on leave", valid_to=dt.date(2026, 8, 1))
    assert window(a) == (dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2026, 6, 30, 22, tzinfo=UTC))
    assert window(b) == (dt.datetime(2025, 3, 2, 9, 30, tzinfo=UTC), None)
    record = thread.get_memory(a)
    assert (record.valid_from, record.valid_to) == ("2024-01-01T00:00:00+00:00", "2026-06-30T22:00:00+00:00")
    assert thread.get_memory(c).valid_to == "2026-08-01T00:00:00+00:00" and thread.get_memory(c).valid_from is None


def test_a_record_without_a_window_is_as_before(thread):
    mid = thread.add_memory("No window here")
    record = thread.get_memory(mid)
    assert (record.valid_from, record.valid_to) == (None, None) and window(mid) == (None, None)
    names = [f.name for f in MemoryRecord.__dataclass_fields__.values()]
    assert names[names.index("source_message_ids") + 1:][:2] == ["valid_from", "valid_to"]  # after the SDK's
    (version,) = thread.get_memory_history(mid)
    assert "valid_from" not in version.after and "valid_to" not in version.after


@pytest.mark.parametrize("arguments, error, field", [
    ({"valid_from": 20240101}, TypeError, "valid_from"),
    ({"valid_to": True}, TypeError, "valid_to"),
    ({"valid_from": "next tuesday"}, ValueError, "valid_from"),
    ({"valid_to": "2026-13-01"}, ValueError, "valid_to"),
    ({"valid_from": "2026-07-01", "valid_to": "2026-06-30"}, ValueError, "valid_to"),
])
def test_bad_bounds_are_refused_naming_the_field(thread, arguments, error, field):
    with pytest.raises(error, match=field):
        thread.add_memory("x", **arguments)
    assert not Memory.objects.exists()


def test_update_sets_changes_and_clears_the_window_each_change_a_version_that_restore_undoes(thread):
    mid = thread.add_memory("Lives in Lyon")
    thread.update_memory(mid, valid_from="2024-01-01")
    thread.update_memory(mid, valid_to="2026-07-01")
    assert window(mid) == (dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2026, 7, 1, tzinfo=UTC))
    with pytest.raises(ValueError, match="valid_to"):  # checked against the stored valid_from
        thread.update_memory(mid, valid_to="2023-12-31")
    thread.update_memory(mid, content="Lives in Lyon, France")  # omitted: kept
    assert window(mid)[1] == dt.datetime(2026, 7, 1, tzinfo=UTC)
    thread.update_memory(mid, valid_from=None)
    assert window(mid) == (None, dt.datetime(2026, 7, 1, tzinfo=UTC))
    history = thread.get_memory_history(mid)
    assert [v.changed for v in history][1:] == [["valid_from"], ["valid_to"], ["content"], ["valid_from"]]
    assert history[2].after["valid_to"] == "2026-07-01T00:00:00+00:00"
    thread.restore_memory_version(mid, 3)
    assert window(mid) == (dt.datetime(2024, 1, 1, tzinfo=UTC), dt.datetime(2026, 7, 1, tzinfo=UTC))
    thread.restore_memory_version(mid, 1)  # before any window: restored open
    assert window(mid) == (None, None)


def test_an_old_snapshot_without_the_keys_restores_an_open_window(thread):
    mid = thread.add_memory("Old fact", valid_from="2020-01-01", valid_to="2021-01-01")
    first = MemoryVersion.objects.get(memory_id=key(mid), version=1)
    first.after = {k: v for k, v in first.after.items() if k not in ("valid_from", "valid_to")}  # pre-#32 shape
    first.save()
    thread.restore_memory_version(mid, 1)
    assert window(mid) == (None, None)


@pytest.mark.django_db(transaction=True)
def test_the_async_twins_take_the_window():
    thread = AgentMemory(llm=None).create_thread(thread_id="t-async", user_id="user-1")

    async def scenario():
        mid = await thread.add_memory_async("Owns a bike", valid_from="2025-05-05")
        await thread.update_memory_async(mid, valid_to="2025-09-09")
        return mid

    mid = asyncio.run(scenario())
    assert window(mid) == (dt.datetime(2025, 5, 5, tzinfo=UTC), dt.datetime(2025, 9, 9, tzinfo=UTC))


def test_the_client_level_methods_take_the_window(client, thread):
    other = client.add_memory("Owns a car", thread_id="t-main", valid_from="2025-05-05")
    client.update_memory(other, valid_from=None, valid_to="2025-09-09")
    assert window(other) == (None, dt.datetime(2025, 9, 9, tzinfo=UTC))


# --- valid_at ----------------------------------------------------------------------------------


@pytest.fixture
def homes(thread):
    """Three memories about where the user lives: Lyon until 2024-06-01, Paris from then, and one without a
    window; and a message saying the same."""
    thread.add_memory("The user lives in Lyon", memory_id="lyon", valid_to="2024-06-01")
    thread.add_memory("The user lives in Paris", memory_id="paris", valid_from="2024-06-01")
    thread.add_memory("The user lives in a flat", memory_id="flat")
    thread.add_messages([{"role": "user", "content": "I live in Lyon, no, Paris", "id": "said"}])
    return thread


def test_valid_at_filters_search_half_open_and_leaves_messages_alone(homes, settings):
    every = {"lyon", "paris", "flat", "said"}
    assert found(homes.search("where does the user live", max_results=10)) == every
    before = homes.search("where does the user live", max_results=10, valid_at="2024-05-31T23:59:59")
    assert found(before) == {"lyon", "flat", "said"}
    at = homes.search("where does the user live", max_results=10, valid_at=dt.date(2024, 6, 1))
    assert found(at) == {"paris", "flat", "said"}  # [valid_from, valid_to): Lyon's window ends as Paris' opens
    for mode in ("VECTOR", "KEYWORD"):  # every arm filters by the same WHERE clause
        settings.OAM_SEARCH_MODE = mode
        results = homes.search("lives Lyon Paris", max_results=10, valid_at="2030-01-01")
        assert "lyon" not in found(results) and "paris" in found(results), mode


def test_valid_at_filters_the_client_search_and_the_lists(client, homes):
    results = client.search("where does the user live", user_id="user-1", max_results=10, valid_at="2023-01-01")
    assert found(results) == {"lyon", "flat", "said"}
    assert {m.id for m in client.list_memories(valid_at="2025-01-01")} == {"paris", "flat"}
    assert {m.id for m in client.list_memories()} == {"lyon", "paris", "flat"}
    assert {m.id for m in homes.list_memories(valid_at="2023-01-01T00:00:00Z")} == {"lyon", "flat"}
    assert {m.id for m in client.search_project("lives", valid_at="2025-01-01", max_results=10)} >= {"paris"}
    with pytest.raises(ValueError, match="valid_at"):
        client.list_memories(valid_at="soon")
    with pytest.raises(TypeError, match="valid_at"):
        homes.search("x", valid_at=1.5)


def test_valid_at_goes_to_the_context_cards_searches(homes):
    card = homes.get_context_card(max_relevant_results=10, valid_at="2025-01-01")
    ids = {result.record_id for result in card.relevant_results}
    assert "lyon" not in ids and "paris" in ids
    with pytest.raises(ValueError, match="valid_at"):
        homes.get_context_card(valid_at="yesterday-ish")


def test_valid_at_filters_linked_memories(homes):
    homes.link_records("flat", "memory", "lyon", "memory", "supports")
    linked = homes.search("flat", max_results=1, num_hops=1, record_types=["memory"])
    assert [link.record_id for link in linked[0].linked] == ["lyon"]
    later = homes.search("flat", max_results=1, num_hops=1, record_types=["memory"], valid_at="2025-01-01")
    assert later[0].record_id == "flat" and later[0].linked == []


# --- supersession closes the older window --------------------------------------------------------


def test_a_supersedes_relation_closes_the_older_window_at_the_newer_start_and_its_removal_reopens_it(thread):
    thread.add_memory("The user lives in Lyon", memory_id="old", valid_from="2020-01-01")
    thread.add_memory("The user lives in Paris", memory_id="new", valid_from="2024-06-01")
    thread.link_records("new", "memory", "old", "memory", "supersedes", relation_id="r")
    assert window("old") == (dt.datetime(2020, 1, 1, tzinfo=UTC), dt.datetime(2024, 6, 1, tzinfo=UTC))
    last = thread.get_memory_history("old")[-1]
    assert last.actor["kind"] == "relation" and last.actor["id"] == "r" and last.changed == ["valid_to"]
    assert "closed the validity window" in last.reason
    assert {m.id for m in thread.list_memories(valid_at="2025-01-01")} == {"new"}
    thread.delete_record_link(relation_id="r")
    assert window("old") == (dt.datetime(2020, 1, 1, tzinfo=UTC), None)
    assert thread.get_memory_history("old")[-1].relation_id == "r"


def test_the_newer_start_is_its_event_time_without_valid_from_and_an_earlier_end_stands(thread):
    thread.add_memory("Drives a Fiat", memory_id="fiat", valid_to="2023-01-01")
    thread.add_memory("Drives a Volvo", memory_id="volvo", timestamp="2024-02-02T10:00:00", valid_from="2023-01-01")
    thread.add_memory("Rides a bike", memory_id="bike", timestamp="2024-03-03T10:00:00")
    thread.add_memory("Rides a tram", memory_id="tram", timestamp="2024-04-04T10:00:00")
    thread.add_memory("Walks", memory_id="walk", valid_from="2025-01-01")
    thread.link_records("volvo", "memory", "fiat", "memory", "supersedes")
    assert window("fiat")[1] == dt.datetime(2023, 1, 1, tzinfo=UTC)  # closed earlier already: kept
    thread.link_records("bike", "memory", "volvo", "memory", "supersedes", relation_id="bv")
    assert window("volvo") == (dt.datetime(2023, 1, 1, tzinfo=UTC), dt.datetime(2024, 3, 3, 10, tzinfo=UTC))  # event
    thread.link_records("tram", "memory", "bike", "memory", "supersedes")  # no window on either: as before #32
    assert window("bike") == (None, None) and Memory.objects.get(pk=key("bike")).status == "invalid"
    thread.add_memory("Takes the bus", memory_id="bus", memory_id_to_link="walk", link_type="supersedes",
                      valid_from="2024-01-01")
    assert window("walk") == (dt.datetime(2025, 1, 1, tzinfo=UTC), None)  # the newer starts first: no inversion
    assert Memory.objects.get(pk=key("walk")).status == "invalid"  # still superseded


def test_retyping_and_deleting_the_newer_memory_undo_the_closing(thread):
    thread.add_memory("Is vegetarian", memory_id="veg", valid_to="2030-01-01")
    thread.add_memory("Eats fish again", memory_id="fish", valid_from="2025-01-01")
    thread.link_records("fish", "memory", "veg", "memory", "supports", relation_id="rel")
    assert window("veg")[1] == dt.datetime(2030, 1, 1, tzinfo=UTC)
    thread.update_record_link("rel", relation_type="supersedes")
    assert window("veg")[1] == dt.datetime(2025, 1, 1, tzinfo=UTC)
    thread.update_record_link("rel", relation_type="refines")
    assert window("veg")[1] == dt.datetime(2030, 1, 1, tzinfo=UTC)  # back to its own end
    thread.update_record_link("rel", relation_type="supersedes")
    thread.delete_memory("fish")
    assert window("veg")[1] == dt.datetime(2030, 1, 1, tzinfo=UTC)
    assert Memory.objects.get(pk=key("veg")).status == "valid"


def test_a_window_edited_after_the_closing_is_not_reopened_and_another_supersession_still_closes(thread):
    thread.add_memory("Lives in Lyon", memory_id="old")
    thread.add_memory("Lives in Paris", memory_id="p", valid_from="2024-06-01")
    thread.add_memory("Lives in Nice", memory_id="n", valid_from="2025-06-01")
    thread.link_records("n", "memory", "old", "memory", "supersedes", relation_id="rn")
    thread.link_records("p", "memory", "old", "memory", "supersedes", relation_id="rp")
    assert window("old")[1] == dt.datetime(2024, 6, 1, tzinfo=UTC)  # the earliest start
    thread.delete_record_link(relation_id="rp")
    assert window("old")[1] == dt.datetime(2025, 6, 1, tzinfo=UTC)  # the remaining supersession closes it
    thread.update_memory("old", valid_to="2025-12-31")
    thread.delete_record_link(relation_id="rn")
    assert window("old")[1] == dt.datetime(2025, 12, 31, tzinfo=UTC)  # a person's edit stands


def test_two_supersessions_removed_in_either_order_leave_the_window_as_it_was(thread):
    """An outside attack: A superseded by C (from August), then by B (from June); removing C and then B left A
    closed in August by a relation that no longer existed (the undo stepped back one version, to C's closing)."""
    for order in (("rc", "rb"), ("rb", "rc")):
        thread.add_memory("Lives in Lyon", memory_id="a", memory_type="fact", valid_from="2026-01-01")
        thread.add_memory("Lives in Nice", memory_id="c", memory_type="fact", valid_from="2026-08-01")
        thread.add_memory("Lives in Paris", memory_id="b", memory_type="fact", valid_from="2026-06-01")
        thread.link_records("c", "fact", "a", "fact", "supersedes", relation_id="rc")
        assert window("a")[1] == dt.datetime(2026, 8, 1, tzinfo=UTC)
        thread.link_records("b", "fact", "a", "fact", "supersedes", relation_id="rb")
        assert window("a")[1] == dt.datetime(2026, 6, 1, tzinfo=UTC)
        versions = len(thread.get_memory_history("a"))
        thread.delete_record_link(relation_id=order[0])
        assert window("a")[1] == (dt.datetime(2026, 6, 1, tzinfo=UTC) if order[0] == "rc"
                                  else dt.datetime(2026, 8, 1, tzinfo=UTC))  # the remaining one's start
        if order[0] == "rc":
            assert len(thread.get_memory_history("a")) == versions  # nothing changed: no version
        thread.delete_record_link(relation_id=order[1])
        assert window("a") == (dt.datetime(2026, 1, 1, tzinfo=UTC), None), order
        assert Memory.objects.get(pk=key("a")).status == "valid"
        assert [m.id for m in thread.list_memories(valid_at="2026-12-01") if m.id == "a"] == ["a"]
        for mid in ("a", "b", "c"):
            thread.delete_memory(mid)


# --- export and import -----------------------------------------------------------------------------


def test_export_and_import_carry_the_window(client, thread, tmp_path):
    from django.core.management import call_command

    from memory.models import Project

    thread.add_memory("Lives in Lyon", memory_id="w", valid_from="2020-01-01", valid_to="2024-06-01")
    thread.add_memory("No window", memory_id="nw")
    path = tmp_path / "u.jsonl"
    call_command("export_memory", user="user-1", project=client.project.slug, output=str(path), verbosity=0)
    elsewhere = Project.objects.create(slug="elsewhere")
    call_command("import_memory", str(path), project="elsewhere", verbosity=0)
    copied = Memory.objects.get(pk=f"{elsewhere.pk}:w")
    assert (copied.valid_from, copied.valid_to) == (dt.datetime(2020, 1, 1, tzinfo=UTC),
                                                    dt.datetime(2024, 6, 1, tzinfo=UTC))
    chunks = set(SearchChunk.objects.filter(record_id=copied.pk).values_list("valid_from", "valid_to"))
    assert chunks == {(copied.valid_from, copied.valid_to)}
    plain = Memory.objects.get(pk=f"{elsewhere.pk}:nw")
    assert (plain.valid_from, plain.valid_to) == (None, None)


# --- extraction fills the window (scripted LLM) ------------------------------------------------------

INLINE = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, review_memory_types=())


def extracted(content, refs, **window):
    return {"memory_type": "fact", "content": content, "source_message_ids": refs, **window}


@pytest.mark.usefixtures("fresh_extraction_tracker")
def test_a_window_stated_in_a_message_is_extracted_and_valid_at_filters_it(db):
    llm = ScriptedLlm([{"memories": [
        extracted("Ann works in Berlin until the end of June 2026.", ["m1"], valid_to="2026-07-01"),
        extracted("Ann has lived in Berlin since March 2024.", ["m2"], valid_from="2024-03-01T00:00:00Z"),
        extracted("Ann owns a red bicycle.", ["m2"]),
    ]}])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-ex", user_id="u1", agent_id="a1",
                                                memory_extraction_config=INLINE)
    thread.add_messages([
        {"role": "user", "content": "I work in Berlin until June.", "timestamp": "2026-03-02T10:00:00"},
        {"role": "user", "content": "We moved here in March 2024, I still ride my red bike.",
         "timestamp": "2026-03-02T10:01:00"}])
    rows = {row.content: row for row in Memory.objects.all()}
    work, home, bike = (rows[text] for text in ("Ann works in Berlin until the end of June 2026.",
                                                "Ann has lived in Berlin since March 2024.", "Ann owns a red bicycle."))
    assert (work.valid_from, work.valid_to) == (None, dt.datetime(2026, 7, 1, tzinfo=UTC))
    assert (home.valid_from, home.valid_to) == (dt.datetime(2024, 3, 1, tzinfo=UTC), None)
    assert (bike.valid_from, bike.valid_to) == (None, None)
    assert thread.get_memory(work.public_id).valid_to == "2026-07-01T00:00:00+00:00"
    prompt = llm.requests[0].messages[0]["content"]
    assert "valid_from / valid_to" in prompt and "ISO dates" in prompt
    item = llm.requests[0].schema["properties"]["memories"]["items"]
    assert {"valid_from", "valid_to"} <= set(item["properties"]) and "valid_to" not in item["required"]
    later = {m.content for m in thread.list_memories(valid_at="2026-08-01")}
    assert later == {home.content, bike.content}
    hits = thread.search("Where does Ann work?", valid_at="2026-08-01", record_types=["fact"])
    assert work.public_id not in {hit.record_id for hit in hits}
    assert work.public_id in {hit.record_id for hit in thread.search("Where does Ann work?", valid_at="2026-06-30",
                                                                     record_types=["fact"])}


@pytest.mark.usefixtures("fresh_extraction_tracker")
def test_bad_dates_from_the_llm_are_dropped_not_fatal(db):
    llm = ScriptedLlm([{"memories": [
        extracted("Ann studies Dutch on Mondays.", ["m1"], valid_from="since we moved", valid_to="2026-05-01"),
        extracted("Ann plays chess with Bob.", ["m1"], valid_from="2026-05-01", valid_to="2026-01-01"),
    ]}])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-bad", user_id="u1", memory_extraction_config=INLINE)
    thread.add_messages([{"role": "user", "content": "Since we moved I study Dutch on Mondays and play chess."}])
    rows = {row.content: row for row in Memory.objects.all()}
    dutch, chess = rows["Ann studies Dutch on Mondays."], rows["Ann plays chess with Bob."]
    assert (dutch.valid_from, dutch.valid_to) == (None, dt.datetime(2026, 5, 1, tzinfo=UTC))  # the unreadable bound
    assert (chess.valid_from, chess.valid_to) == (None, None)  # an inverted window: dropped whole
    assert ExtractionJob.objects.get().status == "done"
