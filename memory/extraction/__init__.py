"""Automatic memory extraction: typed memories from a thread's messages, with provenance.

This package is the extraction below the write services: job rows and their queue, the
LLM's candidates and the duplicate judge. Running a job, which stores what it extracts
through the services, is ``memory.services.extraction`` one floor up.

Flow (docs/architecture.md, "Flows"): ``add_messages`` commits the raw
messages first, then ``extraction_after_add`` decides whether extraction is
due and records an ``ExtractionJob`` over the new message range. INLINE runs
it at once (``run_inline``); BACKGROUND hands its id to the Dramatiq actor
``memory.tasks.extract_job`` after commit. ``job_run`` does the work:

1. claim the job (a transaction: it must be queued and, for ``add_messages``
   jobs, start right after the thread's watermark ``extracted_through_seq``);
2. split the range into LLM calls (``plan_slices``: at most
   ``memory_extraction_window`` target messages per call, under
   ``memory_extraction_token_limit`` prompt tokens) and ask the LLM for
   ``{"memories": [{memory_type, content, source_message_ids}]}`` against a
   JSON schema whose ``source_message_ids`` can only name the call's targets;
3. compare each candidate with the scope's stored memories (``decide``):
   cosine distance below ``DUPLICATE_DISTANCE`` is the same memory (skipped);
   below ``RELATED_DISTANCE`` a short LLM question tells restates / updates /
   contradicts / unrelated; updates and contradictions are stored with a
   relation (``memory.links``: supersedes / contradicts) and the decision in
   ``metadata["extraction"]``;
4. one transaction writes the memories and their chunks
   (``services.memory_add``), the relations, the new watermark and the job's
   counts, if and only if the job still holds its claim and the watermark is
   where it was: a range is never extracted twice, even when a message is
   delivered twice or a slow worker outlives its claim;
5. progress events go to the thread's channel-layer group after commit
   (``memory.core.progress``), then the durable summary is refreshed when due
   (``memory.context.summaries.summary_refresh_if_due``).

The watermark is the truth and the queue only a trigger: ``sweep`` (worker
start-up and every ``OAM_EXTRACTION_SWEEP_SECONDS``) re-queues jobs whose
worker died, re-sends jobs whose queue message was lost, and creates a job for
messages that never got one.

Failures never touch the raw messages. An LLM that is unreachable (refused,
timeout, 429, 5xx) puts the job back in the queue with a doubling backoff
(``jobs.retry_later``) for ``OAM_EXTRACTION_RETRY_HORIZON_SECONDS`` from its
first such failure, its range pending meanwhile, so an outage's messages are
extracted when the LLM comes back (issue #34); other transient errors are
retried by Dramatiq (``OAM_EXTRACTION_MAX_ATTEMPTS`` claims in all, a delete's
fence not counted). Invalid output after the adapter's retries skips that call;
a job that fails for good (``failure``: permanent, or transient once the
horizon ended) is marked failed and the watermark moves past it (spec:
"Extraction failures count as finished"); it stays listed
(``recovery.failed_ranges``) until ``memory.services.extraction.extraction_rerun``
queues it again.

Editing a message (``extraction_after_edit``) re-extracts that message with
its earlier history as context when it was already extracted; such jobs
never move the watermark (spec: update_message Notes).

Projects: a job works in its thread's project. The per-process bookkeeping is
keyed by the thread's stored id (``memory.records.tenancy``); candidates are compared
with memories of the same project only; ids in events, metadata and
``source_message_ids`` are public.

Modules: ``config`` (the SDK's ``MemoryExtractionConfig`` and its enums),
``settings`` (the ``OAM_EXTRACTION_*`` settings and constants), ``queue``
(sending job ids to the worker), ``tracker`` (what this process knows beyond
the database, and ``wait_for_extraction``), ``jobs`` (the job state machine:
schedule, fence, claim, release), ``candidates`` (slices of messages and the
LLM's candidates), ``dedup`` (duplicates, updates, contradictions),
``recovery`` (the sweep and the state report), ``waiting`` (the cross-process
wait for a thread's extraction, HTTP ``?wait=``). Running a job is
``memory.services.extraction``; the prompts and reply schemas are
``memory.llm.prompts``. Import each name from its module: this package exports nothing.
"""
