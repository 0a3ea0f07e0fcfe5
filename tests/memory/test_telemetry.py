"""OpenTelemetry spans of the memory operations (``memory.core.telemetry``), read back from the SDK's in-memory
exporter.

The exporter's provider is given to the engine with ``telemetry.use_tracer_provider`` for this module only (the
global provider can be set once per process, and other modules must not see these spans). Each operation is
checked through the Python client and the JSON API: its one span, its name and the GenAI memory conventions'
attributes; no memory text nor user id unless ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` allows it;
the per-result score events with ``OAM_OTEL_SEARCH_SCORES``; and the SDK set up from the ``OTEL_*`` variables.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.core import telemetry
from memory.core.errors import NotFound
from memory.llm.scripted import ScriptedLlm
from tests.api.helpers import JsonClient
from threads.auth import api_key_create

CONTENT = "Prefers a window seat on long flights"
QUERY = "window seat flights"
USER = "user-1"  # the root conftest's thread
CAPTURE = telemetry.CAPTURE_CONTENT_ENV


@pytest.fixture(scope="module")
def sdk():
    """An SDK provider of this module's, given to the engine, and the exporter keeping the spans it ends."""
    memory_exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory_exporter))
    telemetry.use_tracer_provider(provider)
    yield provider, memory_exporter
    telemetry.use_tracer_provider(None)
    provider.shutdown()


@pytest.fixture
def exporter(sdk):
    return sdk[1]


@pytest.fixture(autouse=True)
def spans(exporter, monkeypatch):
    """A function returning the spans ended since the test started; content capture off unless a test sets it."""
    monkeypatch.delenv(CAPTURE, raising=False)
    exporter.clear()
    return exporter.get_finished_spans


def only(spans, name):
    """The one span named ``name`` (fails when there are none or several)."""
    found = [s for s in spans() if s.name == name]
    assert len(found) == 1, [s.name for s in spans()]
    return found[0]


def everything_said(span) -> str:
    """All of a span's attribute and event values as one string, to look for text that must not be there."""
    values = [span.name, *map(str, span.attributes.values())]
    for event in span.events:
        values += [event.name, *map(str, event.attributes.values())]
    return " | ".join(values)


@pytest.fixture
def api(db):
    key = api_key_create(name="telemetry")[1]
    return JsonClient(headers={"Authorization": f"Bearer {key}"})


# --- one span per operation, named and attributed by the convention ----------------------------------------


def test_python_client_operations_each_make_one_span_named_by_the_convention(thread, spans):
    memory_id = thread.add_memory(CONTENT, memory_id="m-seat", memory_type="preference")
    thread.update_memory(memory_id, metadata={"source": "profile"})
    results = thread.search(QUERY)
    card = thread.get_context_card()
    assert thread.delete_memory(memory_id) == 1

    assert [s.name for s in spans()] == ["create_memory", "update_memory", "search_memory", "get_context_card",
                                         "delete_memory"]
    for span in spans():
        assert span.attributes[telemetry.OPERATION_NAME] == span.name  # span name = {gen_ai.operation.name}
        assert span.kind is SpanKind.INTERNAL
        assert span.attributes[telemetry.STORE_ID] == "default"  # the project's slug
        assert span.instrumentation_scope.name == telemetry.SCOPE
        assert span.status.status_code is StatusCode.UNSET
    create, update, search, card_span, delete = spans()
    for span in (create, update):
        assert span.attributes[telemetry.RECORD_ID] == "m-seat"
        assert span.attributes[telemetry.RECORD_COUNT] == 1
        assert span.attributes["oam.memory.type"] == "preference"
        assert span.attributes[telemetry.CONVERSATION_ID] == "t-main"
        assert span.attributes[telemetry.AGENT_ID] == "agent-1"
    assert search.attributes[telemetry.RECORD_COUNT] == len(results) == 1
    assert search.attributes["oam.search.mode"] == "HYBRID"
    assert search.attributes["oam.search.max_results"] == 10
    assert search.attributes["oam.search.exact_thread_match"] is False  # a thread's default scope
    assert search.attributes[telemetry.CONVERSATION_ID] == "t-main"
    assert card_span.attributes[telemetry.RECORD_COUNT] == len(card.relevant_results)
    assert card_span.attributes["oam.context_card.summary"] == "transcript"
    assert delete.attributes[telemetry.RECORD_ID] == "m-seat"
    assert delete.attributes["oam.memory.deleted"] == 1


