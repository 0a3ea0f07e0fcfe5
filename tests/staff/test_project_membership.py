"""Staff by project: superusers see everything; other staff only their projects.

The staff side of ``tests/api/test_cross_tenant.py``. Project ``hidden-zq`` holds a
filled thread; ``staffer`` (``staff_user``) is a member of the default project
only, ``keeper`` a member of ``hidden-zq``, ``root`` a superuser. Every staff
URL pattern that names a project is read from ``staff.urls`` (a page added
later fails here until the ids of its path are known), requested by
``staffer`` (404: as if the project did not exist), then by ``keeper`` (not
404: the request is a real one), each ``keeper`` request rolled back. The
same for the admin (every ``ModelAdmin`` of a table with a project), the
project list, the default-project redirects and the staff WebSocket.
"""

from __future__ import annotations

import asyncio
import re
from io import StringIO

import pytest
from channels.testing import WebsocketCommunicator
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, reverse

from memory.admin import ProjectScopedAdmin
from memory.client import AgentMemory
from memory.core.errors import NotFound
from memory.core.ids import stored_id
from memory.models import ExtractionJob, Project, Thread, ThreadSummary
from memory.records.tenancy import get_project, staff_project, staff_projects
from staff import urls as staff_urls
from tests import image_samples as samples

HIDDEN = "hidden-zq"
MARK = "zqmarkhidden"
#: The ids of the hidden project's records, by the name of the path parameter that carries them.
HIDDEN_IDS = {"project": HIDDEN, "thread_id": "t-hidden", "message_id": "hm1", "memory_id": "hk1",
              "image_id": "himg", "relation_id": "hr1"}


@pytest.fixture
def hidden(db):
    """Project ``hidden-zq`` with a thread of a message, three memories (one derived from another, one edited: its
    old content's kept vectors), a relation, a standalone image, a summary, an extraction job and a logged context
    card; an erasure receipt, a user profile, an API key and access records (one with no project)."""
    from threads.audit import record_access
    from threads.auth import api_key_create

    project = Project.objects.create(slug=HIDDEN, name=f"Hidden {MARK}")
    client = AgentMemory(project=project, llm=None)
    thread = client.create_thread(thread_id="t-hidden", user_id="hu1", agent_id="ha1", metadata={"s": MARK})
    thread.add_messages([{"role": "user", "content": f"secret {MARK}", "id": "hm1"}])
    thread.add_memory(f"likes {MARK}", memory_id="hk1", memory_type="fact")
    thread.add_memory(f"hates {MARK}", memory_id="hk2", memory_type="fact")
    thread.link_records("hk2", "fact", "hk1", "fact", "contradicts", relation_id="hr1")
    thread.update_memory("hk2", content=f"hated {MARK}")  # kept vectors of the old content (issue #32)
    thread.add_memory(f"derived {MARK}", memory_id="hk3", derived_from=["hk1"])  # a derived_from edge (issue #32)
    thread.add_image(samples.png(), description=f"photo {MARK}", image_id="himg")
    ThreadSummary.objects.create(thread=thread.row, project=project, content=f"Talks about {MARK}", through_seq=1)
    ExtractionJob.objects.create(thread=thread.row, project=project, from_seq=1, to_seq=1, status="done")
    thread.get_context_card()  # a logged card (issue #32: the card log)
    client.erase_user("someone-gone")
    client.add_user("hu1", f"profile {MARK}")  # a profile row (memory.services.profiles)
    api_key_create(name=f"key {MARK}", project=project)
    record_access(channel="api", method="POST", route=f"/api/{MARK}", status=201, project=project)
    record_access(channel="api", method="GET", route=f"/api/{MARK}", status=401)  # no project: superusers only
    return project


