"""The behaviours an ``oracleagentmemory`` application relies on, on the real engine (SQLite file, real
embedder): SDK arguments accepted, configs resolved field by field, the client-level API, result and record
types, and the SDK's rules on search, metadata, extraction without an LLM and profiles.
(``tests/memory/test_sdk_parity.py`` compares the signatures; these run them.)"""

import asyncio
import warnings

import pytest

from memory.client import (
    AgentMemory,
    FactRecord,
    ImageInputLimitConfig,
    MemoryExtractionConfig,
    MemoryExtractionMode,
    MemoryRecord,
    MemoryRetentionConfig,
    MemorySearchConfig,
    OracleAgentMemory,
    OracleThread,
    PreferenceRecord,
    RecordStatus,
    UserProfileRecord,
)
from memory.llm.scripted import ScriptedLlm
from memory.models import Memory, Message, Profile, Thread
from tests import image_samples as samples
from tests.ids import key


def test_sdk_class_names_are_ours():
    assert OracleAgentMemory is AgentMemory
    assert isinstance(AgentMemory(llm=None), OracleAgentMemory)


def test_constructor_takes_the_sdk_arguments(db):
    retention = MemoryRetentionConfig(default_ttl_days=3)
    client = OracleAgentMemory(connection=object(), embedder="sentence-transformers/all-MiniLM-L6-v2", llm=None,
                               memory_retention_config=retention, extract_memories=False,
                               schema_policy="create_if_necessary", table_name_prefix="X_", search_strategy="vector")
    assert client.retention_config is retention and client.memory_retention_config is retention
    assert client.memory_extraction_config.extract_memories is False
    assert client.search_config.mode == "VECTOR"
    with pytest.raises(TypeError, match="not both"):
        AgentMemory(memory_retention_config=retention, retention_config=retention)
    with pytest.raises(ValueError, match="pruner_llm"):
        AgentMemory(pruner_llm=ScriptedLlm([]))
    with pytest.raises(TypeError):
        AgentMemory(embeder="typo")


def test_create_thread_takes_the_sdk_arguments_and_keeps_them(db):
    client = AgentMemory(llm=None)
    thread = client.create_thread(
        thread_id="t-args", user_id="u", agent_id="a", extract_memories=False,
        search_config=MemorySearchConfig(token_budget=50), context_card_token_limit=2000,
        context_card_type_search_concurrency=2, max_message_token_length=900,
        message_shortening_input_token_limit=800, persist_messages_in_config=False,
        image_input_limit_config=ImageInputLimitConfig(max_raw_image_bytes=5000))
    assert isinstance(thread, OracleThread)
    again = client.get_thread("t-args")
    config = again._to_config()
    assert config["memory_extraction_config"]["extract_memories"] is False
    assert config["search_config"]["token_budget"] == 50 and again.search_config.token_budget == 50
    assert (again.context_card_token_limit, again.context_card_type_search_concurrency) == (2000, 2)
    assert (again.max_message_token_length, again.message_shortening_input_token_limit) == (900, 800)
    assert config["image_input_limit_config"]["max_raw_image_bytes"] == 5000
    assert config["persist_messages_in_config"] is False and "messages" not in config
    with pytest.raises(TypeError, match="context_card_token_limit"):
        client.create_thread(context_card_token_limit="big")
    with pytest.raises(TypeError):
        client.create_thread("positional-id")  # keyword-only, as the SDK


def test_configs_resolve_field_by_field(db):
    client = AgentMemory(llm=ScriptedLlm([]), memory_extraction_config=MemoryExtractionConfig(extract_memories=False))
    thread = client.create_thread(thread_id="t-fields", memory_extraction_config=MemoryExtractionConfig(
        extraction_mode=MemoryExtractionMode.INLINE))
    config = client.get_thread("t-fields").memory_extraction_config
    assert config.extract_memories is False  # the client's, not re-enabled by the thread's config
    assert config.extraction_mode is MemoryExtractionMode.INLINE  # the thread's
    assert thread.memory_extraction_config == config
    assert Thread.objects.get(pk=key("t-fields")).config["extract_memories"] is False


def test_deprecated_inline_parameters_warn_and_cannot_mix_with_the_config(db):
    client = AgentMemory(llm=None)
    with pytest.warns(DeprecationWarning, match="memory_extraction_window"):
        thread = client.create_thread(thread_id="t-inline", memory_extraction_window=4)
    assert thread.memory_extraction_config.memory_extraction_window == 4
    with pytest.raises(ValueError, match="not both"):
        client.create_thread(memory_extraction_config=MemoryExtractionConfig(), memory_extraction_frequency=2)