def test_agent_memory_by_id_writes_are_traced_once_too(client, thread, spans):
    thread.add_memory(CONTENT, memory_id="m-seat")
    client.update_memory("m-seat", content="Prefers an aisle seat")
    assert client.delete_memory("m-seat") == 1
    assert client.delete_memory("m-seat") == 0
    assert [s.name for s in spans()] == ["create_memory", "update_memory", "delete_memory", "delete_memory"]
    assert [s.attributes["oam.memory.deleted"] for s in spans()[2:]] == [1, 0]
    assert client.search("seat", user_id=USER) == []  # a client search is one span as well
    assert spans()[-1].name == "search_memory"
    search = spans()[-1].attributes
    assert (search[telemetry.STORE_ID], search[telemetry.RECORD_COUNT]) == ("default", 0)


def test_json_api_operations_each_make_one_span_with_the_same_attributes(api, spans):
    assert api.post("/api/threads", {"thread_id": "t-api", "user_id": USER, "agent_id": "a-api"}).status_code == 201
    assert spans() == ()  # creating a thread is not a memory operation
    resp = api.post("/api/threads/t-api/memories", {"content": CONTENT, "memory_id": "m-api", "memory_type": "fact"})
    assert resp.status_code == 201
    assert api.patch("/api/threads/t-api/memories/m-api", {"content": "Prefers an aisle seat"}).status_code == 200
    hits = api.post("/api/threads/t-api/search", {"query": "aisle seat"}).json()
    assert [h["record_id"] for h in hits] == ["m-api"]
    assert api.post("/api/threads/t-api/context-card", {}).status_code == 200
    assert api.delete("/api/threads/t-api/memories/m-api").status_code == 204

    assert [s.name for s in spans()] == ["create_memory", "update_memory", "search_memory", "get_context_card",
                                         "delete_memory"]
    create, update, search, card, delete = spans()
    assert all(s.attributes[telemetry.STORE_ID] == "default" for s in spans())
    assert (create.attributes[telemetry.RECORD_ID], create.attributes["oam.memory.type"]) == ("m-api", "fact")
    assert update.attributes[telemetry.RECORD_ID] == "m-api"
    assert search.attributes[telemetry.RECORD_COUNT] == 1
    assert card.attributes[telemetry.CONVERSATION_ID] == "t-api"
    assert delete.attributes["oam.memory.deleted"] == 1


@pytest.mark.django_db(transaction=True)  # the MCP bridge's requests run in worker threads of their own
def test_mcp_tool_calls_each_make_the_one_span_of_their_operation(spans):
    from threads.mcp.server import Caller, call  # the MCP door: each tool call is the JSON API request it names

    caller = Caller(token=api_key_create(name="mcp")[1], permission="write")

    def tool(name, **arguments):
        result = asyncio.run(call(caller, name, arguments))
        assert not result.is_error, result
        return result.structured_content

    tool("create_thread", thread_id="t-mcp", user_id=USER, agent_id="a-mcp")
    tool("add_memory", thread_id="t-mcp", content=CONTENT, memory_id="m-mcp")
    tool("update_memory", thread_id="t-mcp", memory_id="m-mcp", content="Prefers an aisle seat")
    assert [hit["record_id"] for hit in tool("search", thread_id="t-mcp", query="aisle seat")["items"]] == ["m-mcp"]
    tool("get_context_card", thread_id="t-mcp")
    tool("delete_memory", thread_id="t-mcp", memory_id="m-mcp")
    assert [s.name for s in spans()] == ["create_memory", "update_memory", "search_memory", "get_context_card",
                                         "delete_memory"]
    assert all(s.attributes[telemetry.CONVERSATION_ID] == "t-mcp" for s in spans())
    assert all(CONTENT not in everything_said(s) for s in spans())


