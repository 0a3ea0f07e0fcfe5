"""Staff pages by project: a project's threads, records and search, under ``/staff/projects/<slug>/``."""

from memory.client import AgentMemory
from memory.models import Project


def two_projects(member):
    """Threads ``c4`` in projects ``acme`` and ``beta``, each with a message naming its project; ``member`` (a
    staff user) may see both (``Project.members``)."""
    for slug in ("acme", "beta"):
        project = Project.objects.create(slug=slug)
        project.members.add(member)
        client = AgentMemory(project=project, llm=None)
        thread = client.create_thread(thread_id="c4", user_id="u1", agent_id="a1")
        thread.add_messages([{"role": "user", "content": f"Ramen order for {slug}", "id": "m1"}])
        thread.add_memory(f"Likes {slug} ramen", memory_id="k1")


def test_each_project_lists_and_shows_its_own_threads(staff, staff_user):
    two_projects(staff_user)
    for slug, other in (("acme", "beta"), ("beta", "acme")):
        listing = staff.get(f"/staff/projects/{slug}/threads/").content.decode()
        assert f'<a href="/staff/projects/{slug}/threads/c4/">c4</a>' in listing
        assert f"/staff/projects/{other}/threads/c4/" not in listing
        page = staff.get(f"/staff/projects/{slug}/threads/c4/").content.decode()
        assert f"Ramen order for {slug}" in page and f"Likes {slug} ramen" in page
        assert f"Ramen order for {other}" not in page and f"Likes {other} ramen" not in page
        assert f'action="/staff/projects/{slug}/threads/c4/memories/k1/edit/"' in page
        found = staff.get(f"/staff/projects/{slug}/search/", {"query": "ramen", "user_id": "u1"}).content.decode()
        assert f"Likes {slug} ramen" in found and f"Likes {other} ramen" not in found


def test_edits_reach_the_record_of_the_project_in_the_url(staff, staff_user):
    two_projects(staff_user)
    response = staff.post("/staff/projects/beta/threads/c4/memories/k1/edit/", {
        "content": "Likes beta udon", "memory_type": "memory", "status": "valid", "metadata": "", "timestamp": "",
        "ttl_days": "", "ttl_anchor": ""})
    assert response.status_code == 302
    assert AgentMemory(project="beta").get_thread("c4").get_memory("k1").content == "Likes beta udon"
    assert AgentMemory(project="acme").get_thread("c4").get_memory("k1").content == "Likes acme ramen"


def test_old_addresses_lead_to_the_default_project_and_unknown_projects_are_404(staff, thread):
    assert staff.get("/staff/").url == "/staff/projects/default/threads/"
    assert staff.get("/staff/threads/", {"q": "main"}).url == "/staff/projects/default/threads/?q=main"
    assert staff.get("/staff/search/", {"query": "x"}).url == "/staff/projects/default/search/?query=x"
    assert staff.get("/staff/projects/nope/threads/").status_code == 404
    assert staff.get("/staff/projects/nope/threads/t-main/").status_code == 404
    assert staff.get("/staff/projects/default/threads/t-main/").status_code == 200


def test_logging_in_leads_to_the_default_projects_threads(staff_user):
    from django.test import Client

    browser = Client()
    response = browser.post("/staff/login/", {"username": "staffer", "password": "pw-for-tests-only"}, follow=True)
    assert response.redirect_chain[-1][0] == "/staff/projects/default/threads/" and response.status_code == 200
