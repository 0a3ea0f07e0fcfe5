"""Request and response bodies of the JSON API (``XxxIn`` / ``XxxOut``), one module per resource.

``threads/schemas/<resource>.py`` holds the bodies of ``threads/api/<resource>.py``
(``threads/api/__init__.py`` says the layout): ``common`` (request base, error
bodies, shared field types), ``threads``, ``messages``, ``memories``,
``images``, ``links``, ``search``, ``context``, ``extraction``, ``records``,
``profiles``, ``keys``, ``erasure``, ``history``, ``review``. A body another
resource answers too is imported from its own resource's module
(``memories.MemoryOut`` in search hits, the review queue and history).
ninja names each OpenAPI component after its class, so class names are
unique across the package.

Input schemas forbid unknown keys (the spec rejects unexpected keyword
arguments) and use strict ints and bools, so ``"5"`` or ``true`` is not read as
a number. Omitted and explicit ``null`` differ: the API passes only the keys a
client sent (``model_fields_set``) to ``memory.client``, so an omitted key is
``NOTSET`` there and the spec's default applies. Where ``null`` has no meaning
the type is not nullable and the default shown in the docs is what omission means.
"""