def test_spans_are_children_of_the_callers_span_through_both_doors(thread, api, spans, sdk):
    """A span the caller (or ``opentelemetry-instrument``'s HTTP instrumentation) has open is the parent, also
    across the API's worker threads (``memory.core.aio.in_worker``)."""
    outer_tracer = sdk[0].get_tracer("caller")
    with outer_tracer.start_as_current_span("caller") as outer:
        thread.search(QUERY)
    with outer_tracer.start_as_current_span("POST /api/search") as request:
        assert api.post("/api/search", {"query": QUERY, "user_id": USER}).status_code == 200
    first, second = [s for s in spans() if s.name == "search_memory"]
    assert first.parent.span_id == outer.get_span_context().span_id
    assert second.parent.span_id == request.get_span_context().span_id
    assert first.context.trace_id == outer.get_span_context().trace_id


def test_a_failed_operation_has_error_type_and_no_message(thread, spans):
    with pytest.raises(NotFound):
        thread.update_memory("m-absent", content="secret text")
    span = only(spans, "update_memory")
    assert span.attributes[telemetry.ERROR_TYPE] == "NotFound"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "NotFound"  # the class name only: a message may quote content
    assert span.events == ()  # no exception event (its message and stack)
    assert "secret text" not in everything_said(span)


# --- content: off by default, on with the GenAI opt-in -------------------------------------------------------


def run_everything(thread):
    """Every traced operation of a thread, with memory text in each."""
    thread.add_memory(CONTENT, memory_id="m-seat")
    thread.update_memory("m-seat", content=CONTENT + " and extra legroom")
    thread.add_messages([{"role": "user", "content": "I fly to Lisbon often", "id": "msg-1"}])
    results = thread.search(QUERY)
    thread.get_context_card()
    thread.delete_memory("m-seat")
    return results


def test_spans_carry_no_memory_text_and_no_user_id_by_default(thread, spans):
    run_everything(thread)
    assert len(spans()) == 5
    for span in spans():
        said = everything_said(span)
        for text in (CONTENT, QUERY, "Lisbon", "legroom", USER):
            assert text not in said, (span.name, text)
        assert not {telemetry.QUERY_TEXT, telemetry.RECORDS, telemetry.USER_ID} & set(span.attributes)


@pytest.mark.parametrize("value", ["true", "TRUE", "SPAN_ONLY", "span_and_event"])
def test_the_genai_content_opt_in_adds_query_records_and_user(thread, spans, monkeypatch, value):
    monkeypatch.setenv(CAPTURE, value)
    results = run_everything(thread)
    create, update, search, card, _ = spans()
    assert json.loads(create.attributes[telemetry.RECORDS]) == [{"id": "m-seat", "content": CONTENT, "metadata": {}}]
    assert json.loads(update.attributes[telemetry.RECORDS])[0]["content"] == CONTENT + " and extra legroom"
    assert search.attributes[telemetry.QUERY_TEXT] == QUERY
    records = json.loads(search.attributes[telemetry.RECORDS])
    assert [(r["id"], r["content"], r["score"]) for r in records] == [(r.record_id, r.content, r.score)
                                                                      for r in results]
    assert "I fly to Lisbon often" in card.attributes[telemetry.QUERY_TEXT]  # the card's query: latest messages
    assert all(s.attributes[telemetry.USER_ID] == USER for s in (create, update, search, card))


