"""Relations between memory-like records (spec: link_records, update_record_link,
delete_record_link, add_memory's link arguments and autonomous_linking, search's num_hops)."""

import asyncio
import datetime

import pytest
from django.utils import timezone

from memory.client import AgentMemory
from memory.links.autonomous import propose_links
from memory.links.rules import INVALIDATING_RELATIONS
from memory.links.writes import PendingLink, pending_link
from memory.llm.adapters import LlmInvalidOutput, LlmTimeout
from memory.llm.prompts import BUILTIN_RELATIONS
from memory.llm.scripted import ScriptedLlm
from memory.models import Memory, RecordLink, SearchChunk
from memory.models import Thread as ThreadRow
from memory.services.memories import memory_add
from tests.ids import key

BUILTINS = [
    ("supersedes", "is_superseded_by"),
    ("contradicts", "contradicts"),
    ("refines", "is_refined_by"),
    ("supports", "is_supported_by"),
    ("duplicates", "duplicates"),
]


def status(memory_id):
    """(memory status, status of every chunk of it)."""
    chunks = set(SearchChunk.objects.filter(source_kind="memory", record_id=key(memory_id))
                 .values_list("status", flat=True))
    return Memory.objects.get(pk=key(memory_id)).status, chunks


def valid(memory_id):
    return status(memory_id) == ("valid", {"valid"})


def invalid(memory_id):
    return status(memory_id) == ("invalid", {"invalid"})


@pytest.fixture
def notes(thread):
    """Four memories of the main thread: a, b, c (memories) and f (a fact)."""
    thread.add_memory("User plays the violin", memory_id="a")
    thread.add_memory("User plays the viola", memory_id="b")
    thread.add_memory("User plays the cello", memory_id="c")
    thread.add_memory("Violins have four strings", memory_id="f", memory_type="fact")
    return thread


# --- link_records -----------------------------------------------------------------------------


@pytest.mark.parametrize("relation_type, reverse", BUILTINS)
def test_builtin_relation_types_store_their_reverse_label(notes, relation_type, reverse):
    rid = notes.link_records("a", "memory", "f", "fact", relation_type)
    row = RecordLink.objects.get(pk=key(rid))
    assert (row.source_id, row.source_type, row.target_id, row.target_type) == (key("a"), "memory", key("f"), "fact")
    assert (row.relation_type, row.opposite_relation_type, row.thread_id) == (relation_type, reverse, key("t-main"))


def test_custom_relation_types_reverse_defaults_to_the_same_label(notes):
    same = notes.link_records("a", "memory", "b", "memory", "mentions")
    named = notes.link_records("a", "memory", "c", "memory", "teaches", opposite_relation_type="learns_from")
    explicit = notes.link_records("b", "memory", "c", "memory", "supports", opposite_relation_type="backs")
    assert RecordLink.objects.get(pk=key(same)).opposite_relation_type == "mentions"
    assert RecordLink.objects.get(pk=key(named)).opposite_relation_type == "learns_from"
    assert RecordLink.objects.get(pk=key(explicit)).opposite_relation_type == "backs"


def test_relation_ids_are_caller_chosen_or_generated(notes):
    assert notes.link_records("a", "memory", "b", "memory", "supports", relation_id="rel-1") == "rel-1"
    generated = notes.link_records("a", "memory", "c", "memory", "supports", timestamp="2024-05-01T10:00:00",
                                   metadata={"why": "same family"})
    row = RecordLink.objects.get(pk=key(generated))
    assert len(generated) == 36 and row.timestamp == "2024-05-01T10:00:00" and row.metadata == {"why": "same family"}
    with pytest.raises(ValueError, match="relation_id"):
        notes.link_records("b", "memory", "c", "memory", "supports", relation_id="rel-1")
    assert RecordLink.objects.count() == 2


def test_a_record_cannot_be_related_to_itself(notes):
    with pytest.raises(ValueError, match="itself"):
        notes.link_records("a", "memory", "a", "memory", "supports")
    assert not RecordLink.objects.exists()


