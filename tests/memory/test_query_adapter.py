"""A learned query adapter (``OAM_QUERY_ADAPTER``, ``memory.embedders.query_adapter``): off by default, maps a
search query's vector by ``W`` when set, and a file that is not a square matrix of the vector size is reported
by ``manage.py check`` (memory.E007) rather than by every search failing."""

from __future__ import annotations

import numpy as np
import pytest

from memory.checks import check_query_adapter
from memory.client import AgentMemory
from memory.core.types import MemorySearchConfig
from memory.embedders import embed_query, get_embedder

DIMENSIONS = 384


def _save(tmp_path, delta: np.ndarray, name: str = "adapter.npy") -> str:
    path = tmp_path / name
    np.save(path, delta)
    return str(path)


def test_no_adapter_by_default_a_query_is_the_models_own_vector(settings):
    assert settings.OAM_QUERY_ADAPTER == ""
    raw = get_embedder().embed(["what food does the user like?"])[0]
    assert np.allclose(embed_query("what food does the user like?"), raw, atol=1e-6)
    assert check_query_adapter() == []


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


@pytest.mark.parametrize("content, rule", [
    (np.eye(3, dtype=np.float32), "holds a (3, 3) array, not 384 x 384"),
    (np.zeros((DIMENSIONS, 2), dtype=np.float32), f"holds a ({DIMENSIONS}, 2) array"),
    (None, "cannot be read as an .npy array"),
])
def test_a_file_that_is_no_square_matrix_of_the_vector_size_is_memory_e007(settings, tmp_path, content, rule):
    if content is None:
        path = tmp_path / "missing.npy"
        settings.OAM_QUERY_ADAPTER = str(path)
    else:
        settings.OAM_QUERY_ADAPTER = _save(tmp_path, content, f"bad-{content.shape[0]}-{content.shape[1]}.npy")
    [error] = check_query_adapter()
    assert error.id == "memory.E007" and rule in error.msg and "OAM_QUERY_ADAPTER" in error.msg
    if content is not None:
        with pytest.raises(ValueError, match="OAM_QUERY_ADAPTER"):
            embed_query("anything")
