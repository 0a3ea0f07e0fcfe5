"""Staff pages: threads, a thread's records, the review queue, search playground, context-card preview, quality.

One module per resource, routed by ``staff/urls.py``:

- ``common``: the staff gate (``staff_required``), the opened thread (``Opened``, ``open_thread``), 404s
  (``visible_project``, ``found``), URLs, focus, the delete confirmation; the status and error constants;
- ``regions``: the thread page's regions (context of each) and the responses a record write answers with;
- ``projects``: the staff home and the project list;
- ``threads``: a project's thread list, a thread's page, its timeline and memories regions;
- ``messages``, ``memories``, ``relations``, ``images``: a thread's records (edit, delete; add a memory or a
  relation; restore a memory's version; serve an image);
- ``extraction``: the extraction progress region, extract now;
- ``context``: the context-card preview;
- ``search``: the search playground;
- ``quality``: the quality dashboard of a project or a thread;
- ``review``: the review queue and its decisions.

Thin edges (docs/architecture.md, "Layers"): parse the form, make one call into
``memory`` (the door below), render. Reads go through ``memory.reports``
(``browse``, ``quality``) and ``memory.records``. Every page works without
JavaScript (forms post, then redirect back); with htmx a form swaps only its
region (one view serves the page and its fragment, ``"page.html#region"`` when
``request.htmx``).

The door of a write: a view calls ``memory.client``, the ``Thread`` handle
``open_thread`` opens (``handle.api``) or an ``AgentMemory``, the spec methods
the JSON API calls too; the client does the restricted-key checks that a direct
service call must remember. A view calls a service only where the client has
no method that does the same, gives it the tenant as the client would
(``allows=Tenant.allows``) and says why in a comment: the memory edit
(``memories.memory_edit``: the client cannot retype a memory) and the review
decisions (``review``: the client has none). Staff act for a whole project (an
unrestricted ``Tenant``); the staff user is the actor of the history entries
every write makes (``staff_required``).

Errors: the ``memory.core.errors.DomainError`` (a ``ValueError``/``TypeError``/``KeyError``
naming its field) that ``memory`` raises is shown next to the field it names
(``staff.forms.add_service_error``) with status 422, htmx or not; a thread,
message, memory, image or relation that is not there is a 404, and so is a
project the signed-in user may not see (``memory.records.tenancy.staff_project``:
superusers see every project, other staff the projects they are members of),
so a staff user cannot tell another project from one that does not exist.

htmx writes also refresh the header counts out of band (``#thread-counts``)
and name, in ``HX-Trigger-After-Settle`` (event ``staff-focus``), the DOM id
of the element that should get keyboard focus after the swap: the record
saved, else its region's heading (``static/staff/staff.js``). GET views also
answer HEAD (``require_safe``).
"""