def test_endpoints_must_be_memory_like_records_of_this_exact_thread(client, notes):
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    other.add_memory("Someone else's note", memory_id="theirs")
    notes.add_messages([{"role": "user", "content": "hello", "id": "msg-1"}])
    notes.add_memory("Stored for nobody's thread", memory_id="orphan", thread_id=None)
    cases = [
        (("a", "memory", "missing", "memory"), "target_record_id"),
        (("theirs", "memory", "a", "memory"), "source_record_id"),
        (("a", "memory", "orphan", "memory"), "target_record_id"),
        (("a", "memory", "msg-1", "message"), "target_record_type"),
        (("a", "memory", "f", "memory"), "target_record_type"),  # f is a fact
        (("a", "image", "b", "memory"), "source_record_type"),
    ]
    for endpoints, field in cases:
        with pytest.raises(ValueError, match=field):
            notes.link_records(*endpoints, "supports")
    assert not RecordLink.objects.exists()


def test_only_one_orientation_per_endpoint_pair(notes):
    rid = notes.link_records("a", "memory", "b", "memory", "supports")
    with pytest.raises(ValueError, match="one orientation") as caught:
        notes.link_records("b", "memory", "a", "memory", "contradicts")
    assert caught.value.relation_id == rid
    with pytest.raises(ValueError, match="already related"):
        notes.link_records("a", "memory", "b", "memory", "refines")
    assert RecordLink.objects.count() == 1


def test_bad_argument_types_and_unknown_keywords(notes):
    with pytest.raises(TypeError):
        notes.link_records("a", "memory", "b", "memory", "supports", weight=3)
    with pytest.raises(TypeError):
        notes.link_records("a", "memory", "b", "memory", 7)
    with pytest.raises(ValueError, match="relation_type"):
        notes.link_records("a", "memory", "b", "memory", "  ")
    with pytest.raises(ValueError, match="relation_type"):
        notes.link_records("a", "memory", "b", "memory", "x" * 65)
    with pytest.raises(TypeError):
        notes.update_record_link("r", colour="red")
    with pytest.raises(TypeError):
        notes.delete_record_link(relation_id="r", force=True)


# --- update_record_link ----------------------------------------------------------------------


def test_update_preserves_omitted_values(notes):
    rid = notes.link_records("a", "memory", "b", "memory", "teaches", opposite_relation_type="learns_from",
                             timestamp="2024-01-01T00:00:00", metadata={"k": 1})
    assert notes.update_record_link(rid, metadata={"k": 2}) == 1
    row = RecordLink.objects.get(pk=key(rid))
    assert (row.relation_type, row.opposite_relation_type, row.timestamp, row.metadata) == (
        "teaches", "learns_from", "2024-01-01T00:00:00", {"k": 2})
    assert notes.update_record_link(rid, relation_type="mentors") == 1  # custom: reverse label kept
    row.refresh_from_db()
    assert (row.relation_type, row.opposite_relation_type) == ("mentors", "learns_from")
    assert notes.update_record_link(rid, timestamp=None, opposite_relation_type="mentee_of") == 1
    row.refresh_from_db()
    assert (row.timestamp, row.opposite_relation_type, row.metadata) == (None, "mentee_of", {"k": 2})


@pytest.mark.parametrize("relation_type, reverse", BUILTINS)
def test_switching_to_a_builtin_type_sets_its_fixed_reverse_label(notes, relation_type, reverse):
    rid = notes.link_records("a", "memory", "b", "memory", "teaches", opposite_relation_type="learns_from")
    assert notes.update_record_link(rid, relation_type=relation_type) == 1
    assert RecordLink.objects.get(pk=key(rid)).opposite_relation_type == reverse


def test_update_of_an_unknown_or_foreign_relation_returns_zero(client, notes):
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    other.add_memory("x1", memory_id="x1")
    other.add_memory("x2", memory_id="x2")
    theirs = other.link_records("x1", "memory", "x2", "memory", "supports")
    assert notes.update_record_link("nope", relation_type="supports") == 0
    assert notes.update_record_link(theirs, relation_type="supersedes") == 0
    assert RecordLink.objects.get(pk=key(theirs)).relation_type == "supports" and valid("x2")


# --- delete_record_link ----------------------------------------------------------------------


def test_delete_by_id(notes):
    rid = notes.link_records("a", "memory", "b", "memory", "supports")
    assert notes.delete_record_link(relation_id=rid) == 1
    assert notes.delete_record_link(relation_id=rid) == 0


