"""A learned query adapter (``OAM_QUERY_ADAPTER``, ``memory.embedders.query_adapter``): the embedder's own by
default (MiniLM ships one), none when off, a file's when set; it maps a search query's vector by ``W``, and a
file that breaks the rules is reported by ``manage.py check`` (memory.E007) while searches go on without it."""

from __future__ import annotations

import numpy as np

from memory.checks import check_query_adapter
from memory.client import AgentMemory
from memory.core.types import MemorySearchConfig
from memory.embedders import ADAPTERS, MiniLMEmbedder, embed_query, get_embedder, query_adapter_path

DIMENSIONS = 384


def _save(tmp_path, delta: np.ndarray, name: str = "adapter.npy") -> str:
    path = tmp_path / name
    np.save(path, delta)
    return str(path)


def test_by_default_a_query_is_mapped_by_the_embedders_own_adapter_and_off_is_the_models_own_vector(settings):
    assert settings.OAM_QUERY_ADAPTER == "auto"
    shipped = ADAPTERS / MiniLMEmbedder.QUERY_ADAPTER
    assert query_adapter_path(MiniLMEmbedder) == str(shipped) and shipped.is_file()
    raw = get_embedder().embed(["what food does the user like?"])[0]
    w = np.eye(DIMENSIONS) + np.load(shipped).astype(np.float64)
    expected = w @ raw
    got = embed_query("what food does the user like?")
    assert np.allclose(got, expected / np.linalg.norm(expected), atol=1e-5)
    assert float(np.dot(got, raw)) < 0.99  # it moves the query
    assert check_query_adapter() == []
    for off in ("", "off", "OFF"):
        settings.OAM_QUERY_ADAPTER = off
        assert query_adapter_path(MiniLMEmbedder) is None
        assert np.allclose(embed_query("what food does the user like?"), raw, atol=1e-6)
        assert check_query_adapter() == []
    settings.OAM_QUERY_ADAPTER = "auto"

    class Plain:
        dimensions = DIMENSIONS

    assert query_adapter_path(Plain) is None  # an embedder that ships none has none


def test_an_adapter_maps_the_query_vector_by_w_and_normalises_it(settings, tmp_path):
    rng = np.random.default_rng(0)
    delta = (rng.standard_normal((DIMENSIONS, DIMENSIONS)) * 0.05).astype(np.float16)
    settings.OAM_QUERY_ADAPTER = _save(tmp_path, delta)
    raw = get_embedder().embed(["what food does the user like?"])[0]
    expected = (np.eye(DIMENSIONS) + delta.astype(np.float32)) @ raw
    got = embed_query("what food does the user like?")
    assert got.dtype == np.float32 and got.shape == (DIMENSIONS,)
    assert np.allclose(got, expected / np.linalg.norm(expected), atol=1e-5)
    assert not np.allclose(got, raw, atol=1e-3)
    assert check_query_adapter() == []


def test_search_ranks_by_the_adapted_query_and_stored_vectors_stay(settings, tmp_path, thread):
    """W = -I (a file of -2I) turns the nearest record into the farthest: what search ranks by is the adapted
    query; the records' stored vectors are the same before and after."""
    thread.add_memory("The cat sleeps on the sofa", memory_id="cat")
    thread.add_memory("Quarterly tax filing deadline moved", memory_id="tax")
    vector = AgentMemory(search_config=MemorySearchConfig(mode="VECTOR")).get_thread("t-main")
    assert [h.record_id for h in vector.search("kitten napping on a couch", max_results=2)] == ["cat", "tax"]
    settings.OAM_QUERY_ADAPTER = _save(tmp_path, -2 * np.eye(DIMENSIONS, dtype=np.float32))
    assert [h.record_id for h in vector.search("kitten napping on a couch", max_results=2)] == ["tax", "cat"]
    settings.OAM_QUERY_ADAPTER = ""
    assert [h.record_id for h in vector.search("kitten napping on a couch", max_results=2)] == ["cat", "tax"]