def login(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def make_user(name: str, *projects: Project, superuser: bool = False, admin_rights: bool = False):
    """A staff user, member of ``projects``; ``admin_rights``: every permission on the memory and threads tables,
    so that what the admin hides is hidden by project, not by a missing permission."""
    users = get_user_model()
    user = (users.objects.create_superuser(name, f"{name}@example.com", "pw-for-tests-only") if superuser else
            users.objects.create_user(name, password="pw-for-tests-only", is_staff=True))
    for project in projects:
        project.members.add(user)
    if admin_rights:
        user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=("memory", "threads")))
    return user


@pytest.fixture
def keeper(hidden):
    return make_user("keeper", hidden, admin_rights=True)


@pytest.fixture
def root(db):
    return make_user("root", superuser=True)


# --- the staff pages ------------------------------------------------------------------------------


def project_patterns() -> list[URLPattern]:
    """Every staff URL pattern whose path names a project."""
    found = [p for p in staff_urls.urlpatterns if "project" in p.pattern.converters]
    assert len(found) >= 20  # thread list, thread page and its regions, record forms, card, search, quality ...
    assert {"quality", "thread_quality"} <= {p.name for p in found}
    return found


def hidden_url(pattern: URLPattern) -> str:
    names = list(pattern.pattern.converters)
    unknown = set(names) - set(HIDDEN_IDS)
    assert not unknown, f"staff:{pattern.name} has path parameters {unknown} this test has no ids for: add them"
    return reverse(f"staff:{pattern.name}", kwargs={n: HIDDEN_IDS[n] for n in names})


def test_every_staff_page_of_another_project_is_a_404_for_a_non_member(staff_user, hidden, keeper):
    outsider, member = login(staff_user), login(keeper)
    for pattern in project_patterns():
        url = hidden_url(pattern)
        refused = []
        for method in ("get", "post"):
            response = getattr(outsider, method)(url)
            assert response.status_code in (404, 405), (method, url, response.status_code)
            assert MARK.encode() not in response.content
            if response.status_code == 404:
                refused.append(method)
        assert refused, f"{url}: neither GET nor POST reached the project check"
        for method in refused:  # the same request by a member is a real one: it gets past the check
            with transaction.atomic():
                response = getattr(member, method)(url)
                transaction.set_rollback(True)
            assert response.status_code != 404, (method, url)
    assert Thread.objects.filter(project=hidden).count() == 1


def test_a_project_that_does_not_exist_and_one_not_mine_look_alike(staff_user, hidden):
    outsider = login(staff_user)
    for slug in (HIDDEN, "no-such-project"):
        for path in ("threads/", "search/?query=secret", "threads/t-hidden/context-card/?preview=1", "quality/",
                     "threads/t-hidden/quality/"):
            response = outsider.get(f"/staff/projects/{slug}/{path}")
            assert response.status_code == 404 and MARK.encode() not in response.content


def test_the_project_list_shows_member_projects_only(staff_user, hidden, keeper, root):
    get_project(None)
    mine = login(staff_user).get("/staff/projects/").content.decode()
    assert 'data-project="default"' in mine and HIDDEN not in mine
    theirs = login(keeper).get("/staff/projects/").content.decode()
    assert f'data-project="{HIDDEN}"' in theirs and 'data-project="default"' not in theirs
    everything = login(root).get("/staff/projects/").content.decode()
    assert f'data-project="{HIDDEN}"' in everything and 'data-project="default"' in everything


def test_the_default_addresses_lead_a_non_member_to_the_project_list(keeper):
    browser = login(keeper)
    for path in ("/staff/", "/staff/threads/", "/staff/search/"):
        assert browser.get(path).url.startswith("/staff/projects/"), path
        assert "/default/" not in browser.get(path).url


def test_a_superuser_sees_every_project_without_membership(hidden, root):
    browser = login(root)
    for url in (f"/staff/projects/{HIDDEN}/threads/", f"/staff/projects/{HIDDEN}/threads/t-hidden/",
                f"/staff/projects/{HIDDEN}/search/?query=secret",
                f"/staff/projects/{HIDDEN}/threads/t-hidden/context-card/?preview=1",
                f"/staff/projects/{HIDDEN}/quality/", f"/staff/projects/{HIDDEN}/threads/t-hidden/quality/?days=1"):
        response = browser.get(url)
        assert response.status_code == 200, url