def test_delete_by_endpoint_tuple_in_stored_orientation(notes):
    notes.link_records("a", "memory", "f", "fact", "supports")
    assert notes.delete_record_link("f", "fact", "a", "memory", "supports") == 0  # reverse orientation
    assert notes.delete_record_link("a", "memory", "f", "fact", "is_supported_by") == 0
    assert notes.delete_record_link("a", "memory", "f", "memory", "supports") == 0  # wrong type
    assert notes.delete_record_link(source_record_id="a", source_record_type="memory", target_record_id="f",
                                    target_record_type="fact", relation_type="supports") == 1
    assert not RecordLink.objects.exists()


def test_delete_selector_must_be_an_id_alone_or_a_complete_tuple(notes):
    rid = notes.link_records("a", "memory", "b", "memory", "supports")
    with pytest.raises(ValueError, match="alone"):
        notes.delete_record_link(source_record_id="a", relation_id=rid)
    with pytest.raises(ValueError, match="missing: target_record_type, relation_type"):
        notes.delete_record_link("a", "memory", "b")
    with pytest.raises(ValueError, match="relation_id"):
        notes.delete_record_link()
    assert RecordLink.objects.count() == 1


def test_delete_of_another_threads_relation_returns_zero(client, notes):
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    other.add_memory("x1", memory_id="x1")
    other.add_memory("x2", memory_id="x2")
    theirs = other.link_records("x1", "memory", "x2", "memory", "supports")
    assert notes.delete_record_link(relation_id=theirs) == 0
    assert notes.delete_record_link("x1", "memory", "x2", "memory", "supports") == 0
    assert RecordLink.objects.filter(pk=key(theirs)).exists()


# --- lifecycle --------------------------------------------------------------------------------


@pytest.mark.parametrize("relation_type", ["supersedes", "refines", "duplicates"])
def test_the_target_of_an_invalidating_relation_becomes_invalid(notes, relation_type):
    rid = notes.link_records("a", "memory", "b", "memory", relation_type)
    assert invalid("b") and valid("a")
    assert notes.delete_record_link(relation_id=rid) == 1
    assert valid("b")


@pytest.mark.parametrize("relation_type", ["supports", "contradicts", "mentions"])
def test_other_relations_leave_both_records_valid(notes, relation_type):
    notes.link_records("a", "memory", "b", "memory", relation_type)
    assert valid("a") and valid("b")


def test_deleting_the_last_invalidating_relation_makes_the_record_valid_again(notes):
    first = notes.link_records("a", "memory", "c", "memory", "supersedes")
    second = notes.link_records("b", "memory", "c", "memory", "refines")
    notes.link_records("f", "fact", "c", "memory", "supports")
    assert notes.delete_record_link(relation_id=first) == 1
    assert invalid("c")  # still refined by b
    assert notes.delete_record_link("b", "memory", "c", "memory", "refines") == 1
    assert valid("c")
    assert second not in RecordLink.objects.values_list("pk", flat=True)


def test_retyping_a_relation_invalidates_or_revalidates_its_target(notes):
    rid = notes.link_records("a", "memory", "b", "memory", "supports")
    notes.update_record_link(rid, relation_type="supersedes")
    assert invalid("b")
    notes.update_record_link(rid, relation_type="duplicates")
    assert invalid("b")
    notes.update_record_link(rid, relation_type="contradicts")
    assert valid("b")


def test_deleting_a_memory_deletes_its_relations_and_revalidates(notes):
    notes.link_records("a", "memory", "b", "memory", "supersedes")
    notes.link_records("c", "memory", "a", "memory", "supports")
    assert invalid("b")
    assert notes.delete_memory("a") == 1
    assert not RecordLink.objects.exists()
    assert valid("b")


def test_deleting_a_superseded_memory_deletes_the_relation(notes):
    notes.link_records("a", "memory", "b", "memory", "supersedes")
    assert notes.delete_memory("b") == 1
    assert not RecordLink.objects.exists() and valid("a")


def test_deleting_the_thread_deletes_its_relations(client, notes):
    notes.link_records("a", "memory", "b", "memory", "supports")
    assert client.delete_thread("t-main") == 1
    assert not RecordLink.objects.exists()


