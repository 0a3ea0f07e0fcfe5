"""The search index: the one writer of ``oam_search_chunks`` and the SQLite vector cache.

Modules: ``writer`` (``index_record``, ``reindex_state``, ``unindex``, keyword contexts, fact keys: the only
code that writes ``SearchChunk`` rows), ``rebuild`` (imported rows' chunks and embedding texts, as the
services make them, and their chunk rows, written through the writer), ``vector_cache`` (exact
nearest-neighbour search for the embedded SQLite store: a process-local copy of the vectors), ``bulk``
(multi-row inserts and updates: Django's ``bulk_create``/``bulk_update``, or on Oracle one single-row
statement through ``executemany``; used for the chunks and for the messages inserted with them).
"""