def test_staff_projects_is_the_one_rule(staff_user, hidden, keeper, root):
    assert list(staff_projects(staff_user)) == [get_project(None)]
    assert list(staff_projects(keeper)) == [hidden]
    assert set(staff_projects(root)) == {hidden, get_project(None)}
    keeper.is_active = False
    assert list(staff_projects(keeper)) == []
    keeper.is_active, keeper.is_staff = True, False
    assert list(staff_projects(keeper)) == []  # membership alone is not enough: staff only
    with pytest.raises(NotFound):
        staff_project(staff_user, HIDDEN)
    with pytest.raises(NotFound):
        staff_project(staff_user, "no-such-project")
    assert staff_project(root, HIDDEN) == hidden


# --- the admin ------------------------------------------------------------------------------------


def scoped_admins():
    """(model, its ModelAdmin) for every admin of a table that belongs to a project, and of projects."""
    found = []
    for model, model_admin in admin.site._registry.items():
        fields = {f.name: f for f in model._meta.get_fields()}
        if model is Project or getattr(fields.get("project"), "related_model", None) is Project:
            found.append((model, model_admin))
    return found


def test_every_admin_of_project_rows_is_scoped_by_project():
    admins = scoped_admins()
    assert {m.__name__ for m, _ in admins} >= {"Project", "Thread", "Message", "Memory", "Image", "RecordLink",
                                               "SearchChunk", "ThreadSummary", "ExtractionJob", "ErasureReceipt",
                                               "ApiKey", "AccessRecord"}
    for model, model_admin in admins:
        assert isinstance(model_admin, ProjectScopedAdmin), f"{model.__name__}'s admin is not project-scoped"


def hidden_rows(model, hidden):
    rows = model.objects.filter(pk=hidden.pk) if model is Project else model.objects.filter(project=hidden)
    return list(rows)


def test_the_admin_hides_other_projects_rows_from_staff_who_are_not_members(db, hidden, keeper):
    outsider = login(make_user("outsider", get_project(None), admin_rights=True))
    member = login(keeper)
    for model, _ in scoped_admins():
        opts = model._meta
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        page = outsider.get(changelist)
        assert page.status_code == 200, changelist
        assert MARK.encode() not in page.content and HIDDEN.encode() not in page.content, changelist
        rows = hidden_rows(model, hidden)
        assert rows, opts.model_name
        assert HIDDEN.encode() in member.get(changelist).content or model is Project
        for row in rows[:2]:
            change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(row.pk)])
            gone = outsider.get(change)
            assert gone.status_code == 302 and gone.url == reverse("admin:index"), change  # "doesn't exist"
            assert member.get(change).status_code == 200, change
    # a bulk delete naming another project's rows deletes nothing
    thread_pk = stored_id(hidden.pk, "t-hidden")
    outsider.post(reverse("admin:memory_thread_changelist"),
                  {"action": "delete_selected", "_selected_action": [thread_pk], "post": "yes"})
    assert Thread.objects.filter(pk=thread_pk).exists()


def test_admin_forms_offer_member_projects_only(db, hidden, keeper):
    get_project(None)
    Project.objects.create(slug="third-zq").members.add(keeper)  # the project filter shows from two choices on
    member = login(keeper)
    for name in ("admin:memory_thread_add", "admin:threads_apikey_add"):
        form = member.get(reverse(name)).content.decode()
        assert f">{HIDDEN}</option>" in form and ">default</option>" not in form, name
    refused = member.post(reverse("admin:threads_apikey_add"),
                          {"name": "k", "project": get_project(None).pk, "permission": "read"})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    changelist = member.get(reverse("admin:memory_thread_changelist")).content.decode()
    filtered = set(re.findall(r"project__id__exact=(\d+)\b", changelist))  # on PostgreSQL a pk may be 1 and 100
    assert str(hidden.pk) in filtered
    assert str(get_project(None).pk) not in filtered  # the filter lists member projects only