def test_invalid_records_are_hidden_by_search_only_when_asked(notes):
    notes.link_records("a", "memory", "b", "memory", "supersedes")
    shown = {r.record_id for r in notes.search("viola", record_types=["memory"])}
    hidden = {r.record_id for r in notes.search("viola", record_types=["memory"], include_invalid_results=False)}
    assert "b" in shown and "b" not in hidden and "a" in hidden


# --- add_memory with an explicit link ---------------------------------------------------------


def test_add_memory_creates_the_memory_and_its_link(notes):
    mid = notes.add_memory("User plays the violin professionally", memory_id="a2", memory_id_to_link="a",
                           link_type="refines", link_id="rel-a2", link_timestamp="2024-06-01T09:00:00",
                           link_metadata={"source": "manual"})
    assert mid == "a2"
    row = RecordLink.objects.get(pk=key("rel-a2"))
    assert (row.source_id, row.target_id, row.relation_type, row.opposite_relation_type) == (
        key("a2"), key("a"), "refines", "is_refined_by")
    assert (row.timestamp, row.metadata, row.source_type, row.target_type) == (
        "2024-06-01T09:00:00", {"source": "manual"}, "memory", "memory")
    assert invalid("a") and valid("a2")


def test_add_memory_with_a_link_inherits_omitted_scopes_from_the_target(notes):
    notes.add_memory("Shared across agents", memory_id="shared", user_id=None, agent_id="agent-2")
    notes.add_memory("Shared note, corrected", memory_id="fix", memory_id_to_link="shared", link_type="supersedes")
    row = Memory.objects.get(pk=key("fix"))
    assert (row.user_id, row.agent_id, row.thread_id) == (None, "agent-2", key("t-main"))
    chunk = SearchChunk.objects.get(record_id=key("fix"))
    assert (chunk.user_id, chunk.agent_id, chunk.thread_id) == (None, "agent-2", key("t-main"))
    notes.add_memory("Overrides one scope", memory_id="fix2", memory_id_to_link="shared", link_type="supports",
                     user_id="user-9")
    row = Memory.objects.get(pk=key("fix2"))
    assert (row.user_id, row.agent_id) == ("user-9", "agent-2")


def test_the_memory_add_service_takes_the_link_arguments_itself(notes):
    """``services.memory_add`` checks and inserts the explicit relation with the memory (no caller-built link)."""
    from memory.core.types import MemoryRetentionConfig

    notes.add_memory("Shared across agents", memory_id="shared", user_id=None, agent_id="agent-2")
    memory_add(thread=notes.row, content="Shared note, corrected", memory_id="fix",
                        retention=MemoryRetentionConfig(), memory_id_to_link="shared", link_type="supersedes",
                        link_id="rel-fix")
    row = RecordLink.objects.get(pk=key("rel-fix"))
    assert (row.source_id, row.target_id, row.relation_type) == (key("fix"), key("shared"), "supersedes")
    assert (Memory.objects.get(pk=key("fix")).user_id, Memory.objects.get(pk=key("fix")).agent_id) == (None, "agent-2")
    assert invalid("shared") and valid("fix")
    with pytest.raises(ValueError, match="link_type"):
        memory_add(thread=notes.row, content="No type", retention=MemoryRetentionConfig(),
                            memory_id_to_link="a")
    link = pending_link(thread=notes.row, memory_id_to_link="a", link_type="supports")
    with pytest.raises(TypeError, match="not both"):
        memory_add(thread=notes.row, content="Both", retention=MemoryRetentionConfig(), link=link,
                            link_type="supports")
    assert not Memory.objects.filter(content__in=["No type", "Both"]).exists()


