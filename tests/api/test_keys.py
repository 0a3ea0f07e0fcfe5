"""Scoped API keys: project, permission, fixed user and agent, expiry, revocation, use times.

Every request acts for its key: the key's project, and for a key with a fixed
``user_id``/``agent_id`` that user's and agent's threads and records only.
Managing keys (``/api/keys``, commands, admin) goes through ``threads.auth``.
"""

import base64
import datetime as dt
import hashlib
import json
from io import StringIO
from urllib.parse import urlencode

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from memory.client import AgentMemory
from memory.models import Memory, Project, RecordLink, Thread
from memory.records.tenancy import get_project
from tests import image_samples as samples
from tests.api.helpers import JsonClient
from tests.ids import key
from threads.auth import TOUCH_SECONDS, api_key_create, api_key_lookup, api_key_revoke
from threads.models import ApiKey


def client_for(**options) -> tuple[JsonClient, ApiKey]:
    """An HTTP client with a fresh key made with ``options`` (``threads.auth.api_key_create``)."""
    row, raw = api_key_create(name=options.pop("name", "k"), **options)
    return JsonClient(headers={"Authorization": f"Bearer {raw}"}), row


@pytest.fixture
def two_users(db):
    """Default project: threads ``t-u1`` (user u1) and ``t-u2`` (user u2), each with a memory naming its user."""
    client = AgentMemory(llm=None)
    for user in ("u1", "u2"):
        thread = client.create_thread(thread_id=f"t-{user}", user_id=user, agent_id="a1")
        thread.add_memory(f"{user} keeps a pet iguana named Ziggy", memory_id=f"pet-{user}")
    return client


# --- permissions -----------------------------------------------------------------------------------


def test_a_read_key_reads_and_searches_but_writes_nothing(two_users):
    reader, _ = client_for(permission="read")
    assert reader.get("/api/threads/t-u1").status_code == 200
    assert reader.post("/api/threads/t-u1/search", {"query": "iguana"}).status_code == 200
    assert reader.post("/api/search", {"query": "iguana", "user_id": "u1"}).status_code == 200
    assert reader.post("/api/threads/t-u1/context-card", {}).status_code == 200
    for method, path, body in (("post", "/api/threads", {"thread_id": "new"}),
                               ("post", "/api/threads/t-u1/memories", {"content": "planted"}),
                               ("patch", "/api/threads/t-u1", {"metadata": {"x": 1}}),
                               ("delete", "/api/threads/t-u1/memories/pet-u1", None),
                               ("delete", "/api/threads/t-u1", None)):
        response = getattr(reader, method)(path, body) if body is not None else getattr(reader, method)(path)
        assert response.status_code == 403, (method, path)
        assert response.json() == {"detail": "this key's permission is 'read'; this operation needs 'write'",
                                   "field": None}
    assert Thread.objects.count() == 2 and Memory.objects.count() == 2 and Thread.objects.get(
        pk=f"{get_project(None).pk}:t-u1").metadata == {}


def test_only_admin_keys_manage_keys(db):
    writer, _ = client_for(permission="write")
    admin, _ = client_for(permission="admin")
    assert writer.get("/api/keys").status_code == 403
    assert writer.post("/api/keys", {"name": "x"}).status_code == 403
    assert admin.get("/api/keys").status_code == 200


# --- a key with a fixed user ---------------------------------------------------------------------


def test_a_user_key_sees_only_its_users_threads(two_users):
    mine, _ = client_for(user_id="u1")
    assert mine.get("/api/threads/t-u1").status_code == 200
    assert mine.get("/api/threads/t-u2").status_code == 404  # not "forbidden": it learns nothing of t-u2
    assert mine.get("/api/threads/t-u2/memories").status_code == 404
    assert mine.delete("/api/threads/t-u2").status_code == 404
    assert AgentMemory().get_thread("t-u2")
    assert [t["thread_id"] for t in mine.get("/api/threads").json()["items"]] == ["t-u1"]
    response = mine.get("/api/threads", {"user_id": "u2"})
    assert response.status_code == 403 and response.json()["field"] == "user_id"


def test_a_user_key_creates_threads_and_memories_for_its_user_only(two_users):
    mine, _ = client_for(user_id="u1")
    created = mine.post("/api/threads", {"thread_id": "t-new"})
    assert created.status_code == 201 and created.json()["user_id"] == "u1"
    other = mine.post("/api/threads", {"thread_id": "t-other", "user_id": "u2"})
    assert other.status_code == 403 and other.json()["field"] == "user_id"
    for body, field in (({"content": "planted", "user_id": "u2"}, "user_id"),
                        ({"content": "planted", "thread_id": "t-u2"}, "thread_id"),
                        ({"content": "planted", "thread_id": "no-such-thread"}, "thread_id")):
        response = mine.post("/api/threads/t-u1/memories", body)
        assert response.status_code == 403 and response.json()["field"] == field, body
    assert not Memory.objects.filter(content="planted").exists()
    own = mine.post("/api/threads/t-u1/memories", {"content": "fine", "thread_id": "t-new"})
    assert own.status_code == 201 and own.json()["thread_id"] == "t-new"