def test_only_superusers_add_projects_and_edit_members(db, hidden, keeper, root):
    member = login(keeper)
    intruder = make_user("intruder", admin_rights=True)
    change = reverse("admin:memory_project_change", args=[hidden.pk])
    page = member.get(change).content.decode()
    assert 'name="members"' not in page and 'name="name"' in page
    response = member.post(change, {"name": "renamed", "members": [keeper.pk, intruder.pk]})
    assert response.status_code == 302
    hidden.refresh_from_db()
    assert hidden.name == "renamed" and list(hidden.members.all()) == [keeper]
    assert member.get(reverse("admin:memory_project_add")).status_code == 403
    superuser = login(root)
    assert 'name="members"' in superuser.get(change).content.decode()
    response = superuser.post(change, {"name": "renamed", "members": [keeper.pk, intruder.pk]})
    assert response.status_code == 302 and set(hidden.members.all()) == {keeper, intruder}


def test_a_superuser_admin_sees_every_projects_rows(hidden, root):
    browser = login(root)
    for model, _ in scoped_admins():
        opts = model._meta
        for row in hidden_rows(model, hidden)[:1]:
            change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[quote(row.pk)])
            assert browser.get(change).status_code == 200, change


# --- the staff WebSocket --------------------------------------------------------------------------


def session_cookie(user) -> bytes:
    return f"sessionid={login(user).cookies['sessionid'].value}".encode()


@pytest.mark.django_db(transaction=True)
def test_the_staff_websocket_refuses_a_non_member_as_if_there_were_no_such_project(hidden):
    from oam_site.asgi import application

    outsider = make_user("outsider", get_project(None))
    member = make_user("keeper", hidden)
    root = make_user("root", superuser=True)

    cookies = {user: session_cookie(user) for user in (outsider, member, root)}

    async def attempt(user, project):
        path = f"/ws/threads/t-hidden/extraction/?project={project}"
        communicator = WebsocketCommunicator(application, path, headers=[(b"cookie", cookies[user]),
                                                                         (b"origin", b"http://testserver")])
        await communicator.connect(timeout=10)
        first = await communicator.receive_output(timeout=5)
        await communicator.disconnect()
        return first.get("code") if first["type"] == "websocket.close" else "open"

    async def attempts():
        return [await attempt(user, project) for user, project in (
            (outsider, HIDDEN), (outsider, "no-such-project"), (member, HIDDEN), (root, HIDDEN))]

    assert asyncio.run(attempts()) == [4404, 4404, "open", "open"]


# --- manage.py add_project_member ----------------------------------------------------------------------


def test_add_project_member_grants_and_removes(hidden, staff_user):
    out = StringIO()
    call_command("add_project_member", HIDDEN, "staffer", stdout=out, stderr=StringIO())
    assert out.getvalue().strip() == f"staffer is a member of {HIDDEN}"
    assert hidden in staff_projects(staff_user)
    out = StringIO()
    call_command("add_project_member", HIDDEN, "staffer", "--remove", stdout=out, stderr=StringIO())
    assert out.getvalue().strip() == f"staffer is not a member of {HIDDEN}"
    assert hidden not in staff_projects(staff_user)
    for args in ([HIDDEN, "nobody"], ["no-such-project", "staffer"]):
        with pytest.raises(CommandError):
            call_command("add_project_member", *args, stdout=StringIO(), stderr=StringIO())
    get_user_model().objects.create_user("plain", password="x")
    err = StringIO()
    call_command("add_project_member", HIDDEN, "plain", stdout=StringIO(), stderr=err)
    assert "not active staff" in err.getvalue()
