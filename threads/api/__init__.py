"""The JSON API: one ninja ``Router`` per resource, joined by ``routes.router``, which ``oam_site.api`` mounts at
``/api/`` (django-ninja's "Routers" guide: a router per resource, joined with ``add_router``).

Layout. ``threads/api/<resource>.py`` holds one resource's routes on its own
``Router(tags=["<resource>"])`` (the tag groups them in ``/api/docs``), with
the helpers only those routes use; the request and response bodies of those
routes are in ``threads/schemas/<resource>.py``, the module of the same name.
What several resources share is in ``common`` (and ``threads/schemas/common.py``).
A resource module imports ``common`` and schemas, never another resource module.

Modules, in the order ``routes.ROUTERS`` joins them (the OpenAPI document's order):

* ``routes``: the root router; ``common``: permissions, error responses,
  ``Pagination``, the request's client (``client_for``, ``thread_for``),
  read-backs, JSON text parameters, ``project_admin``;
* ``threads``: ``/threads``, ``/threads/{thread_id}``;
* ``messages``, ``memories``, ``images``, ``links`` (relations): a thread's
  records, under ``/threads/{thread_id}/``;
* ``search``: ``/threads/{thread_id}/search``, ``/search``;
* ``context``: a thread's ``summary`` and ``context-card``;
* ``extraction``: ``/threads/{thread_id}/extraction``, ``/threads/{thread_id}/extraction/rerun``;
* ``records``: the project's ``/messages``, ``/memories``, ``/images``, and
  ``/memories/{memory_id}`` whatever thread holds it;
* ``profiles``: ``/profiles/{kind}``; ``keys``: ``/keys``;
* ``erasure``: ``/users/{user_id}``, ``/agents/{agent_id}``, ``/erasures``;
* ``history``: ``.../memories/{memory_id}/history``; ``export``:
  ``/users/{user_id}/export``; ``review``: ``/review/memories``, ``/review/dependants``.

operationIds stay ``threads_api_<function>`` whatever module holds a route
(``oam_site.api.OamNinjaAPI.get_openapi_operation_id``), so function names
are unique across the package. ninja names a route's URL after its function too.

Each operation parses the body, makes its call into ``memory``, and shapes
the answer. Only the keys a client sent are forwarded
(``model_dump(exclude_unset=True)``), so an omitted key is ``NOTSET`` in
``memory`` and the spec's default applies. Domain errors become HTTP statuses
in ``oam_site.api``.

Operations are ``async def``: they run on the server's event loop and await
the client's ``_async`` methods, or ``memory.core.aio.in_worker`` of the same
call where the client has none, so the engine's synchronous work (ORM,
embedder, LLM) runs in the request's own worker thread and the loop never
waits on it: a slow LLM caption or extraction wait holds up no other request.
Nothing here reads the database on the loop: handles and rows are loaded in
the worker, lists are lazy querysets read there (``common.Pagination``), and
answers are plain values by the time ninja renders them. ``OAM_API_SYNC``
serves the same operations as sync views (``oam_site.api.api_urls``), for
``bench/api_load.py`` to compare.

Doors: which engine call a route makes. A route calls ``memory.client``: the
``AgentMemory`` of the request's key (``common.client_for``: its project,
and the user and agent a restricted key is fixed to) or a ``Thread`` it hands
out (``common.thread_for``, 404 outside the key's reach). The client does the
checks a restricted key needs. Where the client has no such call, a route
calls an engine function that takes the tenant as an argument (``tenant=``,
or its parts ``restrict=tenant.row_filter()``, ``allows=tenant.allows``), or
a thread row the client handed out. Project-wide admin routes take the
project of an admin key with no fixed user or agent (``common.project_admin``).
No route reaches the engine any other way. The routes that call the engine
beside the client today, and why:

* lists paged by ``limit``/``offset`` with a ``count`` read lazy querysets,
  where the client's ``list_*`` answer capped lists:
  ``threads.thread_list`` (``memory.records.selectors.thread_list(tenant=)``),
  ``messages.message_list`` (``selectors.message_page`` of the thread's row,
  which also answers ``get_messages`` windows), ``images.image_list``
  (``selectors.image_records`` of the thread's row), ``records.project_*_list``
  (``memory.records.listing.*_queryset(tenant=)``), ``profiles.profile_list``;
* read-backs after a client write (``selectors.message_stored``,
  ``memory_stored``, ``image_stored`` by id in the key's project or thread):
  the client's getters hide a row whose TTL is already over, the write
  happened (``messages``, ``memories``, ``images``, ``records``, ``history``,
  ``review``);
* ``messages.message_delete``: ``memory.records.provenance.collecting`` around
  the client's delete, for the receipt of the memories derived from it;
* ``images.image_add``/``image_update``: the base64 decoding and its limits,
  ``memory.records.image_rules.decode_image_base64`` (no database);
* ``extraction.thread_extraction``: ``memory.extraction.recovery.extraction_state``
  and ``memory.extraction.waiting.wait_until_settled`` of the thread's row: the
  client has no state read, and its ``wait_for_memory_extraction`` waits on
  this process's work only and raises on timeout (the route reads the stored
  jobs of every worker and answers ``settled: false``);
* ``extraction.thread_extraction_rerun``: ``memory.services.extraction.extraction_rerun`` of the thread's row
  (``thread_for`` under a write key): the client has no re-run of failed ranges;
* ``profiles``: ``memory.services.profiles`` (``tenant=``): one route serves
  users and agents (``kind``), the client has one method per kind;
* ``erasure.erasure_list``/``erasure_get``, ``export.user_export``:
  ``memory.services.erasure`` receipts and ``memory.services.portability``
  (``project=`` of ``project_admin``): project-wide admin reads the client
  has not;
* ``review``: ``memory.records.review_rules.review_records(restrict=)``,
  ``memory.records.derivations.flagged_queryset(restrict=)`` (flagged dependants, issue #32) and
  ``memory.services.review`` decisions (``allows=``, ``dependant_clear`` too): the review queue is not
  the SDK's, so the client has no methods for it;
* ``keys``: ``threads.auth`` (the delivery app's own keys, not the engine).
"""
