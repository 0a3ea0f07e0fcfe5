"""``integrations.langgraph.OamStore`` driven by LangGraph itself: a compiled ``StateGraph`` whose nodes get the
store injected (``store: BaseStore``) and write and read memories through it, checked against the OAM tables
(``oam_threads``, ``oam_memories``) and against what the graph reads back.

The nodes run in the test's thread (LangGraph's one-task fast path) or, for ``ainvoke``, in the client's
worker thread: the tests use ``transactional_db`` so that either sees committed rows.
"""

import asyncio
import datetime as dt
from typing import Any, TypedDict

import pytest
from django.utils import timezone
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp

from integrations.langgraph import OamStore, holding_thread_id, labelled_scope, positional_scope
from memory.client import AgentMemory
from memory.models import Memory, MemoryVersion, Project, Thread
from memory.records.tenancy import Tenant
from tests.ids import key

pytestmark = pytest.mark.django_db(transaction=True)


class State(TypedDict, total=False):
    user_id: str
    notes: list[dict[str, Any]]
    question: str
    recalled: list[dict[str, Any]]
    found: Any


def remember(state: State, *, store: BaseStore) -> State:
    """A node writing each note of the state into the user's memories namespace."""
    for note in state.get("notes", []):
        store.put(("users", state["user_id"], "memories"), note["key"], note["value"], **note.get("put", {}))
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    """A node searching the user's memories with the state's question and reading one back by key."""
    items = store.search(("users", state["user_id"]), query=state["question"], limit=2)
    found = store.get(("users", state["user_id"], "memories"), "drink")
    return {"recalled": [{"key": i.key, "value": i.value, "score": i.score} for i in items],
            "found": found.value if found else None}


def memory_graph(store: BaseStore):
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


def one_node_graph(store: BaseStore, node):
    builder = StateGraph(State)
    builder.add_node("act", node)
    builder.add_edge(START, "act")
    builder.add_edge("act", END)
    return builder.compile(store=store)


NOTES = [
    {"key": "drink", "value": {"content": "Prefers espresso coffee in the morning", "kind": "food", "stars": 5}},
    {"key": "home", "value": {"content": "Lives in Lisbon near the river", "kind": "place", "stars": 3}},
    {"key": "pet", "value": {"text": "Has a cat named Miso", "kind": "animal", "tags": ["cat", "pet"]}},
]


@pytest.fixture
def client(transactional_db):
    return AgentMemory(llm=None)


def test_a_graph_writes_memories_to_the_oam_tables_and_reads_them_back(client):
    store = OamStore(client)
    result = memory_graph(store).invoke({"user_id": "u1", "notes": NOTES, "question": "what coffee do they drink?"})

    thread = Thread.objects.get(pk=key(holding_thread_id("u1", None)))
    assert (thread.public_id, thread.user_id, thread.agent_id) == ("langgraph:users:u1", "u1", None)
    rows = {row.metadata["langgraph"]["key"]: row for row in Memory.objects.filter(thread_id=thread.pk)}
    assert sorted(rows) == ["drink", "home", "pet"]
    drink = rows["drink"]
    assert drink.public_id == store.memory_id(("users", "u1", "memories"), "drink")
    assert drink.public_id.startswith("langgraph-") and len(drink.public_id) == 50
    assert (drink.content, drink.memory_type, drink.user_id) == (NOTES[0]["value"]["content"], "memory", "u1")
    assert rows["pet"].content == "Has a cat named Miso"  # the "text" field when there is no "content"
    assert drink.metadata["langgraph"] == {"namespace": ["users", "u1", "memories"],
                                           "path": {"0": "users", "1": "u1", "2": "memories"},
                                           "key": "drink", "value": NOTES[0]["value"], "ttl": None}
    assert drink.expires_at is None

    # what the graph read back: the hybrid search ranks the coffee note first; get returns the value as put
    assert result["recalled"][0]["key"] == "drink" and result["recalled"][0]["score"] > 0
    assert result["recalled"][0]["value"] == NOTES[0]["value"]
    assert len(result["recalled"]) == 2
    assert result["found"] == NOTES[0]["value"]

    # a second run replaces an item in place: same row, new value, created_at kept, updated_at moved
    before = store.get(("users", "u1", "memories"), "drink")
    changed = {"key": "drink", "value": {"content": "Switched to green tea", "kind": "food", "stars": 4}}
    result = memory_graph(store).invoke({"user_id": "u1", "notes": [changed], "question": "green tea"})
    assert result["found"] == changed["value"]
    assert Memory.objects.filter(thread_id=thread.pk).count() == 3
    drink.refresh_from_db()
    assert drink.content == "Switched to green tea" and drink.metadata["langgraph"]["value"] == changed["value"]
    after = store.get(("users", "u1", "memories"), "drink")
    assert after.created_at == before.created_at and after.updated_at > before.updated_at


