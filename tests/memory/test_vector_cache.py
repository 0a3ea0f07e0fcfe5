"""The cached vector arm on a real SQLite file: exact, fresh, and never wrong after deletes or rollbacks.

``memory.search.ranking.vector_arm`` must return what ranking every filtered chunk in
SQL returns (``chunk_queryset``): same chunks, same order, same distances.
These tests commit their rows (``transaction=True``) because the cache only
refreshes outside transactions.
"""

import datetime

import numpy as np
import pytest
from django.db import connection, transaction
from django.utils import timezone

import memory.search.backends as search_module  # the SQLite backend: its vector cache path and fallback
from memory.core.types import MemorySearchConfig, SearchScope
from memory.index import vector_cache as vector_cache_module
from memory.index.vector_cache import Snapshot, VectorCache, get_vector_cache
from memory.models import SearchChunk
from memory.search.query import chunk_queryset
from memory.search.ranking import vector_arm
from memory.search.request import build_request
from tests.ids import default_project_id, key

pytestmark = pytest.mark.backend("sqlite")  # SQLite machinery: the file, WAL, FTS5 or the vector cache

DIM = 384


@pytest.fixture(autouse=True)
def fresh_caches():
    vector_cache_module._caches.clear()
    yield
    vector_cache_module._caches.clear()


def unit(rng, n=None):
    v = rng.standard_normal((n or 1, DIM)).astype("f4")
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v if n else v[0]


def make_chunks(rng, count, *, start=0, user="u1", thread="t1", agent="a1", **extra):
    now = timezone.now()
    vectors = unit(rng, count)
    rows = []
    for i in range(count):
        j = start + i
        fields = dict(project_id=default_project_id(), source_kind="message", record_id=f"{thread}-m{j}",
                      record_type="message", chunk_index=0, user_id=user, agent_id=agent, thread_id=key(thread),
                      status="valid",
                      metadata={"n": j % 5, "tags": ["even" if j % 2 == 0 else "odd"]},
                      text=f"user: text {j}", context="", embedding=vectors[i], created_at=now)
        fields.update(extra)
        rows.append(SearchChunk(**fields))
    SearchChunk.objects.bulk_create(rows)
    return vectors


def request(scope=None, **kwargs):
    arguments = dict(scope=scope or SearchScope(user_id="u1"), config=MemorySearchConfig(mode="VECTOR"),
                     record_types=["message", "fact"], max_results=10)
    arguments.update(kwargs)
    return build_request("query", project_id=default_project_id(), **arguments)


def sql_ranking(req, vec, limit):
    return [(k, r, float(d)) for k, r, d in chunk_queryset(req, vec, limit=limit)]


def assert_same_ranking(got, expected):
    assert [(k, r) for k, r, _ in got] == [(k, r) for k, r, _ in expected]
    np.testing.assert_allclose([d for *_, d in got], [d for *_, d in expected], rtol=1e-5, atol=1e-6)


@pytest.fixture
def store(transactional_db):
    """1,500 committed chunks: three users, several threads, mixed status, expiry, metadata."""
    rng = np.random.default_rng(11)
    make_chunks(rng, 900, user="u1", thread="t1")
    make_chunks(rng, 300, user="u1", thread="t2", agent="a2")
    make_chunks(rng, 200, user="u2", thread="t3")
    make_chunks(rng, 60, user="u1", thread="t4", status="invalid")
    make_chunks(rng, 40, user="u1", thread="t5", expires_at=timezone.now() - datetime.timedelta(days=1))
    return rng


@pytest.mark.parametrize("case", [
    dict(),
    dict(scope=SearchScope(user_id="u1", agent_id="a2")),
    dict(scope=SearchScope(user_id="u2")),
    dict(scope=SearchScope(user_id="u1", thread_id="t2", exact_thread_match=True)),
    dict(metadata_filter={"n": 3}),
    dict(metadata_filter={"tags": {"$array_contains": "odd"}}),
    dict(include_invalid_results=True),
    dict(record_types=["fact"]),
])
def test_cached_arm_equals_sql_ranking(store, case):
    req = request(**case)
    for _ in range(3):
        vec = unit(store)
        assert_same_ranking(vector_arm(req, vec, limit=100), sql_ranking(req, vec, 100))
    snapshot = get_vector_cache().snapshot(connection)
    assert snapshot is not None and snapshot.n == 1500  # the cache, not SQL, served the searches


def test_selective_filters_fall_back_to_sql(store, monkeypatch):
    calls = []
    original = search_module.chunk_queryset
    monkeypatch.setattr(search_module, "chunk_queryset", lambda *a, **k: calls.append(1) or original(*a, **k))
    # a thread holding 300 of 1,500 chunks: 20 % pass, K grows once and the cache answers
    req = request(scope=SearchScope(user_id="u1", agent_id="a2", thread_id="t2", exact_thread_match=True))
    vec = unit(store)
    assert_same_ranking(vector_arm(req, vec, limit=100), sql_ranking(req, vec, 100))
    assert calls == []
    # nothing passes among the candidates: SQL ranks the (few) filtered rows
    req = request(metadata_filter={"n": 99})
    assert vector_arm(req, vec, limit=100) == []
    assert calls == [1]


