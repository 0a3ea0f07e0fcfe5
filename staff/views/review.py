"""The review queue of a project (``memory.records.review_rules``): pending memories across threads, and the
staff decisions on them (approve, edit then approve, reject: ``memory.services.review``); and the memories flagged
because a memory they were derived from changed (issue #32, ``memory.links.dependants``), with that change, and
the staff decision that clears the flag (``memory.services.review.dependant_clear``)."""

from __future__ import annotations

from django.contrib import messages as flash
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_POST, require_safe

from memory.core.errors import NotFlagged, NotFound, NotPending
from memory.models import MEMORY_TYPES, Memory, Project
from memory.records import derivations
from memory.records import review_rules as review
from memory.records.tenancy import Tenant
from memory.services.review import dependant_clear, memory_approve, memory_edit_approve, memory_reject
from staff.forms import ReviewDecisionForm, ReviewEditForm, ReviewFilterForm, add_service_error
from staff.templatetags.staff_tags import domid
from staff.views.common import INVALID, SERVICE_ERRORS, staff_required, visible_project

#: Pending memories one page of the queue shows (each with its flags and similar memories).
REVIEW_PER_PAGE = 20
#: Flagged dependants the page shows (the most recently flagged first; the count says how many there are).
DEPENDANTS_SHOWN = 50
#: How the page names the change a cause records (``memory.links.dependants.CAUSE_ACTIONS``).
CAUSE_WORDS = {"supersede": "superseded", "invalidate": "invalidated", "update": "edited", "delete": "deleted"}


def _dependants(current: Project, arguments: dict) -> tuple[list[dict], int]:
    """The flagged dependants the page lists (``memory.records.derivations.flagged_queryset`` under the queue's
    filters), each with its cause, the changed source memory when it is still there, and words for the change;
    and how many there are."""
    rows = derivations.flagged_queryset(project=current, **arguments)
    entries = []
    for row in rows[:DEPENDANTS_SHOWN]:
        cause = row.review_cause if isinstance(row.review_cause, dict) else {}
        entries.append({"row": row, "key": domid(row.public_id), "cause": cause,
                        "source": derivations.cause_source(row),
                        "what": CAUSE_WORDS.get(cause.get("action"), cause.get("action") or "changed"),
                        "at": parse_datetime(cause["at"]) if isinstance(cause.get("at"), str) else None})
    return entries, rows.count()


def _review_context(request: HttpRequest, current: Project, *, failed: dict | None = None) -> tuple[dict, int]:
    """The queue page: filters, one page of ``memory.records.review_rules.ReviewItem`` (with their rows), the
    total; and the status (422 for bad filters)."""
    form = ReviewFilterForm(request.GET)
    status, rows = 200, Memory.objects.none()
    dependants, flagged = [], 0
    if form.is_valid():
        try:
            rows = review.pending_queryset(project=current, **form.arguments())
            dependants, flagged = _dependants(current, form.arguments())
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
            status = INVALID
    else:
        status = INVALID
    page = Paginator(rows, REVIEW_PER_PAGE).get_page(request.GET.get("page"))
    now = timezone.now()
    items = [{"row": row, "item": review.review_item(row, now=now), "key": domid(row.public_id)} for row in page]
    return {"project": current, "nav": "review", "form": form, "page": page, "items": items,
            "flag_kinds": review.FLAG_KINDS, "memory_types": MEMORY_TYPES, "failed": failed or {},
            "query": request.GET.urlencode(), "dependants": dependants, "flagged": flagged,
            "max_dependants": derivations.MAX_DEPENDANTS}, status


@require_safe
@staff_required
def review_queue(request: HttpRequest, project: str) -> HttpResponse:
    """``/staff/projects/<slug>/review/``: the project's memories awaiting review across threads, the longest
    waiting first (``?thread_id=``, ``?memory_type=``, ``?page=``), each beside the stored memories most
    similar to it (duplicate and contradiction candidates) and with the injection scan's flags
    (``memory.records.review_rules``); approve, edit then approve, or reject each (the views below). Below the
    queue, the memories flagged because one they were derived from changed (issue #32), with the change (the
    source memory, what happened to it, when), each with a button that clears the flag."""
    current = visible_project(request, project)
    context, status = _review_context(request, current)
    return render(request, "staff/review.html", context, status=status)


