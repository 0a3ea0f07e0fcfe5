"""Tools for development and measurement, not for serving: the LoCoMo loader and the local LLM server.

Modules: ``locomo`` (``locomo10.json`` read into plain values, evidence scoring for ``bench/``),
``llm_server`` (llama.cpp's OpenAI-compatible server on loopback with the SmolLM2-135M GGUF).
"""