def test_add_memory_link_errors_write_nothing(client, notes):
    other = client.create_thread(thread_id="t-other", user_id="user-1", agent_id="agent-1")
    other.add_memory("theirs", memory_id="theirs")
    notes.link_records("a", "memory", "b", "memory", "supports", relation_id="taken")
    before = Memory.objects.count()
    cases = [
        (dict(memory_id_to_link="a"), "link_type"),
        (dict(link_type="supersedes"), "memory_id_to_link"),
        (dict(memory_id_to_link="a", link_type="mentions"), "link_type"),
        (dict(memory_id_to_link="theirs", link_type="supports"), "memory_id_to_link"),
        (dict(memory_id_to_link="missing", link_type="supports"), "memory_id_to_link"),
        (dict(link_id="rel-x"), "link_id"),
        (dict(link_metadata={"a": 1}), "link_metadata"),
        (dict(memory_id_to_link="a", link_type="supports", link_id="taken"), "link_id"),
        (dict(memory_id_to_link="a", link_type="supports", thread_id="t-other"), "thread_id"),
    ]
    for kwargs, field in cases:
        with pytest.raises(ValueError, match=field):
            notes.add_memory("new note", **kwargs)
    with pytest.raises(TypeError, match="link_timestamp"):
        notes.add_memory("new note", memory_id_to_link="a", link_type="supports", link_timestamp=20240101)
    assert Memory.objects.count() == before and RecordLink.objects.count() == 1


def test_add_memory_and_link_commit_together(notes, monkeypatch):
    """The link is written inside the memory's transaction: if it fails, the memory is not stored."""
    original = PendingLink.__call__

    def target_vanishes(self, memory):
        Memory.objects.filter(pk=key(self.target_id)).delete()  # deleted between the check and the write
        return original(self, memory)

    monkeypatch.setattr(PendingLink, "__call__", target_vanishes)
    with pytest.raises(ValueError, match="memory_id_to_link"):
        notes.add_memory("Corrected", memory_id="new", memory_id_to_link="a", link_type="supersedes")
    assert not Memory.objects.filter(pk=key("new")).exists()
    assert not SearchChunk.objects.filter(record_id=key("new")).exists()
    assert Memory.objects.filter(pk=key("a")).exists()  # the delete rolled back with the rest


# --- search num_hops ---------------------------------------------------------------------------


@pytest.fixture
def chain(thread):
    """d refines c refines b supersedes a: a chain of four memories, plus a message."""
    thread.add_memory("Granny's apple pie recipe uses cinnamon", memory_id="a")
    thread.add_memory("The pie bakes for forty minutes", memory_id="b", memory_id_to_link="a",
                      link_type="supersedes", link_id="r-ba")
    thread.add_memory("Oven temperature is 180 degrees", memory_id="c", memory_id_to_link="b",
                      link_type="refines", link_id="r-cb")
    thread.add_memory("Use the middle rack of the oven", memory_id="d", memory_id_to_link="c",
                      link_type="refines", link_id="r-dc")
    thread.add_messages([{"role": "user", "content": "What about the apple pie recipe?", "id": "m-pie"}])
    return thread


def hit(results, record_id):
    [found] = [r for r in results if r.record_id == record_id]
    return found


def linked(result):
    return [(x.record_id, x.relation_type, x.hops, x.relation_id, x.from_record_id) for x in result.linked]


def test_search_without_num_hops_has_no_linked_records(chain):
    results = chain.search("apple pie cinnamon", record_types=["memory"])
    assert all(r.linked == [] for r in results)
    assert all(r.linked == [] for r in chain.search("apple pie cinnamon", record_types=["memory"], num_hops=0))


def test_num_hops_follows_relations_both_ways_with_the_traversed_label(chain):
    a = hit(chain.search("apple pie cinnamon", num_hops=1), "a")
    assert linked(a) == [("b", "is_superseded_by", 1, "r-ba", "a")]
    a = hit(chain.search("apple pie cinnamon", num_hops=3), "a")
    assert linked(a) == [("b", "is_superseded_by", 1, "r-ba", "a"), ("c", "is_refined_by", 2, "r-cb", "b"),
                         ("d", "is_refined_by", 3, "r-dc", "c")]
    c = hit(chain.search("oven temperature degrees", num_hops=1), "c")
    assert linked(c) == [("b", "refines", 1, "r-cb", "c"), ("d", "is_refined_by", 1, "r-dc", "c")]
    assert c.linked[0].record.content == "The pie bakes for forty minutes"


def test_max_linked_results_caps_each_direct_result_nearest_first(chain):
    a = hit(chain.search("apple pie cinnamon", num_hops=5, max_linked_results=2), "a")
    assert [x.record_id for x in a.linked] == ["b", "c"]
    a = hit(chain.search("apple pie cinnamon", num_hops=5, max_linked_results=0), "a")
    assert a.linked == []