def test_search_without_a_query_lists_and_filters_go_to_the_metadata_filter(client):
    store = OamStore(client)
    memory_graph(store).invoke({"user_id": "u1", "notes": NOTES, "question": "coffee"})

    def filtered(state: State, *, store: BaseStore) -> State:
        def keys(**arguments):
            return [item.key for item in store.search(("users", "u1"), **arguments)]

        return {"found": {
            "all": keys(),
            "page": keys(limit=1, offset=1),
            "kind": keys(filter={"kind": "food"}),
            "eq": keys(filter={"stars": {"$eq": 3}}),
            "ne": keys(filter={"kind": {"$ne": "food"}}),
            "list": keys(filter={"tags": ["cat", "pet"]}),
            "typed": keys(filter={"stars": "5"}),  # type-exact: "5" is not 5
            "query_and_filter": keys(query="coffee", filter={"kind": "place"}),
            "other_prefix": [item.key for item in store.search(("users", "u2"))],
            "gt": keys(filter={"stars": {"$gt": 3}}),
            "between": keys(filter={"stars": {"$gte": 3, "$lt": 5}}),
            "gte_float": keys(filter={"stars": {"$gte": 3.0}}),
            "range_and_ne": keys(filter={"stars": {"$gte": 0, "$ne": 5}}),
            "range_and_eq": keys(filter={"stars": {"$lte": 5, "$eq": 5}}),
            "string_range": keys(filter={"kind": {"$lt": "food"}}),  # "animal" < "food" < "place"
            "typed_range": keys(filter={"stars": {"$gt": "3"}}),  # a string bound matches strings only
            "query_and_range": keys(query="coffee", filter={"stars": {"$lte": 4}, "kind": {"$gte": "a"}}),
        }}

    found = one_node_graph(store, filtered).invoke({})["found"]
    assert found["all"] == ["drink", "home", "pet"]  # oldest first
    assert found["page"] == ["home"]
    assert found["kind"] == ["drink"]
    assert found["eq"] == ["home"]
    assert found["ne"] == ["home", "pet"]  # $ne holds where the key is missing too ("pet" has a kind)
    assert found["list"] == ["pet"]
    assert found["typed"] == []
    assert found["query_and_filter"] == ["home"]
    assert found["other_prefix"] == []
    assert found["gt"] == ["drink"]
    assert found["between"] == ["home"]
    assert found["gte_float"] == ["drink", "home"]  # "pet" has no stars: no match, no error
    assert found["range_and_ne"] == ["home"]
    assert found["range_and_eq"] == ["drink"]
    assert found["string_range"] == ["pet"]
    assert found["typed_range"] == []
    assert found["query_and_range"] == ["home"]

    def bad_bound(state: State, *, store: BaseStore) -> State:
        return {"found": store.search(("users", "u1"), filter={"stars": {"$gt": True}})}

    with pytest.raises(ValueError, match=r"stars\.\$gt: must be a number or a string"):
        one_node_graph(store, bad_bound).invoke({})


