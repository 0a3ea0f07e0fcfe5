"""Projects: ids are unique within a project, and nothing of one project reaches another.

Two applications use the same ids (thread ``c4``, user ``u1``, message ``m1``,
memory ``k1``, image ``img``, relation ``r1``) and the same words; each sees
its own records only, through every read, write and search of the engine.
"""

import numpy as np
import pytest
from django.utils import timezone

from memory.client import AgentMemory
from memory.client import Thread as ThreadHandle
from memory.core import progress
from memory.core.errors import OutOfScope
from memory.core.ids import public_id, stored_id
from memory.core.types import NOTSET, SearchScope
from memory.extraction.dedup import nearest_memories_queryset
from memory.index.vector_cache import get_vector_cache
from memory.links.writes import link_list
from memory.models import Image, Memory, Message, Project, RecordLink, SearchChunk, Thread
from memory.records.tenancy import Tenant, get_project
from tests import image_samples as samples

TEXT = "The user loves spicy ramen from the night market"


def fill(client: AgentMemory, marker: str) -> ThreadHandle:
    """One thread with the same ids in every project; ``marker`` tells the projects' contents apart."""
    thread = client.create_thread(thread_id="c4", user_id="u1", agent_id="a1")
    thread.add_messages([{"role": "user", "content": f"{TEXT} ({marker})", "id": "m1"}])
    thread.add_memory(f"{TEXT} ({marker})", memory_id="k1", memory_type="preference")
    thread.add_memory(f"Prefers {marker} noodles", memory_id="k2")
    thread.add_image(samples.png(), description=f"A bowl of ramen ({marker})", image_id="img")
    thread.link_records("k2", "memory", "k1", "preference", "supports", relation_id="r1")
    return thread


@pytest.fixture
def two(db):
    """(client of project acme, client of project beta), each with the same ids filled in."""
    acme = AgentMemory(project=Project.objects.create(slug="acme"), llm=None)
    beta = AgentMemory(project=Project.objects.create(slug="beta"), llm=None)
    fill(acme, "acme")
    fill(beta, "beta")
    return acme, beta


def test_the_same_ids_in_two_projects_are_two_sets_of_records(two):
    acme, beta = two
    assert Thread.objects.count() == 2 and Message.objects.count() == 2 and Memory.objects.count() == 4
    assert Image.objects.count() == 2 and RecordLink.objects.count() == 1 * 2
    for client, marker in ((acme, "acme"), (beta, "beta")):
        thread = client.get_thread("c4")
        assert (thread.thread_id, thread.user_id) == ("c4", "u1")
        [message] = thread.get_messages()
        assert (message.id, message.thread_id, message.content) == ("m1", "c4", f"{TEXT} ({marker})")
        assert thread.get_memory("k1").content == f"{TEXT} ({marker})"
        assert [m.id for m in thread.list_memories()] == ["k1", "k2"]
        [image] = thread.list_images()
        assert (image.id, image.thread_id, image.description) == ("img", "c4", f"A bowl of ramen ({marker})")
        [relation] = link_list(thread=thread.row)
        assert (relation.relation_id, relation.thread_id, relation.source_record_id, relation.target_record_id) == (
            "r1", "c4", "k2", "k1")
    # stored under "<project pk>:<id>", with the project column set
    row = Memory.objects.get(pk=stored_id(acme.project.pk, "k1"))
    assert (row.project_id, row.thread_id, row.public_id) == (acme.project.pk, stored_id(acme.project.pk, "c4"), "k1")
    assert set(SearchChunk.objects.values_list("project_id", flat=True)) == {acme.project.pk, beta.project.pk}


def test_searches_never_cross_projects(two):
    acme, beta = two
    for client, other in ((acme, "beta"), (beta, "acme")):
        thread = client.get_thread("c4")
        for results in (thread.search("spicy ramen night market", max_results=50),
                        thread.search("ramen", scope=None, exact_user_match=False, exact_agent_match=False,
                                      max_results=50),
                        client.search("spicy ramen", user_id="u1", max_results=50),
                        client.search("ramen noodles bowl", user_id="u1", max_results=50, num_hops=2)):
            assert results, "a search of its own project finds its records"
            texts = [r.content for r in results] + [link.record.content for r in results for link in r.linked]
            assert not any(other in text for text in texts), texts


def test_writes_and_deletes_by_id_stay_in_their_project(two):
    acme, beta = two
    thread = acme.get_thread("c4")
    thread.update_memory("k1", content="changed in acme")
    thread.update_message("m1", content="changed in acme")
    thread.update_image("img", description="changed in acme")
    assert thread.delete_record_link(relation_id="r1") == 1
    assert thread.delete_memory("k2") == 1 and thread.delete_image("img") == 1 and thread.delete_message("m1") == 1
    other = beta.get_thread("c4")
    assert other.get_memory("k1").content == f"{TEXT} (beta)"
    assert other.get_messages()[0].content == f"{TEXT} (beta)"
    assert [i.description for i in other.list_images()] == ["A bowl of ramen (beta)"]
    assert [m.id for m in other.list_memories()] == ["k1", "k2"]
    assert RecordLink.objects.filter(project=beta.project).count() == 1
    assert acme.delete_thread("c4") == 1
    assert beta.get_thread("c4").get_memory("k2").content == "Prefers beta noodles"
    assert beta.search("ramen", user_id="u1")


