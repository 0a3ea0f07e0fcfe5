"""Context cards and thread summaries (spec: ``get_summary``, ``get_context_card``).

Modules: ``summaries`` (the running thread summary, refreshed by the LLM when due, and its transcript
fallback), ``cards`` (the context card: that summary, the records found by a search of the thread's scope,
the recent messages), ``card_log`` (the context-card log's reads and codec: replay with ``as_of``, issue #32).
"""