def test_namespaces_are_listed_and_delete_removes_the_memory(client):
    store = OamStore(client)

    def organise(state: State, *, store: BaseStore) -> State:
        store.put(("users", "u1", "memories"), "a", {"content": "one"})
        store.put(("users", "u1", "agents", "planner", "notes"), "b", {"content": "two"})
        store.put(("users", "u2", "memories"), "c", {"content": "three"})
        store.put(("shared", "docs"), "d", {"content": "four"})
        store.delete(("users", "u2", "memories"), "c")
        return {"found": {
            "all": store.list_namespaces(),
            "users": store.list_namespaces(prefix=("users",), max_depth=2),
            "wild": store.list_namespaces(prefix=("users", "*", "memories")),
            "suffix": store.list_namespaces(suffix=("notes",)),
            "paged": store.list_namespaces(limit=1, offset=1),
            "deleted": store.get(("users", "u2", "memories"), "c"),
        }}

    found = one_node_graph(store, organise).invoke({})["found"]
    assert found["all"] == [("shared", "docs"), ("users", "u1", "agents", "planner", "notes"),
                            ("users", "u1", "memories")]
    assert found["users"] == [("users", "u1")]
    assert found["wild"] == [("users", "u1", "memories")]
    assert found["suffix"] == [("users", "u1", "agents", "planner", "notes")]
    assert found["paged"] == [("users", "u1", "agents", "planner", "notes")]
    assert found["deleted"] is None
    assert not Memory.objects.filter(pk=key(store.memory_id(("users", "u2", "memories"), "c"))).exists()
    # each scope has its thread: user u1 with agent planner, and no user for ("shared", "docs")
    scoped = Memory.objects.get(pk=key(store.memory_id(("users", "u1", "agents", "planner", "notes"), "b")))
    assert (scoped.user_id, scoped.agent_id, scoped.thread_id) == (
        "u1", "planner", key("langgraph:users:u1:agents:planner"))
    shared = Memory.objects.get(pk=key(store.memory_id(("shared", "docs"), "d")))
    assert (shared.user_id, shared.thread_id) == (None, key("langgraph"))


