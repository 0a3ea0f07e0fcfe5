"""Language models: the chat-completion adapters and every prompt the engine sends.

Imports only the tables' constants and ``memory.core``, so every floor above may use it.

Modules: ``adapters`` (the ``Llm`` interface, its errors, the parse/validate/retry loop, the OpenAI-compatible
adapter and the SDK ``ILlm`` wrapper; ``get_llm``, ``as_llm``), ``replies`` (a reply, its JSON parse and
schema check, a server's status errors, call statistics; pure), ``scripted`` (``ScriptedLlm``, the test
double with queued replies), ``prompts`` (every prompt and reply schema: extraction, judge, linking,
summary, captions).
"""
