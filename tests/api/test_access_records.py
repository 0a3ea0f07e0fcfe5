"""Access records and key revocation on open sockets.

"Nothing records which key created or changed a record": every API write,
every refused request, every staff write and every WebSocket connection is an
``AccessRecord`` naming its key (or staff member), project, route and the
public ids in its path; an erasure clears the erased threads' ids from them.
Revoking or rotating a key closes the WebSockets it opened.
"""

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from memory.client import AgentMemory
from memory.models import Project
from memory.records.tenancy import get_project
from tests.api.helpers import JsonClient
from threads.auth import api_key_create, api_key_revoke, api_key_rotate
from threads.models import AccessRecord


def keyed(**options):
    row, raw = api_key_create(name=options.pop("name", "k"), **options)
    return JsonClient(headers={"Authorization": f"Bearer {raw}"}), row, raw


def test_writes_and_refusals_are_recorded_with_their_key(db, settings):
    writer, row, _ = keyed()
    reader, reader_row, _ = keyed(permission="read")
    assert writer.post("/api/threads", {"thread_id": "c4", "user_id": "u1"}).status_code == 201
    assert writer.post("/api/threads/c4/memories", {"content": "likes tea", "memory_id": "m1"}).status_code == 201
    assert writer.delete("/api/threads/c4/memories/m1").status_code == 204
    assert writer.get("/api/threads/c4").status_code == 200  # a read: not recorded by default
    assert reader.post("/api/threads", {"thread_id": "nope"}).status_code == 403
    assert JsonClient(headers={"Authorization": "Bearer wrong"}).delete("/api/threads/c4").status_code == 401
    records = list(AccessRecord.objects.order_by("id").values_list(
        "api_key_id", "project__slug", "channel", "method", "route", "thread_id", "record_id", "status"))
    assert records == [
        (row.pk, "default", "api", "POST", "/api/threads", None, None, 201),
        (row.pk, "default", "api", "POST", "/api/threads/{thread_id}/memories", "c4", None, 201),
        (row.pk, "default", "api", "DELETE", "/api/threads/{thread_id}/memories/{memory_id}", "c4", "m1", 204),
        (reader_row.pk, "default", "api", "POST", "/api/threads", None, None, 403),
        (None, None, "api", "DELETE", "/api/threads/{thread_id}", None, None, 401),  # no project: no ids
    ]
    settings.OAM_AUDIT_READS = True
    writer.get("/api/threads/c4")
    assert AccessRecord.objects.order_by("-id").values_list("method", "route").first() == (
        "GET", "/api/threads/{thread_id}")


def test_an_erasure_leaves_no_user_or_thread_id_in_the_records(db):
    admin, admin_row, _ = keyed(permission="admin")
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-ann", user_id="ann@example.com")
    client.create_thread(thread_id="t-bob", user_id="bob")
    for thread_id in ("t-ann", "t-bob"):
        response = admin.post(f"/api/threads/{thread_id}/memories", {"content": "x", "memory_id": f"m-{thread_id}"})
        assert response.status_code == 201
    assert admin.delete("/api/users/ann@example.com").json()["counts"]["threads"] == 1
    assert set(AccessRecord.objects.values_list("thread_id", flat=True)) == {None, "t-bob"}
    assert not any("ann" in str(value) for row in AccessRecord.objects.values() for value in row.values())
    erasure = AccessRecord.objects.get(route="/api/users/{user_id}")
    assert (erasure.api_key_id, erasure.status, erasure.record_id) == (admin_row.pk, 200, None)