def test_ttl_minutes_become_days_and_reads_refresh_them(client):
    store = OamStore(client, ttl={"default_ttl": 60})
    ns = ("users", "u1", "memories")

    def put(state: State, *, store: BaseStore) -> State:
        store.put(ns, "default", {"content": "an hour"})
        store.put(ns, "long", {"content": "three days and a minute"}, ttl=3 * 1440 + 1)
        store.put(ns, "forever", {"content": "no ttl"}, ttl=None)
        store.put(ns, "week", {"content": "a week"}, ttl=7 * 1440)
        store.search(ns)  # reads refresh the TTLs: nothing to write yet
        return {}

    one_node_graph(store, put).invoke({})

    def row(name):
        return Memory.objects.get(pk=key(store.memory_id(ns, name)))

    day = dt.timedelta(days=1)
    assert row("default").expires_at == row("default").created_at + day  # 60 minutes, rounded up to a day
    assert row("default").metadata["langgraph"]["ttl"] == 60
    assert row("long").expires_at == row("long").created_at + 4 * day
    assert row("forever").expires_at is None
    assert row("week").expires_at == row("week").created_at + 8 * day  # past the week: the next whole day
    assert MemoryVersion.objects.filter(memory_id=row("week").pk).count() == 1  # created; the read wrote nothing

    # 23.5 hours later (moved back in the table) the item has half an hour left; a read with refresh_ttl
    # extends the expiry to cover an hour from now, two days from the creation; a read without it does not.
    # (Twelve hours later no write is needed: the first day still covers an hour from then.)
    created = timezone.now() - dt.timedelta(hours=23, minutes=30)
    Memory.objects.filter(pk=row("default").pk).update(created_at=created, expires_at=created + day)

    def read(state: State, *, store: BaseStore) -> State:
        return {"found": store.get(ns, "default", refresh_ttl=state["question"] == "refresh").value}

    stale = row("default").expires_at
    assert one_node_graph(store, read).invoke({"question": "no"})["found"] == {"content": "an hour"}
    assert row("default").expires_at == stale
    one_node_graph(store, read).invoke({"question": "refresh"})
    assert row("default").expires_at == row("default").created_at + 2 * day

    # an expired item is gone for get and search at once, before the purge deletes it
    Memory.objects.filter(pk=row("long").pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

    def gone(state: State, *, store: BaseStore) -> State:
        return {"found": [store.get(ns, "long"), [i.key for i in store.search(ns)]]}

    assert one_node_graph(store, gone).invoke({})["found"] == [None, ["default", "forever", "week"]]
    # a put over the expired item's key stores it again (the expired row still held the id)
    store.put(ns, "long", {"content": "back"}, ttl=0.5)
    assert store.get(ns, "long").value == {"content": "back"}
    assert row("long").expires_at == row("long").created_at + day

    with pytest.raises(ValueError, match="ttl"):
        store.put(ns, "bad", {"content": "x"}, ttl=-1)


def test_an_async_graph_goes_through_abatch(client):
    store = OamStore(client, scope=positional_scope(user_id=1))

    async def node(state: State, *, store: BaseStore) -> State:
        await store.aput(("memories", state["user_id"]), "drink", {"content": "Prefers espresso coffee"})
        await store.aput(("memories", state["user_id"]), "home", {"content": "Lives in Lisbon"})
        items = await store.asearch(("memories", state["user_id"]), query="coffee", limit=1)
        got = await store.aget(("memories", state["user_id"]), "home")
        namespaces = await store.alist_namespaces(prefix=("memories",))
        await store.adelete(("memories", state["user_id"]), "home")
        return {"recalled": [i.value for i in items], "found": [got.value, namespaces]}

    result = asyncio.run(one_node_graph(store, node).ainvoke({"user_id": "u7"}))
    assert result["recalled"] == [{"content": "Prefers espresso coffee"}]
    assert result["found"] == [{"content": "Lives in Lisbon"}, [("memories", "u7")]]
    assert list(Memory.objects.values_list("user_id", "content")) == [("u7", "Prefers espresso coffee")]


def test_another_tenant_sees_nothing_of_the_first(client):
    store = OamStore(client)
    memory_graph(store).invoke({"user_id": "u1", "notes": NOTES, "question": "coffee"})
    store.put(("shared",), "note", {"content": "Prefers espresso coffee, says the team"})

    other_project = OamStore(AgentMemory(project=Project.objects.create(slug="other"), llm=None))
    restricted = OamStore(AgentMemory(tenant=Tenant(project=client.project, user_id="u2"), llm=None))
    for other in (other_project, restricted):
        assert other.get(("users", "u1", "memories"), "drink") is None
        assert other.get(("shared",), "note") is None
        assert other.search(("users",)) == [] and other.search(()) == []
        assert other.search((), query="espresso coffee") == []
        assert other.list_namespaces() == []
    result = memory_graph(other_project).invoke({"user_id": "u1", "notes": [], "question": "coffee"})
    assert result == {"user_id": "u1", "notes": [], "question": "coffee", "recalled": [], "found": None}

    # a restricted client cannot name another user; what it writes without one is its own user's
    with pytest.raises(ValueError, match="u2"):
        restricted.search(("users", "u1"), query="coffee")
    with pytest.raises(ValueError, match="u2"):
        restricted.put(("users", "u1", "memories"), "drink", {"content": "overwritten"})
    restricted.put(("shared",), "note", {"content": "mine"})
    assert restricted.get(("shared",), "note").value == {"content": "mine"}
    assert store.get(("shared",), "note").value == {"content": "Prefers espresso coffee, says the team"}
    mine = Memory.objects.get(pk=key(restricted.memory_id(("shared",), "note")))
    assert (mine.user_id, mine.thread_id) == ("u2", key("langgraph:users:u2"))
    assert Memory.objects.get(pk=key(store.memory_id(("users", "u1", "memories"), "drink"))).content \
        == NOTES[0]["value"]["content"]


def test_bad_namespaces_and_keys_are_refused_before_anything_is_stored(client):
    store = OamStore(client)
    for namespace in [(), ("langgraph", "x"), ("a.b",), ("",), ("users",), ("users", "u1", "users", "u2")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"content": "x"})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("langgraph",), "k", {"content": "x"})])
    with pytest.raises(InvalidNamespaceError):  # checked before the first op runs: a batch is refused whole
        store.batch([PutOp(("notes",), "ok", {"content": "x"}), PutOp(("users",), "k", {"content": "x"})])
    with pytest.raises(ValueError, match="key"):
        store.batch([PutOp(("notes",), "ok", {"content": "x"}), GetOp(("notes",), "")])
    with pytest.raises(InvalidNamespaceError):
        store.get(("agents",), "k")
    with pytest.raises(InvalidNamespaceError):
        OamStore(client, scope=positional_scope(user_id=1)).put(("memories",), "k", {"content": "x"})
    for bad_key in ["", " ", "k" * 256, "line\nbreak", "nul\x00"]:
        with pytest.raises(ValueError, match="key"):
            store.put(("notes",), bad_key, {"content": "x"})
    with pytest.raises(TypeError, match="key"):
        store.batch([GetOp(("notes",), 7)])
    with pytest.raises(TypeError, match="value"):
        store.batch([PutOp(("notes",), "k", ["not", "a", "dict"])])
    with pytest.raises(ValueError, match="metadata"):
        store.put(("notes",), "k", {"content": "x", "n": float("nan")})
    with pytest.raises(ValueError, match=r"filter\.n: give \$eq or \$ne, not both"):
        store.search(("notes",), filter={"n": {"$eq": 1, "$ne": 2}})
    with pytest.raises(ValueError, match=r"filter\.n: unsupported operator: \$in"):
        store.search(("notes",), filter={"n": {"$in": [1, 2]}})
    with pytest.raises(ValueError, match=r"filter\.n: cannot mix operators"):
        store.search(("notes",), filter={"n": {"$gt": 1, "m": 2}})
    with pytest.raises(ValueError, match="limit"):
        store.search(("notes",), limit=-1)
    # found by an outside attack: each was another exception, or a silent empty answer
    with pytest.raises(ValueError, match=r"filter: \$gt needs a field"):
        store.search(("notes",), filter={"$gt": 5})
    with pytest.raises(ValueError, match="ttl"):
        store.put(("notes",), "k", {"content": "x"}, ttl=10**400)
    for namespace in [("users", "\ud800"), ("threads", "\udc00"), ("notes\ud800",)]:
        with pytest.raises(InvalidNamespaceError, match="valid Unicode"):
            store.put(namespace, "k", {"content": "x"})
    assert not Memory.objects.exists()


