"""A thread's memories: add, inline edit, restore a version, delete.

Every write goes through the thread's ``memory.client.Thread`` but the edit,
which may retype a memory: ``memory.services.memories.memory_update`` with the
client's tenant (``memory_edit``).
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_http_methods, require_POST

from memory.core.errors import NotFound
from memory.reports import browse
from memory.services.memories import memory_update
from staff.forms import MemoryAddForm, MemoryEditForm, add_service_error
from staff.templatetags.staff_tags import domid
from staff.views.common import SERVICE_ERRORS, Edit, confirm, found, open_thread, record_url, staff_required
from staff.views.regions import after_write, invalid


@require_POST
@staff_required
def memory_add(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Store a manual memory through ``Thread.add_memory`` (embedded and searchable at once)."""
    handle = open_thread(request, project, thread_id)
    form = MemoryAddForm(request.POST)
    if form.is_valid():
        try:
            arguments = form.arguments()
            memory_id = handle.api.add_memory(arguments.pop("content"), **arguments)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        return invalid(request, handle, add_form=form, focus="memory-add")
    return after_write(request, handle, "Memory added.", f"memory-{domid(memory_id)}")


@require_POST
@staff_required
def memory_edit(request: HttpRequest, project: str, thread_id: str, memory_id: str) -> HttpResponse:
    """Edit content, type, status and TTL through ``services.memory_update`` (what ``Thread.update_memory``
    calls, plus ``memory_type``), scoped by the client's tenant as the client scopes it.

    Changed content is re-embedded; a new type moves the record, its chunks
    and its relation endpoints together. Only changed fields are sent.
    """
    handle = open_thread(request, project, thread_id)
    row = found(browse.memory_row, handle.row, memory_id)
    form = MemoryEditForm(request.POST)
    if form.is_valid():
        try:
            changes = form.changes(row)
            if changes:
                # The service, not Thread.update_memory: the client cannot retype (memory_type is not a spec argument).
                memory_update(thread=handle.row, memory_id=memory_id, allows=handle.client.tenant.allows,
                              retention=handle.client.retention_config, **changes)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        return invalid(request, handle, edit=Edit("memory", memory_id, form), focus=f"memory-{domid(memory_id)}")
    return after_write(request, handle, "Memory saved.", f"memory-{domid(memory_id)}")


@require_POST
@staff_required
def memory_restore(request: HttpRequest, project: str, thread_id: str, memory_id: str) -> HttpResponse:
    """Undo from the timeline: restore the POSTed ``version`` with ``Thread.restore_memory_version`` (a new
    version; the memory is re-indexed). 404 for a missing memory or version, 400 for a version that is not a
    positive number."""
    handle = open_thread(request, project, thread_id)
    found(browse.memory_row, handle.row, memory_id)
    version = request.POST.get("version", "")
    if not version.isascii() or not version.isdigit() or not 0 < int(version) < 2**31:
        return HttpResponse("version: must be a positive integer", status=400, content_type="text/plain")
    try:
        number = handle.api.restore_memory_version(memory_id, int(version))
    except NotFound:
        raise Http404("no such version") from None
    return after_write(request, handle, f"Version {version} restored as version {number}.",
                       f"memory-{domid(memory_id)}")


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def memory_delete(request: HttpRequest, project: str, thread_id: str, memory_id: str) -> HttpResponse:
    """GET: ask for confirmation. POST: ``Thread.delete_memory`` (relations go, their targets revalidate)."""
    handle = open_thread(request, project, thread_id)
    row = found(browse.memory_row, handle.row, memory_id)
    action = record_url(handle, "memory_delete", memory_id)
    text = f"[{row.memory_type}] {row.content}"
    if request.method != "POST":
        return confirm(request, handle, kind="memory", record=row, action=action, text=text)
    try:
        deleted = handle.api.delete_memory(memory_id)
    except TimeoutError as exc:
        return confirm(request, handle, kind="memory", record=row, action=action, text=text, status=503,
                       error=str(exc))
    if not deleted:
        raise Http404(f"no live memory {memory_id!r}")
    return after_write(request, handle, "Memory deleted.", "memories", focus="memories-heading")