def test_message_results_are_not_expanded(chain):
    results = chain.search("apple pie recipe", num_hops=2)
    assert hit(results, "m-pie").linked == []
    assert hit(results, "a").linked  # memories are


def test_num_hops_and_max_linked_results_are_checked(chain):
    for bad in (-1, 6):
        with pytest.raises(ValueError, match="num_hops"):
            chain.search("pie", num_hops=bad)
    with pytest.raises(TypeError, match="num_hops"):
        chain.search("pie", num_hops=True)
    with pytest.raises(ValueError, match="max_linked_results"):
        chain.search("pie", num_hops=1, max_linked_results=-1)
    # a SQL row limit is 64-bit: larger is a ValueError, not a database error
    with pytest.raises(ValueError, match="max_linked_results: must be at most 2147483647"):
        chain.search("pie", num_hops=1, max_linked_results=10**20)
    with pytest.raises(ValueError, match="max_results: must be at most 1000"):  # the SDK's bound
        chain.search("pie", max_results=10**20)
    assert chain.search("pie", max_results=1000, num_hops=1, max_linked_results=2**31 - 1)
    with pytest.raises(TypeError, match="max_linked_results"):
        chain.search("pie", num_hops=1, max_linked_results="5")


def test_expansion_hides_invalid_records_when_asked_and_does_not_walk_through_them(chain):
    # a and b are invalid (superseded, refined); c is invalid (refined by d); d is valid.
    assert [m for m in "abcd" if invalid(m)] == ["a", "b", "c"]
    d = hit(chain.search("middle rack oven", num_hops=3), "d")
    assert [x.record_id for x in d.linked] == ["c", "b", "a"]
    d = hit(chain.search("middle rack oven", num_hops=3, include_invalid_results=False), "d")
    assert d.linked == []


def test_expansion_skips_expired_records_and_does_not_walk_through_them(chain):
    past = timezone.now() - datetime.timedelta(days=1)
    Memory.objects.filter(pk=key("b")).update(expires_at=past)
    SearchChunk.objects.filter(record_id=key("b")).update(expires_at=past)
    a = hit(chain.search("apple pie cinnamon", num_hops=3), "a")
    assert a.linked == []
    c = hit(chain.search("oven temperature degrees", num_hops=3), "c")
    assert [x.record_id for x in c.linked] == ["d"]


def test_expansion_respects_the_search_scope(thread):
    thread.add_memory("Team standup happens at nine", memory_id="s1")
    thread.add_memory("Standup notes for another user", memory_id="s2", user_id="user-2",
                      memory_id_to_link="s1", link_type="supports")
    s1 = hit(thread.search("standup at nine", num_hops=1), "s1")
    assert s1.linked == []  # s2 belongs to user-2: outside the thread's default exact-user scope
    s1 = hit(thread.search("standup at nine", num_hops=1, exact_user_match=False), "s1")
    assert [x.record_id for x in s1.linked] == ["s2"]


def test_results_from_other_threads_expand_within_their_own_thread(client, thread):
    sibling = client.create_thread(thread_id="t-sib", user_id="user-1", agent_id="agent-1")
    sibling.add_memory("Sailing lessons on Saturday mornings", memory_id="sail")
    sibling.add_memory("Sailing lessons moved to Sunday", memory_id="sail2", memory_id_to_link="sail",
                       link_type="supersedes")
    thread.add_memory("Unrelated note about taxes", memory_id="tax")
    results = thread.search("sailing lessons Saturday", num_hops=1)  # exact_thread_match=False by default
    assert [x.record_id for x in hit(results, "sail").linked] == ["sail2"]
    assert hit(results, "tax").linked == []


def test_cycles_are_not_followed_back_to_the_start(notes):
    notes.link_records("a", "memory", "b", "memory", "supports", relation_id="r1")
    notes.link_records("b", "memory", "c", "memory", "supports", relation_id="r2")
    notes.link_records("c", "memory", "a", "memory", "supports", relation_id="r3")
    a = hit(notes.search("violin", record_types=["memory"], num_hops=5), "a")
    assert linked(a) == [("b", "supports", 1, "r1", "a"), ("c", "is_supported_by", 1, "r3", "a")]