@pytest.mark.parametrize("value", ["false", "EVENT_ONLY", "NO_CONTENT", "1"])
def test_other_values_of_the_opt_in_keep_content_out(thread, spans, monkeypatch, value):
    monkeypatch.setenv(CAPTURE, value)
    run_everything(thread)
    assert all(CONTENT not in everything_said(s) and USER not in everything_said(s) for s in spans())


# --- "why was this recalled": per-result score events ----------------------------------------------------------


@pytest.fixture
def seats(thread):
    thread.add_memory(CONTENT, memory_id="m-seat")
    thread.add_memory("Likes a window seat on trains", memory_id="m-train")
    thread.add_memory("Allergic to peanuts", memory_id="m-food")
    return thread


def result_events(span):
    return [e.attributes for e in span.events if e.name == telemetry.RESULT_EVENT]


def test_score_events_are_off_by_default(seats, spans):
    seats.search(QUERY)
    assert only(spans, "search_memory").events == ()


def test_hybrid_search_events_give_rank_score_distance_and_each_arm(seats, spans, settings):
    settings.OAM_OTEL_SEARCH_SCORES = True
    results = seats.search(QUERY)
    events = result_events(only(spans, "search_memory"))
    assert [e[telemetry.RECORD_ID] for e in events] == [r.record_id for r in results]
    assert [e["oam.search.rank"] for e in events] == list(range(1, len(results) + 1))
    for event, result in zip(events, results):
        assert event["oam.search.score"] == pytest.approx(result.score)
        assert event["oam.search.distance"] == pytest.approx(result.distance)
        assert event["oam.search.record_type"] == "memory"
        assert event["oam.search.vector.similarity"] == pytest.approx(1 - result.distance, abs=1e-6)
        assert event["oam.search.vector.rank"] >= 1
        assert 0.0 <= event["oam.search.signal.rrf"] <= 1.0 and event["oam.search.rrf"] > 0
    best = events[0]
    assert best[telemetry.RECORD_ID] == "m-seat"  # every query word is in it
    assert best["oam.search.text.rank"] == 1 and best["oam.search.text.bm25"] > 0
    assert best["oam.search.signal.terms"] == 1.0
    food = [e for e in events if e[telemetry.RECORD_ID] == "m-food"]
    assert not food or "oam.search.text.rank" not in food[0]  # no keyword of the query: no keyword arm credit


def test_vector_and_keyword_searches_explain_their_own_arms(seats, spans, settings):
    settings.OAM_OTEL_SEARCH_SCORES = True
    settings.OAM_SEARCH_MODE = "VECTOR"  # the ranking when the thread's search config names none
    results = seats.search(QUERY)
    events = result_events(spans()[-1])
    assert [e["oam.search.vector.rank"] for e in events] == list(range(1, len(results) + 1))
    for event, result in zip(events, results):
        assert event["oam.search.vector.similarity"] == pytest.approx(result.score)
        assert not any(name.startswith(("oam.search.text", "oam.search.signal")) for name in event)

    settings.OAM_SEARCH_MODE = "KEYWORD"
    results = seats.search("peanuts")
    [event] = result_events(spans()[-1])
    assert event[telemetry.RECORD_ID] == results[0].record_id == "m-food"
    assert event["oam.search.text.rank"] == 1 and event["oam.search.text.bm25"] > 0
    assert event["oam.search.rrf"] == pytest.approx(results[0].score)
    assert "oam.search.vector.rank" not in event


def test_linked_memories_get_graph_events(seats, spans, settings):
    settings.OAM_OTEL_SEARCH_SCORES = True
    seats.link_records("m-train", "memory", "m-seat", "memory", "supports", relation_id="r-1")
    results = seats.search("peanuts", num_hops=1, record_types=["memory"], max_results=1)
    assert [r.record_id for r in results] == ["m-food"]  # no relation: nothing linked
    results = seats.search("trains", num_hops=1, record_types=["memory"], max_results=1)
    assert [r.record_id for r in results] == ["m-train"] and len(results[0].linked) == 1
    span = spans()[-1]
    [result] = result_events(span)
    assert result["oam.search.graph.linked_count"] == 1
    [link] = [e.attributes for e in span.events if e.name == telemetry.LINKED_EVENT]
    assert link[telemetry.RECORD_ID] == "m-seat"
    assert (link["oam.search.graph.from_record_id"], link["oam.search.graph.hops"]) == ("m-train", 1)
    assert (link["oam.search.graph.relation_type"], link["oam.search.graph.relation_id"]) == ("supports", "r-1")


