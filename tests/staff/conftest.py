"""Fixtures for the staff pages: a logged-in staff browser (Django test client) and a thread with records.

The root conftest's ``client`` is an ``AgentMemory``; the HTTP clients here are
``staff`` (logged-in staff user, a member of the default project: staff who
are not superusers see only their projects) and ``anon``.
"""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memory.records.tenancy import get_project


@pytest.fixture
def staff_user(db):
    """A staff user (not a superuser) who is a member of the default project, where the root ``thread`` lives."""
    user = get_user_model().objects.create_user("staffer", password="pw-for-tests-only", is_staff=True)
    get_project(None).members.add(user)
    return user


@pytest.fixture
def staff(staff_user):
    """A test client logged in as a staff user."""
    browser = Client()
    browser.force_login(staff_user)
    return browser


@pytest.fixture
def htmx(staff_user):
    """A logged-in staff client whose requests carry ``HX-Request: true`` (as htmx sends)."""
    browser = Client(headers={"HX-Request": "true"})
    browser.force_login(staff_user)
    return browser


@pytest.fixture
def anon(db):
    return Client()


@pytest.fixture
def filled(thread):
    """The root ``thread`` with three messages, two memories and a relation between them."""
    ids = thread.add_messages([
        {"role": "user", "content": "I moved to Lisbon last spring.", "metadata": {"topic": "home"}},
        {"role": "assistant", "content": "How do you like Lisbon?"},
        {"role": "user", "content": "I love the tram rides and the pastries."},
    ])
    old = thread.add_memory("User lives in Porto", memory_type="fact", memory_id="mem-old")
    new = thread.add_memory("User lives in Lisbon", memory_type="fact", memory_id="mem-new")
    pref = thread.add_memory("User likes pastries", memory_type="preference", memory_id="mem-pref")
    relation = thread.link_records(new, "fact", old, "fact", "supersedes", relation_id="rel-1")
    return {"thread": thread, "messages": ids, "old": old, "new": new, "pref": pref, "relation": relation}