def test_new_chunks_are_found_and_deleted_ones_never_returned(store):
    req = request()
    target = unit(store)
    before = vector_arm(req, target, limit=10)
    SearchChunk.objects.create(project_id=default_project_id(), source_kind="message", record_id="new",
                               record_type="message", user_id="u1", agent_id="a1", thread_id=key("t9"),
                               text="user: new", embedding=target)
    after = vector_arm(req, target, limit=10)
    assert after[0][:2] == ("message", "new") and after[0][2] == pytest.approx(0.0, abs=1e-6)
    assert after[1:] == before[:9]
    SearchChunk.objects.filter(record_id="new").delete()
    assert vector_arm(req, target, limit=10) == before
    snapshot = get_vector_cache().snapshot(connection)
    # no reload for a plain delete, even of the newest chunk: it was marked dead when met
    assert snapshot.n == 1501 and snapshot.live_rows == 1500


def test_reused_ids_after_a_reset_reload_the_cache(store):
    req = request()
    vec = unit(store)
    vector_arm(req, vec, limit=10)
    # a flushed table whose id sequence restarts (what a test runner may do): same ids, new vectors
    SearchChunk.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM sqlite_sequence WHERE name = 'oam_search_chunks'")
    make_chunks(np.random.default_rng(99), 1500)
    assert_same_ranking(vector_arm(req, vec, limit=100), sql_ranking(req, vec, 100))


def test_rows_written_inside_a_transaction_are_ranked_too(store):
    req = request()
    vec = unit(store)
    vector_arm(req, vec, limit=10)  # loads the cache outside the transaction
    with transaction.atomic():
        SearchChunk.objects.create(project_id=default_project_id(), source_kind="memory", record_id="mem-x",
                                   record_type="fact", user_id="u1", agent_id="a1", thread_id=key("t1"), text="fact",
                                   embedding=vec)
        got = vector_arm(req, vec, limit=100)
        assert got[0][:2] == ("memory", "mem-x")
        assert_same_ranking(got, sql_ranking(req, vec, 100))
        transaction.set_rollback(True)
    assert ("memory", "mem-x") not in {(k, r) for k, r, _ in vector_arm(req, vec, limit=100)}


def test_over_the_row_cap_search_ranks_in_sql(store, settings):
    settings.OAM_VECTOR_CACHE_MAX_ROWS = 1000
    req = request()
    vec = unit(store)
    assert get_vector_cache().snapshot(connection) is None
    assert_same_ranking(vector_arm(req, vec, limit=50), sql_ranking(req, vec, 50))


def test_cache_off_setting(store, settings):
    settings.OAM_VECTOR_CACHE = False
    assert get_vector_cache() is None
    req = request()
    vec = unit(store)
    assert_same_ranking(vector_arm(req, vec, limit=20), sql_ranking(req, vec, 20))


def test_search_results_match_with_and_without_the_cache(transactional_db, settings):
    """End to end through the public API: real messages, real embeddings."""
    from memory.client import AgentMemory

    thread = AgentMemory().create_thread(thread_id="tc", user_id="u1", agent_id="a1")
    thread.add_messages([{"role": "user", "content": text} for text in (
        "I adopted a beagle called Biscuit last spring.", "My sister lives in Lisbon.",
        "I play the cello in a community orchestra.", "We are planning a trip to Japan in April.",
        "I'm allergic to peanuts.", "Biscuit loves chasing squirrels in the park.")])
    with_cache = [(r.record.id, round(r.distance, 5)) for r in thread.search("what pet do I have?", max_results=4)]
    assert get_vector_cache().snapshot(connection).n >= 6
    settings.OAM_VECTOR_CACHE = False
    without = [(r.record.id, round(r.distance, 5)) for r in thread.search("what pet do I have?", max_results=4)]
    assert with_cache == without


def test_snapshot_nearest_skips_dead_rows_and_handles_small_stores():
    rng = np.random.default_rng(3)
    matrix = unit(rng, 5)
    ids = np.arange(1, 6, dtype=np.int64)
    alive = np.ones(5, dtype=bool)
    snap = Snapshot(ids, matrix, alive, 5, 5)
    q = matrix[2] * 3.0  # any length: the query is normalised
    assert sorted(snap.nearest(q, 10).tolist()) == [1, 2, 3, 4, 5]
    assert 3 in snap.nearest(q, 1).tolist()
    alive[2] = False
    assert 3 not in snap.nearest(q, 1).tolist() and 3 not in snap.nearest(q, 10).tolist()
    assert snap.live_rows == 4
    empty = VectorCache()._snapshot
    assert empty.nearest(q, 5).size == 0


def test_warm_loads_the_cache_on_its_own_thread(store):
    from memory.index.vector_cache import warm_in_background

    thread = warm_in_background()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert get_vector_cache()._snapshot.n == 1500  # loaded by the warm-up, before any search


def test_warm_is_a_no_op_with_the_cache_off(store, settings):
    from memory.index.vector_cache import warm

    settings.OAM_VECTOR_CACHE = False
    assert warm() == 0