def test_extraction_asked_for_without_an_llm_is_refused(db):
    client = AgentMemory(llm=None)
    with pytest.raises(ValueError, match="^llm: extract_memories=True needs an LLM"):
        client.create_thread(thread_id="t-nollm", extract_memories=True)
    assert not Thread.objects.filter(pk=key("t-nollm")).exists()
    with pytest.raises(ValueError, match="^llm"):
        AgentMemory(llm=None, extract_memories=True).create_thread()
    assert client.create_thread(thread_id="t-off", extract_memories=False).thread_id == "t-off"
    assert AgentMemory(llm=ScriptedLlm([])).create_thread(
        extract_memories=True).memory_extraction_config.extract_memories


def test_get_thread_settings_apply_to_the_handle_only(db):
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-over", extract_memories=False)
    handle = client.get_thread("t-over", memory_extraction_config=MemoryExtractionConfig(
        memory_extraction_window=7), search_config=MemorySearchConfig(max_results=2), llm=None)
    assert handle.memory_extraction_config.memory_extraction_window == 7
    assert handle.memory_extraction_config.extract_memories is False  # still the stored one
    assert handle.search_config.max_results == 2
    assert client.get_thread("t-over").memory_extraction_config.memory_extraction_window == -1


def test_update_thread_stores_metadata_and_settings(db):
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-upd", metadata={"a": 1}, extract_memories=False)
    updated = client.update_thread("t-upd", {"b": 2}, memory_extraction_config=MemoryExtractionConfig(
        memory_extraction_frequency=5), context_card_token_limit=300)
    again = client.get_thread("t-upd")
    assert updated.metadata == again.metadata == {"b": 2}
    assert again.memory_extraction_config.memory_extraction_frequency == 5
    assert again.memory_extraction_config.extract_memories is False
    assert again.context_card_token_limit == 300
    assert client.update_thread("t-upd", None).metadata == {}
    with pytest.raises(KeyError):
        client.update_thread("missing", {})


@pytest.mark.django_db(transaction=True)
def test_async_twins_of_client_level_methods(db):
    client = AgentMemory(llm=None)
    asyncio.run(client.create_thread_async(thread_id="t-async", user_id="u", agent_id="a"))
    memory_id = asyncio.run(client.add_memory_async("async note", thread_id="t-async"))
    assert [m.id for m in asyncio.run(client.list_memories_async(thread_id="t-async"))] == [memory_id]
    assert asyncio.run(client.update_thread_async("t-async", {"m": 1}, context_card_token_limit=9)).metadata == {"m": 1}
    assert client.get_thread("t-async").context_card_token_limit == 9
    asyncio.run(client.wait_for_memory_extraction_async(timeout=5))


def _seed(client):
    one = client.create_thread(thread_id="t-1", user_id="u1", agent_id="a1", metadata={"team": "x"})
    two = client.create_thread(thread_id="t-2", user_id="u1", agent_id="a2")
    other = client.create_thread(thread_id="t-3", user_id="u2", agent_id="a1")
    one.add_messages([{"role": "user", "content": "hello from one", "metadata": {"k": 1}}])
    two.add_messages([{"role": "user", "content": "hello from two"}])
    other.add_messages([{"role": "user", "content": "hello from three"}])
    return one, two, other


def test_client_level_lists(db):
    client = AgentMemory(llm=None)
    one, two, _other = _seed(client)
    assert [t.thread_id for t in client.list_threads("u1")] == ["t-1", "t-2"]
    assert [t.thread_id for t in client.list_threads("u1", agent_id="a2")] == ["t-2"]
    assert [t.thread_id for t in client.list_threads("u1", metadata_filter={"team": "x"})] == ["t-1"]
    assert client.list_threads(None) == []
    with pytest.raises(TypeError):
        client.list_threads()  # user_id is required, as the SDK
    assert [m.content for m in client.list_messages(user_id="u1")] == ["hello from one", "hello from two"]
    assert [m.content for m in client.list_messages(thread_id="t-3")] == ["hello from three"]
    assert [m.content for m in client.list_messages(metadata_filter={"k": 1})] == ["hello from one"]
    assert len(client.list_messages(limit=1)) == 1
    fact = client.add_memory("likes tea", memory_type="fact", thread_id="t-1")
    note = client.add_memory("general", thread_id="t-2", metadata={"src": "crm"})
    listed = client.list_memories(user_id="u1")
    assert [m.id for m in listed] == [fact, note] and isinstance(listed[0], FactRecord)
    assert [m.id for m in client.list_memories(metadata_filter={"src": "crm"})] == [note]
    assert [m.id for m in client.list_memories(thread_id="t-1")] == [fact]
    image_id = client.add_image(samples.png(), description="a square", thread_id="t-2")
    assert [i.id for i in client.list_images(user_id="u1")] == [image_id]
    [loaded] = client.list_images(image_id=image_id, include_bytes=True)
    assert loaded.bytes == samples.png() and loaded.content == "a square"
    with pytest.raises(ValueError, match="limit"):
        client.list_memories(limit=0)
    with pytest.raises(ValueError, match="include_bytes"):
        client.list_images(include_bytes=True)


