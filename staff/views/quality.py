"""The memory-quality dashboard of a project or of one thread (figures: ``memory.reports.quality``)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from memory.core.errors import NotFound
from memory.models import Project
from memory.models import Thread as ThreadRow
from memory.records import selectors
from memory.reports import quality as quality_figures
from staff.forms import QualityForm, add_service_error
from staff.views.common import INVALID, SERVICE_ERRORS, staff_required, visible_project


@require_safe
@staff_required
def quality(request: HttpRequest, project: str) -> HttpResponse:
    """The project's quality dashboard (``memory.reports.quality``): plots of memories per type over time, extraction
    yield, duplicates skipped, contradictions and supersessions, review queue age, rejected-candidate reasons.

    ``?days=`` picks the range (``memory.reports.quality.RANGES``); another value is shown next to the field with
    status 422 and no plots.
    """
    return _quality_page(request, visible_project(request, project), None)


@require_safe
@staff_required
def thread_quality(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The same dashboard for one thread of the project (404: no such thread, or a project not the user's)."""
    current = visible_project(request, project)
    try:
        row = selectors.thread_get(project=current, thread_id=thread_id)
    except NotFound:
        raise Http404(f"no thread {thread_id!r}") from None
    return _quality_page(request, current, row)


def _quality_page(request: HttpRequest, project: Project, thread: ThreadRow | None) -> HttpResponse:
    """Render ``staff/quality.html``: the figures go to the page as JSON (``json_script``), which
    ``static/staff/quality.js`` plots with the vendored Chart.js (no inline script: the CSP forbids it)."""
    query = request.GET.copy()
    if not query.get("days"):  # blank or absent: the default range, shown selected
        query["days"] = str(quality_figures.DEFAULT_DAYS)
    form = QualityForm(query)
    data, status = None, 200
    if form.is_valid():
        try:
            data = quality_figures.dashboard(project=project, thread=thread, **form.arguments())
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        data, status = None, INVALID
    return render(request, "staff/quality.html", {"project": project, "thread": thread, "form": form,
                                                  "dashboard": data, "nav": "threads" if thread else "quality"},
                  status=status)
