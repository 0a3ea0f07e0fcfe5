"""A thread's extraction: its progress region, and extracting the pending messages now (through the thread's
``memory.client.Thread``)."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from memory.extraction.recovery import extraction_state
from staff.views.common import DETAIL, detail_url, open_thread, staff_required, with_focus


@require_safe
@staff_required
def extraction_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#extraction-progress`` fragment: the thread's extraction state as stored."""
    handle = open_thread(request, project, thread_id)
    return render(request, DETAIL + "#extraction",
                  {"thread": handle.row, "project": handle.project,
                   "extraction": extraction_state(thread=handle.row)})


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
    if request.htmx:
        state = extraction_state(thread=handle.row)
        return with_focus(render(request, DETAIL + "#extraction", {"thread": handle.row, "project": handle.project,
                                                                   "extraction": state, "note": note},
                                 status=status), "extraction-note")
    (flash.success if status == 200 else flash.error)(request, note)
    return redirect(detail_url(handle, "extraction-progress"))
