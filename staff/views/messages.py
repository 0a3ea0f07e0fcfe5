"""A thread's messages: inline edit and delete, through the thread's ``memory.client.Thread``."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from memory.reports import browse
from staff.forms import MessageEditForm, add_service_error
from staff.views.common import (
    DETAIL,
    FORM_CHOICES,
    INVALID,
    SERVICE_ERRORS,
    Edit,
    confirm,
    detail_url,
    found,
    open_thread,
    record_url,
    staff_required,
    with_focus,
)
from staff.views.regions import counts, detail_context


@require_POST
@staff_required
def message_edit(request: HttpRequest, project: str, thread_id: str, message_id: str) -> HttpResponse:
    """Edit a message's content and metadata through ``Thread.update_message`` (re-embeds, re-extracts).

    Only changed fields are sent: unchanged content is not re-embedded.
    htmx: the message's list item.
    """
    handle = open_thread(request, project, thread_id)
    row = found(browse.message_row, handle.row, message_id)
    form = MessageEditForm(request.POST, message=row)
    if form.is_valid():
        try:
            changes = form.changes()
            if changes:
                handle.api.update_message(message_id, **changes)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        edit = Edit("message", message_id, form)
        if request.htmx:
            body = render_to_string(DETAIL + "#message", {"thread": handle.row, "project": handle.project,
                                                          "message": row, "edit": edit, "now": timezone.now(),
                                                          **FORM_CHOICES}, request)
            return with_focus(HttpResponse(body, status=INVALID), f"message-{row.seq}")
        return render(request, DETAIL, detail_context(handle, request, edit=edit), status=INVALID)
    if request.htmx:
        row.refresh_from_db()
        body = render_to_string(DETAIL + "#message", {"thread": handle.row, "project": handle.project,
                                                      "message": row, "now": timezone.now(), **FORM_CHOICES}, request)
        return with_focus(HttpResponse(body + counts(request, handle)), f"message-{row.seq}")
    flash.success(request, "Message saved.")
    return redirect(detail_url(handle, f"message-{row.seq}"))


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def message_delete(request: HttpRequest, project: str, thread_id: str, message_id: str) -> HttpResponse:
    """GET: ask for confirmation. POST: ``Thread.delete_message`` (its chunks go with it).

    htmx POST: an empty body that removes the list item (and the header counts, out of band).
    """
    handle = open_thread(request, project, thread_id)
    row = found(browse.message_row, handle.row, message_id)
    if request.method != "POST":
        return confirm(request, handle, kind="message", record=row,
                       action=record_url(handle, "message_delete", message_id),
                       text=f"{row.role}: {row.content}")
    try:
        deleted = handle.api.delete_message(message_id)
    except TimeoutError as exc:
        return confirm(request, handle, kind="message", record=row, status=503, error=str(exc),
                       action=record_url(handle, "message_delete", message_id),
                       text=f"{row.role}: {row.content}")
    if not deleted:  # expired meanwhile: the spec's delete sees live messages only
        raise Http404(f"no live message {message_id!r}")
    if request.htmx:
        return with_focus(HttpResponse(counts(request, handle)), "timeline-heading")
    flash.success(request, "Message deleted.")
    return redirect(detail_url(handle, "timeline"))