def test_ids_taken_in_another_project_are_free_and_unknown_ones_are_not_found(two):
    acme, _ = two
    gamma = AgentMemory(project=Project.objects.create(slug="gamma"), llm=None)
    with pytest.raises(KeyError):
        gamma.get_thread("c4")  # beta's and acme's c4 are not gamma's
    assert gamma.delete_thread("c4") == 0
    fill(gamma, "gamma")  # no 409: every id is free in gamma
    with pytest.raises(ValueError, match="thread_id"):
        acme.create_thread(thread_id="c4")  # but taken in acme
    with pytest.raises(ValueError, match="memory_id"):
        acme.get_thread("c4").add_memory("again", memory_id="k1")


def test_a_memory_planted_with_another_thread_id_stays_in_its_project(two):
    acme, beta = two
    acme.get_thread("c4").add_memory("planted by acme for c4-other", thread_id="c4-other", memory_id="plant")
    row = Memory.objects.get(pk=stored_id(acme.project.pk, "plant"))
    assert row.thread_id == stored_id(acme.project.pk, "c4-other") and row.project_id == acme.project.pk
    beta_card = beta.get_thread("c4").get_context_card(max_relevant_results=10)
    assert "planted" not in beta_card.content


def test_extraction_compares_candidates_with_its_own_project_only(two):
    acme, beta = two
    vector = SearchChunk.objects.filter(project=acme.project, source_kind="memory").values_list(
        "embedding", flat=True).first()
    rows = list(nearest_memories_queryset(vector=vector, project_id=acme.project.pk, user_id="u1", agent_id="a1",
                                          now=timezone.now(), limit=10))
    assert rows and {r.split(":")[0] for r, _ in rows} == {str(acme.project.pk)}


@pytest.mark.backend("sqlite")
def test_the_vector_cache_takes_candidates_from_the_searched_project_only(transactional_db, two):
    from django.db import connection

    acme, beta = two
    get_vector_cache().clear()
    snapshot = get_vector_cache().snapshot(connection)  # outside a transaction: loaded
    assert snapshot is not None
    query = np.ones(384, dtype="f4")
    ids, _, _ = snapshot.candidates(query, 1000, project_id=beta.project.pk)
    projects = set(SearchChunk.objects.filter(id__in=ids.tolist()).values_list("project_id", flat=True))
    assert projects == {beta.project.pk} and len(ids) == SearchChunk.objects.filter(project=beta.project).count()


def test_progress_groups_and_events_are_per_project(two):
    acme, beta = two
    rows = [c.get_thread("c4").row for c in two]
    assert progress.group_name(rows[0].pk) != progress.group_name(rows[1].pk)
    assert public_id(rows[0].pk) == public_id(rows[1].pk) == "c4"


def test_clients_and_handles_refuse_what_is_not_theirs(two):
    acme, beta = two
    with pytest.raises(KeyError):
        AgentMemory(project="no-such-project").get_thread("c4")
    with pytest.raises(TypeError, match="project"):
        AgentMemory(project=42)
    with pytest.raises(ValueError, match="not in project"):
        ThreadHandle(beta.get_thread("c4").row, acme)
    assert AgentMemory().project == get_project(None) and get_project(None).slug == "default"


def test_a_restricted_tenant_keeps_scopes_and_writes_to_its_user(two):
    acme, _ = two
    tenant = Tenant(project=acme.project, user_id="u1")
    assert tenant.limit_scope(SearchScope()) == SearchScope(user_id="u1", exact_user_match=True)
    assert tenant.limit_scope(SearchScope(user_id="u1")).user_id == "u1"
    with pytest.raises(OutOfScope, match="user_id"):
        tenant.limit_scope(SearchScope(user_id="u2"))
    with pytest.raises(OutOfScope, match="exact_user_match"):
        tenant.limit_scope(SearchScope(user_id="u1", exact_user_match=False))
    assert tenant.fill("user_id", NOTSET) == "u1" and tenant.fill("agent_id", "any") == "any"
    with pytest.raises(ValueError, match="user_id"):  # OutOfScope is a ValueError, as the spec's errors are
        tenant.fill("user_id", "u2")
    u1 = AgentMemory(tenant=tenant, llm=None)
    assert u1.create_thread(thread_id="mine").user_id == "u1"
    acme.create_thread(thread_id="theirs", user_id="u2")
    with pytest.raises(KeyError):
        u1.get_thread("theirs")
    assert u1.delete_thread("theirs") == 0 and acme.get_thread("theirs")
    acme.get_thread("theirs").add_memory("u2 also loves ramen", memory_type="preference")
    results = u1.search_project("ramen", max_results=50, record_types=["memory", "preference"])
    assert results and {r.record.user_id for r in results} == {"u1"}  # an operator's search, held to u1
    with pytest.raises(OutOfScope, match="user_id"):
        u1.search("ramen", user_id="u2")
    with pytest.raises(TypeError, match="tenant"):
        AgentMemory(tenant=tenant, project="acme")