def test_a_user_keys_searches_stay_with_its_user(two_users):
    mine, _ = client_for(user_id="u1")
    own = mine.post("/api/search", {"query": "pet iguana", "user_id": "u1", "max_results": 50})
    assert own.status_code == 200 and {r["record"]["user_id"] for r in own.json()} == {"u1"}
    unscoped = mine.post("/api/search", {"query": "pet iguana", "max_results": 50})  # its user is explicit
    assert unscoped.status_code == 200 and unscoped.json() == own.json()
    loose = mine.post("/api/search", {"query": "iguana", "user_id": "u1", "exact_user_match": False})
    assert loose.status_code == 422  # the SDK refuses it for every client search (test_search_scope)
    for path, body, field in (("/api/search", {"query": "iguana", "user_id": "u2"}, "user_id"),
                              ("/api/threads/t-u1/search", {"query": "iguana", "user_id": "u2"}, "user_id"),
                              ("/api/threads/t-u1/search", {"query": "iguana", "exact_user_match": False},
                               "exact_user_match")):
        response = mine.post(path, body)
        assert response.status_code == 403 and response.json()["field"] == field, (path, body)
    wide = mine.post("/api/threads/t-u1/search", {"query": "iguana", "exact_thread_match": False, "max_results": 50})
    assert {r["record"]["user_id"] for r in wide.json()} == {"u1"}


def test_an_agent_key_is_held_to_its_agent(db):
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-a1", user_id="u1", agent_id="a1")
    client.create_thread(thread_id="t-a2", user_id="u1", agent_id="a2")
    agent, _ = client_for(agent_id="a1")
    assert agent.get("/api/threads/t-a1").status_code == 200 and agent.get("/api/threads/t-a2").status_code == 404
    assert agent.post("/api/threads", {"thread_id": "t-x", "agent_id": "a2"}).json()["field"] == "agent_id"
    assert agent.post("/api/threads", {"thread_id": "t-y", "user_id": "u9"}).json()["agent_id"] == "a1"


# --- projects ------------------------------------------------------------------------------------


def test_a_key_works_in_its_project_only(two_users):
    beta = Project.objects.create(slug="beta")
    theirs, _ = client_for(project=beta)
    assert theirs.get("/api/threads/t-u1").status_code == 404
    assert theirs.get("/api/threads").json()["items"] == []
    assert theirs.post("/api/search", {"query": "iguana", "user_id": "u1"}).json() == []
    assert theirs.post("/api/threads", {"thread_id": "t-u1", "user_id": "u1"}).status_code == 201  # no 409
    assert theirs.get("/api/threads/t-u1/memories").json()["items"] == []
    assert AgentMemory().get_thread("t-u1").get_memory("pet-u1")


# --- expiry, revocation, use times -------------------------------------------------------------------