def test_an_erasure_scrubs_the_ids_of_erased_records_that_lived_in_threads_that_remain(db):
    """Found by a security review: ann's memory stored in bob's thread (and one in no thread) was erased with
    ann, but the access records of its writes kept its id under bob's surviving thread. Now every erased
    memory, image and relation loses its id in the records, wherever it lived; bob's own records stay."""
    admin, _, _ = keyed(permission="admin")
    client = AgentMemory(llm=None)
    bob = client.create_thread(thread_id="t-bob", user_id="bob")
    bob.add_memory("bob likes tea", memory_id="m-bob")
    link = {"source_record_id": "m-ann-secret", "source_record_type": "memory", "target_record_id": "m-bob",
            "target_record_type": "memory", "relation_type": "supports", "relation_id": "r-ann-bob"}
    for method, path, body in (
            ("post", "/api/threads/t-bob/memories", {"content": "ann's passport", "memory_id": "m-ann-secret",
                                                     "user_id": "ann"}),
            ("post", "/api/threads/t-bob/links", link),
            ("patch", "/api/threads/t-bob/links/r-ann-bob", {"metadata": {"x": 1}}),
            ("patch", "/api/threads/t-bob/memories/m-ann-secret", {"metadata": {"y": 1}}),
            ("patch", "/api/threads/t-bob/memories/m-bob", {"metadata": {"z": 1}})):
        assert getattr(admin, method)(path, body).status_code in (200, 201), path
    bob.add_memory("ann floats", memory_id="m-ann-float", user_id="ann", thread_id=None)
    assert admin.delete("/api/memories/m-ann-float").status_code == 204  # ... a record of it, then re-added
    bob.add_memory("ann floats again", memory_id="m-ann-float", user_id="ann", thread_id=None)
    assert set(AccessRecord.objects.values_list("record_id", flat=True)) >= {"m-ann-secret", "r-ann-bob",
                                                                            "m-ann-float", "m-bob"}

    assert admin.delete("/api/users/ann").json()["counts"] == {
        "threads": 0, "messages": 0, "memories": 2, "images": 0, "relations": 1, "chunks": 2, "summaries": 0,
        "extraction_jobs": 0, "admin_log_entries": 0, "api_keys": 0, "memory_versions": 5}
    kept = set(AccessRecord.objects.values_list("thread_id", "record_id"))
    assert not {record for _, record in kept} & {"m-ann-secret", "r-ann-bob", "m-ann-float"}
    assert ("t-bob", "m-bob") in kept and ("t-bob", None) in kept  # bob's thread survives, and so do its ids


def test_staff_writes_are_recorded_with_the_staff_member(db, thread):
    staff = Client()
    eve = get_user_model().objects.create_user("eve", password="pw-for-tests-only", is_staff=True)
    get_project(None).members.add(eve)
    staff.force_login(eve)
    thread.add_memory("likes tea", memory_id="m1")
    response = staff.post("/staff/projects/default/threads/t-main/memories/m1/delete/")
    assert response.status_code == 302
    record = AccessRecord.objects.get()
    assert (record.channel, record.staff_user, record.project.slug, record.method, record.thread_id,
            record.record_id, record.status) == ("staff", "eve", "default", "POST", "t-main", "m1", 302)
    assert record.route == "/staff/projects/{project}/threads/{thread_id}/memories/{memory_id}/delete/"


def test_admin_writes_are_recorded_and_an_erasure_clears_their_ids(db):
    """The admin's own history is erased with the records it names (no content may outlive them), so the
    access records keep who changed or deleted what in the admin, under the object's project and public id."""
    from django.contrib.admin.utils import quote

    root = get_user_model().objects.create_superuser("root", password="pw-for-tests-only")
    staff = Client()
    staff.force_login(root)
    client = AgentMemory(llm=None)
    thread = client.create_thread(thread_id="t-ann", user_id="ann")
    thread.add_memory("likes tea", memory_id="m-ann")
    client.create_thread(thread_id="t-bob", user_id="bob").add_memory("likes coffee", memory_id="m-bob")
    response = staff.post(f"/admin/memory/memory/{quote(f'{client.project.pk}:m-bob')}/delete/", {"post": "yes"})
    assert response.status_code == 302
    record = AccessRecord.objects.get(channel="staff")
    assert (record.staff_user, record.project, record.method, record.record_id, record.thread_id) == (
        "root", client.project, "POST", "m-bob", None)
    assert record.route == "/admin/memory/memory/{object_id}/delete/"
    staff.post(f"/admin/memory/memory/{quote(f'{client.project.pk}:m-ann')}/change/", {})
    staff.post(f"/admin/memory/thread/{quote(f'{client.project.pk}:t-ann')}/change/", {})
    assert AccessRecord.objects.filter(channel="staff", record_id="m-ann").exists()
    assert AccessRecord.objects.filter(channel="staff", thread_id="t-ann").exists()

    client.delete_user("ann")
    assert not AccessRecord.objects.filter(record_id="m-ann").exists()
    assert not AccessRecord.objects.filter(thread_id="t-ann").exists()


