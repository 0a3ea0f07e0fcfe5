"""Rules and reads over the engine's tables: what a value must be, who may see a row, and how rows are read.

Above ``memory.llm`` and the tables, below the index writer: nothing here writes a search chunk.

Modules:

* ``validators``: every argument check (``check_id``, ``check_metadata``, ``check_bounded_int`` ...).
* ``tenancy``: projects, staff projects, the ``Tenant`` a client acts for.
* ``selectors``: reads of threads, messages, memories and images for the API and the client.
* ``listing``: project-wide lists (the SDK's client-level ``list_*``).
* ``metadata_filter``: the spec's ``metadata_filter`` validated and compiled to a ``Q`` that runs in SQL.
* ``metadata_sql``: that ``Q``'s condition: the parsed filter's nodes and their SQLite and Oracle SQL.
* ``history``: the history of every memory (``oam_memory_versions``): versions, actors, reads.
* ``as_of``: recorded time (issue #32): memories rebuilt from their history at an instant, erasure marks.
* ``review_rules``: the review queue's policy (which reads hide a pending memory), its reads and the
  injection scan; the decisions are ``memory.services.review``.
* ``provenance``: derived memories follow their source messages (``OAM_DERIVED_MEMORY_POLICY``).
* ``derivations``: ``derived_from`` edges between memories (issue #32): the argument's rule, what a caller may
  name, the walk to every dependant, the reads of flagged memories (the flagging is ``memory.links.dependants``).
* ``image_rules``: untrusted image bytes: limits, validation with Pillow, captions by the thread's LLM.
* ``admin_log``: the Django admin's history of the engine's records, erased with them.
"""
