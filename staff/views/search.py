"""The search playground: an operator's search across the threads of a project (``AgentMemory.search_project``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from memory.client import AgentMemory
from staff.forms import SearchForm, add_service_error
from staff.views.common import (
    INVALID,
    SERVICE_ERRORS,
    default_url,
    redirect_keeping_query,
    staff_required,
    visible_project,
)


@require_safe
@staff_required
def default_search(request: HttpRequest) -> HttpResponse:
    """``/staff/search/`` (the address before projects): the default project's search page, same query."""
    return redirect_keeping_query(request, default_url(request, "staff:search"))


@require_safe
@staff_required
@vary_on_headers("HX-Request")
def search(request: HttpRequest, project: str) -> HttpResponse:
    """Search playground: ``AgentMemory.search_project``, an operator's search across the threads of a project
    (omitted ids leave their dimension open; given ones match exactly).

    Results show rank, score, distance, type, where each record came from
    (thread, user, agent; a memory's source messages) and linked memories.
    htmx: the ``#search-panel`` fragment (form and ``#search-results``).
    """
    client = AgentMemory(project=visible_project(request, project))
    form = SearchForm(request.GET if "query" in request.GET else None,
                      initial={"thread_id": request.GET.get("thread_id", "")})
    results, status = None, 200
    if form.is_bound and form.is_valid():
        try:
            arguments = form.arguments()
            results = client.search_project(arguments.pop("query"), **arguments)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
            results = None
    if form.is_bound and not form.is_valid():
        status = INVALID
    template = "staff/search.html" + ("#search-panel" if request.htmx else "")
    return render(request, template, {"form": form, "results": results, "nav": "search", "project": client.project},
                  status=status)
