"""Search over every record kind on ``oam_search_chunks``: vector, keyword or hybrid.

Flow (docs/architecture.md, "Flows"): resolve the scope by the spec's rules →
the same SQL filter (scope, record types, status, expiry, metadata filter)
for every ranked list ("arm") → one result per record → fusion → token
budgets → relations followed for ``num_hops`` (``memory.links``) →
``SearchResult`` list, best first.

Arms, each ranked in the database:

* ``vector``: ``VectorDistance`` (cosine) between the query embedding and the
  chunk embeddings (which carry the record's date, ``services.embedding_text``).
* ``text``: BM25 (SQLite FTS5) / ``SCORE`` (Oracle Text ``CONTAINS``) on the
  chunk's own words.
* ``context``: the same on the chunk's ``context``: a message with the two
  turns on each side.

HYBRID (the default) fuses all three by weighted reciprocal rank fusion
(Cormack, Clarke and Büttcher, SIGIR 2009): ``score = Σ w / (k + rank)`` with
``k = 10`` and weights vector 1, text 1, context 2. Measured on LoCoMo
(bench/locomo_import.py, 1,536 questions, per-user scope): evidence recall@10
0.742 against 0.444 for vectors alone, 0.502 for plain BM25 and 0.532 for
plain RRF (k=60) of the two (``bench/locomo_import.py``, ``BASELINES_SOURCE_MD``).

HYBRID then has a second stage (``memory.search.second_stage``): a deeper
candidate pool from each arm (``ranking.candidate_pool``: ``POOL_DEPTH``
records each, with their raw scores and rows) rescored by signals, the fusion
among them: arm scores normalised per query, exact term and proper-noun
overlap, the speaker the query names, dates and relative times in the query
against the record's date, neighbours' words and meaning at a discount, and
validity. Its weights were chosen on the tuning half of LoCoMo
(``bench/locomo_tune.py``).

Two rules on top of the fusion: in HYBRID a keyword match whose
BM25 carries no evidence (``MIN_BM25_EVIDENCE``) gets no rank credit, so a
turn is not lifted by words every turn has, its neighbours' included; and a
memory never outranks the memory that superseded, refined or duplicated it
(``after_replacements``).

Projects: a search runs in one project (``SearchRequest.project_id``).
``filtered_chunks`` is the one place that filters chunks, and it always adds
``project_id``; the vector arm (SQLite cache, SQL ranking, Oracle's approximate
SQL), both keyword arms and graph expansion compile their WHERE clause from it.

Modules: ``request`` (argument checks, scope resolution, ``SearchRequest``),
``query`` (the filtered chunks and their compiled WHERE clause),
``backends`` (the vendor seam: SQLite with its vector cache, Oracle; chosen
by ``backend_for``), ``ranking`` (the arms, fusion, the candidate pool,
results, ``run_search``), ``second_stage`` (the signals and their weights;
pure), ``dates`` (what a query and a record say about time, for the second
stage's date signals; pure), ``as_of`` (search as of an instant, issue #32: the memories rebuilt from history,
ranked by vector, and the cache of historical vectors). Import each name from its module: this package
exports nothing.
"""
