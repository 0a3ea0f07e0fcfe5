"""Context cards and thread summaries (spec: ``get_summary``, ``get_context_card``).

Modules: ``cards`` (the running thread summary, refreshed when due, and the context card built from a
search of the thread's records).
"""
