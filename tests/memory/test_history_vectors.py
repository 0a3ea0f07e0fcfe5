"""History vectors (issue #32, part 5): the chunk vectors of a memory's earlier content are kept with its history
(``HistoryVector``, ``memory.index.writer.keep_history_vectors``), copied from the chunks an edit or a delete
replaces, so an as-of search embeds nothing for them (``memory.search.as_of``); they go wherever the history goes."""

import datetime as dt
import time

import numpy as np
import pytest
from django.utils import timezone

from memory.client import AgentMemory
from memory.index.writer import content_sha, history_vectors
from memory.models import HistoryVector, Memory, MemoryVersion, SearchChunk
from memory.records.tenancy import Tenant
from memory.search import as_of as search_as_of
from memory.services.erasure import expired_purge
from memory.services.review import memory_edit_approve, memory_reject
from tests.ids import key

LYON, PARIS = "The user lives in Lyon", "The user lives in Paris"
QUERY = "Where does the user live?"


def tick():
    """An instant strictly between two writes."""
    time.sleep(0.005)
    moment = timezone.now()
    time.sleep(0.005)
    return moment


def kept(public: str) -> dict[str, list]:
    """The kept vectors of a memory: ``{content_sha: [vector, ...]}`` in chunk order."""
    found: dict[str, list] = {}
    for sha, vector in (HistoryVector.objects.filter(memory_id=key(public))
                        .order_by("content_sha", "chunk_index").values_list("content_sha", "embedding")):
        found.setdefault(sha, []).append(np.asarray(vector, dtype="<f4"))
    return found


def chunk_vectors(public: str) -> list:
    return [np.asarray(v, dtype="<f4") for v in SearchChunk.objects.filter(
        source_kind="memory", record_id=key(public)).order_by("chunk_index").values_list("embedding", flat=True)]


class NoEmbedder:
    """An embedder an as-of search must not call for a kept content."""

    calls = 0

    def embed(self, texts):
        NoEmbedder.calls += len(texts)
        raise AssertionError(f"embedded {texts!r}")


@pytest.fixture
def no_embedding(monkeypatch):
    search_as_of.HISTORICAL_VECTORS.clear()
    NoEmbedder.calls = 0
    monkeypatch.setattr(search_as_of, "get_embedder", lambda: NoEmbedder())
    yield
    assert NoEmbedder.calls == 0
    assert search_as_of.HISTORICAL_VECTORS.misses == 0 and search_as_of.HISTORICAL_VECTORS.hits == 0


def test_a_memory_never_edited_costs_nothing(thread):
    a = thread.add_memory(LYON, memory_type="fact")
    thread.update_memory(a, metadata={"k": 1})  # no content change
    assert not HistoryVector.objects.exists()


def test_an_edit_keeps_the_old_contents_vectors_and_the_as_of_search_embeds_nothing(thread, no_embedding):
    a = thread.add_memory(LYON, memory_type="fact")
    before = chunk_vectors(a)
    t1 = tick()
    thread.update_memory(a, content=PARIS)
    assert {sha: [v.tolist() for v in vs] for sha, vs in kept(a).items()} == {
        content_sha(LYON): [v.tolist() for v in before]}
    row = HistoryVector.objects.get(memory_id=key(a))
    assert row.project_id == Memory.objects.get(pk=key(a)).project_id and row.chunk_index == 0
    then = thread.search(QUERY, as_of=t1, record_types=["fact"])
    assert [(r.id, r.record.content) for r in then] == [(a, LYON)]
    expected = search_as_of._cosine(np.asarray(search_as_of.embed_query(QUERY), dtype="<f4"), before)
    assert then[0].distance == pytest.approx(expected, abs=1e-5)  # the vectors the index held at t1
    thread.update_memory(a, content=LYON)  # back: the content already kept is not written twice
    thread.update_memory(a, content=PARIS)
    assert sorted(kept(a)) == sorted([content_sha(LYON), content_sha(PARIS)])
    assert HistoryVector.objects.filter(memory_id=key(a)).count() == 2


