"""The thread page and its regions (``staff/thread_detail.html``): the context of each region, and the responses a
write of a record answers with.

Regions: ``#thread-counts`` (header), ``#timeline``, ``#memories``, ``#summary``,
``#relations``, ``#images``, ``#extraction-progress``. An htmx write swaps its
region and refreshes the header counts out of band; a failed one shows its form
again with status 422, in its region for htmx, in the whole page otherwise.
"""

from __future__ import annotations

from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils import timezone

from memory.extraction.recovery import extraction_state
from memory.reports import browse
from staff.forms import MemoryAddForm, RelationForm
from staff.graph import relation_graph
from staff.views.common import DETAIL, FORM_CHOICES, INVALID, Edit, Opened, detail_url, with_focus


def counts(request: HttpRequest, handle: Opened) -> str:
    """The thread's header counts (``#thread-counts``) as an out-of-band swap, for htmx responses to writes."""
    return render_to_string(f"{DETAIL}#counts", {"overview": browse.thread_overview(handle.row), "oob": True},
                            request)


def records_context(handle: Opened, *, edit: Edit | None = None, add_form=None, relation_form=None) -> dict:
    """The memories and relations regions: memories grouped by type, relations, graph and their forms."""
    row = handle.row
    now = timezone.now()
    rows = list(browse.memories(row))
    timelines = browse.memory_timelines(row, [m.pk for m in rows])
    for memory in rows:  # the history timeline of each memory (memory.records.history)
        memory.history_entries = timelines.get(memory.pk, [])
    by_id = {m.pk: m for m in rows}
    relations = browse.relations(row, by_id)
    live = [m for m in rows if m.expires_at is None or m.expires_at > now]
    return {
        **FORM_CHOICES,
        "thread": row,
        "project": handle.project,
        "now": now,
        "nav": "threads",
        "memory_groups": browse.group_by_type(rows),
        "memories_total": len(rows),
        "relations": relations,
        "graph": relation_graph(relations),
        "add_form": add_form or MemoryAddForm(),
        "relation_form": relation_form or RelationForm(memories=live),
        "edit": edit,
    }


def timeline_context(handle: Opened, request: HttpRequest) -> dict:
    """The ``#timeline`` region: one page (``?page=``, 200 messages) of the conversation."""
    page = Paginator(browse.timeline(handle.row), browse.MESSAGES_PER_PAGE).get_page(request.GET.get("page"))
    return {**FORM_CHOICES, "thread": handle.row, "project": handle.project, "now": timezone.now(),
            "messages_page": page}


def images_context(handle: Opened, *, edit: Edit | None = None) -> dict:
    """The ``#images`` region: the thread's standalone images (not in a message), expired ones flagged."""
    return {**FORM_CHOICES, "thread": handle.row, "project": handle.project, "now": timezone.now(),
            "images": list(browse.standalone_images(handle.row)), "edit": edit}


def detail_context(handle: Opened, request: HttpRequest, **records) -> dict:
    """The whole thread page: every region (``records``: ``records_context``'s keywords, a failed form)."""
    return {
        **timeline_context(handle, request),
        **images_context(handle),
        **records_context(handle, **records),
        "overview": browse.thread_overview(handle.row),
        "summary": browse.summary_view(handle.row),
        "extraction": extraction_state(thread=handle.row),
    }


def records_response(request: HttpRequest, handle: Opened, context: dict, *, main: str = "memories",
                     status: int = 200, focus: str = "") -> HttpResponse:
    """``#memories`` and ``#relations`` for an htmx swap: ``main`` in place, the other out of band.

    Both change together: a relation can invalidate a memory, a retyped or
    deleted memory changes the relations list. The header counts come out of
    band too; ``focus`` is the DOM id to focus after the swap.
    """
    other = "relations" if main == "memories" else "memories"
    body = render_to_string(f"{DETAIL}#{main}", context, request)
    body += render_to_string(f"{DETAIL}#{other}", {**context, "oob": True}, request)
    response = HttpResponse(body + counts(request, handle), status=status)
    return with_focus(response, focus) if focus else response


def after_write(request: HttpRequest, handle: Opened, text: str, anchor: str, *, main: str = "memories",
                focus: str = ""):
    """Success: the records regions for htmx (focus on ``focus``, else ``anchor``); otherwise a flash message
    and a redirect back to ``anchor`` (POST/redirect/GET)."""
    if request.htmx:
        return records_response(request, handle, records_context(handle), main=main, focus=focus or anchor)
    flash.success(request, text)
    return redirect(detail_url(handle, anchor))


def invalid(request: HttpRequest, handle: Opened, *, main: str = "memories", focus: str = "",
            **records) -> HttpResponse:
    """A form with errors: its region for htmx (focus on ``focus``), else the whole thread page; 422 both ways."""
    if request.htmx:
        return records_response(request, handle, records_context(handle, **records), main=main, status=INVALID,
                                focus=focus)
    return render(request, DETAIL, detail_context(handle, request, **records), status=INVALID)


def images_response(request: HttpRequest, handle: Opened, *, edit: Edit | None = None, status: int = 200,
                    focus: str) -> HttpResponse:
    """The ``#images`` region for an htmx swap, with the header counts out of band; focus on ``focus``."""
    body = render_to_string(f"{DETAIL}#images", images_context(handle, edit=edit), request)
    return with_focus(HttpResponse(body + counts(request, handle), status=status), focus)
