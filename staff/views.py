"""Staff pages: threads, a thread's records, search playground, context-card preview.

Thin edges (docs/architecture.md, "Layers"): parse the form, make one call into
``memory`` (``memory.client`` spec methods, the same the JSON API in
``threads/api.py`` uses, or ``memory.services``; reads through
``memory.reports.browse``), render. Every page works without JavaScript (forms post,
then redirect back); with htmx a form swaps only its region (one view serves the page and its fragment, ``"page.html#region"``
when ``request.htmx``).

Errors: the ``memory.core.errors.DomainError`` (a ``ValueError``/``TypeError``/``KeyError``
naming its field) that ``memory`` raises is shown next to the field it names (``staff.forms.add_service_error``) with
status 422, htmx or not; a thread, message, memory, image or relation that is
not there is a 404, and so is a project the signed-in user may not see
(``memory.records.tenancy.staff_project``: superusers see every project, other staff
the projects they are members of), so a staff user cannot
tell another project from one that does not exist.

htmx writes also refresh the header counts out of band (``#thread-counts``)
and name, in ``HX-Trigger-After-Settle`` (event ``staff-focus``), the DOM id
of the element that should get keyboard focus after the swap: the record
saved, else its region's heading (``static/staff/staff.js``). GET views also
answer HEAD (``require_safe``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages as flash
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from memory.reports import browse, quality as quality_figures
from memory.extraction.recovery import extraction_state
from memory.services.review import memory_approve, memory_edit_approve, memory_reject
from memory.services.memories import memory_update
from memory.records import history, review_rules as review, selectors
from memory.client import AgentMemory, Thread
from memory.core.errors import DomainError, NotFound, NotPending
from memory.models import MEMORY_TYPES, STATUSES, Memory, Project, Thread as ThreadRow
from memory.records.tenancy import staff_project, staff_projects
from staff.forms import (
    ContextCardForm,
    ImageEditForm,
    MemoryAddForm,
    MemoryEditForm,
    MessageEditForm,
    QualityForm,
    RelationForm,
    ReviewDecisionForm,
    ReviewEditForm,
    ReviewFilterForm,
    SearchForm,
    TTL_ANCHORS,
    ThreadFilterForm,
    add_service_error,
)
from staff.graph import relation_graph
from staff.templatetags.staff_tags import domid
from staff.thumbnails import thumbnail

INVALID = 422
#: What ``memory`` raises for bad input (``memory.core.errors.DomainError``: the spec's ValueError, TypeError,
#: KeyError with the field at fault). Any other exception is a programming error and a 500.
SERVICE_ERRORS = (DomainError,)
DETAIL = "staff/thread_detail.html"
#: Choices the inline memory form lists.
FORM_CHOICES = {"memory_types": MEMORY_TYPES, "statuses": STATUSES, "ttl_anchors": TTL_ANCHORS}


def staff_required(view):
    """Let active staff users in; send anyone else to the staff login page.

    An htmx request gets ``HX-Redirect`` instead of a redirect, so the login
    page replaces the whole page rather than landing inside a region.
    """

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        user = request.user
        if user.is_authenticated and user.is_active and user.is_staff:
            with history.acting("staff", user.get_username(), f"{request.method} {request.path}"):
                return view(request, *args, **kwargs)
        login = reverse("staff:login")
        if request.htmx:
            back = request.htmx.current_url_abs_path or request.get_full_path()
            return HttpResponseClientRedirect(f"{login}?{urlencode({'next': back})}")
        return redirect_to_login(request.get_full_path(), login)

    return wrapper


@dataclass
class Opened:
    """A thread as the views use it: the stored ``row``, the spec handle ``api`` and its ``client`` (whose
    ``project`` is the thread's)."""

    row: ThreadRow
    api: Thread
    client: AgentMemory

    @property
    def thread_id(self) -> str:
        """The thread's public id."""
        return self.row.public_id

    @property
    def project(self) -> Project:
        """The project the thread (and the URL) belongs to."""
        return self.client.project


def _project(request: HttpRequest, slug: str) -> Project:
    """The project of a URL's ``<slug:project>`` if the signed-in user may see it (``staff_project``), or 404:
    the same 404 for a project that does not exist and for one the user is not a member of."""
    try:
        return staff_project(request.user, slug)
    except NotFound:
        raise Http404(f"no project {slug!r}") from None


def _handle(request: HttpRequest, project: str, thread_id: str) -> Opened:
    """Open a thread of the project named in the URL (``memory.client``: configured retention, search config
    and LLM), or 404 (no such thread, or a project the user may not see: ``_project``)."""
    client = AgentMemory(project=_project(request, project))
    try:
        row = selectors.thread_get(project=client.project, thread_id=thread_id)
    except NotFound:
        raise Http404(f"no thread {thread_id!r}") from None
    return Opened(row=row, api=Thread(row, client), client=client)


def _found(lookup, *args):
    """``lookup(*args)`` from ``memory.reports.browse``, a ``NotFound`` becoming a 404."""
    try:
        return lookup(*args)
    except NotFound as exc:
        raise Http404(exc.message) from None


def _detail_url(handle: Opened, anchor: str = "") -> str:
    url = reverse("staff:thread_detail", args=[handle.project.slug, handle.thread_id])
    return url + (f"#{anchor}" if anchor else "")


def _record_url(handle: Opened, name: str, record_id: str) -> str:
    """``staff:<name>`` of a record (public id) of the thread."""
    return reverse(f"staff:{name}", args=[handle.project.slug, handle.thread_id, record_id])


def _focus(response: HttpResponse, dom_id: str) -> HttpResponse:
    """Ask the page script to move keyboard focus to the element ``dom_id`` once htmx has settled the swap."""
    return trigger_client_event(response, "staff-focus", {"id": dom_id}, after="settle")


def _counts(request: HttpRequest, handle: "Opened") -> str:
    """The thread's header counts (``#thread-counts``) as an out-of-band swap, for htmx responses to writes."""
    return render_to_string(f"{DETAIL}#counts", {"overview": browse.thread_overview(handle.row), "oob": True},
                            request)


@dataclass
class Edit:
    """A failed inline edit: which record (``kind`` message/memory/image, its model name; ``id``) and its bound form."""

    kind: str
    id: str
    form: object


# --- threads -----------------------------------------------------------------------------------


@require_safe
@staff_required
def home(request: HttpRequest) -> HttpResponse:
    """``/staff/``: the default project's thread list, or the project list for a user who may not see it."""
    return redirect(_default_url(request, "staff:thread_list"))


@require_safe
@staff_required
def project_list(request: HttpRequest) -> HttpResponse:
    """``/staff/projects/``: the projects the user may see (``staff_projects``) with their thread counts, each
    linking to its threads."""
    return render(request, "staff/project_list.html",
                  {"projects": browse.project_browse(projects=staff_projects(request.user)), "nav": "projects"})


@require_safe
@staff_required
def default_thread_list(request: HttpRequest) -> HttpResponse:
    """``/staff/threads/`` (the address before projects): the default project's thread list, same query."""
    return _redirect_keeping_query(request, _default_url(request, "staff:thread_list"))


@require_safe
@staff_required
def default_search(request: HttpRequest) -> HttpResponse:
    """``/staff/search/`` (the address before projects): the default project's search page, same query."""
    return _redirect_keeping_query(request, _default_url(request, "staff:search"))


def _default_url(request: HttpRequest, name: str) -> str:
    """``name``'s page of the default project, or the project list when the user may not see that project."""
    try:
        return reverse(name, args=[staff_project(request.user, None).slug])
    except NotFound:
        return reverse("staff:project_list")


def _redirect_keeping_query(request: HttpRequest, url: str) -> HttpResponse:
    query = request.GET.urlencode()
    return redirect(url + (f"?{query}" if query else ""))


@require_safe
@staff_required
@vary_on_headers("HX-Request")
def thread_list(request: HttpRequest, project: str) -> HttpResponse:
    """A project's threads with counts and last activity, filtered by ``q``, ``user_id``, ``agent_id``,
    ``metadata``; paged.

    htmx: the ``#thread-browser`` fragment (filters and list). A bad metadata
    filter is shown next to its field with status 422.
    """
    current = _project(request, project)
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


def _records_context(handle: Opened, *, edit: Edit | None = None, add_form=None, relation_form=None) -> dict:
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


def _timeline_context(handle: Opened, request: HttpRequest) -> dict:
    """The ``#timeline`` region: one page (``?page=``, 200 messages) of the conversation."""
    page = Paginator(browse.timeline(handle.row), browse.MESSAGES_PER_PAGE).get_page(request.GET.get("page"))
    return {**FORM_CHOICES, "thread": handle.row, "project": handle.project, "now": timezone.now(),
            "messages_page": page}


def _images_context(handle: Opened, *, edit: Edit | None = None) -> dict:
    """The ``#images`` region: the thread's standalone images (not in a message), expired ones flagged."""
    return {**FORM_CHOICES, "thread": handle.row, "project": handle.project, "now": timezone.now(),
            "images": list(browse.standalone_images(handle.row)), "edit": edit}


def _detail_context(handle: Opened, request: HttpRequest, **records) -> dict:
    return {
        **_timeline_context(handle, request),
        **_images_context(handle),
        **_records_context(handle, **records),
        "overview": browse.thread_overview(handle.row),
        "summary": browse.summary_view(handle.row),
        "extraction": extraction_state(thread=handle.row),
    }


@require_safe
@staff_required
def thread_detail(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """A thread: header (``#thread-counts``), ``#timeline``, ``#memories``, ``#summary``, ``#relations``,
    ``#images``, ``#extraction-progress``."""
    handle = _handle(request, project, thread_id)
    return render(request, DETAIL, _detail_context(handle, request))


@require_safe
@staff_required
def timeline_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#timeline`` fragment, one page of messages (``?page=``), with the header counts out of band;
    the full thread page without htmx."""
    handle = _handle(request, project, thread_id)
    if not request.htmx:
        return redirect(_detail_url(handle) + (f"?page={request.GET['page']}" if "page" in request.GET else ""))
    body = render_to_string(DETAIL + "#timeline", {**_timeline_context(handle, request), "edit": None}, request)
    return HttpResponse(body + _counts(request, handle))


@require_safe
@staff_required
def memories_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#memories`` fragment with ``#relations`` and the header counts out of band (the live-extraction
    script reloads them)."""
    handle = _handle(request, project, thread_id)
    return _records_response(request, handle, _records_context(handle))


@require_safe
@staff_required
def extraction_region(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The ``#extraction-progress`` fragment: the thread's extraction state as stored."""
    handle = _handle(request, project, thread_id)
    return render(request, DETAIL + "#extraction",
                  {"thread": handle.row, "project": handle.project,
                   "extraction": extraction_state(thread=handle.row)})


def _records_response(request: HttpRequest, handle: Opened, context: dict, *, main: str = "memories",
                      status: int = 200, focus: str = "") -> HttpResponse:
    """``#memories`` and ``#relations`` for an htmx swap: ``main`` in place, the other out of band.

    Both change together: a relation can invalidate a memory, a retyped or
    deleted memory changes the relations list. The header counts come out of
    band too; ``focus`` is the DOM id to focus after the swap.
    """
    other = "relations" if main == "memories" else "memories"
    body = render_to_string(f"{DETAIL}#{main}", context, request)
    body += render_to_string(f"{DETAIL}#{other}", {**context, "oob": True}, request)
    response = HttpResponse(body + _counts(request, handle), status=status)
    return _focus(response, focus) if focus else response


def _after_write(request: HttpRequest, handle: Opened, text: str, anchor: str, *, main: str = "memories",
                 focus: str = ""):
    """Success: the records regions for htmx (focus on ``focus``, else ``anchor``); otherwise a flash message
    and a redirect back to ``anchor`` (POST/redirect/GET)."""
    if request.htmx:
        return _records_response(request, handle, _records_context(handle), main=main, focus=focus or anchor)
    flash.success(request, text)
    return redirect(_detail_url(handle, anchor))


def _invalid(request: HttpRequest, handle: Opened, *, main: str = "memories", focus: str = "",
             **records) -> HttpResponse:
    """A form with errors: its region for htmx (focus on ``focus``), else the whole thread page; 422 both ways."""
    if request.htmx:
        return _records_response(request, handle, _records_context(handle, **records), main=main, status=INVALID,
                                 focus=focus)
    return render(request, DETAIL, _detail_context(handle, request, **records), status=INVALID)


# --- messages ----------------------------------------------------------------------------------


@require_POST
@staff_required
def message_edit(request: HttpRequest, project: str, thread_id: str, message_id: str) -> HttpResponse:
    """Edit a message's content and metadata through ``Thread.update_message`` (re-embeds, re-extracts).

    Only changed fields are sent: unchanged content is not re-embedded.
    htmx: the message's list item.
    """
    handle = _handle(request, project, thread_id)
    row = _found(browse.message_row, handle.row, message_id)
    form = MessageEditForm(request.POST, message=row)
    if form.is_valid():
        try:
            changes = form.changes()
            if changes:
                handle.api.update_message(message_id, **changes)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        edit = Edit("message", message_id, form)
        if request.htmx:
            body = render_to_string(DETAIL + "#message", {"thread": handle.row, "project": handle.project,
                                                          "message": row, "edit": edit, "now": timezone.now(),
                                                          **FORM_CHOICES}, request)
            return _focus(HttpResponse(body, status=INVALID), f"message-{row.seq}")
        return render(request, DETAIL, _detail_context(handle, request, edit=edit), status=INVALID)
    if request.htmx:
        row.refresh_from_db()
        body = render_to_string(DETAIL + "#message", {"thread": handle.row, "project": handle.project,
                                                      "message": row, "now": timezone.now(), **FORM_CHOICES}, request)
        return _focus(HttpResponse(body + _counts(request, handle)), f"message-{row.seq}")
    flash.success(request, "Message saved.")
    return redirect(_detail_url(handle, f"message-{row.seq}"))


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def message_delete(request: HttpRequest, project: str, thread_id: str, message_id: str) -> HttpResponse:
    """GET: ask for confirmation. POST: ``Thread.delete_message`` (its chunks go with it).

    htmx POST: an empty body that removes the list item (and the header counts, out of band).
    """
    handle = _handle(request, project, thread_id)
    row = _found(browse.message_row, handle.row, message_id)
    if request.method != "POST":
        return _confirm(request, handle, kind="message", record=row,
                        action=_record_url(handle, "message_delete", message_id),
                        text=f"{row.role}: {row.content}")
    try:
        deleted = handle.api.delete_message(message_id)
    except TimeoutError as exc:
        return _confirm(request, handle, kind="message", record=row, status=503, error=str(exc),
                        action=_record_url(handle, "message_delete", message_id),
                        text=f"{row.role}: {row.content}")
    if not deleted:  # expired meanwhile: the spec's delete sees live messages only
        raise Http404(f"no live message {message_id!r}")
    if request.htmx:
        return _focus(HttpResponse(_counts(request, handle)), "timeline-heading")
    flash.success(request, "Message deleted.")
    return redirect(_detail_url(handle, "timeline"))


def _confirm(request: HttpRequest, handle: Opened, *, kind: str, record, action: str, text: str,
             status: int = 200, error: str = "", relation=None) -> HttpResponse:
    """The delete confirmation: a fragment under the record for htmx, a page of its own otherwise.

    ``text`` is what the record says; for a relation, ``relation`` (``browse.RelationView``)
    shows both memories and the relation type.
    """
    context = {"thread": handle.row, "project": handle.project, "kind": kind, "record": record, "action": action,
               "text": text, "error": error, "cancel": _detail_url(handle), "relation": relation}
    template = "staff/confirm_delete.html" + ("#confirm" if request.htmx else "")
    return render(request, template, context, status=status)


# --- memories ----------------------------------------------------------------------------------


@require_POST
@staff_required
def memory_add(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Store a manual memory through ``Thread.add_memory`` (embedded and searchable at once)."""
    handle = _handle(request, project, thread_id)
    form = MemoryAddForm(request.POST)
    if form.is_valid():
        try:
            arguments = form.arguments()
            memory_id = handle.api.add_memory(arguments.pop("content"), **arguments)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        return _invalid(request, handle, add_form=form, focus="memory-add")
    return _after_write(request, handle, "Memory added.", f"memory-{domid(memory_id)}")


@require_POST
@staff_required
def memory_edit(request: HttpRequest, project: str, thread_id: str, memory_id: str) -> HttpResponse:
    """Edit content, type, status and TTL through ``services.memory_update`` (what ``update_memory`` calls).

    Changed content is re-embedded; a new type moves the record, its chunks
    and its relation endpoints together. Only changed fields are sent.
    """
    handle = _handle(request, project, thread_id)
    row = _found(browse.memory_row, handle.row, memory_id)
    form = MemoryEditForm(request.POST)
    if form.is_valid():
        try:
            changes = form.changes(row)
            if changes:
                memory_update(thread=handle.row, memory_id=memory_id,
                                       retention=handle.client.retention_config, **changes)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        return _invalid(request, handle, edit=Edit("memory", memory_id, form), focus=f"memory-{domid(memory_id)}")
    return _after_write(request, handle, "Memory saved.", f"memory-{domid(memory_id)}")


@require_POST
@staff_required
def memory_restore(request: HttpRequest, project: str, thread_id: str, memory_id: str) -> HttpResponse:
    """Undo from the timeline: restore the POSTed ``version`` with ``Thread.restore_memory_version`` (a new
    version; the memory is re-indexed). 404 for a missing memory or version, 400 for a version that is not a
    positive number."""
    handle = _handle(request, project, thread_id)
    _found(browse.memory_row, handle.row, memory_id)
    version = request.POST.get("version", "")
    if not version.isascii() or not version.isdigit() or not 0 < int(version) < 2**31:
        return HttpResponse("version: must be a positive integer", status=400, content_type="text/plain")
    try:
        number = handle.api.restore_memory_version(memory_id, int(version))
    except NotFound:
        raise Http404("no such version") from None
    return _after_write(request, handle, f"Version {version} restored as version {number}.",
                        f"memory-{domid(memory_id)}")


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def memory_delete(request: HttpRequest, project: str, thread_id: str, memory_id: str) -> HttpResponse:
    """GET: ask for confirmation. POST: ``Thread.delete_memory`` (relations go, their targets revalidate)."""
    handle = _handle(request, project, thread_id)
    row = _found(browse.memory_row, handle.row, memory_id)
    action = _record_url(handle, "memory_delete", memory_id)
    text = f"[{row.memory_type}] {row.content}"
    if request.method != "POST":
        return _confirm(request, handle, kind="memory", record=row, action=action, text=text)
    try:
        deleted = handle.api.delete_memory(memory_id)
    except TimeoutError as exc:
        return _confirm(request, handle, kind="memory", record=row, action=action, text=text, status=503,
                        error=str(exc))
    if not deleted:
        raise Http404(f"no live memory {memory_id!r}")
    return _after_write(request, handle, "Memory deleted.", "memories", focus="memories-heading")


# --- relations ---------------------------------------------------------------------------------


@require_POST
@staff_required
def relation_add(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Relate two memories of the thread through ``Thread.link_records``."""
    handle = _handle(request, project, thread_id)
    now = timezone.now()
    live = [m for m in browse.memories(handle.row) if m.expires_at is None or m.expires_at > now]
    form = RelationForm(request.POST, memories=live)
    if form.is_valid():
        try:
            relation_id = handle.api.link_records(**form.arguments())
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    if not form.is_valid():
        return _invalid(request, handle, main="relations", relation_form=form, focus="relation-add")
    return _after_write(request, handle, "Relation added.", "relations", main="relations",
                        focus=f"relation-{domid(relation_id)}")


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def relation_delete(request: HttpRequest, project: str, thread_id: str, relation_id: str) -> HttpResponse:
    """GET: ask for confirmation, naming both memories and the relation type. POST: ``Thread.delete_record_link``."""
    handle = _handle(request, project, thread_id)
    view = _found(browse.relation_view, handle.row, relation_id)
    if request.method != "POST":
        link = view.link
        ends = [(end.content if end is not None else f"{kind} {pk} (gone)")
                for end, kind, pk in ((view.source, link.source_type, link.source_id),
                                      (view.target, link.target_type, link.target_id))]
        return _confirm(request, handle, kind="relation", record=link, relation=view,
                        action=_record_url(handle, "relation_delete", relation_id),
                        text=f"“{ends[0]}” {link.relation_type} “{ends[1]}”")
    if not handle.api.delete_record_link(relation_id=relation_id):
        raise Http404(f"no relation {relation_id!r}")
    return _after_write(request, handle, "Relation removed.", "relations", main="relations",
                        focus="relations-heading")


# --- extraction --------------------------------------------------------------------------------


@require_POST
@staff_required
def extract_now(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """Extract the pending messages now (``Thread.extract_pending_messages``); progress arrives over the socket.

    htmx: the ``#extraction-progress`` fragment with a note of what happened.
    """
    handle = _handle(request, project, thread_id)
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
        return _focus(render(request, DETAIL + "#extraction", {"thread": handle.row, "project": handle.project,
                                                               "extraction": state, "note": note},
                             status=status), "extraction-note")
    (flash.success if status == 200 else flash.error)(request, note)
    return redirect(_detail_url(handle, "extraction-progress"))


# --- images ------------------------------------------------------------------------------------


def _images_response(request: HttpRequest, handle: Opened, *, edit: Edit | None = None, status: int = 200,
                     focus: str) -> HttpResponse:
    """The ``#images`` region for an htmx swap, with the header counts out of band; focus on ``focus``."""
    body = render_to_string(f"{DETAIL}#images", _images_context(handle, edit=edit), request)
    return _focus(HttpResponse(body + _counts(request, handle), status=status), focus)


@require_POST
@staff_required
def image_edit(request: HttpRequest, project: str, thread_id: str, image_id: str) -> HttpResponse:
    """Edit a standalone image's description and metadata through ``Thread.update_image`` (spec: update_image).

    A new description is re-embedded (the image's search chunks are rewritten);
    new metadata is copied to its chunks. Only changed fields are sent. An
    image in a message is edited with its message. htmx: the ``#images`` region.
    """
    handle = _handle(request, project, thread_id)
    row = _found(browse.standalone_image_row, handle.row, image_id)
    form = ImageEditForm(request.POST)
    if form.is_valid():
        try:
            changes = form.changes(row)
            if changes:
                handle.api.update_image(image_id, **changes)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    key = f"image-{domid(image_id)}"
    if not form.is_valid():
        edit = Edit("image", image_id, form)
        if request.htmx:
            return _images_response(request, handle, edit=edit, status=INVALID, focus=key)
        return render(request, DETAIL, _detail_context(handle, request, edit=edit), status=INVALID)
    if request.htmx:
        return _images_response(request, handle, focus=key)
    flash.success(request, "Image saved.")
    return redirect(_detail_url(handle, key))


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def image_delete(request: HttpRequest, project: str, thread_id: str, image_id: str) -> HttpResponse:
    """GET: ask for confirmation. POST: ``Thread.delete_image`` (its search chunks go with it).

    Standalone images only: one in a message goes with its message (404 here).
    """
    handle = _handle(request, project, thread_id)
    row = _found(browse.standalone_image_row, handle.row, image_id)
    if request.method != "POST":
        return _confirm(request, handle, kind="image", record=row,
                        action=_record_url(handle, "image_delete", image_id),
                        text=f"{row.mime_type}, {row.width}×{row.height} px: {row.description or '(no description)'}")
    if not handle.api.delete_image(image_id):  # expired meanwhile: the spec's delete sees live images only
        raise Http404(f"no live image {image_id!r}")
    if request.htmx:
        return _images_response(request, handle, focus="images-heading")
    flash.success(request, "Image deleted.")
    return redirect(_detail_url(handle, "images"))


@require_safe
@staff_required
def image(request: HttpRequest, project: str, thread_id: str, image_id: str) -> HttpResponse:
    """An image of the thread as stored (``?thumb=1``: a PNG thumbnail of at most 160 px a side).

    Served with its validated MIME type, ``nosniff`` and a CSP that runs nothing.
    """
    handle = _handle(request, project, thread_id)
    row = _found(browse.image_data, handle.row, image_id)
    data, mime_type = bytes(row.data), row.mime_type
    if "thumb" in request.GET:
        try:
            data, mime_type = thumbnail(data)
        except OSError:
            raise Http404(f"image {image_id!r} cannot be decoded") from None
    response = HttpResponse(data, content_type=mime_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'"
    response["Cache-Control"] = "private, max-age=300"
    return response


# --- context card and search ------------------------------------------------------------------


@require_safe
@staff_required
@vary_on_headers("HX-Request")
def context_card(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The card ``Thread.get_context_card`` gives an agent, with the spec's options (blank: default).

    htmx: the ``#card-panel`` fragment (options and ``#context-card``).
    """
    handle = _handle(request, project, thread_id)
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
def search(request: HttpRequest, project: str) -> HttpResponse:
    """Search playground: ``AgentMemory.search_project``, an operator's search across the threads of a project
    (omitted ids leave their dimension open; given ones match exactly).

    Results show rank, score, distance, type, where each record came from
    (thread, user, agent; a memory's source messages) and linked memories.
    htmx: the ``#search-panel`` fragment (form and ``#search-results``).
    """
    client = AgentMemory(project=_project(request, project))
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


# --- memory quality ------------------------------------------------------------------------------


@require_safe
@staff_required
def quality(request: HttpRequest, project: str) -> HttpResponse:
    """The project's quality dashboard (``memory.reports.quality``): plots of memories per type over time, extraction
    yield, duplicates skipped, contradictions and supersessions, review queue age, rejected-candidate reasons.

    ``?days=`` picks the range (``memory.reports.quality.RANGES``); another value is shown next to the field with
    status 422 and no plots.
    """
    return _quality_page(request, _project(request, project), None)


@require_safe
@staff_required
def thread_quality(request: HttpRequest, project: str, thread_id: str) -> HttpResponse:
    """The same dashboard for one thread of the project (404: no such thread, or a project not the user's)."""
    current = _project(request, project)
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


# --- the review queue (memory.records.review_rules) ----------------------------------------------------------

#: Pending memories one page of the queue shows (each with its flags and similar memories).
REVIEW_PER_PAGE = 20


def _review_context(request: HttpRequest, current: Project, *, failed: dict | None = None) -> tuple[dict, int]:
    """The queue page: filters, one page of ``memory.records.review_rules.ReviewItem`` (with their rows), the total; and
    the status (422 for bad filters)."""
    form = ReviewFilterForm(request.GET)
    status, rows = 200, Memory.objects.none()
    if form.is_valid():
        try:
            rows = review.pending_queryset(project=current, **form.arguments())
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
            "query": request.GET.urlencode()}, status


@require_safe
@staff_required
def review_queue(request: HttpRequest, project: str) -> HttpResponse:
    """``/staff/projects/<slug>/review/``: the project's memories awaiting review across threads, the longest
    waiting first (``?thread_id=``, ``?memory_type=``, ``?page=``), each beside the stored memories most
    similar to it (duplicate and contradiction candidates) and with the injection scan's flags
    (``memory.records.review_rules``); approve, edit then approve, or reject each (the views below)."""
    current = _project(request, project)
    context, status = _review_context(request, current)
    return render(request, "staff/review.html", context, status=status)


def _review_decide(request: HttpRequest, project: str, memory_id: str, form_class, decide, done: str
                   ) -> HttpResponse:
    """Run one decision (``decide(current, form)`` -> ``services.ReviewDecision``); then back to the queue
    (POST/redirect/GET, the GET filters kept from ``?``). A memory that is not there (or of a project the user
    may not see) is a 404; one that no longer awaits review a 409; bad input the queue page with the error
    next to the item's form, 422."""
    current = _project(request, project)
    form = form_class(request.POST)
    status = INVALID
    if form.is_valid():
        try:
            decision = decide(current, form)
        except NotFound:
            raise Http404(f"no memory {memory_id!r}") from None
        except NotPending as exc:
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
    return _review_decide(request, project, memory_id, ReviewDecisionForm, lambda current, form: memory_approve(
        project=current, memory_id=memory_id, **form.arguments()), "approved")


@require_POST
@staff_required
def review_edit(request: HttpRequest, project: str, memory_id: str) -> HttpResponse:
    """Edit a pending memory's content and/or type, then approve it (``services.memory_edit_approve``: one
    ``approve`` entry, before what was extracted, after what was approved); unchanged, a plain approval."""
    def decide(current: Project, form: ReviewEditForm):
        arguments = form.arguments(review.pending_row(project=current, memory_id=memory_id))
        if set(arguments) == {"reason"}:
            return memory_approve(project=current, memory_id=memory_id, **arguments)
        return memory_edit_approve(project=current, memory_id=memory_id, **arguments)

    return _review_decide(request, project, memory_id, ReviewEditForm, decide, "edited and approved")


@require_POST
@staff_required
def review_reject(request: HttpRequest, project: str, memory_id: str) -> HttpResponse:
    """Reject a pending memory (``services.memory_reject``): it is deleted, with a ``reject`` history entry by
    this staff user (the note as its reason) that stays until its user is erased."""
    return _review_decide(request, project, memory_id, ReviewDecisionForm, lambda current, form: memory_reject(
        project=current, memory_id=memory_id, **form.arguments()), "rejected")
