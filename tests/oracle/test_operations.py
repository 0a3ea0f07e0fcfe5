"""``memory.operations.CreateVectorIndex``: arguments, serialization, SQL variants."""

import re

import pytest
from django.db import connections
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.writer import OperationWriter

from memory.operations import CreateVectorIndex


@pytest.fixture(scope="module")
def chunk_model():
    loader = MigrationLoader(None, ignore_no_migrations=True)
    return loader.project_state().apps.get_model("memory", "SearchChunk")


def block_for(oracle, op, model):
    with oracle.schema_editor(collect_sql=True, atomic=False) as editor:
        return op.create_sql(editor, model)


@pytest.mark.parametrize("name", ["oam_search_chunks_embedding_vec_ix", "1abc", "has space", "x'y", ""])
def test_rejects_names_django_would_truncate_or_that_need_quoting(name):
    with pytest.raises(ValueError):
        CreateVectorIndex("searchchunk", name, "embedding")


@pytest.mark.parametrize("kwargs", [
    {"metric": "DOT"}, {"metric": "HAMMING"}, {"accuracy": 0}, {"accuracy": 101}, {"neighbors": 1},
    {"neighbors": 2049}, {"efconstruction": 0}, {"efconstruction": 65536}, {"partitions": 0},
    {"parallel": 0}, {"accuracy": True},
])
def test_rejects_out_of_range_arguments(kwargs):
    with pytest.raises(ValueError):
        CreateVectorIndex("searchchunk", "oam_chunk_vec_ix", "embedding", **kwargs)


def test_custom_parameters_reach_both_index_types(oracle, chunk_model):
    op = CreateVectorIndex("searchchunk", "oam_chunk_l2_ix", "embedding", metric="euclidean", accuracy=90,
                           neighbors=16, efconstruction=100, partitions=8, parallel=4)
    block = block_for(oracle, op, chunk_model)
    hnsw, ivf = re.findall(r"EXECUTE IMMEDIATE '([^']*)'", block)
    assert hnsw == ('CREATE VECTOR INDEX "OAM_CHUNK_L2_IX" ON "OAM_SEARCH_CHUNKS" ("EMBEDDING") '
                    "ORGANIZATION INMEMORY NEIGHBOR GRAPH DISTANCE EUCLIDEAN WITH TARGET ACCURACY 90 "
                    "PARAMETERS (TYPE HNSW, NEIGHBORS 16, EFCONSTRUCTION 100) PARALLEL 4")
    assert ivf == ('CREATE VECTOR INDEX "OAM_CHUNK_L2_IX" ON "OAM_SEARCH_CHUNKS" ("EMBEDDING") '
                   "ORGANIZATION NEIGHBOR PARTITIONS DISTANCE EUCLIDEAN WITH TARGET ACCURACY 90 "
                   "PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS 8) PARALLEL 4")


def test_refuses_a_field_that_is_not_a_vector(oracle, chunk_model):
    op = CreateVectorIndex("searchchunk", "oam_chunk_text_ix", "text")
    with pytest.raises(ValueError, match="not a VectorField"):
        block_for(oracle, op, chunk_model)


def test_state_is_untouched_and_description(chunk_model):
    loader = MigrationLoader(None, ignore_no_migrations=True)
    state = loader.project_state()
    before = state.clone()
    op = CreateVectorIndex("searchchunk", "oam_chunk_vec_ix", "embedding")
    op.state_forwards("memory", state)
    assert state.models == before.models
    assert op.describe() == "Create vector index oam_chunk_vec_ix (HNSW, IVF fallback, COSINE) on searchchunk.embedding"
    assert op.migration_name_fragment == "searchchunk_oam_chunk_vec_ix"
    assert op.reversible and op.reduces_to_sql and not op.atomic  # atomic would open a connection


def test_deconstruct_and_migration_writer_round_trip(oracle, chunk_model):
    op = CreateVectorIndex("searchchunk", "oam_chunk_vec_ix", "embedding", neighbors=64)
    name, args, kwargs = op.deconstruct()
    assert (name, args) == ("CreateVectorIndex", [])
    assert kwargs == {"model_name": "searchchunk", "name": "oam_chunk_vec_ix", "field": "embedding", "neighbors": 64}
    source, imports = OperationWriter(op, indentation=0).serialize()
    assert imports == {"import memory.operations"}
    namespace = {}
    exec("import memory.operations\nop = " + source.rstrip(","), namespace)
    assert block_for(oracle, namespace["op"], chunk_model) == block_for(oracle, op, chunk_model)


def test_allow_migrate_is_respected(oracle, chunk_model, monkeypatch):
    from django.db import router

    monkeypatch.setattr(router, "allow_migrate_model", lambda alias, model: False)
    op = CreateVectorIndex("searchchunk", "oam_chunk_vec_ix", "embedding")
    loader = MigrationLoader(None, ignore_no_migrations=True)
    state = loader.project_state()
    with oracle.schema_editor(collect_sql=True, atomic=False) as editor:
        op.database_forwards("memory", editor, state, state)
        op.database_backwards("memory", editor, state, state)
    assert editor.collected_sql == []
    assert connections["oracle_offline"] is oracle


def test_offline_connection_refuses_to_connect():
    """The guard the whole suite relies on: a connect attempt fails loudly and is recorded."""
    from tests.oracle.offline import make_offline_oracle

    connection = make_offline_oracle("oracle_guard_probe")
    with pytest.raises(AssertionError, match="tried to connect"):
        connection.connect()
    assert len(connection.connect_attempts) == 1
    assert connection.connection is None