def test_the_stores_ids_are_reserved_so_an_api_key_cannot_take_them_first(client):
    """The store derives its threads' and memories' ids; the JSON API (and MCP through it) refuses to create
    ids with the reserved prefix, so another key of the project cannot squat them (found by an outside attack:
    a u2-only key made thread langgraph:users:u1, and u1's puts then failed)."""
    from django.test import Client as HttpClient

    from threads.api.common import RESERVED_ID_PREFIXES
    from threads.auth import api_key_create

    store = OamStore(client)
    assert holding_thread_id("u1", None).startswith(RESERVED_ID_PREFIXES)
    assert store.memory_id(("users", "u1", "notes"), "k").startswith(RESERVED_ID_PREFIXES)
    raw = api_key_create(name="squatter", project=client.tenant.project, user_id="u2")[1]
    http = HttpClient(headers={"Authorization": f"Bearer {raw}"})
    made = http.post("/api/threads", {"thread_id": holding_thread_id("u1", None), "user_id": "u2"},
                     content_type="application/json")
    assert made.status_code == 422 and "reserved" in made.text and "thread_id" in made.text
    assert http.post("/api/threads", {"thread_id": "t2", "user_id": "u2"}, content_type="application/json"
                     ).status_code == 201
    taken = http.post("/api/threads/t2/memories", {"content": "x", "memory_id": store.memory_id(
        ("users", "u1", "notes"), "k")}, content_type="application/json")
    assert taken.status_code == 422 and "memory_id" in taken.text
    store.put(("users", "u1", "notes"), "k", {"content": "u1's note"})
    assert store.get(("users", "u1", "notes"), "k").value == {"content": "u1's note"}


def test_the_scope_rules():
    assert labelled_scope(("users", "u1", "agents", "a1", "threads", "t1", "x")).__dict__ == {
        "user_id": "u1", "agent_id": "a1", "thread_id": "t1"}
    assert labelled_scope(("notes", "users", "agents")).user_id == "agents"  # a value may be a label word
    assert labelled_scope(("users",), True).user_id is None  # a prefix may stop before the value
    assert positional_scope(user_id=1, agent_id=2)(("m", "u", "a", "x")).__dict__ == {
        "user_id": "u", "agent_id": "a", "thread_id": None}
    with pytest.raises(ValueError):
        positional_scope(user_id=-1)
    assert holding_thread_id("a/b%:", "c") == "langgraph:users:a%2Fb%25%3A:agents:c"
    assert holding_thread_id("u" * 250, None).startswith("langgraph-")


def test_a_namespace_naming_a_thread_stores_into_that_thread(client):
    client.create_thread(thread_id="trip", user_id="u1", agent_id="planner")
    store = OamStore(client)
    store.put(("threads", "trip", "facts"), "hotel", {"content": "Hotel near Termini"}, index=["content"])
    row = Memory.objects.get()
    assert (row.thread_id, row.user_id, row.agent_id) == (key("trip"), "u1", "planner")
    assert [i.key for i in store.search(("threads", "trip"), query="hotel")] == ["hotel"]
    assert client.get_thread("trip").get_memory(row.public_id).content == "Hotel near Termini"
