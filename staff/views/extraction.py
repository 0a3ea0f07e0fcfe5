"""A thread's extraction: its progress region, extracting the pending messages now (through the thread's
``memory.client.Thread``) and re-running its failed ranges (``memory.services.extraction.extraction_rerun``: the
client has no such method)."""

from __future__ import annotations

import re

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from memory.core.errors import MAX_SQL_COUNT, NotFound
from memory.extraction.recovery import extraction_state
from memory.services.extraction import extraction_rerun
from staff.views.common import DETAIL, detail_url, open_thread, staff_required, with_focus


@require_safe
@staff_required
def extraction_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#extraction-progress`` fragment: the thread's extraction state as stored."""
    handle = open_thread(request, project, thread_id)
    return render(request, DETAIL + "#extraction",
                  {"thread": handle.row, "project": handle.project,
                   "extraction": extraction_state(thread=handle.row)})


def _region(request: HttpRequest, handle, note: str, status: int) -> HttpResponse:
    """After a POST: htmx gets the ``#extraction-state`` fragment with ``note`` (focused), a plain form a flash
    message and a redirect to the region."""
    if request.htmx:
        state = extraction_state(thread=handle.row)
        return with_focus(render(request, DETAIL + "#extraction", {"thread": handle.row, "project": handle.project,
                                                                   "extraction": state, "note": note},
                                 status=status), "extraction-note")
    (flash.success if status == 200 else flash.error)(request, note)
    return redirect(detail_url(handle, "extraction-progress"))


@require_POST
@staff_required
def extraction_rerun_view(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Run the thread's failed extraction ranges again: the one of form field ``job_id``, or all when it is
    empty (``extraction_rerun``, noted as by this staff user). 404 for a thread of a project the user may not
    see; a note with 422 for a ``job_id`` that is not a number, 404 for one that is not a failed job of the
    thread. htmx: the ``#extraction-state`` fragment with a note."""
    handle = open_thread(request, project, thread_id)
    raw = request.POST.get("job_id", "").strip()
    # ASCII digits only: str.isdigit() accepts "²" (int() then raised: a 500) and "٣" (read as 3)
    if raw and not (re.fullmatch(r"[0-9]{1,19}", raw) and 1 <= int(raw) <= MAX_SQL_COUNT):
        return _region(request, handle, f"job_id: must be a job number, not {raw[:40]!r}.", 422)
    try:
        jobs = extraction_rerun(thread=handle.row, job_id=int(raw) if raw else None,
                                by=f"staff {request.user.get_username()}")
    except NotFound:
        return _region(request, handle, f"job_id: job {raw} is not a failed extraction job of this thread.", 404)
    if not jobs:
        return _region(request, handle, "No failed extraction range to re-run.", 200)
    ranges = ", ".join(f"job {job.pk} (messages #{job.from_seq}–#{job.to_seq})" for job in jobs)
    return _region(request, handle, f"Queued again: {ranges}.", 200)


@require_POST
@staff_required
def extract_now(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Extract the pending messages now (``Thread.extract_pending_messages``); progress arrives over the socket.

    htmx: the ``#extraction-progress`` fragment with a note of what happened.
    """
    handle = open_thread(request, project, thread_id)
    status = 200
    try:
        job_id = handle.api.extract_pending_messages()
        if job_id is not None:
            note = f"Extraction job {job_id} started."
        elif handle.api.llm is None or not handle.api.memory_extraction_config.extract_memories:
            note, status = "Extraction is off for this thread: no LLM is configured (OAM_LLM_BASE_URL) " \
                           "or extract_memories is false.", 409
        else:
            note = "Nothing to extract: every message is already extracted or queued."
    except TimeoutError as exc:
        note, status = str(exc), 503
    return _region(request, handle, note, status)
