"""OpenTelemetry spans of the engine's memory operations, named and attributed as the GenAI memory conventions say.

Off by default: with ``opentelemetry-api`` alone and no SDK configured, every span is the API's invalid,
non-recording span, which ``memory_span`` does not even make current (about 5 us an operation on this project's
2-core machine, against milliseconds for a search or a write), and the engine computes no attribute, content or
event for it (each caller checks ``span.is_recording()`` before anything costly). ``configure_from_env``
(called at start-up by ``memory.apps.MemoryConfig.ready``) installs the SDK from the standard ``OTEL_*``
variables (docs/configuration.md, "Tracing (OpenTelemetry)").

The convention
--------------
OpenTelemetry semantic conventions for generative AI, span ``gen_ai.memory.client``
(open-telemetry/semantic-conventions-genai, ``model/gen-ai/spans.yaml`` and ``model/gen-ai/registry.yaml``,
added by #140, merged 2026-05-11; stability "development"). #140's description names five operations; the
registry as merged has seven, ``create_memory`` and ``upsert_memory`` beside ``update_memory``, and this module
follows the registry:

* span name ``{gen_ai.operation.name}``, nothing after it;
* ``gen_ai.operation.name`` (required): one of ``create_memory_store``, ``search_memory``, ``create_memory``
  ("the caller requests creation of new memory records"), ``update_memory`` ("modification of known existing
  memory records"), ``upsert_memory`` ("a public API that may create, update, or consolidate memory records
  without the caller choosing which"), ``delete_memory``, ``delete_memory_store``;
* span kind CLIENT, and "MAY be set to INTERNAL on spans representing calls to memory systems running in the
  same process": ``INTERNAL`` here, the engine runs in the process of the door that calls it;
* ``gen_ai.memory.store.id`` (conditionally required; "SHOULD document what [it] maps to"): here the
  project's slug (``memory.Project``, the tenant: every record, search and write belongs to one project);
* ``gen_ai.memory.record.id`` when the operation applies to one record: its public id (the caller's);
* ``gen_ai.memory.record.count`` (recommended): for ``search_memory`` the records returned, for
  ``create_memory``/``update_memory``/``delete_memory`` the records the operation attempted to write (1 here),
  for ``upsert_memory`` those it attempted to create or update;
* ``gen_ai.memory.query.text`` and ``gen_ai.memory.records``: opt-in; "Instrumentations SHOULD NOT capture this
  attribute by default. Capture SHOULD be gated by an explicit user opt-in, for example
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``" (``capture_content``). ``gen_ai.memory.records`` follows
  ``gen-ai-memory-records.json``: a list of ``{"content", "id", "score", "metadata"}`` (``content`` required),
  recorded as a JSON string ("When recorded on spans, it MAY be recorded as a JSON string if structured format
  is not supported": the Python SDK takes primitives and lists of them only);
* ``error.type`` (conditionally required, "if the operation ended in an error"): the exception's class name
  (``NotFound``, ``InvalidArgument``, ``LlmInvalidOutput`` ...), and the span's status ERROR with that name
  only: an exception's message may quote content, so it is never recorded.

Where each operation is traced, once, whatever door calls it (the JSON API, the MCP server, the Python client,
the staff pages, the admin, the Dramatiq worker):

=============================================  ======================  ======================================
engine function                                operation (span name)   why this name
=============================================  ======================  ======================================
``memory.search.ranking.run_search``           ``search_memory``       the convention's
``memory.services.memories.memory_add``        ``create_memory``       the spec's ``add_memory`` creates one
``memory.services.memories.memory_update``     ``update_memory``       a known record, by id
``memory.services.memories.memory_delete``,    ``delete_memory``       one record, by id
``memory_delete_by_id``
``memory.services.extraction.job_run``         ``upsert_memory``       an extraction decides per candidate:
                                                                       new, update, contradiction, duplicate
``memory.context.cards.context_card_build``    ``get_context_card``    OURS: the convention has no operation
                                                                       that assembles a context card; named
                                                                       after the spec's method, same pattern
=============================================  ======================  ======================================

Personal data
-------------
The convention defines no user attribute for memory spans (the first proposal's ``gen_ai.memory.namespace``,
"e.g., user_id", open-telemetry/semantic-conventions#3250, was dropped before #140). A user id is personal
data: it is recorded, as ``user.id`` (the general registry's), only with content capture on. Ids of records,
threads (``gen_ai.conversation.id``) and agents (``gen_ai.agent.id``), counts, record types and scope flags are
recorded by default.

Attributes and events of ours (``oam.*``, not in the convention)
---------------------------------------------------------------
``oam.memory.type`` (memory, fact, guideline, preference), ``oam.memory.deleted`` (0 or 1: whether a delete
found the record), ``oam.search.*`` (the request: mode, max_results, record types, num_hops, the scope's
exact-match flags), ``oam.extraction.*`` (job id, trigger, outcome, counts), ``oam.context_card.*``.

With ``OAM_OTEL_SEARCH_SCORES`` (a Django setting, default False) each record a search or a context card
returns gets a span event ``oam.search.result`` ("why was this recalled", ``result_events``): its record id,
type, rank (1 = first returned), score and cosine distance, and what the ranking kept per arm
(``memory.search.ranking.search_records``' ``explain``); each memory reached through relations gets an event
``oam.search.linked``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider

from memory.core import conf
from memory.core.types import ImageRecord, MemoryRecord, Message, SearchResult

#: The instrumentation scope of the engine's spans.
SCOPE = "oam_site.memory"
#: ``service.name`` of the provider ``configure_from_env`` installs when neither ``OTEL_SERVICE_NAME`` nor
#: ``OTEL_RESOURCE_ATTRIBUTES`` names one.
SERVICE_NAME = "oam-site"

# --- gen_ai.operation.name values (the convention's, but GET_CONTEXT_CARD: ours) ---------------------------
SEARCH_MEMORY = "search_memory"
CREATE_MEMORY = "create_memory"
UPDATE_MEMORY = "update_memory"
UPSERT_MEMORY = "upsert_memory"
DELETE_MEMORY = "delete_memory"
#: Not in the convention: assembling a context card (summary, relevant records, recent messages) of a thread.
GET_CONTEXT_CARD = "get_context_card"

# --- the convention's attributes ----------------------------------------------------------------------
OPERATION_NAME = "gen_ai.operation.name"
STORE_ID = "gen_ai.memory.store.id"
RECORD_ID = "gen_ai.memory.record.id"
RECORD_COUNT = "gen_ai.memory.record.count"
QUERY_TEXT = "gen_ai.memory.query.text"
RECORDS = "gen_ai.memory.records"
CONVERSATION_ID = "gen_ai.conversation.id"
AGENT_ID = "gen_ai.agent.id"
ERROR_TYPE = "error.type"
#: The general registry's user id: personal data, recorded only with content capture (``capture_content``).
USER_ID = "user.id"

#: The GenAI instrumentations' opt-in to content, which the memory attributes' notes name.
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
#: Values that turn it on: ``true`` (the boolean form; OpenTelemetry reads booleans case-insensitively), and the
#: GenAI utilities' modes that put content on spans (``SPAN_ONLY``, ``SPAN_AND_EVENT``; ``EVENT_ONLY`` and
#: ``NO_CONTENT`` keep it off spans, and the engine emits no content events).
_CAPTURE_VALUES = frozenset({"true", "span_only", "span_and_event"})

#: Span events of the "why was this recalled" trace (``result_events``).
RESULT_EVENT = "oam.search.result"
LINKED_EVENT = "oam.search.linked"

_override: TracerProvider | None = None
_tracer: Tracer | None = None


def capture_content() -> bool:
    """Whether spans may carry memory text (queries, record contents) and user ids: the environment variable
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` is ``true`` (or ``SPAN_ONLY``/``SPAN_AND_EVENT``),
    read at each call. Off by default."""
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in _CAPTURE_VALUES


def search_scores() -> bool:
    """Whether a search's returned records get ``oam.search.result`` events (``OAM_OTEL_SEARCH_SCORES``)."""
    return bool(conf.get("OAM_OTEL_SEARCH_SCORES"))


def use_tracer_provider(provider: TracerProvider | None) -> None:
    """Send the engine's spans to ``provider`` instead of the global one (None: the global one again).

    For tests and for an application that keeps its own provider: OpenTelemetry lets the global provider be set
    once per process."""
    global _override, _tracer
    _override, _tracer = provider, None


def get_tracer() -> Tracer:
    """The engine's tracer: from ``use_tracer_provider``'s provider, else the global one. The global one's is the
    API's proxy tracer, which follows a provider set later (``configure_from_env``, ``opentelemetry-instrument``)."""
    global _tracer
    if _tracer is None:
        provider = _override if _override is not None else trace.get_tracer_provider()
        _tracer = provider.get_tracer(SCOPE)
    return _tracer


@contextmanager
def memory_span(operation: str, *, store_id: str | Callable[[], str] | None = None,
                attributes: Mapping[str, Any] | None = None) -> Iterator[Span]:
    """A span named ``operation`` with ``gen_ai.operation.name`` set to it, kind INTERNAL, current inside.

    ``store_id``: the project's slug (``gen_ai.memory.store.id``), or a callable returning it, called only when
    the span records (it may query). ``attributes``: more attributes at the start; None values are left out.
    An exception leaving the block sets ``error.type`` and the ERROR status to its class name, and goes on.
    Callers add attributes known later on the yielded span, after checking ``span.is_recording()``.
    """
    start = {OPERATION_NAME: operation}
    if attributes:
        start.update((name, value) for name, value in attributes.items() if value is not None)
    span = get_tracer().start_span(operation, kind=SpanKind.INTERNAL, attributes=start)
    if not span.get_span_context().is_valid:
        # No SDK: the API's invalid span, nothing to record or to hand on to children. Not made current: that
        # cost 9.5 us a span here (context attach and detach); this whole path costs 5 us (2.6 of them the
        # ``with`` statement itself), against milliseconds for any traced operation.
        yield span
        return
    with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
        if store_id is not None and span.is_recording():
            span.set_attribute(STORE_ID, store_id() if callable(store_id) else store_id)
        try:
            yield span
        except Exception as exc:
            if span.is_recording():
                failed(span, type(exc).__qualname__)
            raise


def failed(span: Span, error_type: str) -> None:
    """Mark ``span`` as ended in an error of type ``error_type`` (``error.type`` and status ERROR, no message)."""
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """Set each attribute whose value is not None on a recording span."""
    if span.is_recording():
        span.set_attributes({name: value for name, value in attributes.items() if value is not None})


def set_user(span: Span, user_id: Any) -> None:
    """``user.id``, only with content capture on (personal data; the module docstring) and a user given."""
    if isinstance(user_id, str) and span.is_recording() and capture_content():
        span.set_attribute(USER_ID, user_id)


def set_content(span: Span, *, query: str | None = None, records: Sequence[Mapping[str, Any]] | None = None) -> None:
    """The opt-in content attributes, only with content capture on: ``gen_ai.memory.query.text`` = ``query``,
    ``gen_ai.memory.records`` = ``records`` as a JSON string (each ``{"content": ..., "id": ..., "score": ...,
    "metadata": {...}}``, ``gen-ai-memory-records.json``)."""
    if not span.is_recording() or not capture_content():
        return
    if query is not None:
        span.set_attribute(QUERY_TEXT, query)
    if records is not None:
        span.set_attribute(RECORDS, json.dumps(list(records), ensure_ascii=False, default=str))


def record_kind(record: Message | MemoryRecord | ImageRecord) -> str:
    """``"message"``, ``"image"`` or ``"memory"``: the index's source kind of a record (the key kind of
    ``search_records``' ``explain``)."""
    if isinstance(record, Message):
        return "message"
    return "image" if isinstance(record, ImageRecord) else "memory"


def result_records(results: Sequence[SearchResult]) -> list[dict[str, Any]]:
    """Search results as ``gen_ai.memory.records`` items: id, content (the record's text), score, and the record
    type and cosine distance in ``metadata``."""
    return [{"id": r.record_id, "content": r.content, "score": r.score,
             "metadata": {"record_type": r.record_type, "distance": r.distance}} for r in results]


def result_events(span: Span, results: Sequence[SearchResult],
                  explain: Mapping[tuple[str, str], Mapping[str, float | int]]) -> None:
    """The "why was this recalled" trace: one ``oam.search.result`` event per result, in order.

    Attributes: ``gen_ai.memory.record.id`` (public id), ``oam.search.record_type``, ``oam.search.rank`` (1 =
    first returned), ``oam.search.score`` (the ranking score, higher is better), ``oam.search.distance`` (cosine
    distance of the best chunk, 0-2), then ``oam.search.<name>`` for each entry of ``explain[(kind, id)]``
    (``memory.search.ranking.search_records``: ranks from 1 and raw scores per arm, the fused RRF score, the
    second stage's signals in [0, 1]) and ``oam.search.graph.linked_count``. Each linked memory of a result then
    gets an ``oam.search.linked`` event: its id, ``oam.search.graph.from_record_id``, ``.hops`` (edges from the
    result), ``.relation_type`` and ``.relation_id``. Nothing when the span does not record.
    """
    if not span.is_recording():
        return
    for rank, result in enumerate(results, 1):
        attributes: dict[str, Any] = {
            RECORD_ID: result.record_id, "oam.search.record_type": result.record_type, "oam.search.rank": rank,
            "oam.search.score": float(result.score), "oam.search.distance": float(result.distance),
            "oam.search.graph.linked_count": len(result.linked),
        }
        for name, value in explain.get((record_kind(result.record), result.record_id), {}).items():
            if value is not None:
                attributes[f"oam.search.{name}"] = value
        span.add_event(RESULT_EVENT, attributes)
        for link in result.linked:
            span.add_event(LINKED_EVENT, {
                RECORD_ID: link.record_id, "oam.search.graph.from_record_id": link.from_record_id,
                "oam.search.graph.hops": link.hops, "oam.search.graph.relation_type": link.relation_type,
                "oam.search.graph.relation_id": link.relation_id,
            })


# --- the SDK from the environment ---------------------------------------------------------------------------

#: ``OTEL_TRACES_EXPORTER`` names this module builds: the SDK's console exporter, and OTLP over the protocol that
#: ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` / ``OTEL_EXPORTER_OTLP_PROTOCOL`` names (default ``http/protobuf``, the
#: OpenTelemetry specification's default), each from its own package.
OTLP_PACKAGES = {
    "http/protobuf": ("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                      "opentelemetry-exporter-otlp-proto-http"),
    "grpc": ("opentelemetry.exporter.otlp.proto.grpc.trace_exporter", "opentelemetry-exporter-otlp-proto-grpc"),
}


class TelemetryConfigError(ImproperlyConfigured):
    """The ``OTEL_*`` variables name an exporter this process cannot build (its package is not installed, or the
    name is unknown); the message names the variable and the package to install."""


def wanted(environ: Mapping[str, str]) -> bool:
    """Whether the environment asks for traces: ``OTEL_TRACES_EXPORTER`` set to anything but ``none``, or an OTLP
    endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) given; and
    ``OTEL_SDK_DISABLED`` not ``true``."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return exporters != "none"
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def exporters_from_env(environ: Mapping[str, str]) -> list[Any]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` names (comma-separated; default ``otlp``): ``console`` (the SDK's
    ``ConsoleSpanExporter``, to this process's standard output), ``otlp`` (``OTLPSpanExporter`` of the protocol's
    package, which reads its endpoint, headers and timeout from the ``OTEL_EXPORTER_OTLP_*`` variables itself),
    ``none``.
    Raises ``TelemetryConfigError`` for an unknown name or protocol, or an OTLP package that is not installed."""
    import importlib

    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if n.strip()]
    exporters: list[Any] = []
    for name in names:
        if name == "none":
            continue
        if name == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stdout))
        elif name == "otlp":
            protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
            if protocol not in OTLP_PACKAGES:
                raise TelemetryConfigError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: this service exports "
                                           f"traces over {' or '.join(OTLP_PACKAGES)}")
            module, package = OTLP_PACKAGES[protocol]
            try:
                exporter_class = importlib.import_module(module).OTLPSpanExporter
            except ImportError:
                raise TelemetryConfigError(f"OTEL_TRACES_EXPORTER=otlp ({protocol}) needs the package {package}: "
                                           f"pip install {package} (or OTEL_TRACES_EXPORTER=console)") from None
            exporters.append(exporter_class())
        else:
            raise TelemetryConfigError(f"OTEL_TRACES_EXPORTER={name!r}: this service builds console, otlp or none "
                                       "(other exporters: run under opentelemetry-instrument)")
    return exporters


def configure_from_env(environ: Mapping[str, str] | None = None,
                       install: Callable[[TracerProvider], None] = trace.set_tracer_provider) -> TracerProvider | None:
    """Install an SDK ``TracerProvider`` from the standard variables when they ask for traces (``wanted``) and no
    provider is set yet (under ``opentelemetry-instrument`` one is: it is kept); return it, or None.

    The provider takes its resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``; else ``service.name``
    ``oam-site``) and sampler
    (``OTEL_TRACES_SAMPLER``) from the environment as the SDK does, with one ``BatchSpanProcessor`` (its
    ``OTEL_BSP_*`` variables) per exporter of ``exporters_from_env``; it is shut down (flushed) at exit.
    ``environ``: the variables this module reads, default ``os.environ`` (the SDK's own pieces read
    ``os.environ``); ``install``: default ``opentelemetry.trace.set_tracer_provider``.
    Raises ``TelemetryConfigError`` as ``exporters_from_env`` does.
    """
    environ = os.environ if environ is None else environ
    if not wanted(environ) or not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    exporters = exporters_from_env(environ)
    if not exporters:
        return None
    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = SdkTracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider)
    return provider
