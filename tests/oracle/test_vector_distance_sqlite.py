"""``VectorDistance`` computed for real on SQLite (sqlite-vec) against numpy."""

import datetime

import numpy as np
import pytest

from memory.core.types import MemorySearchConfig, SearchScope
from memory.fields import VectorDistance
from memory.models import SearchChunk
from memory.search.query import chunk_queryset
from memory.search.request import build_request
from tests.ids import default_project_id

DIM = 384


def basis(*pairs):
    vec = np.zeros(DIM, dtype="f4")
    for index, value in pairs:
        vec[index] = value
    return vec


def cosine_distance(a, b):
    a, b = np.asarray(a, "f8"), np.asarray(b, "f8")
    return 1.0 - a @ b / (np.linalg.norm(a) * np.linalg.norm(b))


def chunk(record_id, embedding, **extra):
    values = dict(project_id=default_project_id(), source_kind="memory", record_id=record_id, record_type="fact",
                  text=f"text {record_id}", embedding=embedding)
    values.update(extra)
    return SearchChunk(**values)


# Hand-made: same direction different length (cosine 0, L2 large), 45 degrees, orthogonal, opposite.
HAND_MADE = {
    "same": basis((0, 1.0)),
    "same-longer": basis((0, 3.0), (2, 0.1)),
    "diagonal": basis((0, 1.0), (1, 1.0)),
    "orthogonal": basis((1, 1.0)),
    "opposite": basis((0, -1.0)),
}
QUERY = basis((0, 1.0))


@pytest.fixture
def hand_made(db):
    SearchChunk.objects.bulk_create([chunk(rid, vec) for rid, vec in HAND_MADE.items()])


def ranked(metric="COSINE", query=QUERY):
    return list(
        SearchChunk.objects.annotate(d=VectorDistance("embedding", query, metric=metric))
        .order_by("d", "id").values_list("record_id", "d")
    )


def test_cosine_ranking_matches_numpy(hand_made):
    rows = ranked()
    expected = sorted(HAND_MADE, key=lambda rid: cosine_distance(HAND_MADE[rid], QUERY))
    assert [rid for rid, _ in rows] == expected == ["same", "same-longer", "diagonal", "orthogonal", "opposite"]
    for rid, distance in rows:
        assert distance == pytest.approx(cosine_distance(HAND_MADE[rid], QUERY), abs=1e-5)
    assert dict(rows)["opposite"] == pytest.approx(2.0, abs=1e-6)


def test_euclidean_ranks_differently(hand_made):
    rows = ranked("EUCLIDEAN")
    expected = sorted(HAND_MADE, key=lambda rid: np.linalg.norm(HAND_MADE[rid] - QUERY))
    assert [rid for rid, _ in rows] == expected
    assert expected.index("same-longer") > expected.index("orthogonal")  # unlike cosine
    for rid, distance in rows:
        assert distance == pytest.approx(float(np.linalg.norm(HAND_MADE[rid] - QUERY)), abs=1e-5)


def test_random_vectors_rank_like_numpy(db):
    rng = np.random.default_rng(11)
    vectors = rng.standard_normal((25, DIM)).astype("f4")
    SearchChunk.objects.bulk_create([chunk(f"r{i}", v) for i, v in enumerate(vectors)])
    query = rng.standard_normal(DIM).astype("f4")
    rows = ranked(query=query)
    distances = [cosine_distance(v, query) for v in vectors]
    assert [rid for rid, _ in rows] == [f"r{i}" for i in np.argsort(distances)]
    saved = SearchChunk.objects.get(record_id="r3").embedding
    assert saved.dtype == np.float32
    np.testing.assert_array_equal(saved, vectors[3])


def test_chunk_queryset_filters_and_ranks_on_sqlite(db):
    """The query compiled for Oracle in test_search_sql, run for real on SQLite."""
    now = datetime.datetime(2026, 11, 30, 12, 0, tzinfo=datetime.UTC)
    scope = dict(user_id="user-1", agent_id="agent-1")
    SearchChunk.objects.bulk_create([
        chunk("best", basis((0, 1.0)), metadata={"topic": "billing"}, **scope),
        chunk("good", basis((0, 1.0), (1, 1.0)), metadata={"topic": "billing"}, **scope),
        chunk("far", basis((1, 1.0)), metadata={"topic": "billing"}, **scope,
              expires_at=now + datetime.timedelta(days=1)),
        chunk("other-user", basis((0, 1.0)), metadata={"topic": "billing"}, user_id="user-2", agent_id="agent-1"),
        chunk("expired", basis((0, 1.0)), metadata={"topic": "billing"}, **scope,
              expires_at=now - datetime.timedelta(seconds=1)),
        chunk("invalid", basis((0, 1.0)), metadata={"topic": "billing"}, status="invalid", **scope),
        chunk("other-topic", basis((0, 1.0)), metadata={"topic": "travel"}, **scope),
        chunk("a-message", basis((0, 1.0)), metadata={"topic": "billing"}, record_type="message",
              source_kind="message", **scope),
    ])
    request = build_request(
        "q", project_id=default_project_id(), scope=SearchScope(**scope, exact_thread_match=False),
        config=MemorySearchConfig(),
        record_types=["fact"], metadata_filter={"topic": "billing"}, include_invalid_results=False,
    )
    rows = list(chunk_queryset(request, QUERY, now=now))
    assert [record_id for _, record_id, _ in rows] == ["best", "good", "far"]
    assert [d for *_, d in rows] == pytest.approx([0.0, 1 - 2 ** -0.5, 1.0], abs=1e-5)