# --- WebSockets -------------------------------------------------------------------------------------


async def _open(path):
    from oam_site.asgi import application

    communicator = WebsocketCommunicator(application, path)
    connected, code = await communicator.connect(timeout=10)
    if connected:
        await communicator.receive_json_from(timeout=10)  # the state frame
    return communicator, connected, code


async def _closed_with(communicator):
    """The close code the server sends next (it must send something within 5 s)."""
    output = await communicator.receive_output(timeout=5)
    return output.get("code") if output["type"] == "websocket.close" else output["type"]


@pytest.mark.django_db(transaction=True)
def test_revoking_or_rotating_a_key_closes_its_sockets_and_only_its(settings, fresh_extraction_tracker):
    settings.OAM_EMBEDDED_WORKER = False
    AgentMemory(llm=None).create_thread(thread_id="t-ws", user_id="u1")
    revoked, rotated, kept = (api_key_create(name=n) for n in ("revoked", "rotated", "kept"))
    path = "/ws/threads/t-ws/extraction/?api_key="

    async def scenario():
        sockets = [(await _open(path + raw))[0] for _, raw in (revoked, rotated, kept)]
        await database_sync_to_async(api_key_revoke)(key=revoked[0])
        first = await _closed_with(sockets[0])
        others = [await s.receive_nothing(timeout=0.5) for s in sockets[1:]]  # True: still open, silent
        await database_sync_to_async(api_key_rotate)(key=rotated[0])
        second = await _closed_with(sockets[1])
        third = await sockets[2].receive_nothing(timeout=0.5)
        _, connected, code = await _open(path + revoked[1])  # and it cannot come back
        for s in sockets:
            await s.disconnect()
        return first, others, second, third, (connected, code)

    first, others, second, third, again = asyncio.run(scenario())
    assert first == 4401 and others == [True, True]
    assert second == 4401 and third is True
    assert again == (False, 4401)
    attempts = list(AccessRecord.objects.filter(channel="websocket").order_by("id").values_list("api_key_id", "status"))
    assert attempts == [(revoked[0].pk, 101), (rotated[0].pk, 101), (kept[0].pk, 101), (None, 4401)]
    assert AccessRecord.objects.filter(channel="websocket", project__slug="default").count() == 3