def test_client_level_record_methods(db):
    client = AgentMemory(llm=None)
    _seed(client)
    with pytest.raises(ValueError, match="^thread_id: required"):
        client.add_memory("nowhere")
    source = client.add_memory("new plan", thread_id="t-1", memory_type="preference")
    target = client.add_memory("old plan", thread_id="t-1", memory_type="preference")
    assert client.update_memory(source, content="newer plan", metadata={"v": 2}) == source
    assert client.get_thread("t-1").get_memory(source).content == "newer plan"
    relation = client.link_records(source, "preference", target, "preference", "supersedes")
    assert client.update_record_link(relation, metadata={"why": "changed"}) == 1
    assert client.delete_record_link(relation_id=relation) == 1
    assert client.delete_record_link(relation_id=relation) == 0
    image_id = client.add_image(samples.png(), description="first", thread_id="t-1")
    assert client.update_image(image_id, description="second") == image_id
    assert client.delete_image(image_id) == 1 and client.delete_image(image_id) == 0
    assert client.update_record_link("missing", metadata={}) == 0
    with pytest.raises(KeyError):
        client.update_memory("missing", content="x")
    assert client.delete_memory(target) == 1


def test_client_level_methods_stay_within_a_restricted_tenant(db):
    from memory.records.tenancy import Tenant, get_project

    client = AgentMemory(llm=None)
    _seed(client)
    theirs = client.add_memory("u2's note", thread_id="t-3")
    restricted = AgentMemory(llm=None, tenant=Tenant(project=get_project(None), user_id="u1"))
    assert {m.thread_id for m in restricted.list_messages()} == {"t-1", "t-2"}
    assert theirs not in [m.id for m in restricted.list_memories()]
    with pytest.raises(KeyError):
        restricted.update_memory(theirs, content="mine now")
    with pytest.raises(ValueError):
        restricted.list_memories(user_id="u2")
    with pytest.raises(KeyError):
        restricted.add_memory("into their thread", thread_id="t-3")
    assert Memory.objects.get(pk=key(theirs)).content == "u2's note"


def test_typed_records_and_search_results(db):
    client = AgentMemory(llm=None)
    thread = client.create_thread(thread_id="t-typed", user_id="u", agent_id="a")
    pref = thread.add_memory("prefers green tea", memory_type="preference", metadata={"src": "chat"},
                             timestamp="2024-01-02T03:04:05Z")
    record = thread.get_memory(pref)
    assert isinstance(record, PreferenceRecord) and isinstance(record, MemoryRecord)
    assert record.record_type == "preference" and record.linked_results == ()
    [hit] = thread.search("green tea", max_results=1)
    assert (hit.id, hit.metadata, hit.status, hit.timestamp) == (pref, {"src": "chat"}, RecordStatus.VALID,
                                                                 "2024-01-02T03:04:05Z")
    assert hit.linked_results == [] and hit.format_content() == hit.formatted_content
    assert hit.formatted_content.startswith("<preference>\n  <record_id>")


def test_search_refuses_an_empty_query_and_too_many_results(thread):
    for query in ("", "   "):
        with pytest.raises(ValueError, match="^query"):
            thread.search(query)
    with pytest.raises(ValueError, match="max_results"):
        thread.search("tea", max_results=1001)
    with pytest.raises(TypeError):
        thread.search("tea", None, None)  # scope arguments are keyword-only, as the SDK