def test_client_search_also_expands(chain):
    results = AgentMemory().search("apple pie cinnamon", user_id="user-1", num_hops=1)
    assert [x.record_id for x in hit(results, "a").linked] == ["b"]


# --- autonomous linking -------------------------------------------------------------------------


def supersedes_m1():
    return {"links": [{"candidate": "M1", "relation_type": "supersedes"}]}


def llm_thread(llm, thread_id="t-llm"):
    return AgentMemory(llm=llm).create_thread(thread_id=thread_id, user_id="u1", agent_id="a1")


def test_scenario_updated_preference_supersedes_the_old_one(db):
    llm = ScriptedLlm([supersedes_m1()])
    thread = llm_thread(llm)
    tea = thread.add_memory("User likes tea", memory_type="preference")
    assert llm.requests == []  # nothing to compare with yet: no LLM call
    coffee = thread.add_memory("User now prefers coffee", memory_type="preference")
    assert len(llm.requests) == 1
    assert valid(coffee) and invalid(tea)
    [row] = RecordLink.objects.all()
    assert (row.source_id, row.target_id, row.relation_type, row.opposite_relation_type) == (
        key(coffee), key(tea), "supersedes", "is_superseded_by")

    results = thread.search("coffee", num_hops=1)
    assert hit(results, coffee).linked[0].record_id == tea
    assert hit(results, coffee).linked[0].relation_type == "supersedes"
    results = thread.search("tea", num_hops=1)
    assert linked(hit(results, tea)) == [(coffee, "is_superseded_by", 1, row.public_id, tea)]
    assert hit(results, tea).record.status == "invalid"
    assert tea not in {r.record_id for r in thread.search("tea", include_invalid_results=False)}


def test_the_llm_sees_the_new_memory_and_its_nearest_valid_memories_of_the_thread(db):
    llm = ScriptedLlm([{"links": []}])
    thread = llm_thread(llm)
    thread.add_memory("User likes green tea", memory_id="tea", autonomous_linking=False)
    thread.add_memory("User liked black tea", memory_id="old", status="invalid", autonomous_linking=False)
    thread.add_memory("Paris is in France", memory_id="paris", memory_type="fact", autonomous_linking=False)
    llm_thread(None, "t-else").add_memory("User likes oolong tea", memory_id="elsewhere")
    assert thread.add_memory("User now prefers coffee over tea", memory_id="coffee") == "coffee"
    [request] = llm.requests
    prompt = request.messages[-1]["content"]
    assert prompt.startswith("NEW: [memory] User now prefers coffee over tea")
    assert "M1: [memory] User likes green tea" in prompt and "M2: [fact] Paris is in France" in prompt
    assert "black tea" not in prompt and "oolong" not in prompt and "M3" not in prompt
    items = request.schema["properties"]["links"]["items"]["properties"]
    assert items["candidate"]["enum"] == ["M1", "M2"]
    assert items["relation_type"]["enum"] == ["supersedes", "contradicts", "refines", "supports", "duplicates"]
    assert request.schema_name == "memory_links"
    assert not RecordLink.objects.exists()


def test_a_restricted_clients_autonomous_linking_sees_and_links_its_own_users_memories_only(db):
    """With user-restricted keys: u2's client adding a memory to u2's thread, which also holds u1's memory,
    must neither show u1's memory to the LLM nor let it supersede it (``propose_links(restrict=...)``)."""
    from memory.records.tenancy import Tenant, get_project

    llm = ScriptedLlm([supersedes_m1()])
    shared = AgentMemory(llm=None).create_thread(thread_id="t-shared", user_id="u2", agent_id="a1")
    shared.add_memory("User prefers tea, passport 1234", memory_id="theirs", user_id="u1")
    shared.add_memory("User likes tea", memory_id="mine")
    restricted = AgentMemory(tenant=Tenant(get_project(None), user_id="u2"), llm=llm).get_thread("t-shared")
    restricted.add_memory("User now prefers coffee over tea", memory_id="coffee")
    [request] = llm.requests
    prompt = request.messages[-1]["content"]
    assert "M1: [memory] User likes tea" in prompt and "passport" not in prompt and "M2" not in prompt
    [row] = RecordLink.objects.all()
    assert (row.source_id, row.target_id) == (key("coffee"), key("mine"))
    assert invalid("mine") and valid("theirs")


