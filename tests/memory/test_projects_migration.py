"""Migration 0006 on a real SQLite file: rows stored before projects move to ``default``.

The test database is migrated back to 0005, filled through the historical
models, and migrated forward again: ids become stored ids, every row gets
project 1, ``pair_key`` is recomputed, the FTS5 triggers are back (Django
rebuilt the chunk table) and keyword search still finds the old words. Then
backwards once more, and forwards to the latest state for the other tests.
Migration 0008 (project members) keeps what existing staff users could see.
"""

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.backend("sqlite")  # data from before 0006 lives only in SQLite files (PostgreSQL: 0013)

BEFORE = [("memory", "0005_images")]
AFTER = [("memory", "0006_projects")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def rows(sql):
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


@pytest.fixture
def legacy(transactional_db):
    """A store at migration 0005 with a thread, a message, two memories (one with no thread), a relation and chunks."""
    apps = migrate(BEFORE)
    Thread, Message, Memory = (apps.get_model("memory", n) for n in ("Thread", "Message", "Memory"))
    RecordLink, SearchChunk = apps.get_model("memory", "RecordLink"), apps.get_model("memory", "SearchChunk")
    thread = Thread.objects.create(id="c4", user_id="u1", agent_id="a1")
    Message.objects.create(id="m1", thread=thread, seq=1, role="user", content="I love pizza")
    Memory.objects.create(id="k1", content="likes pizza", thread_id="c4", user_id="u1")
    Memory.objects.create(id="k2", content="owned by no thread", thread_id=None, user_id="u1")
    RecordLink.objects.create(id="r1", thread_id="c4", source_id="k1", source_type="memory", target_id="k2",
                              target_type="memory", relation_type="supports", opposite_relation_type="x",
                              pair_key="2:k1|k2")
    vector = np.ones(384, dtype="<f4")
    SearchChunk.objects.create(source_kind="message", record_id="m1", record_type="message", thread_id="c4",
                               user_id="u1", text="user: I love pizza", context="user: I love pizza",
                               embedding=vector.tobytes())
    SearchChunk.objects.create(source_kind="memory", record_id="k2", record_type="memory", thread_id=None,
                               user_id="u1", text="owned by no thread", context="", embedding=vector.tobytes())
    yield
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_forward_moves_everything_into_the_default_project(legacy):
    migrate(AFTER)
    assert rows("SELECT id, slug FROM oam_projects") == [(1, "default")]
    assert rows("SELECT id, project_id FROM oam_threads") == [("1:c4", 1)]
    assert rows("SELECT id, thread_id, project_id FROM oam_messages") == [("1:m1", "1:c4", 1)]
    assert rows("SELECT id, thread_id, project_id FROM oam_memories ORDER BY id") == [
        ("1:k1", "1:c4", 1), ("1:k2", None, 1)]
    assert rows("SELECT id, thread_id, source_id, target_id, pair_key FROM oam_record_links") == [
        ("1:r1", "1:c4", "1:k1", "1:k2", "4:1:k1|1:k2")]
    assert rows("SELECT record_id, thread_id, project_id FROM oam_search_chunks ORDER BY id") == [
        ("1:m1", "1:c4", 1), ("1:k2", None, 1)]
    triggers = {name for (name,) in rows("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert triggers == {"oam_search_chunks_fts_ai", "oam_search_chunks_fts_ad", "oam_search_chunks_fts_au"}
    assert rows("SELECT rowid FROM oam_search_chunks_fts WHERE oam_search_chunks_fts MATCH 'pizza'") == [(1,)]
    with connection.cursor() as cursor:  # the triggers work: a new chunk is in the keyword index at once
        cursor.execute("INSERT INTO oam_search_chunks (project_id, source_kind, record_id, record_type, chunk_index, "
                       "status, metadata, text, context, embedding, created_at) VALUES (1, 'memory', '1:k3', "
                       "'memory', 0, 'valid', '{}', 'anchovies', 'anchovies', %s, '2026-01-01')",
                       [np.ones(384, dtype="<f4").tobytes()])
    assert len(rows("SELECT rowid FROM oam_search_chunks_fts WHERE oam_search_chunks_fts MATCH 'anchovies'")) == 1


def test_backward_restores_bare_ids_while_only_default_holds_records(legacy):
    migrate(AFTER)
    migrate(BEFORE)
    assert rows("SELECT id FROM oam_threads") == [("c4",)]
    assert rows("SELECT id, source_id, target_id, pair_key FROM oam_record_links") == [("r1", "k1", "k2", "2:k1|k2")]
    assert rows("SELECT record_id, thread_id FROM oam_search_chunks ORDER BY id") == [("m1", "c4"), ("k2", None)]
    assert len(rows("SELECT name FROM sqlite_master WHERE type = 'trigger'")) == 3


def test_backward_is_refused_once_another_project_holds_records(legacy):
    apps = migrate(AFTER)
    other = apps.get_model("memory", "Project").objects.create(slug="other")
    apps.get_model("memory", "Thread").objects.create(id=f"{other.pk}:c4", project_id=other.pk)
    with pytest.raises(RuntimeError, match="projects other than 'default' hold records"):
        migrate(BEFORE)
    assert rows("SELECT id FROM oam_threads ORDER BY id") == [("1:c4",), (f"{other.pk}:c4",)]


def test_0008_keeps_what_existing_staff_could_see(transactional_db):
    """Staff by project (migration 0008): staff users who existed saw every project; they become members of
    every existing project. Superusers (who see all anyway), inactive and non-staff users get nothing."""
    apps = migrate([("memory", "0007_erasure")])
    try:
        from django.contrib.auth import get_user_model  # auth's tables are not touched by memory's migrations

        users, projects = get_user_model(), apps.get_model("memory", "Project")
        for name, flags in (("staff", {"is_staff": True}), ("root", {"is_staff": True, "is_superuser": True}),
                            ("gone", {"is_staff": True, "is_active": False}), ("plain", {})):
            users.objects.create(username=name, **flags)
        acme, beta = projects.objects.create(slug="acme"), projects.objects.create(slug="beta")
        migrate([("memory", "0008_project_members")])
        staff = users.objects.get(username="staff").pk
        assert sorted(rows("SELECT project_id, user_id FROM oam_projects_members")) == [
            (acme.pk, staff), (beta.pk, staff)]
    finally:
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