def test_add_messages_metadata_replaces_the_messages_own(thread):
    [replaced, kept] = thread.add_messages([{"role": "user", "content": "a", "metadata": {"own": 1}},
                                            {"role": "user", "content": "b", "metadata": {"own": 2}}],
                                           metadata=[{"given": True}, None])
    assert Message.objects.get(pk=key(replaced)).metadata == {"given": True}
    assert Message.objects.get(pk=key(kept)).metadata == {"own": 2}
    [shared] = thread.add_messages([{"role": "user", "content": "c", "metadata": {"own": 3}}], metadata={"s": 1})
    assert Message.objects.get(pk=key(shared)).metadata == {"s": 1}


def test_profiles(db):
    client = AgentMemory(llm=None)
    assert client.add_user("u1", "Prefers concise answers.", metadata={"source": "crm"}) == "u1"
    assert client.add_user("u2", "Likes detail.") == "u2"
    assert client.add_agent("a1", "Travel assistant.") == "a1"
    assert client.add_user("u1", "Prefers very concise answers.", metadata={"source": "crm"}) == "u1"  # replaces
    users = client.list_users()
    assert [u.id for u in users] == ["u1", "u2"] and isinstance(users[0], UserProfileRecord)
    assert users[0].content == "Prefers very concise answers." and users[0].record_type == "user_profile"
    assert [u.id for u in client.list_users(metadata_filter={"source": "crm"})] == ["u1"]
    assert [a.id for a in client.list_agents()] == ["a1"]
    with pytest.raises(ValueError, match="information"):
        client.add_user("u3", "   ")
    assert client.delete_user("u2", cascade=False) == 1 and client.delete_user("u2", cascade=False) == 0
    client.create_thread(thread_id="t-u1", user_id="u1", agent_id="a1").add_memory("u1's memory")
    assert client.delete_user("u1") == 1
    assert not Profile.objects.filter(subject_id="u1").exists() and not Memory.objects.exists()
    assert client.delete_agent("a1") == 1 and client.list_agents() == []


def test_profiles_stay_within_a_restricted_tenant(db):
    from memory.records.tenancy import Tenant, get_project

    AgentMemory(llm=None).add_user("u2", "someone else")
    restricted = AgentMemory(llm=None, tenant=Tenant(project=get_project(None), user_id="u1"))
    assert restricted.add_user("u1", "me") == "u1"
    assert [u.id for u in restricted.list_users()] == ["u1"]
    with pytest.raises(ValueError):
        restricted.add_user("u2", "overwritten")
    with pytest.raises(ValueError):
        restricted.add_agent("a9", "not mine to write")
    assert Profile.objects.get(subject_id="u2").information == "someone else"


def test_a_restricted_client_reads_only_the_profiles_of_those_it_shares_a_thread_with(db):
    """Found by a reviewer: a key fixed to agent a2 listed every user's profile ("lives in Rome") though a2
    never had a thread with them. The other kind's profiles are readable only across a shared thread."""
    from memory.records.tenancy import Tenant, get_project
    from memory.services import profiles

    client = AgentMemory(llm=None)
    client.add_user("u1", "lives in Rome")
    client.add_user("u2", "lives in Oslo")
    client.add_agent("a1", "travel agent")
    client.add_agent("a2", "cooking agent")
    client.create_thread(thread_id="t-u2-a2", user_id="u2", agent_id="a2")
    project = get_project(None)
    agent_key = AgentMemory(llm=None, tenant=Tenant(project=project, agent_id="a2"))
    assert [u.id for u in agent_key.list_users()] == ["u2"]
    assert [a.id for a in agent_key.list_agents()] == ["a2"]
    assert profiles.profile_get(tenant=agent_key.tenant, kind="user", subject_id="u2").content == "lives in Oslo"
    with pytest.raises(KeyError):
        profiles.profile_get(tenant=agent_key.tenant, kind="user", subject_id="u1")
    user_key = AgentMemory(llm=None, tenant=Tenant(project=project, user_id="u1"))
    assert user_key.list_agents() == []  # u1 shares no thread with any agent
    client.create_thread(thread_id="t-u1-a1", user_id="u1", agent_id="a1")
    assert [a.id for a in user_key.list_agents()] == ["a1"]
    assert [u.id for u in client.list_users()] == ["u1", "u2"]  # an unrestricted client reads them all


def test_wait_and_close(db):
    client = AgentMemory(llm=None)
    client.create_thread(thread_id="t-close", extract_memories=False).add_messages([{"role": "user", "content": "x"}])
    client.wait_for_memory_extraction(timeout=1)
    with pytest.raises(ValueError, match="timeout"):
        client.wait_for_memory_extraction(timeout=-1)
    client.close()
    client.close(timeout=0)  # idempotent
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.close()