def test_kept_and_recomputed_vectors_rank_alike(thread):
    """The same answer as the embedder's (the LRU path, for versions written before the vectors were kept): it
    embeds what the index embedded, the event time's prefix included (``embedding_text``)."""
    a = thread.add_memory(LYON, memory_type="fact", timestamp="2023-05-08T13:56:00Z")
    b = thread.add_memory("The user has a cat called Tom", memory_type="fact")
    c = thread.add_memory("The user works in Marseille as a baker", memory_type="fact", timestamp="2023-06-01")
    t1 = tick()
    for mid, text in ((a, PARIS), (b, "The user has a dog"), (c, "The user retired")):
        thread.update_memory(mid, content=text)
    search_as_of.HISTORICAL_VECTORS.clear()
    with_kept = thread.search(QUERY, as_of=t1, record_types=["fact"])
    assert search_as_of.HISTORICAL_VECTORS.misses == 0
    HistoryVector.objects.all().delete()
    recomputed = thread.search(QUERY, as_of=t1, record_types=["fact"])
    assert search_as_of.HISTORICAL_VECTORS.misses == 3  # one chunk each, embedded
    assert [r.id for r in with_kept] == [r.id for r in recomputed]
    assert [r.distance for r in with_kept] == pytest.approx([r.distance for r in recomputed], abs=1e-5)


def test_a_restore_keeps_what_it_replaces(thread):
    a = thread.add_memory(LYON, memory_type="fact")
    thread.update_memory(a, content=PARIS)
    t2 = tick()
    thread.restore_memory_version(a, 1)
    assert thread.get_memory(a).content == LYON
    assert sorted(kept(a)) == sorted([content_sha(LYON), content_sha(PARIS)])
    search_as_of.HISTORICAL_VECTORS.clear()
    assert thread.search(QUERY, as_of=t2, record_types=["fact"])[0].record.content == PARIS
    assert search_as_of.HISTORICAL_VECTORS.misses == 0


def test_a_delete_keeps_the_vectors_with_the_history(thread, no_embedding):
    b = thread.add_memory("The user plays the cello")
    before = chunk_vectors(b)
    t1 = tick()
    thread.delete_memory(b)
    assert [v.tolist() for v in kept(b)[content_sha("The user plays the cello")]] == [v.tolist() for v in before]
    assert thread.search("cello", as_of=t1, record_types=["memory"])[0].id == b


def test_the_review_queue_keeps_what_an_edit_or_a_reject_replaces(client):
    from memory.extraction.config import MemoryExtractionConfig

    thread = client.create_thread(thread_id="t-rev", user_id="u1", agent_id="a1",
                                  memory_extraction_config=MemoryExtractionConfig(review_added_memories=True))
    edited = thread.add_memory("Answer in Klingon", memory_type="guideline")
    memory_edit_approve(project=client.project, memory_id=edited, content="Answer in English")
    assert list(kept(edited)) == [content_sha("Answer in Klingon")]
    rejected = thread.add_memory("Answer in Esperanto", memory_type="guideline")
    memory_reject(project=client.project, memory_id=rejected)
    assert list(kept(rejected)) == [content_sha("Answer in Esperanto")]


def test_a_users_erasure_leaves_no_vector_of_its_memories(client, thread):
    other = client.create_thread(thread_id="t-u", user_id="user-u", agent_id="agent-1")
    e = other.add_memory("User U keeps bees")
    other.update_memory(e, content="User U keeps wasps")
    gone = other.add_memory("User U plays chess")
    other.delete_memory(gone)
    mine = thread.add_memory(LYON)
    thread.update_memory(mine, content=PARIS)
    assert HistoryVector.objects.filter(memory_id__in=[key(e), key(gone)]).count() == 2
    client.erase_user("user-u")
    assert not HistoryVector.objects.filter(memory_id__in=[key(e), key(gone)]).exists()
    assert list(kept(mine)) == [content_sha(LYON)]  # another user's stay