def test_expired_and_revoked_keys_are_refused(db):
    soon = timezone.now() + dt.timedelta(seconds=60)
    client, row = client_for(expires_at=soon)
    assert client.get("/api/threads").status_code == 200
    ApiKey.objects.filter(pk=row.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    assert client.get("/api/threads").status_code == 401
    other, row = client_for()
    api_key_revoke(key=row)
    assert other.get("/api/threads").status_code == 401
    row.refresh_from_db()
    assert not row.is_active and row.revoked_at is not None
    with pytest.raises(ValueError, match="expires_at"):
        api_key_create(name="past", expires_at=timezone.now() - dt.timedelta(days=1))
    with pytest.raises(ValueError, match="permission"):
        api_key_create(name="bad", permission="root")


def test_last_used_at_is_written_at_most_once_a_minute(db):
    client, row = client_for()
    assert row.last_used_at is None
    client.get("/api/threads")
    row.refresh_from_db()
    first = row.last_used_at
    assert first is not None
    client.get("/api/threads")
    row.refresh_from_db()
    assert row.last_used_at == first  # within the minute: not written again
    ApiKey.objects.filter(pk=row.pk).update(last_used_at=first - dt.timedelta(seconds=TOUCH_SECONDS + 1))
    client.get("/api/threads")
    row.refresh_from_db()
    assert row.last_used_at > first


# --- /api/keys -------------------------------------------------------------------------------------


def test_keys_are_created_listed_rotated_and_revoked_over_http(db):
    admin, admin_row = client_for(permission="admin", name="ops")
    made = admin.post("/api/keys", {"name": "bot", "permission": "read", "user_id": "u1",
                                    "expires_at": "2099-01-01T00:00:00Z"})
    assert made.status_code == 201, made.content
    body = made.json()
    raw = body["key"]
    row = ApiKey.objects.get(pk=body["key_id"])
    assert row.key_hash == hashlib.sha256(raw.encode()).hexdigest() and raw.startswith(body["prefix"])
    assert (body["project"], body["permission"], body["user_id"], body["active"]) == ("default", "read", "u1", True)
    assert row.created_by == f"api-key:{admin_row.pk}"
    listed = admin.get("/api/keys").json()["items"]
    assert {k["key_id"] for k in listed} == {admin_row.pk, row.pk} and all("key" not in k for k in listed)
    assert raw not in admin.get("/api/keys").content.decode()
    bot = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    assert bot.get("/api/threads").status_code == 200 and bot.post("/api/threads", {}).status_code == 403

    rotated = admin.post(f"/api/keys/{row.pk}/rotate")
    assert rotated.status_code == 200 and rotated.json()["key_id"] == row.pk and rotated.json()["rotated_at"]
    assert bot.get("/api/threads").status_code == 401
    fresh = JsonClient(headers={"Authorization": f"Bearer {rotated.json()['key']}"})
    assert fresh.get("/api/threads").status_code == 200

    assert admin.delete(f"/api/keys/{row.pk}").status_code == 204
    assert admin.delete(f"/api/keys/{row.pk}").status_code == 204  # twice: harmless
    assert fresh.get("/api/threads").status_code == 401
    assert admin.post(f"/api/keys/{row.pk}/rotate").status_code == 422  # a revoked key stays revoked
    assert [k["active"] for k in admin.get("/api/keys").json()["items"] if k["key_id"] == row.pk] == [False]


def test_key_management_stays_in_the_project_and_refuses_bad_input(db):
    admin, _ = client_for(permission="admin")
    other_project_key, _ = api_key_create(name="theirs", project=Project.objects.create(slug="beta"))
    assert admin.delete(f"/api/keys/{other_project_key.pk}").status_code == 404
    assert admin.post(f"/api/keys/{other_project_key.pk}/rotate").status_code == 404
    assert ApiKey.objects.get(pk=other_project_key.pk).is_active
    for body, field in (({"name": "x", "permission": "root"}, "permission"),
                        ({"name": "x", "expires_at": "2000-01-01T00:00:00Z"}, "expires_at"),
                        ({"name": "x", "expires_at": "2099-01-01T00:00:00"}, "expires_at"),
                        ({"name": ""}, "name"),
                        ({"name": "x", "project": "beta"}, "project")):
        response = admin.post("/api/keys", body)
        assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == field, body
    restricted, _ = client_for(permission="admin", user_id="u1")
    response = restricted.post("/api/keys", {"name": "escalate"})
    assert response.status_code == 403 and "restricted" in response.json()["detail"]
    assert restricted.get("/api/erasures").status_code == 403  # nor read the project's erasure receipts
    assert not ApiKey.objects.filter(name__in=["x", "escalate"]).exists()


# --- commands ------------------------------------------------------------------------------------------


def test_commands_create_list_rotate_and_revoke_scoped_keys(db):
    out = StringIO()
    call_command("create_project", "acme", "--name", "ACME", stdout=out)
    assert out.getvalue().strip() == "acme"
    out = StringIO()
    call_command("create_api_key", "bot", "--project", "acme", "--permission", "read", "--user-id", "u1",
                 "--expires-in-days", "30", stdout=out, stderr=StringIO())
    raw = out.getvalue().strip()
    row = api_key_lookup(raw)
    assert (row.project.slug, row.permission, row.user_id, row.created_by) == ("acme", "read", "u1", "manage.py")
    assert dt.timedelta(days=29) < row.expires_at - timezone.now() <= dt.timedelta(days=30)
    listing = StringIO()
    call_command("list_api_keys", "--project", "acme", stdout=listing)
    [line] = listing.getvalue().splitlines()
    assert line.split("\t")[:7] == [str(row.pk), "acme", "bot", f"{row.prefix}…", "read", "u1", "-"]
    assert raw not in listing.getvalue()
    out = StringIO()
    call_command("rotate_api_key", str(row.pk), stdout=out, stderr=StringIO())
    new = out.getvalue().strip()
    assert api_key_lookup(raw) is None and api_key_lookup(new).pk == row.pk
    call_command("revoke_api_key", str(row.pk), stdout=StringIO())
    assert api_key_lookup(new) is None
    for args in (["create_api_key", "x", "--project", "nope"], ["create_api_key", "x", "--expires-in-days", "0"],
                 ["create_api_key", "x", "--user-id", "   "], ["rotate_api_key", "999999"],
                 ["revoke_api_key", "999999"], ["create_project", "acme"], ["create_project", "not a slug"]):
        with pytest.raises(CommandError):
            call_command(*args, stdout=StringIO(), stderr=StringIO())


def test_a_user_restricted_key_does_not_see_another_users_memory_stored_in_its_thread(db):
    """Found by a security review: an admin stored user u1's memory in user u2's thread; u2's key read and
    edited it. Now it is "not found" for u2's key everywhere (get, list, PATCH, DELETE), as for the SDK's
    restricted client, and untouched; the project's unrestricted key still sees it."""
    client = AgentMemory()
    thread = client.create_thread(thread_id="t2", user_id="u2", agent_id="a1")
    own = thread.add_memory("u2 likes tea", memory_id="own")
    other = thread.add_memory("u1 secret: passport 1234", memory_id="other", user_id="u1")
    u2, _ = client_for(user_id="u2", permission="write")
    admin, _ = client_for(permission="write", name="unrestricted")

    assert u2.get(f"/api/threads/t2/memories/{other}").status_code == 404
    listed = u2.get("/api/threads/t2/memories").json()
    assert [m["id"] for m in listed["items"]] == [own] and listed["count"] == 1
    assert u2.patch(f"/api/threads/t2/memories/{other}", {"content": "tampered"}).status_code == 404
    assert u2.delete(f"/api/threads/t2/memories/{other}").status_code == 404
    assert "passport" not in u2.get("/api/threads/t2/memories").content.decode()
    assert Memory.objects.get(pk=key("other")).content == "u1 secret: passport 1234"

    assert admin.get(f"/api/threads/t2/memories/{other}").status_code == 200
    assert admin.get("/api/threads/t2/memories").json()["count"] == 2
    assert u2.get(f"/api/threads/t2/memories/{own}").status_code == 200
    assert u2.patch(f"/api/threads/t2/memories/{own}", {"content": "u2 likes green tea"}).status_code == 200


@pytest.fixture
def shared_thread(db):
    """u2's thread ``t2`` holding u2's memories ``own1``/``own2`` (related: ``r-own``) and u1's memory ``other``
    (stored there by an unrestricted client) related to ``own1`` (``r-mixed``, ``other`` supersedes ``own1``)."""
    thread = AgentMemory(llm=None).create_thread(thread_id="t2", user_id="u2", agent_id="a1")
    thread.add_memory("u2 likes tea", memory_id="own1")
    thread.add_memory("u2 likes green tea", memory_id="own2")
    thread.add_memory("u1 secret: passport 1234, likes tea", memory_id="other", user_id="u1")
    thread.link_records("own2", "memory", "own1", "memory", "supports", relation_id="r-own")
    thread.link_records("other", "memory", "own1", "memory", "contradicts", relation_id="r-mixed",
                        metadata={"why": "passport"})
    return thread


def test_a_user_restricted_key_sees_no_relation_to_another_users_record_in_its_thread(shared_thread):
    """Found by a security review: the links of u2's thread listed a relation to u1's memory stored there, with
    its id. Now, for u2's key, a relation with an endpoint it cannot see does not exist
    (``memory.links.writes.visible``): not listed, not readable, not changed or deleted, not made; search's linked
    results never reach it."""
    u2, _ = client_for(user_id="u2", permission="write")
    admin, _ = client_for(permission="write", name="unrestricted")
    tuple_of_mixed = urlencode({"source_record_id": "other", "source_record_type": "memory", "target_record_id": "own1",
                                "target_record_type": "memory", "relation_type": "contradicts"})

    for query in ("", "?record_id=own1", "?record_id=other"):
        listed = u2.get(f"/api/threads/t2/links{query}").json()
        assert [r["relation_id"] for r in listed["items"]] == ([] if "other" in query else ["r-own"]), query
        assert "other" not in json.dumps(listed) and "passport" not in json.dumps(listed)
    assert u2.get("/api/threads/t2/links/r-mixed").status_code in (404, 405)  # no single-relation GET route
    assert u2.patch("/api/threads/t2/links/r-mixed", {"metadata": {"x": 1}}).status_code == 404
    assert u2.delete("/api/threads/t2/links/r-mixed").status_code == 404
    assert u2.delete(f"/api/threads/t2/links?{tuple_of_mixed}").status_code == 404
    made = u2.post("/api/threads/t2/links", {"source_record_id": "own2", "source_record_type": "memory",
                                             "target_record_id": "other", "target_record_type": "memory",
                                             "relation_type": "supersedes"})
    assert made.status_code == 422 and "no memory-like record 'other'" in made.content.decode()
    linked = u2.post("/api/threads/t2/memories", {"content": "u2 drinks tea daily", "memory_id_to_link": "other",
                                                  "link_type": "supersedes"})
    assert linked.status_code == 422 and "memory_id_to_link" in linked.content.decode()
    found = u2.post("/api/threads/t2/search", {"query": "tea", "num_hops": 3, "max_results": 10}).json()
    reached = {r["record_id"] for r in found} | {n["record_id"] for r in found for n in r["linked"]}
    assert {"own1", "own2"} <= reached and "other" not in reached and "passport" not in json.dumps(found)
    assert any(n["relation_id"] == "r-own" for r in found for n in r["linked"])  # the walk ran
    assert u2.patch("/api/threads/t2/links/r-own", {"metadata": {"ok": True}}).status_code == 200

    everything = admin.get("/api/threads/t2/links").json()
    assert [r["relation_id"] for r in everything["items"]] == ["r-own", "r-mixed"]
    assert RecordLink.objects.get(pk=key("r-mixed")).metadata == {"why": "passport"}
    assert Memory.objects.get(pk=key("other")).status == "valid"  # u2 could not supersede it


def test_the_python_client_of_a_restricted_tenant_sees_the_same_relations(shared_thread):
    from memory.records.tenancy import Tenant

    own = AgentMemory(tenant=Tenant(get_project(None), user_id="u2"), llm=None).get_thread("t2")
    assert [r.relation_id for r in own.record_links()] == ["r-own"]
    with pytest.raises(KeyError):
        own.get_record_link("r-mixed")
    assert own.update_record_link("r-mixed", metadata={"x": 1}) == 0
    assert own.delete_record_link(relation_id="r-mixed") == 0
    assert [r.relation_id for r in shared_thread.record_links()] == ["r-own", "r-mixed"]


@pytest.mark.parametrize("kind", ["thread", "memory", "message", "image", "relation"])
def test_a_taken_id_is_a_409_that_names_nothing_but_the_id(two_users, kind):
    """Ids are unique per project, so a user-restricted key learns that an id it asks for is taken by
    someone in its project: a deliberate, documented limit (docs/projects-and-keys.md, "API keys"). The answer
    says only that: no owner, no user, agent or thread of the record that holds the id."""
    thread = two_users.get_thread("t-u1")
    two_users.create_thread(thread_id="taken-thread", user_id="u1", agent_id="a1")
    thread.add_messages([{"role": "user", "content": "u1 here", "id": "taken-msg"}])
    thread.add_image(samples.png(), description="u1's photo", image_id="taken-img")
    thread.add_memory("u1 also keeps a cat", memory_id="taken-mem")
    thread.link_records("taken-mem", "memory", "pet-u1", "memory", "supports", relation_id="taken-rel")
    u2_thread = two_users.get_thread("t-u2")
    u2_thread.add_memory("u2 keeps a dog", memory_id="dog-u2")
    u2, _ = client_for(user_id="u2", permission="write")
    request = {
        "thread": ("/api/threads", {"thread_id": "taken-thread"}, "thread_id", "taken-thread"),
        "memory": ("/api/threads/t-u2/memories", {"content": "x", "memory_id": "taken-mem"}, "memory_id",
                   "taken-mem"),
        "message": ("/api/threads/t-u2/messages", {"messages": [{"role": "user", "content": "x", "id": "taken-msg"}]},
                    "messages[].id", "taken-msg"),
        "image": ("/api/threads/t-u2/images", {"data": base64.b64encode(samples.png()).decode(),
                                               "image_id": "taken-img"}, "image_id", "taken-img"),
        "relation": ("/api/threads/t-u2/links", {"source_record_id": "dog-u2", "source_record_type": "memory",
                                                 "target_record_id": "pet-u2", "target_record_type": "memory",
                                                 "relation_type": "supports", "relation_id": "taken-rel"},
                     "relation_id", "taken-rel"),
    }
    path, body, field, value = request[kind]
    response = u2.post(path, body)
    assert response.status_code == 409, response.content
    assert response.json() == {"detail": f"{field} {value!r} already exists", "field": field}
    for secret in ("u1", "a1", "cat", "photo"):
        assert secret not in response.content.decode(), secret