def _review_decide(request: HttpRequest, project: str, memory_id: str, form_class, decide, done: str
                   ) -> HttpResponse:
    """Run one decision (``decide(scope, form)`` -> ``services.ReviewDecision``, ``scope`` the service's
    ``project``, ``memory_id`` and ``allows``); then back to the queue (POST/redirect/GET, the GET filters kept
    from ``?``). A memory that is not there (or of a project the user may not see) is a 404; one that no longer
    awaits review a 409; bad input the queue page with the error next to the item's form, 422."""
    current = visible_project(request, project)
    # The services, as the JSON API calls them: the client has no review method; staff act for the whole project.
    scope = {"project": current, "memory_id": memory_id, "allows": Tenant(project=current).allows}
    form = form_class(request.POST)
    status = INVALID
    if form.is_valid():
        try:
            decision = decide(scope, form)
        except NotFound:
            raise Http404(f"no memory {memory_id!r}") from None
        except (NotPending, NotFlagged) as exc:
            form.add_error(None, exc.message)
            status = 409
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
        else:
            flash.success(request, f"Memory {decision.memory_id} {done} (history version {decision.version})."
                          + (f" Relation {decision.relation_id} made." if decision.relation_id else ""))
            query = request.GET.urlencode()
            return redirect(reverse("staff:review", args=[current.slug]) + (f"?{query}" if query else ""))
    context, _ = _review_context(request, current, failed={"memory_id": memory_id, "form": form,
                                                            "kind": form_class.__name__})
    return render(request, "staff/review.html", context, status=status)


@require_POST
@staff_required
def review_approve(request: HttpRequest, project: str, memory_id: str) -> HttpResponse:
    """Approve a pending memory as it is (``services.memory_approve``): an ``approve`` history entry by this
    staff user, the note as its reason; searches and context cards return the memory from now on."""
    return _review_decide(request, project, memory_id, ReviewDecisionForm,
                          lambda scope, form: memory_approve(**scope, **form.arguments()), "approved")


@require_POST
@staff_required
def review_edit(request: HttpRequest, project: str, memory_id: str) -> HttpResponse:
    """Edit a pending memory's content and/or type, then approve it (``services.memory_edit_approve``: one
    ``approve`` entry, before what was extracted, after what was approved); unchanged, a plain approval."""
    def decide(scope: dict, form: ReviewEditForm):
        arguments = form.arguments(review.pending_row(project=scope["project"], memory_id=memory_id))
        if set(arguments) == {"reason"}:
            return memory_approve(**scope, **arguments)
        return memory_edit_approve(**scope, **arguments)

    return _review_decide(request, project, memory_id, ReviewEditForm, decide, "edited and approved")


@require_POST
@staff_required
def review_reject(request: HttpRequest, project: str, memory_id: str) -> HttpResponse:
    """Reject a pending memory (``services.memory_reject``): it is deleted, with a ``reject`` history entry by
    this staff user (the note as its reason) that stays until its user is erased."""
    return _review_decide(request, project, memory_id, ReviewDecisionForm,
                          lambda scope, form: memory_reject(**scope, **form.arguments()), "rejected")


@require_POST
@staff_required
def review_dependant_clear(request: HttpRequest, project: str, memory_id: str) -> HttpResponse:
    """Clear the flag of a memory flagged because one it was derived from changed (``services.dependant_clear``,
    issue #32): an ``unflag`` history entry by this staff user, the note as its reason. 404 for a memory that is
    not there, 409 for one that is not flagged."""
    return _review_decide(request, project, memory_id, ReviewDecisionForm,
                          lambda scope, form: dependant_clear(**scope, **form.arguments()), "cleared")
