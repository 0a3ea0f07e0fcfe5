"""Search scoping as the SDK (``oracleagentmemory`` 26.8.0) does it.

Checked against the SDK's own code (``OracleAgentMemory._prepare_scope``,
``_validate_search_scope``, ``_default_search_scope``, ``_resolve_scope_exact``;
``OracleThread._prepare_scope``, ``_default_search_scope``):

* ``SearchScope()`` leaves every field unset (``NOTSET``), exact flags included.
* A thread's search fills every unset field from the thread, a prebuilt
  ``scope`` too: its user with ``exact_user_match=True``, its agent with
  ``exact_agent_match=True``, this thread with ``exact_thread_match=False``.
* A client search needs an explicit user scope (``user_id=...``, ``None`` for
  records with no user, or a ``scope`` with one) and refuses
  ``exact_user_match=False``: "OracleAgentMemory client searches require
  explicit user scoping" / "... require exact user scoping". An omitted agent
  or thread is unconstrained; a given agent is matched exactly unless
  ``exact_agent_match=False``; a given thread is not (``exact_thread_match``
  defaults to False) unless ``exact_thread_match=True``.
* ``max_results`` above 1,000 is refused (``_MAX_SEARCH_RESULTS``).

On today's main each of these searched every user's records.
"""

import pytest

from memory.client import AgentMemory
from memory.core.types import NOTSET, SearchScope

PET = "keeps a pet iguana named Ziggy"


@pytest.fixture
def people(db):
    """Users u1 (agents a1, a2; threads t1, t1b) and u2, and a memory with no user, all about an iguana."""
    client = AgentMemory(llm=None)
    t1 = client.create_thread(thread_id="t1", user_id="u1", agent_id="a1")
    t1b = client.create_thread(thread_id="t1b", user_id="u1", agent_id="a2")
    t2 = client.create_thread(thread_id="t2", user_id="u2", agent_id="a1")
    t1.add_memory(f"u1 {PET} (t1)", memory_id="m-t1")
    t1b.add_memory(f"u1 {PET} (t1b)", memory_id="m-t1b")
    t2.add_memory(f"u2 {PET} (t2)", memory_id="m-t2")
    t1.add_memory(f"nobody {PET}", memory_id="m-none", user_id=None, thread_id=None)
    return client


def ids(results) -> set[str]:
    return {r.record_id for r in results}


def search(target, **arguments):
    return ids(target.search("pet iguana Ziggy", max_results=20, record_types=["memory"], **arguments))


def test_search_scope_leaves_every_field_unset():
    scope = SearchScope()
    assert all(getattr(scope, f) is NOTSET for f in ("user_id", "agent_id", "thread_id", "exact_user_match",
                                                       "exact_agent_match", "exact_thread_match"))


def test_a_client_search_needs_an_explicit_user(people):
    with pytest.raises(ValueError, match="client searches require explicit user scoping"):
        people.search("iguana")
    with pytest.raises(ValueError, match="client searches require explicit user scoping"):
        people.search("iguana", scope=SearchScope(agent_id="a1"))
    with pytest.raises(ValueError, match="client searches require exact user scoping"):
        people.search("iguana", user_id="u1", exact_user_match=False)
    with pytest.raises(ValueError, match="client searches require exact user scoping"):
        people.search("iguana", scope=SearchScope(user_id="u1", exact_user_match=False))


def test_a_client_search_is_one_users_across_agents_and_threads(people):
    assert search(people, user_id="u1") == {"m-t1", "m-t1b"}
    assert search(people, user_id="u2") == {"m-t2"}
    assert search(people, user_id=None) == {"m-none"}
    assert search(people, scope=SearchScope(user_id="u1")) == {"m-t1", "m-t1b"}
    assert search(people, user_id="u1", agent_id="a2") == {"m-t1b"}
    assert search(people, user_id="u1", agent_id="a2", exact_agent_match=False) == {"m-t1", "m-t1b"}
    # a given thread is not matched unless asked: the client default is exact_thread_match=False
    assert search(people, user_id="u1", thread_id="t1") == {"m-t1", "m-t1b"}
    assert search(people, user_id="u1", thread_id="t1", exact_thread_match=True) == {"m-t1"}


def test_a_thread_search_fills_a_prebuilt_scope_from_the_thread(people):
    t1 = people.get_thread("t1")
    assert search(t1) == {"m-t1"}  # its user u1 and agent a1, any thread of them
    assert search(t1, scope=SearchScope()) == {"m-t1"}  # was: every user's records
    assert search(t1, scope=SearchScope(exact_agent_match=False)) == {"m-t1", "m-t1b"}
    assert search(t1, scope=SearchScope(exact_thread_match=True)) == {"m-t1"}
    assert search(t1, scope=SearchScope(user_id="u2", agent_id="a1")) == {"m-t2"}  # an explicit override
    assert search(t1, user_id="u2") == {"m-t2"}
    with pytest.raises(ValueError, match="scope"):
        t1.search("iguana", scope=SearchScope(), user_id="u1")


def test_max_results_above_the_sdk_bound_is_refused(people):
    with pytest.raises(ValueError, match="max_results"):
        people.search("iguana", user_id="u1", max_results=1001)
    with pytest.raises(ValueError, match="max_results"):
        people.get_thread("t1").search("iguana", max_results=10**9)
    assert people.get_thread("t1").search("iguana", max_results=1000)


def test_a_user_restricted_client_searches_its_user_without_naming_it(people):
    """"A user-restricted key never needs to pass user_id" (found missing by a security review:
    the SDK's rule was checked before the restriction filled the user in). The rule still holds for others."""
    from memory.core.errors import OutOfScope
    from memory.records.tenancy import Tenant

    def restricted(**fixed):
        return AgentMemory(tenant=Tenant(project=people.project, **fixed), llm=None)

    u1 = restricted(user_id="u1")
    assert search(u1) == {"m-t1", "m-t1b"} == search(u1, scope=SearchScope())
    assert search(u1, agent_id="a2") == {"m-t1b"} == search(u1, scope=SearchScope(agent_id="a2"))
    assert search(u1, user_id="u1") == {"m-t1", "m-t1b"}
    assert search(restricted(user_id="u1", agent_id="a2")) == {"m-t1b"}
    with pytest.raises(OutOfScope, match="user_id"):
        u1.search("iguana", user_id="u2")
    with pytest.raises(ValueError, match="client searches require exact user scoping"):
        u1.search("iguana", exact_user_match=False)
    with pytest.raises(ValueError, match="scope"):
        u1.search("iguana", scope=SearchScope(), agent_id="a1")
    agent_only = restricted(agent_id="a1")  # restricted to an agent, not a user: the SDK's rule applies
    with pytest.raises(ValueError, match="client searches require explicit user scoping"):
        agent_only.search("iguana")
    assert search(agent_only, user_id="u1") == {"m-t1"}