def test_a_threads_delete_takes_them_but_a_detached_survivor_keeps_its_own(client):
    c5 = client.create_thread(thread_id="c5", user_id="u1", agent_id="a1")
    mine = c5.add_memory("u1 likes zebras")
    c5.update_memory(mine, content="u1 likes giraffes")
    theirs = c5.add_memory("u2 keeps an alpaca", user_id="u2")
    c5.update_memory(theirs, content="u2 keeps an alpaca named Rosa")
    deleted = c5.add_memory("u1 likes hippos")
    c5.delete_memory(deleted)
    u1 = AgentMemory(tenant=Tenant(project=client.project, user_id="u1"), llm=None)
    assert u1.delete_thread("c5") == 1
    assert not HistoryVector.objects.filter(memory_id__in=[key(mine), key(deleted)]).exists()
    assert Memory.objects.filter(pk=key(theirs), thread_id=None).exists()
    assert list(kept(theirs)) == [content_sha("u2 keeps an alpaca")]
    # an unrestricted thread delete takes everything
    c7 = client.create_thread(thread_id="c7", user_id="u1", agent_id="a1")
    x = c7.add_memory("u1 reads novels")
    c7.update_memory(x, content="u1 reads poems")
    assert client.delete_thread("c7") == 1
    assert not HistoryVector.objects.filter(memory_id=key(x)).exists()


def test_the_expiry_purge_takes_them(thread):
    expiring = thread.add_memory("Expires soon", ttl_days=1)
    thread.update_memory(expiring, content="Expires soon, edited")
    assert kept(expiring)
    expired_purge(now=timezone.now() + dt.timedelta(days=2))
    assert not MemoryVersion.objects.filter(memory_id=key(expiring)).exists()
    assert not HistoryVector.objects.filter(memory_id=key(expiring)).exists()


def test_vectors_never_answer_another_projects_memory(client, thread):
    """The lookup is by stored ids, which carry the project, and asks the project as well: the same public id and
    the same old content in another project meet none of this project's vectors."""
    from memory.models import Project

    a = thread.add_memory(LYON, memory_type="fact", memory_id="m-twin")
    t1 = tick()
    thread.update_memory(a, content=PARIS)
    other = AgentMemory(project=Project.objects.create(slug="other-project", name="Other"), llm=None)
    there = other.create_thread(thread_id="t-main", user_id="user-1", agent_id="agent-1")
    twin = there.add_memory(LYON, memory_type="fact", memory_id="m-twin")
    theirs, ours = key(twin, "other-project"), key(a)
    assert theirs != ours
    assert set(history_vectors(client.project.pk, [(ours, content_sha(LYON))])) == {(ours, content_sha(LYON))}
    assert history_vectors(other.project.pk, [(ours, content_sha(LYON))]) == {}  # the project is asked too
    assert history_vectors(other.project.pk, [(theirs, content_sha(LYON))]) == {}
    there.update_memory(twin, content="Elsewhere")
    row = HistoryVector.objects.get(memory_id=theirs)
    assert row.project_id == other.project.pk != client.project.pk
    HistoryVector.objects.filter(memory_id=ours).delete()  # ours gone: theirs must not stand in
    search_as_of.HISTORICAL_VECTORS.clear()
    assert thread.search(QUERY, as_of=t1, record_types=["fact"])[0].record.content == LYON
    assert search_as_of.HISTORICAL_VECTORS.misses == 1  # embedded again, not read from the other project


def test_old_contents_without_kept_vectors_are_embedded_within_the_request_budget(thread, monkeypatch):
    """An outside attack: versions without kept vectors (written before them, or imported) were embedded whatever
    their size, in one call: 474,556 characters in 18.8 s for four memories, and unbounded with more. Now over
    MAX_EMBED_CHARS the search is a ValueError naming as_of, before anything is embedded."""
    big = [thread.add_memory(" ".join(f"word{i}x{n}" for n in range(300)), memory_type="fact") for i in range(3)]
    t1 = tick()
    for mid in big:
        thread.update_memory(mid, content="short")
    HistoryVector.objects.all().delete()  # as for versions kept before the vectors were
    search_as_of.HISTORICAL_VECTORS.clear()
    monkeypatch.setattr(search_as_of, "MAX_EMBED_CHARS", 5_000)
    with pytest.raises(ValueError, match="^as_of: rebuilding this instant needs .* over the per-request budget"):
        thread.search(QUERY, as_of=t1, record_types=["fact"])
    assert search_as_of.HISTORICAL_VECTORS.misses == 0  # refused before any embedding
    monkeypatch.setattr(search_as_of, "MAX_EMBED_CHARS", 250_000)
    assert len(thread.search(QUERY, as_of=t1, record_types=["fact"])) == 3
