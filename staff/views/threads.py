"""A project's thread list and a thread's page, with the regions htmx reloads (timeline, memories)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from memory.models import Thread as ThreadRow
from memory.reports import browse
from staff.forms import ThreadFilterForm
from staff.views.common import (
    DETAIL,
    INVALID,
    default_url,
    detail_url,
    open_thread,
    redirect_keeping_query,
    staff_required,
    visible_project,
)
from staff.views.regions import counts, detail_context, records_context, records_response, timeline_context


@require_safe
@staff_required
def default_thread_list(request: HttpRequest) -> HttpResponse:
    """``/staff/threads/`` (the address before projects): the default project's thread list, same query."""
    return redirect_keeping_query(request, default_url(request, "staff:thread_list"))


@require_safe
@staff_required
@vary_on_headers("HX-Request")
def thread_list(request: HttpRequest, project: str) -> HttpResponse:
    """A project's threads with counts and last activity, filtered by ``q``, ``user_id``, ``agent_id``,
    ``metadata``; paged.

    htmx: the ``#thread-browser`` fragment (filters and list). A bad metadata
    filter is shown next to its field with status 422.
    """
    current = visible_project(request, project)
    form = ThreadFilterForm(request.GET)
    status = 200
    if form.is_valid():
        data = form.cleaned_data
        rows = browse.thread_browse(project=current, q=data["q"].strip(), user_id=data["user_id"].strip(),
                                    agent_id=data["agent_id"].strip(), metadata_filter=data["metadata"])
    else:
        rows, status = ThreadRow.objects.none(), INVALID
    page = Paginator(rows, browse.THREADS_PER_PAGE).get_page(request.GET.get("page"))
    template = "staff/thread_list.html" + ("#thread-browser" if request.htmx else "")
    return render(request, template, {"form": form, "page": page, "nav": "threads", "project": current},
                  status=status)


@require_safe
@staff_required
def thread_detail(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """A thread: header (``#thread-counts``), ``#timeline``, ``#memories``, ``#summary``, ``#relations``,
    ``#images``, ``#extraction-progress``."""
    handle = open_thread(request, project, thread_id)
    return render(request, DETAIL, detail_context(handle, request))


@require_safe
@staff_required
def timeline_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#timeline`` fragment, one page of messages (``?page=``), with the header counts out of band;
    the full thread page without htmx."""
    handle = open_thread(request, project, thread_id)
    if not request.htmx:
        return redirect(detail_url(handle) + (f"?page={request.GET['page']}" if "page" in request.GET else ""))
    body = render_to_string(DETAIL + "#timeline", {**timeline_context(handle, request), "edit": None}, request)
    return HttpResponse(body + counts(request, handle))


@require_safe
@staff_required
def memories_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#memories`` fragment with ``#relations`` and the header counts out of band (the live-extraction
    script reloads them)."""
    handle = open_thread(request, project, thread_id)
    return records_response(request, handle, records_context(handle))
