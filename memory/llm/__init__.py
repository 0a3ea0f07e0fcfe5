"""Language models: the chat-completion adapters and every prompt the engine sends.

Imports only the tables' constants and ``memory.core``, so every floor above may use it.

Modules: ``adapters`` (OpenAI-compatible and scripted LLMs that return text or JSON validated against a
schema; ``get_llm``), ``prompts`` (every prompt and reply schema: extraction, judge, linking, summary, captions).
"""