def test_context_card_events_rank_its_relevant_results(seats, spans, settings):
    settings.OAM_OTEL_SEARCH_SCORES = True
    seats.add_messages([{"role": "user", "content": "Book me a window seat", "id": "msg-1"}])
    before = len(spans())
    card = seats.get_context_card(max_relevant_results=2)
    span = only(spans, "get_context_card")
    events = result_events(span)
    assert [e[telemetry.RECORD_ID] for e in events] == [r.record_id for r in card.relevant_results]
    assert len(events) == 2 and events[0]["oam.search.rank"] == 1
    assert all("oam.search.rrf" in e for e in events)
    assert [s.name for s in spans()[before:]] == ["get_context_card"]  # its searches make no span of their own


# --- extraction --------------------------------------------------------------------------------------------------


INLINE = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False, review_memory_types=())


def extracted(*items):
    return {"memories": [{"memory_type": t, "content": c, "source_message_ids": list(r)} for t, c, r in items]}


@pytest.mark.usefixtures("fresh_extraction_tracker")
def test_extraction_is_one_upsert_memory_span(db, spans, monkeypatch):
    llm = ScriptedLlm([extracted(("preference", "Ann loves green tea.", ["m1"]),
                                 ("fact", "Ann lives in Porto.", ["m2"]))])
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-x", user_id="ann", agent_id="a1",
                                                memory_extraction_config=INLINE)
    thread.add_messages([{"role": "user", "content": "I love green tea."},
                         {"role": "user", "content": "I live in Porto."}])
    span = only(spans, "upsert_memory")
    assert [s.name for s in spans()] == ["upsert_memory"]  # its memories make no create_memory spans
    attributes = span.attributes
    assert attributes[telemetry.OPERATION_NAME] == "upsert_memory"
    assert attributes[telemetry.STORE_ID] == "default"
    assert attributes[telemetry.CONVERSATION_ID] == "t-x"
    assert attributes[telemetry.RECORD_COUNT] == 2
    assert (attributes["oam.extraction.outcome"], attributes["oam.extraction.trigger"]) == ("done", "add_messages")
    assert attributes["oam.extraction.llm_calls"] == 1 and attributes["oam.extraction.messages_extracted"] == 2
    assert "green tea" not in everything_said(span) and telemetry.USER_ID not in attributes

    monkeypatch.setenv(CAPTURE, "true")
    # refs are the job's own (m1: its first message); the judge, if asked, says unrelated
    llm.replies += [extracted(("fact", "Ann owns a bicycle.", ["m1"])), {"relation": "unrelated"},
                    {"relation": "unrelated"}]
    thread.add_messages([{"role": "user", "content": "I own a bicycle."}])
    span = spans()[-1]
    [record] = json.loads(span.attributes[telemetry.RECORDS])
    assert record["content"] == "Ann owns a bicycle." and record["metadata"]["decision"] == "new"
    assert span.attributes[telemetry.USER_ID] == "ann"


@pytest.mark.usefixtures("fresh_extraction_tracker")
def test_a_failed_extraction_span_has_its_error_type(db, spans):
    llm = ScriptedLlm(["not json"] * 3)  # every try invalid: LlmInvalidOutput, the job fails
    thread = AgentMemory(llm=llm).create_thread(thread_id="t-y", user_id="u", agent_id="a",
                                                memory_extraction_config=INLINE)
    thread.add_messages([{"role": "user", "content": "I love green tea."}])
    span = only(spans, "upsert_memory")
    assert span.attributes["oam.extraction.outcome"] == "failed"
    assert span.attributes[telemetry.ERROR_TYPE] == "LlmInvalidOutput"
    assert span.status.status_code is StatusCode.ERROR and span.status.description == "LlmInvalidOutput"
    assert span.attributes[telemetry.RECORD_COUNT] == 0