@pytest.mark.django_db(transaction=True)
def test_refusals_before_a_key_is_known_keep_no_thread_or_record_id(settings, fresh_extraction_tracker):
    """Found by a security review: a 401 or a refused WebSocket was recorded with no project and the ids of
    its path, which no erasure (per project) can find. Now such a record keeps the route, method, status and
    time only; an existing one loses its ids (migration threads 0004)."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    settings.OAM_EMBEDDED_WORKER = False
    AgentMemory(llm=None).create_thread(thread_id="KANARIthread", user_id="u1")
    wrong = JsonClient(headers={"Authorization": "Bearer wrong"})
    assert wrong.delete("/api/threads/KANARIthread/memories/KANARImem").status_code == 401
    assert JsonClient().get("/api/threads/KANARIthread").status_code == 401

    async def refused():
        from oam_site.asgi import application

        codes = []
        for path, headers in (("/ws/threads/KANARIthread/extraction/?api_key=wrong", []),
                              ("/ws/threads/KANARIthread/extraction/", []),
                              ("/ws/threads/KANARIthread/extraction/", [(b"cookie", cookie)])):
            communicator = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://localhost"),
                                                                             *headers])
            connected, code = await communicator.connect(timeout=10)
            codes.append(code if not connected else await _closed_with(communicator))
            await communicator.disconnect()
        return codes

    browser = Client()
    browser.force_login(get_user_model().objects.create_user("joe", password="pw-for-tests-only"))  # not staff
    cookie = f"sessionid={browser.cookies['sessionid'].value}".encode()
    assert asyncio.run(refused()) == [4401, 4401, 4403]
    rows = list(AccessRecord.objects.order_by("id").values_list("project", "channel", "route", "thread_id",
                                                                "record_id", "status"))
    assert rows == [
        (None, "api", "/api/threads/{thread_id}/memories/{memory_id}", None, None, 401),
        (None, "api", "/api/threads/{thread_id}", None, None, 401),
        (None, "websocket", "/ws/threads/{thread_id}/extraction/", None, None, 4401),
        (None, "websocket", "/ws/threads/{thread_id}/extraction/", None, None, 4401),
        (None, "websocket", "/ws/threads/{thread_id}/extraction/", None, None, 4403),
    ]
    old = AccessRecord.objects.create(channel="api", method="GET", route="/api/threads/{thread_id}", status=401)
    AccessRecord.objects.filter(pk=old.pk).update(thread_id="KANARIthread", record_id="KANARImem")  # stored before
    kept = AccessRecord.objects.create(channel="api", method="GET", route="/api/threads/{thread_id}", status=404,
                                       project=get_project(None), thread_id="t1")
    migration = importlib.import_module("threads.migrations.0004_unattributed_access_ids")
    migration.clear_ids(apps, SimpleNamespace(connection=connection))
    assert AccessRecord.objects.filter(thread_id__isnull=False).values_list("pk", "thread_id")[::1] == [(kept.pk, "t1")]


def test_the_staff_project_list_counts_threads(db):
    staff = Client()
    eve = get_user_model().objects.create_user("eve", password="pw-for-tests-only", is_staff=True)
    staff.force_login(eve)
    acme = AgentMemory(project=Project.objects.create(slug="acme"), llm=None)
    acme.project.members.add(eve)
    for tid in ("a", "b"):
        acme.create_thread(thread_id=tid)
    html = staff.get("/staff/projects/").content.decode()
    assert '<a href="/staff/projects/acme/threads/">acme</a>' in html
    row = html.split('data-project="acme"')[1].split("</tr>")[0]
    assert '<td class="num">2</td>' in row


def test_the_periodic_purge_deletes_access_records_past_their_retention(db, settings):
    """The log stays bounded: ``expired_purge`` (workers, ``manage.py purge_expired``) drops old records."""
    from datetime import timedelta

    from django.core.management import call_command
    from django.utils import timezone

    from memory.services.erasure import expired_purge
    from threads.models import AccessRecord

    settings.OAM_ACCESS_LOG_DAYS = 30
    now = timezone.now()
    for days in (31, 29, 1):
        AccessRecord.objects.create(channel="api", method="POST", route="/api/threads", status=201,
                                    at=now - timedelta(days=days))
    counts = expired_purge(now=now)
    assert counts["access_records"] == 1
    assert sorted((now - r.at).days for r in AccessRecord.objects.all()) == [1, 29]
    settings.OAM_ACCESS_LOG_DAYS = 0  # kept forever
    assert expired_purge(now=now + timedelta(days=400))["access_records"] == 0 and AccessRecord.objects.count() == 2
    settings.OAM_ACCESS_LOG_DAYS = 2
    call_command("purge_expired", verbosity=0)
    assert AccessRecord.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_socket_closes_when_its_key_expires_or_is_revoked_by_another_process(settings, fresh_extraction_tracker):
    """Found by a security review: ``manage.py revoke_api_key`` runs in another process, whose message the
    in-memory channel layer cannot carry, and an expiry sends nothing. The socket re-checks its key."""
    from datetime import timedelta

    from django.utils import timezone

    from threads.models import ApiKey

    settings.OAM_EMBEDDED_WORKER = False
    settings.OAM_WS_KEY_RECHECK_SECONDS = 0.2
    AgentMemory(llm=None).create_thread(thread_id="t-ws", user_id="u1")
    revoked, expiring, kept = (api_key_create(name=n) for n in ("cli-revoked", "expiring", "kept"))
    path = "/ws/threads/t-ws/extraction/?api_key="

    async def scenario():
        sockets = [(await _open(path + raw))[0] for _, raw in (revoked, expiring, kept)]
        # what another process does: change the row, publish nothing this process hears
        await database_sync_to_async(ApiKey.objects.filter(pk=revoked[0].pk).update)(is_active=False)
        await database_sync_to_async(ApiKey.objects.filter(pk=expiring[0].pk).update)(
            expires_at=timezone.now() - timedelta(seconds=1))
        codes = [await _closed_with(sockets[0]), await _closed_with(sockets[1])]
        still_open = await sockets[2].receive_nothing(timeout=0.6)
        for s in sockets:
            await s.disconnect()
        return codes, still_open

    codes, still_open = asyncio.run(scenario())
    assert codes == [4401, 4401] and still_open is True


@pytest.mark.django_db(transaction=True)
def test_erasing_a_user_deletes_the_keys_fixed_to_them_and_closes_their_sockets(settings, fresh_extraction_tracker):
    """Found by a security review: a key created for one user stayed usable after that user's erasure and
    wrote new data for them. Now every key fixed to the erased user (or agent) is deleted, with the admin's
    history of it; its sockets close; its access records stay, without it."""
    from django.contrib.admin.models import LogEntry

    from threads.models import ApiKey

    settings.OAM_EMBEDDED_WORKER = False
    admin, admin_row, _ = keyed(permission="admin", name="ops")
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-k", user_id="KANARIuser", agent_id="a1")
    root = get_user_model().objects.create_superuser("root", "root@example.com", "pw-for-tests-only")
    browser = Client()
    browser.force_login(root)
    response = browser.post("/admin/threads/apikey/add/", {
        "name": "for KANARIuser", "project": str(get_project(None).pk), "permission": "write",
        "user_id": "KANARIuser", "agent_id": "", "expires_at_0": "", "expires_at_1": ""})
    assert response.status_code == 200 and b"API key created" in response.content
    fixed = ApiKey.objects.get(user_id="KANARIuser")
    raw = response.context["raw"]
    assert LogEntry.objects.filter(object_id=str(fixed.pk)).exists()  # "for KANARIuser (...)"
    user_key = JsonClient(headers={"Authorization": f"Bearer {raw}"})
    assert user_key.post("/api/threads/t-k/memories", {"content": "likes tea"}).status_code == 201
    other_client, other, _ = keyed(name="u2 widget", user_id="u2")
    agent_client, agent_key, _ = keyed(name="a9 bot", agent_id="a9")

    async def scenario():
        socket, connected, _ = await _open(f"/ws/threads/t-k/extraction/?api_key={raw}")
        assert connected
        body = (await database_sync_to_async(admin.delete)("/api/users/KANARIuser")).json()
        return body, await _closed_with(socket)

    body, code = asyncio.run(scenario())
    assert body["counts"]["api_keys"] == 1 and body["counts"]["admin_log_entries"] == 1 and code == 4401
    assert not ApiKey.objects.filter(pk=fixed.pk).exists()
    assert user_key.post("/api/threads", {"thread_id": "again", "user_id": "KANARIuser"}).status_code == 401
    assert set(ApiKey.objects.values_list("pk", flat=True)) == {admin_row.pk, other.pk, agent_key.pk}
    assert AccessRecord.objects.filter(api_key__isnull=True, status=201).exists()  # its write, without the key
    assert not LogEntry.objects.exists()
    assert not any("KANARI" in str(value) for model in (ApiKey, AccessRecord)
                   for row in model.objects.values() for value in row.values())
    # an agent's erasure takes the keys fixed to that agent; a key erasing its own user goes with it
    assert admin.delete("/api/agents/a9").json()["counts"]["api_keys"] == 1
    _, self_eraser, self_raw = keyed(name="u3 admin", permission="admin", user_id="u3")
    response = JsonClient(headers={"Authorization": f"Bearer {self_raw}"}).delete("/api/users/u3")
    assert response.status_code == 200 and response.json()["counts"]["api_keys"] == 1
    record = AccessRecord.objects.get(route="/api/users/{user_id}", status=200, api_key__isnull=True)
    assert record.project == get_project(None)  # recorded, without the key it erased