def test_autonomous_linking_off_or_without_llm_makes_no_call(db):
    llm = ScriptedLlm([])  # any request would raise AssertionError
    thread = llm_thread(llm)
    thread.add_memory("User likes tea", autonomous_linking=False)
    thread.add_memory("User likes coffee", autonomous_linking=False)
    plain = llm_thread(None, "t-plain")
    plain.add_memory("User likes tea")
    plain.add_memory("User likes coffee", autonomous_linking=True)
    assert llm.requests == [] and not RecordLink.objects.exists()
    with pytest.raises(TypeError):
        plain.add_memory("x", autonomous_linking="yes")


@pytest.mark.parametrize("failure", [LlmTimeout("slow"), "not json at all"])
def test_llm_failure_leaves_the_memory_stored(db, failure):
    llm = ScriptedLlm([failure] * 3)
    thread = llm_thread(llm)
    thread.add_memory("User likes tea", memory_id="tea")
    assert thread.add_memory("User now prefers coffee", memory_id="coffee") == "coffee"
    assert Memory.objects.filter(pk=key("coffee")).exists() and not RecordLink.objects.exists()
    assert valid("tea")


def test_propose_links_stores_each_proposal_once_and_skips_what_cannot_be_stored(db):
    thread = llm_thread(None)
    thread.add_memory("User likes tea", memory_id="tea")
    thread.add_memory("User drinks tea every morning", memory_id="morning")
    thread.add_memory("User now prefers coffee to tea", memory_id="coffee")
    row = ThreadRow.objects.get(pk=key("t-llm"))
    llm = ScriptedLlm([{"links": [{"candidate": "M1", "relation_type": "supersedes"},
                                  {"candidate": "M1", "relation_type": "contradicts"},
                                  {"candidate": "M2", "relation_type": "contradicts"}]}])
    created = propose_links(row, "coffee", llm)
    assert len(created) == 2
    pairs = set(RecordLink.objects.values_list("source_id", "target_id", "relation_type"))
    assert len(pairs) == 2 and all(source == key("coffee") for source, _, _ in pairs)
    assert RecordLink.objects.get(pk=key(created[0])).metadata == {"origin": "autonomous_linking"}
    # Everything near is related now or invalid: nothing left to ask about.
    assert propose_links(row, "coffee", ScriptedLlm([])) == []
    assert propose_links(row, "missing", ScriptedLlm([])) == []


def test_propose_links_raises_llm_errors_for_its_caller(db):
    thread = llm_thread(None)
    thread.add_memory("User likes tea", memory_id="tea")
    thread.add_memory("User now prefers coffee", memory_id="coffee")
    with pytest.raises(LlmInvalidOutput):
        propose_links(ThreadRow.objects.get(pk=key("t-llm")), "coffee",
                            ScriptedLlm([{"links": [{"candidate": "M9", "relation_type": "supersedes"}]}] * 3))
    assert not RecordLink.objects.exists()


# --- async twins ---------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_async_twins(notes):
    async def scenario():
        rid = await notes.link_records_async("a", "memory", "b", "memory", "supersedes", relation_id="ra")
        updated = await notes.update_record_link_async(rid, metadata={"x": 1})
        deleted = await notes.delete_record_link_async(relation_id=rid)
        return rid, updated, deleted

    assert asyncio.run(scenario()) == ("ra", 1, 1)
    assert valid("b")


# --- a real LLM -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_autonomous_linking_with_a_real_llm_stores_only_well_formed_relations(db, local_llm):
    """SmolLM2-135M cannot be trusted to pick the right relation: this checks the pipeline end to end."""
    thread = llm_thread(local_llm)
    tea = thread.add_memory("User likes tea", memory_type="preference")
    coffee = thread.add_memory("User now prefers coffee instead of tea", memory_type="preference")
    assert local_llm.totals.calls == 1
    assert Memory.objects.filter(pk=key(coffee)).exists()
    for row in RecordLink.objects.all():
        assert (row.source_id, row.target_id) == (key(coffee), key(tea))
        assert row.relation_type in BUILTIN_RELATIONS
        assert row.opposite_relation_type == BUILTIN_RELATIONS[row.relation_type]
        assert invalid(tea) == (row.relation_type in INVALIDATING_RELATIONS)
