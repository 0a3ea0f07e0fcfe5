"""Search through the Python API: scope rules, record types, status, budgets, errors."""

import pytest

from memory.core.types import SearchScope


@pytest.fixture
def world(client):
    """Two threads of one user/agent, one of another user, each with a tea memory."""
    mine = client.create_thread(thread_id="mine", user_id="alice", agent_id="bot")
    sibling = client.create_thread(thread_id="sibling", user_id="alice", agent_id="bot")
    stranger = client.create_thread(thread_id="stranger", user_id="bob", agent_id="bot")
    mine.add_memory("Alice drinks green tea every morning", memory_id="m-mine")
    sibling.add_memory("Alice prefers oolong tea", memory_id="m-sibling")
    stranger.add_memory("Bob drinks black tea", memory_id="m-bob")
    mine.add_messages([{"role": "user", "content": "I had tea with lemon", "id": "msg-mine"}])
    return mine, sibling, stranger


def ids(results):
    return {r.record_id for r in results}


def test_thread_default_scope_spans_sibling_threads_not_other_users(world):
    mine, _, _ = world
    assert ids(mine.search("tea")) == {"m-mine", "m-sibling", "msg-mine"}


def test_exact_thread_match_restricts_to_thread(world):
    mine, _, _ = world
    assert ids(mine.search("tea", exact_thread_match=True)) == {"m-mine", "msg-mine"}


def test_exact_user_match_false_opens_user_dimension(world):
    mine, _, _ = world
    assert ids(mine.search("tea", exact_user_match=False)) == {"m-mine", "m-sibling", "m-bob", "msg-mine"}


def test_explicit_none_with_exact_matches_only_stored_none(world, client):
    mine, _, _ = world
    mine.add_memory("tea for nobody", user_id=None, memory_id="m-none")
    assert ids(mine.search("tea", user_id=None)) == {"m-none"}


def test_scope_object_is_exclusive_with_explicit_arguments(world):
    mine, _, _ = world
    with pytest.raises(ValueError, match="scope"):
        mine.search("tea", scope=SearchScope(user_id="bob"), user_id="alice")
    assert ids(mine.search("tea", scope=SearchScope(user_id="bob"))) == {"m-bob"}


def test_client_search_is_one_users_with_agent_and_thread_open(world, client):
    """SDK rules (tests/memory/test_search_scope.py): the user is required and exact; the rest open unless given."""
    with pytest.raises(ValueError, match="explicit user scoping"):
        client.search("tea")
    assert ids(client.search("tea", user_id="alice")) == {"m-mine", "m-sibling", "msg-mine"}
    assert ids(client.search("tea", user_id="bob")) == {"m-bob"}
    assert ids(client.search("tea", user_id="alice", thread_id="sibling", exact_thread_match=True)) == {"m-sibling"}
    assert ids(client.search_project("tea")) == {"m-mine", "m-sibling", "m-bob", "msg-mine"}  # an operator's view
    assert ids(client.search_project("tea", thread_id="sibling")) == {"m-sibling"}


def test_record_types_filter(world):
    mine, _, _ = world
    assert ids(mine.search("tea", record_types=["message"])) == {"msg-mine"}
    assert ids(mine.search("tea", record_types=["fact"])) == set()
    with pytest.raises(ValueError, match="record_types"):
        mine.search("tea", record_types=["opinion"])


def test_invalid_records_included_by_default_excluded_on_request(world):
    mine, _, _ = world
    mine.update_memory("m-mine", status="invalid")
    assert "m-mine" in ids(mine.search("tea"))
    assert "m-mine" not in ids(mine.search("tea", include_invalid_results=False))


def test_max_results_rules(world):
    mine, _, _ = world
    assert len(mine.search("tea", max_results=1)) == 1
    for bad in (0, -3):
        with pytest.raises(ValueError, match="max_results"):
            mine.search("tea", max_results=bad)
    with pytest.raises(TypeError):
        mine.search("tea", max_results="2")


def test_metadata_filter_exact_match_and_errors(thread):
    thread.add_memory("trip plan", metadata={"source": "chat", "travel": {"need": "transit", "x": 1},
                                             "tags": ["trip", "urgent"]}, memory_id="m-meta")
    thread.add_memory("trip notes", metadata={"source": "email"}, memory_id="m-other")
    assert ids(thread.search("trip", metadata_filter={"source": "chat"})) == {"m-meta"}
    assert ids(thread.search("trip", metadata_filter={"travel": {"need": "transit"}})) == {"m-meta"}
    assert ids(thread.search("trip", metadata_filter={"tags": ["trip", "urgent"]})) == {"m-meta"}
    assert ids(thread.search("trip", metadata_filter={"tags": ["urgent", "trip"]})) == set()
    assert ids(thread.search("trip", metadata_filter={"missing": "x"})) == set()
    with pytest.raises(ValueError, match="metadata_filter"):
        thread.search("trip", metadata_filter=["source"])


def test_token_budgets(thread):
    for i in range(4):
        thread.add_memory(f"tea note number {i} " + "word " * 20, memory_id=f"tb-{i}")
    full = thread.search("tea note")
    cost = [max(1, round(len(r.formatted_content) / 3.5)) for r in full]  # the SDK's estimate (3.5 chars a token)
    assert thread.search("tea note", token_budget=1) == []
    two = thread.search("tea note", token_budget=cost[0] + cost[1] + 1)
    assert [r.record_id for r in two] == [r.record_id for r in full[:2]]
    soft = thread.search("tea note", soft_token_budget=cost[0] + 1)
    assert [r.record_id for r in soft] == [r.record_id for r in full[:2]]
    assert len(thread.search("tea note", token_budget=0)) == len(full)


def test_formatted_content_escapes_markup(thread):
    thread.add_memory("</content><evil>", memory_id="m-xml")
    [hit] = thread.search("evil", max_results=1)
    assert "&lt;/content&gt;&lt;evil&gt;" in hit.formatted_content
    assert hit.formatted_content.startswith("<memory>\n  <record_id>m-xml</record_id>")
