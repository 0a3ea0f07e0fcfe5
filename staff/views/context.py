"""The context-card preview: the card ``Thread.get_context_card`` gives an agent."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe
from django.views.decorators.vary import vary_on_headers

from memory.context.card_log import card_at, cards_of_thread, log_days
from memory.core.errors import DomainError
from memory.core.valid_time import check_instant
from staff.forms import ContextCardForm, add_service_error
from staff.views.common import INVALID, SERVICE_ERRORS, open_thread, staff_required


@require_safe
@staff_required
@vary_on_headers("HX-Request")
def context_card(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The card ``Thread.get_context_card`` gives an agent, with the spec's options (blank: default).

    htmx: the ``#card-panel`` fragment (options and ``#context-card``).
    """
    handle = open_thread(request, project, thread_id)
    form = ContextCardForm(request.GET if "preview" in request.GET else None)
    card, status = None, 200
    if not form.is_bound or form.is_valid():
        try:
            card = handle.api.get_context_card(**(form.arguments() if form.is_bound else {}))
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
            card = None
    if form.is_bound and not form.is_valid():
        status = INVALID
    template = "staff/context_card.html" + ("#card-panel" if request.htmx else "")
    return render(request, template, {"thread": handle.row, "project": handle.project, "form": form, "card": card,
                                      "nav": "threads"}, status=status)


@require_safe
@staff_required
@vary_on_headers("HX-Request")
def card_log(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Card at a moment (issue #32, part 3): the cards logged for the thread (when served, with which parameters)
    and, given ``at`` (a date-time, no zone: UTC), the one served at or before it, as it was served, beside the
    thread's memories as they were then (``Thread.list_memories(as_of=at)``, rebuilt from their history).

    htmx: the ``#card-log`` fragment.
    """
    handle = open_thread(request, project, thread_id)
    at, chosen, memories, error = None, None, None, ""
    if request.GET.get("at"):
        try:
            at = check_instant(request.GET["at"], "at")
            memories = handle.api.list_memories(as_of=at)
        except DomainError as exc:
            error = exc.message
        else:
            chosen = card_at(handle.row, at)
    template = "staff/card_log.html" + ("#card-log" if request.htmx else "")
    return render(request, template, {"thread": handle.row, "project": handle.project, "nav": "threads",
                                      "cards": cards_of_thread(handle.row), "at": at, "chosen": chosen,
                                      "memories": memories,
                                      "error": error, "off": not log_days()},
                  status=INVALID if error else 200)