# --- off: no SDK -------------------------------------------------------------------------------------------------


def test_without_an_sdk_provider_nothing_is_recorded_and_everything_works(thread, spans, settings, monkeypatch,
                                                                          sdk):
    """What the API alone gives (no SDK configured): non-recording spans; the engine still answers as usual, and
    computes no content or events for them."""
    settings.OAM_OTEL_SEARCH_SCORES = True
    monkeypatch.setenv(CAPTURE, "true")
    telemetry.use_tracer_provider(trace.NoOpTracerProvider())
    try:
        with telemetry.memory_span(telemetry.SEARCH_MEMORY, store_id=lambda: pytest.fail("store id computed")) as s:
            assert not s.is_recording()
        results = run_everything(thread)
        with pytest.raises(NotFound):
            thread.update_memory("m-absent", content="x")
    finally:
        telemetry.use_tracer_provider(sdk[0])
    assert [r.record_id for r in results][:1] == ["m-seat"]
    assert spans() == ()


# --- the SDK from the OTEL_* variables -------------------------------------------------------------------------


@pytest.fixture
def no_provider_yet(monkeypatch):
    """As at start-up: no provider set (the API's proxy)."""
    monkeypatch.setattr(telemetry.trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())


def configure(environ):
    installed = []
    provider = telemetry.configure_from_env(environ, install=installed.append)
    assert installed == ([provider] if provider is not None else [])
    return provider


@pytest.mark.parametrize("environ", [
    {},
    {"OTEL_TRACES_EXPORTER": "none"},
    {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
    {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "TRUE"},
    {"OTEL_SERVICE_NAME": "oam"},
])
def test_no_sdk_unless_the_variables_ask_for_traces(no_provider_yet, environ):
    assert configure(environ) is None


def test_console_exporter_from_the_variables(no_provider_yet, capsys):
    provider = configure({"OTEL_TRACES_EXPORTER": "console"})
    assert isinstance(provider, TracerProvider)
    try:
        with provider.get_tracer("t").start_as_current_span("search_memory"):
            pass
        assert provider.force_flush()
        out = capsys.readouterr().out
        assert '"name": "search_memory"' in out
        assert provider.resource.attributes["service.name"] == telemetry.SERVICE_NAME
    finally:
        provider.shutdown()


def test_a_provider_already_set_is_kept(monkeypatch):
    """Under ``opentelemetry-instrument`` the SDK is set before Django starts: it is not replaced."""
    monkeypatch.setattr(telemetry.trace, "get_tracer_provider", lambda: TracerProvider())
    assert configure({"OTEL_TRACES_EXPORTER": "console"}) is None


def test_otlp_needs_its_package_and_names_it(no_provider_yet, monkeypatch):
    monkeypatch.setattr(telemetry, "OTLP_PACKAGES", {"http/protobuf": ("no_such_module.http", "pkg-http"),
                                                     "grpc": ("no_such_module.grpc", "pkg-grpc")})
    with pytest.raises(telemetry.TelemetryConfigError, match="pip install pkg-http"):
        configure({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})  # the exporter defaults to otlp
    with pytest.raises(telemetry.TelemetryConfigError, match="pip install pkg-grpc"):
        configure({"OTEL_TRACES_EXPORTER": "console,otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    with pytest.raises(telemetry.TelemetryConfigError, match="OTEL_EXPORTER_OTLP_PROTOCOL='http/json'"):
        configure({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})
    with pytest.raises(telemetry.TelemetryConfigError, match="'zipkin'"):
        configure({"OTEL_TRACES_EXPORTER": "zipkin"})
