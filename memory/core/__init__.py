"""The bottom floor of the engine: values, errors, settings and helpers that import no model.

Everything above may import it; it imports nothing of the engine (``.importlinter``, "The engine's floors").

Modules:

* ``errors``: ``DomainError`` and the built-in types the spec names (``InvalidArgument``/``Conflict`` are
  ``ValueError``s, ``InvalidType`` a ``TypeError``, ``NotFound`` a ``KeyError``), the limits on one call's work.
* ``types``: the spec's public value types (records, configs, enums, ``SearchScope``) and ``NOTSET``, the
  omitted-argument marker, of type ``NotSet`` (parameters are annotated ``T | NotSet = NOTSET``).
* ``rendering``: records and context cards as the XML-like text agents paste into prompts.
* ``conf``: every ``OAM_*`` setting the engine reads, with default, type and bounds.
* ``ids``: stored ids (``"<project pk>:<public id>"``) and back.
* ``ttl``: timestamps and time-to-live rules of messages and memories.
* ``valid_time``: the validity window of memories (issue #32): instants read and checked, the half-open rule.
* ``chunking``: long text split into overlapping chunks for embedding; token estimates.
* ``locking``: row locks that work on SQLite and Oracle.
* ``aio``: the synchronous engine run from async code (``in_worker``, ``run_inline``).
* ``degraded``: guards that fail open (the cache, the channel layer, the broker): the registry of degraded
  parts ``/readyz`` reads, one warning a minute, the bounded per-process fallback of the rate counters.
* ``progress``: extraction progress events sent to a thread's channel-layer group after commit.
* ``batching``: the ``Embedder`` protocol, inputs cut into forward passes of like lengths (``length_batches``),
  concurrent embedding calls sharing passes (``MicroBatchingEmbedder``), the worker count.
* ``onnx``: a model shipped inside an installed package, run by onnxruntime on the CPU (``OnnxModel``).
* ``telemetry``: OpenTelemetry spans of the memory operations (search, memory writes and deletes, context cards,
  extraction) by the GenAI memory conventions: the tracer, ``memory_span``, the content rule
  (``capture_content``), the search score events, the SDK installed from the ``OTEL_*`` variables at start-up.
"""
