"""Relations between a thread's memories: add and delete, through the thread's ``memory.client.Thread``."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from memory.reports import browse
from staff.forms import RelationForm, add_service_error
from staff.templatetags.staff_tags import domid
from staff.views.common import SERVICE_ERRORS, confirm, found, open_thread, record_url, staff_required
from staff.views.regions import after_write, invalid


@require_POST
@staff_required
def relation_add(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Relate two memories of the thread through ``Thread.link_records``."""
    handle = open_thread(request, project, thread_id)
    now = timezone.now()
    live = [m for m in browse.memories(handle.row) if m.expires_at is None or m.expires_at > now]
    form = RelationForm(request.POST, memories=live)
    if form.is_valid():
        try:
            relation_id = handle.api.link_records(**form.arguments())
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        return invalid(request, handle, main="relations", relation_form=form, focus="relation-add")
    return after_write(request, handle, "Relation added.", "relations", main="relations",
                       focus=f"relation-{domid(relation_id)}")


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def relation_delete(request: HttpRequest, project: str, thread_id: str, relation_id: str) -> HttpResponse:
    """GET: ask for confirmation, naming both memories and the relation type. POST: ``Thread.delete_record_link``."""
    handle = open_thread(request, project, thread_id)
    view = found(browse.relation_view, handle.row, relation_id)
    if request.method != "POST":
        link = view.link
        ends = [(end.content if end is not None else f"{kind} {pk} (gone)")
                for end, kind, pk in ((view.source, link.source_type, link.source_id),
                                      (view.target, link.target_type, link.target_id))]
        return confirm(request, handle, kind="relation", record=link, relation=view,
                       action=record_url(handle, "relation_delete", relation_id),
                       text=f"“{ends[0]}” {link.relation_type} “{ends[1]}”")
    if not handle.api.delete_record_link(relation_id=relation_id):
        raise Http404(f"no relation {relation_id!r}")
    return after_write(request, handle, "Relation removed.", "relations", main="relations",
                       focus="relations-heading")
