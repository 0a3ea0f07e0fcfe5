"""The memory engine: the Oracle AI Agent Memory thread API on Django models (docs/architecture.md).

Its packages are its floors, top to bottom; a module imports only the floors below its own
(``.importlinter``, contract ``engine-floors``):

* ``apps``, ``migrations``: Django's start-up, the schema history;
* ``admin``, ``management``, ``tasks``, ``checks``: the Django admin, ``manage.py`` commands, the Dramatiq
  actor, system checks;
* ``client`` (the Python API, the SDK's names), ``reports`` (staff read models), ``dev`` (LoCoMo and the
  local LLM server, for ``bench/`` and tests), ``review`` (the injection scan as ``memory.review.scan``);
* ``services``: every write, and running an extraction job;
* ``extraction`` (jobs, candidates, dedup) and ``context`` (summaries, context cards);
* ``search``; ``links`` (relations); ``index`` (the search index's writer);
* ``records``: rules and reads over the tables;
* ``llm``: LLM adapters and prompts;
* ``models`` (the tables), ``operations`` (index migrations), ``rerankers``;
* ``fields`` (``VectorField``), ``embedders``, ``backends`` (SQLite with sqlite-vec), ``signals``;
* ``core``: values, errors and settings that import no model.
"""
