"""Adapters that plug OAM Site's memory into agent frameworks, on the in-process client (``memory.client``).

Each adapter only adapts arguments and calls ``memory.client.AgentMemory`` and its ``Thread`` handles; the
rules (ids, limits, tenancy, TTL, the metadata filter grammar, search) are the engine's. Each framework is an
optional dependency (requirements-dev.txt installs both for the tests). Beside ``threads | staff`` in the
layers of ``.importlinter``: imports ``memory``, never ``oam_site``, ``threads`` or ``staff``.

Modules:

* ``langgraph``: ``OamStore``, a LangGraph ``BaseStore`` over OAM memories (namespace -> user/agent/thread
  scope, ``search(query=...)`` -> hybrid search, ``filter`` -> the metadata filter, ``ttl`` -> ``ttl_days``).
* ``openai_agents``: ``OamSession``, an OpenAI Agents SDK ``Session`` over one OAM thread's messages.

Import each name from its module: this package exports nothing.
"""
