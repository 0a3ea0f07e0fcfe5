"""Relations between memory-like records: writes, lifecycle, graph expansion and autonomous linking.

Spec (the Oracle AI Agent Memory thread API spec): ``link_records``,
``update_record_link``, ``delete_record_link``; ``add_memory``'s
``memory_id_to_link``/``link_type``/``link_id``/``link_timestamp``/
``link_metadata`` and ``autonomous_linking``; ``search``'s ``num_hops`` and
``max_linked_results``.

Rules kept here:

* Both endpoints are live memory-like records ("memory", "fact", "guideline",
  "preference") whose ``thread_id`` is this exact thread; a record is never
  linked to itself; one relation per endpoint pair, in one orientation
  (``RecordLink.pair_key`` is the sorted pair, unique).
* ``relation_type`` reads source -> target, ``opposite_relation_type`` target ->
  source. Built-in types carry their fixed reverse label
  (``BUILTIN_RELATIONS``); a custom type's reverse defaults to the same label.
* Lifecycle: the target of a ``supersedes``, ``refines`` or ``duplicates``
  relation is invalid; when the last such relation into it goes away (deleted,
  retyped, or its other endpoint deleted) it is valid again. Status changes are
  written to the memory and its ``SearchChunk`` rows in the same transaction.
* Valid time (issue #32): a ``supersedes`` relation also closes its target's
  validity window at its source's start (``valid_from``, else event time, else
  creation time: ``rules.window_start``) unless an earlier ``valid_to`` stands
  (and only when either has a window: two memories without one are as before);
  removing or retyping the relation undoes a closing it made (``rules.reopen_window``).
  Each change is a history version naming the relation.
* Graph expansion (``linked_sql``/``attach_linked``): one recursive query walks
  relations in both directions from the direct memory results, bounded by the
  hop count, never revisiting a record on the same path, passing only through
  records the search may show (scope, expiry, status, ``valid_at``).
* Autonomous linking (``propose_links``): the LLM compares a new memory with its
  nearest stored memories of the thread and proposes relations from it, as
  JSON validated against ``link_schema``.

Ids: functions take and return public ids; rows hold stored ids of the
thread's project (``memory.records.tenancy``), so a relation never reaches another project.

Modules: ``rules`` (constants, checks, the status lifecycle), ``writes``
(link_records, update, delete, reads, ``add_memory``'s pending link),
``graph`` (graph expansion for search), ``autonomous`` (autonomous linking),
``dependants`` (``derived_from`` edges and flagging what was derived from a changed memory, issue #32; the
status lifecycle calls it, so it imports no other module here).
The prompt and reply schema are ``memory.llm.prompts``. Import each name from
its module: this package exports nothing.
"""