def _bad_files(tmp_path) -> list[tuple[str, str]]:
    """(path, the rule it breaks) for files an outside attack found that passed the first check or crashed it."""
    out = []

    def save(name, array, rule):
        out.append((_save(tmp_path, array, name), rule))

    save("small.npy", np.eye(3, dtype=np.float32), "holds a (3, 3) array, not 384 x 384")
    save("wide.npy", np.zeros((DIMENSIONS, 2), dtype=np.float32), f"holds a ({DIMENSIONS}, 2) array")
    save("text.npy", np.full((DIMENSIONS, DIMENSIONS), "abc"), "not real numbers")
    save("bytes.npy", np.zeros((DIMENSIONS, DIMENSIONS), dtype="S1"), "not real numbers")
    save("complex.npy", np.zeros((DIMENSIONS, DIMENSIONS), dtype=np.complex64), "not real numbers")
    save("bool.npy", np.zeros((DIMENSIONS, DIMENSIONS), dtype=bool), "not real numbers")
    save("structured.npy", np.zeros((DIMENSIONS, DIMENSIONS), dtype=[("a", "f4"), ("b", "f4")]), "not real numbers")
    inf = np.zeros((DIMENSIONS, DIMENSIONS), dtype=np.float16)
    inf[0, 0] = np.inf
    save("inf.npy", inf, "not a finite float32")
    save("nan.npy", np.full((DIMENSIONS, DIMENSIONS), np.nan, dtype=np.float16), "not a finite float32")
    save("overflow.npy", np.full((DIMENSIONS, DIMENSIONS), 1e39), "not a finite float32")
    save("huge.npy", np.full((DIMENSIONS, DIMENSIONS), 1e30, dtype=np.float32), "an entry over 1000")
    save("zero-w.npy", -np.eye(DIMENSIONS, dtype=np.float32), "nearly zero")
    (tmp_path / "empty.npy").write_bytes(b"")
    out.append((str(tmp_path / "empty.npy"), "cannot be read"))
    np.savez(tmp_path / "archive.npz", a=np.zeros((DIMENSIONS, DIMENSIONS)))
    out.append((str(tmp_path / "archive.npz"), "not one .npy array"))
    out.append((str(tmp_path / "missing.npy"), "cannot be read"))
    return out


def test_a_file_that_breaks_the_rules_is_memory_e007_and_searches_go_on_without_it(settings, tmp_path, caplog,
                                                                                     thread):
    thread.add_memory("The cat sleeps on the sofa", memory_id="cat")
    raw = get_embedder().embed(["kitten napping on a couch"])[0]
    for path, rule in _bad_files(tmp_path):
        settings.OAM_QUERY_ADAPTER = path
        [error] = check_query_adapter()
        assert error.id == "memory.E007" and rule in error.msg and "OAM_QUERY_ADAPTER" in error.msg, (path, error)
        caplog.clear()
        got = embed_query("kitten napping on a couch")
        assert np.isfinite(got).all() and np.allclose(got, raw, atol=1e-6), path
        assert any(rule in r.getMessage() and r.levelname == "ERROR" for r in caplog.records), path
        [hit] = thread.search("kitten napping on a couch", max_results=1)  # no 500: the search goes on
        assert hit.record_id == "cat"


def test_the_shipped_adapter_ranks_the_answer_above_the_question_that_shares_its_words(settings, thread):
    """What MiniLM's adapter learned from question/evidence pairs: asked "What did Melanie do?", the model's
    own vector prefers the turn that asked the same question; the adapted query prefers the turn that answers
    it (VECTOR mode: the vector arm alone)."""
    thread.add_messages([
        {"role": "Caroline", "content": "Melanie, what did you do last weekend?", "id": "c1"},
        {"role": "Melanie", "content": "I went camping with the kids.", "id": "m1"},
    ])
    vector = AgentMemory(search_config=MemorySearchConfig(mode="VECTOR"))

    def top():
        return [r.record.id for r in vector.search("What did Melanie do?", user_id="user-1",
                                                   record_types=["message"], max_results=2)]

    settings.OAM_QUERY_ADAPTER = "off"
    assert top() == ["c1", "m1"]
    settings.OAM_QUERY_ADAPTER = "auto"
    assert top() == ["m1", "c1"]
