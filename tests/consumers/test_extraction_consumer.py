"""The extraction WebSocket (threads.consumers) on the in-memory channel layer.

Connections go through ``oam_site.asgi.application`` (routing, origin check,
session auth), with ``channels.testing.WebsocketCommunicator``. Database rows
are made with ``transactional_db``: the consumer reads them from another thread.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.llm.adapters import LlmInvalidOutput
from memory.llm.scripted import ScriptedLlm
from memory.models import Project
from threads.auth import api_key_create

pytestmark = pytest.mark.django_db(transaction=True)

BACKGROUND = MemoryExtractionConfig(extraction_mode="background", enable_context_summary=False)
PATH = "/ws/threads/t-ws/extraction/"


@pytest.fixture(autouse=True)
def no_lazy_worker(settings, fresh_extraction_tracker):
    """No embedded worker unless a test asks for ``extraction_worker``."""
    settings.OAM_EMBEDDED_WORKER = False


@pytest.fixture
def application():
    from oam_site.asgi import application

    return application


@pytest.fixture
def api_key():
    return api_key_create(name="ws")[1]


@pytest.fixture
def thread():
    return AgentMemory(llm=None).create_thread(thread_id="t-ws", user_id="u1", agent_id="a1")


async def connect(application, path=PATH, headers=()):
    communicator = WebsocketCommunicator(application, path, headers=list(headers))
    connected, code = await communicator.connect(timeout=10)
    return communicator, connected, code


def run(coro):
    return asyncio.run(coro)


# --- authentication --------------------------------------------------------------------------------


async def close_code(communicator) -> int | None:
    """The code of the close the server sends right after accepting (None: it stayed open)."""
    try:
        output = await communicator.receive_output(timeout=5)
    except asyncio.TimeoutError:
        return None
    return output["code"] if output["type"] == "websocket.close" else None


def test_anonymous_connections_are_accepted_then_closed_4401(application, thread):
    """A browser sees a close code only after accept (a refused handshake is 1006 to it): the staff page
    shows the reason for 4401/4403/4404 and stops reconnecting. (Was: refused before accept.)"""
    async def scenario():
        communicator, connected, _ = await connect(application, headers=[(b"origin", b"http://testserver")])
        code = await close_code(communicator)
        await communicator.disconnect()
        return connected, code

    assert run(scenario()) == (True, 4401)


def test_a_bearer_api_key_is_accepted_without_an_origin(application, thread, api_key):
    async def scenario():
        communicator, connected, _ = await connect(
            application, headers=[(b"authorization", f"Bearer {api_key}".encode())])
        state = await communicator.receive_json_from(timeout=10)
        await communicator.disconnect()
        return connected, state

    connected, state = run(scenario())
    assert connected
    assert state["event"] == "state" and state["thread_id"] == "t-ws" and state["watermark"] == 0
    assert state["last_job"] is None and state["config"]["extraction_mode"] == "BACKGROUND"


def test_an_api_key_in_the_query_string_is_accepted(application, thread, api_key):
    async def scenario():
        communicator, connected, _ = await connect(application, f"{PATH}?api_key={api_key}")
        await communicator.disconnect()
        return connected

    assert run(scenario()) is True


def test_wrong_or_inactive_keys_are_refused(application, thread, api_key):
    from threads.models import ApiKey

    async def attempt(path, headers=()):
        communicator, connected, _ = await connect(application, path, headers)
        await communicator.disconnect()
        return connected

    assert run(attempt(f"{PATH}?api_key=nope")) is False
    assert run(attempt(PATH, [(b"authorization", b"Bearer nope")])) is False
    ApiKey.objects.update(is_active=False)
    assert run(attempt(f"{PATH}?api_key={api_key}")) is False


def test_an_unknown_thread_is_refused(application, api_key):
    async def scenario():
        communicator, connected, _ = await connect(application, f"/ws/threads/nope/extraction/?api_key={api_key}")
        await communicator.disconnect()
        return connected

    assert run(scenario()) is False


def test_api_key_clients_are_still_refused_before_accept_with_the_code(application, thread, api_key):
    async def attempt(path):
        communicator, connected, code = await connect(application, path)
        await communicator.disconnect()
        return connected, code

    assert run(attempt(f"{PATH}?api_key=nope")) == (False, 4401)
    assert run(attempt(f"/ws/threads/nope/extraction/?api_key={api_key}")) == (False, 4404)


def session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def test_a_staff_session_is_accepted_from_an_allowed_origin(application, thread):
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    thread.project.members.add(staff)
    member = User.objects.create_user("member", password="x")

    async def attempt(cookie, origin, path=PATH):
        communicator, connected, _ = await connect(application, path,
                                                   headers=[(b"cookie", cookie), (b"origin", origin)])
        code = await close_code(communicator) if connected else None
        await communicator.disconnect()
        return connected, code

    staff_cookie, member_cookie = session_cookie(staff), session_cookie(member)
    assert run(attempt(staff_cookie, b"http://testserver")) == (True, None)  # open: the state frame comes
    assert run(attempt(staff_cookie, b"http://evil.example")) == (False, None)  # origin check, before accept
    # refusals of a browser: accepted, then closed with the reason (was: refused before accept)
    assert run(attempt(member_cookie, b"http://testserver")) == (True, 4403)  # signed in, not staff
    assert run(attempt(staff_cookie, b"http://testserver", "/ws/threads/nope/extraction/")) == (True, 4404)


def test_a_staff_session_listens_in_the_project_it_names(application, thread):
    """Thread ids are unique within a project: a staff page names its project with ``?project=<slug>``."""
    staff = User.objects.create_user("staff", password="x", is_staff=True)
    acme = Project.objects.create(slug="acme")
    acme.members.add(staff)
    thread.project.members.add(staff)
    AgentMemory(project=acme, llm=None).create_thread(thread_id="only-acme")
    cookie = session_cookie(staff)

    async def attempt(path):
        communicator, connected, _ = await connect(application, path,
                                                   headers=[(b"cookie", cookie), (b"origin", b"http://testserver")])
        first = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return first.get("code") if first["type"] == "websocket.close" else json.loads(first["text"])["thread_id"]

    assert run(attempt("/ws/threads/only-acme/extraction/?project=acme")) == "only-acme"
    assert run(attempt("/ws/threads/only-acme/extraction/")) == 4404  # the default project has no such thread
    assert run(attempt("/ws/threads/only-acme/extraction/?project=nope")) == 4404
    assert run(attempt("/ws/threads/t-ws/extraction/?project=default")) == "t-ws"


@pytest.mark.parametrize("change, code", [("removed", 4404), ("not staff", 4403), ("inactive", 4403),
                                          ("deleted", 4401), ("made superuser", None)])
def test_a_staff_socket_closes_once_its_user_may_no_longer_see_the_project(application, thread, settings, change,
                                                                           code):
    """Found by a security review: a staff socket outlived the membership it was opened with. Now it checks its
    user every ``OAM_WS_KEY_RECHECK_SECONDS`` as key sockets check their key, and closes with the code a new
    handshake would get: 4404 no longer a member, 4403 no longer active staff, 4401 no such user."""
    from django.core.management import call_command

    settings.OAM_WS_KEY_RECHECK_SECONDS = 0.2
    alice = User.objects.create_user("alice", password="x", is_staff=True)
    acme = Project.objects.create(slug="acme")
    acme.members.add(alice)
    AgentMemory(project=acme, llm=None).create_thread(thread_id="t-acme")
    cookie = session_cookie(alice)

    def lose():
        if change == "removed":
            call_command("add_project_member", "acme", "alice", "--remove", stdout=io.StringIO(),
                         stderr=io.StringIO())
        elif change == "deleted":
            alice.delete()
        else:
            field, value = {"not staff": ("is_staff", False), "inactive": ("is_active", False),
                            "made superuser": ("is_superuser", True)}[change]
            User.objects.filter(pk=alice.pk).update(**{field: value})

    async def scenario():
        communicator, connected, _ = await connect(application, "/ws/threads/t-acme/extraction/?project=acme",
                                                   headers=[(b"cookie", cookie), (b"origin", b"http://testserver")])
        assert connected and (await communicator.receive_json_from(timeout=5))["event"] == "state"
        still_open = await communicator.receive_nothing(timeout=0.6)  # re-checked, still a member
        await database_sync_to_async(lose)()
        if code is None:
            result = await communicator.receive_nothing(timeout=0.6)
        else:
            result = await close_code(communicator)
        await communicator.disconnect()
        return still_open, result

    assert run(scenario()) == (True, True if code is None else code)


def test_a_key_listens_to_its_projects_and_its_users_threads_only(application, thread):
    """A key opens the sockets of threads it could read over HTTP; any other is a thread that does not exist."""
    AgentMemory(llm=None).create_thread(thread_id="t-u2", user_id="u2", agent_id="a1")
    beta = Project.objects.create(slug="beta")
    AgentMemory(project=beta, llm=None).create_thread(thread_id="t-ws", user_id="u1", agent_id="a1")
    u1 = api_key_create(name="u1", user_id="u1", permission="read")[1]
    theirs = api_key_create(name="beta", project=beta)[1]

    async def attempt(path):
        communicator, connected, code = await connect(application, path)
        state = await communicator.receive_json_from(timeout=10) if connected else None
        await communicator.disconnect()
        return code if not connected else (state["thread_id"], state["watermark"])

    assert run(attempt(f"{PATH}?api_key={u1}")) == ("t-ws", 0)  # u1's thread, any permission may listen
    assert run(attempt(f"/ws/threads/t-u2/extraction/?api_key={u1}")) == 4404  # another user's: none
    assert run(attempt(f"{PATH}?api_key={theirs}")) == ("t-ws", 0)  # beta's own t-ws
    assert run(attempt(f"/ws/threads/t-u2/extraction/?api_key={theirs}")) == 4404
    assert run(attempt(f"{PATH}?api_key={theirs}&project=default")) == 4403  # a key cannot name another project


# --- events -------------------------------------------------------------------------------------------


async def events_until(communicator, last: str, timeout: float = 60) -> list[dict]:
    events = []
    while not events or events[-1]["event"] != last:
        events.append(await communicator.receive_json_from(timeout=timeout))
    return events


def test_events_stream_while_background_extraction_runs(application, api_key, extraction_worker):
    llm = ScriptedLlm([{"memories": [
        {"memory_type": "preference", "content": "Ann loves green tea.", "source_message_ids": ["m1"]},
        {"memory_type": "guideline", "content": "Answer Ann in French.", "source_message_ids": ["m2"]},
    ]}])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-ws", user_id="u1", agent_id="a1",
                                                memory_extraction_config=BACKGROUND)

    async def scenario():
        communicator, connected, _ = await connect(application, f"{PATH}?api_key={api_key}")
        assert connected
        assert (await communicator.receive_json_from(timeout=10))["event"] == "state"
        ids = await thread.add_messages_async([{"role": "user", "content": "I love green tea."},
                                               {"role": "user", "content": "Answer me in French."}])
        events = await events_until(communicator, "finished")
        await communicator.disconnect()
        return ids, events

    ids, events = run(scenario())
    names = [e["event"] for e in events]
    assert names == ["queued", "started", "progress", "memory_created", "memory_created", "finished"]
    assert {e["job_id"] for e in events} == {events[0]["job_id"]}
    assert (events[0]["from_seq"], events[0]["to_seq"]) == (1, 2)
    created = {e["memory_type"]: e for e in events if e["event"] == "memory_created"}
    assert created["preference"]["source_message_ids"] == [ids[0]]
    assert created["guideline"]["decision"] == "new"
    finished = events[-1]
    assert finished["memories_created"] == 2 and finished["watermark"] == 2 and finished["seconds"] > 0
    assert (finished["duplicates_skipped"], finished["rejected_candidates"], finished["llm_calls"]) == (0, 0, 1)
    assert "content" not in created["preference"]  # ids and counts only


def test_a_failed_extraction_is_reported(application, api_key, extraction_worker):
    llm = ScriptedLlm([LlmInvalidOutput("bad", raw="x", errors=["e"], attempts=3)])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-ws", user_id="u1", agent_id="a1",
                                                memory_extraction_config=BACKGROUND)

    async def scenario():
        communicator, _, _ = await connect(application, f"{PATH}?api_key={api_key}")
        await communicator.receive_json_from(timeout=10)
        await thread.add_messages_async([{"role": "user", "content": "hello"}])
        events = await events_until(communicator, "failed")
        await communicator.disconnect()
        return events

    events = run(scenario())
    assert [e["event"] for e in events] == ["queued", "started", "progress", "failed"]
    assert "LlmInvalidOutput" in events[-1]["reason"]


def test_inline_extraction_streams_the_same_events(application, api_key):
    llm = ScriptedLlm([{"memories": [
        {"memory_type": "fact", "content": "Ann lives in Lisbon.", "source_message_ids": ["m1"]}]}])
    thread = AgentMemory(llm=llm).create_thread(
        thread_id="t-ws", user_id="u1", agent_id="a1",
        memory_extraction_config=MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False))

    async def scenario():
        communicator, _, _ = await connect(application, f"{PATH}?api_key={api_key}")
        await communicator.receive_json_from(timeout=10)
        await thread.add_messages_async([{"role": "user", "content": "I live in Lisbon."}])
        events = await events_until(communicator, "finished", timeout=10)
        await communicator.disconnect()
        return events

    assert [e["event"] for e in run(scenario())] == ["queued", "started", "progress", "memory_created", "finished"]


def test_a_repair_by_the_sweep_is_streamed_and_the_state_shows_the_stall(application, api_key):
    from channels.db import database_sync_to_async

    from memory.extraction.recovery import sweep
    from memory.models import ExtractionJob

    thread = AgentMemory(llm=ScriptedLlm([])).create_thread(thread_id="t-ws", user_id="u1", agent_id="a1",
                                                            memory_extraction_config=BACKGROUND)
    thread.add_messages([{"role": "user", "content": "I love green tea."}])
    ExtractionJob.objects.update(from_seq=3)  # a queue that cannot advance (watermark 0)

    async def scenario():
        communicator, _, _ = await connect(application, f"{PATH}?api_key={api_key}")
        state = await communicator.receive_json_from(timeout=10)
        counts = await database_sync_to_async(sweep)(boot=True)
        event = await communicator.receive_json_from(timeout=10)
        await communicator.disconnect()
        return state, counts, event

    state, counts, event = run(scenario())
    assert state["event"] == "state" and state["stalled"]["reason"] == "blocked"
    assert state["broker"] == {"kind": "in-process", "ok": True, "error": None}
    assert counts["repaired"] == 1
    assert event["event"] == "repaired" and (event["was_from_seq"], event["from_seq"], event["to_seq"]) == (3, 1, 1)


def test_group_names_are_safe_for_any_thread_id():
    from memory.core.progress import group_name

    assert group_name("t-ws") == "thread.t-ws"
    odd = group_name("a thread/with spaces?" * 10)
    assert odd.startswith("thread.x.") and len(odd) < 100
    assert odd.replace("thread.x.", "").isalnum()


@pytest.mark.parametrize("restricted, after, code", [(True, "recreated for u2", 4404), (False, "deleted", 4404),
                                                     (True, "kept", None), (False, "recreated for u2", None)])
def test_a_key_socket_closes_once_its_thread_is_gone_or_now_another_users(application, thread, settings,
                                                                           restricted, after, code):
    """Found by a security review: a socket of a key fixed to u1 stayed open after its thread was deleted and
    made again under the same id for u2, where it would have relayed u2's extraction events. Every
    ``OAM_WS_KEY_RECHECK_SECONDS`` the socket checks the thread too: gone, or one the key may not see, is 4404;
    an unrestricted key may see the new thread, so it stays."""
    settings.OAM_WS_KEY_RECHECK_SECONDS = 0.2
    raw = api_key_create(name="k", user_id="u1" if restricted else None, permission="read")[1]

    def change():
        client = AgentMemory(llm=None)
        if after != "kept":
            client.delete_thread("t-ws")
        if after == "recreated for u2":
            client.create_thread(thread_id="t-ws", user_id="u2", agent_id="a1")

    async def scenario():
        communicator, connected, _ = await connect(application, headers=[(b"authorization", f"Bearer {raw}".encode())])
        assert connected and (await communicator.receive_json_from(timeout=5))["event"] == "state"
        still_open = await communicator.receive_nothing(timeout=0.6)  # re-checked: the thread is there
        await database_sync_to_async(change)()
        result = await communicator.receive_nothing(timeout=0.8) if code is None else await close_code(communicator)
        await communicator.disconnect()
        return still_open, result

    assert run(scenario()) == (True, True if code is None else code)
