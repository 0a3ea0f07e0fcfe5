"""Writes of the memory engine: threads, messages, memories and images with their search chunks.

Modules, one per behaviour:

* ``threads``, ``messages``, ``memories``, ``images``: create, update and delete each entity;
* ``review``: the review queue's decisions (approve, edit-then-approve, reject; the rules are
  ``memory.records.review_rules``);
* ``extraction``: running an extraction job and storing what it finds (``extraction_after_add``,
  ``extraction_after_edit``, ``run_inline``, ``job_run``; the job bookkeeping is ``memory.extraction``);
* ``erasure``: deleting for good (every delete ends here) and the expiry purge;
* ``scrub``: making committed deletes final in the storage (``storage_scrub``, after an erasure, a purge and
  the admin's deletes);
* ``cards``: serving context cards, and the card log that replays them (issue #32: ``context_card_get``);
* ``portability``: export and import of one user's memory as JSON Lines;
* ``profiles``: user and agent profiles (``add_user``/``add_agent``);
* ``parts`` parses message input; ``common`` holds the thread lock, the TTL refresh and fenced deletes.

Argument checks are ``memory.records.validators``; the search chunks are written only
through ``memory.index.writer``. Import each name from its module
(``from memory.services.memories import memory_add``): this package exports nothing.

Every function is keyword-only, validates everything before it writes, embeds
outside the transaction, and writes a record together with its ``SearchChunk``
rows in one transaction, so a batch with one bad item writes nothing and a
failure leaves nothing half-written (docs/architecture.md, "Flows").

Errors follow the spec: ``ValueError`` (``InvalidArgument``/``Conflict``) for bad
values, ``TypeError`` for bad types, ``KeyError`` (``NotFound``) for records
that are not there, expired, or owned by another thread.

Projects (``memory.records.tenancy``): a function works in the project of the thread
row it is given (or of ``project``), takes and returns the caller's public
ids, and stores rows under stored ids (``stored_id``) with their ``project``
column set, so nothing it does can reach another project's records.
"""
