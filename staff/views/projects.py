"""The staff home and the project list."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_safe

from memory.records.tenancy import staff_projects
from memory.reports import browse
from staff.views.common import default_url, staff_required


@require_safe
@staff_required
def home(request: HttpRequest) -> HttpResponse:
    """``/staff/``: the default project's thread list, or the project list for a user who may not see it."""
    return redirect(default_url(request, "staff:thread_list"))


@require_safe
@staff_required
def project_list(request: HttpRequest) -> HttpResponse:
    """``/staff/projects/``: the projects the user may see (``staff_projects``) with their thread counts, each
    linking to its threads."""
    return render(request, "staff/project_list.html",
                  {"projects": browse.project_browse(projects=staff_projects(request.user)), "nav": "projects"})
