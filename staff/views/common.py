"""What every staff view shares: the staff gate, the opened thread, 404s, URLs, focus and the delete confirmation.

``staff_required`` lets active staff in and names the staff user as the actor
of every memory write (``memory.records.history.acting``); ``open_thread``
opens a thread of a project the user may see as a ``memory.client.Thread``
(the door of the writes, ``staff.views``); ``visible_project`` and ``found``
turn what the user may not see, or what is not there, into a 404.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps
from urllib.parse import urlencode

from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from memory.client import AgentMemory, Thread
from memory.core.errors import DomainError, NotFound
from memory.models import MEMORY_TYPES, STATUSES, Project
from memory.models import Thread as ThreadRow
from memory.records import history, selectors
from memory.records.tenancy import staff_project
from staff.forms import TTL_ANCHORS

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


def visible_project(request: HttpRequest, slug: str) -> Project:
    """The project of a URL's ``<slug:project>`` if the signed-in user may see it (``staff_project``), or 404:
    the same 404 for a project that does not exist and for one the user is not a member of."""
    try:
        return staff_project(request.user, slug)
    except NotFound:
        raise Http404(f"no project {slug!r}") from None


def open_thread(request: HttpRequest, project: str, thread_id: str) -> Opened:
    """Open a thread of the project named in the URL (``memory.client``: configured retention, search config
    and LLM), or 404 (no such thread, or a project the user may not see: ``visible_project``)."""
    client = AgentMemory(project=visible_project(request, project))
    try:
        row = selectors.thread_get(project=client.project, thread_id=thread_id)
    except NotFound:
        raise Http404(f"no thread {thread_id!r}") from None
    return Opened(row=row, api=Thread(row, client), client=client)


def found(lookup, *args):
    """``lookup(*args)`` from ``memory.reports.browse``, a ``NotFound`` becoming a 404."""
    try:
        return lookup(*args)
    except NotFound as exc:
        raise Http404(exc.message) from None


def default_url(request: HttpRequest, name: str) -> str:
    """``name``'s page of the default project, or the project list when the user may not see that project."""
    try:
        return reverse(name, args=[staff_project(request.user, None).slug])
    except NotFound:
        return reverse("staff:project_list")


def redirect_keeping_query(request: HttpRequest, url: str) -> HttpResponse:
    """A redirect to ``url`` with the request's query string."""
    query = request.GET.urlencode()
    return redirect(url + (f"?{query}" if query else ""))


def detail_url(handle: Opened, anchor: str = "") -> str:
    """The thread page's URL, with ``#anchor`` when given."""
    url = reverse("staff:thread_detail", args=[handle.project.slug, handle.thread_id])
    return url + (f"#{anchor}" if anchor else "")


def record_url(handle: Opened, name: str, record_id: str) -> str:
    """``staff:<name>`` of a record (public id) of the thread."""
    return reverse(f"staff:{name}", args=[handle.project.slug, handle.thread_id, record_id])


def with_focus(response: HttpResponse, dom_id: str) -> HttpResponse:
    """Ask the page script to move keyboard focus to the element ``dom_id`` once htmx has settled the swap."""
    return trigger_client_event(response, "staff-focus", {"id": dom_id}, after="settle")


@dataclass
class Edit:
    """A failed inline edit: which record (``kind`` message/memory/image, its model name; ``id``) and its bound form."""

    kind: str
    id: str
    form: object


def confirm(request: HttpRequest, handle: Opened, *, kind: str, record, action: str, text: str,
            status: int = 200, error: str = "", relation=None) -> HttpResponse:
    """The delete confirmation: a fragment under the record for htmx, a page of its own otherwise.

    ``text`` is what the record says; for a relation, ``relation`` (``browse.RelationView``)
    shows both memories and the relation type.
    """
    context = {"thread": handle.row, "project": handle.project, "kind": kind, "record": record, "action": action,
               "text": text, "error": error, "cancel": detail_url(handle), "relation": relation}
    template = "staff/confirm_delete.html" + ("#confirm" if request.htmx else "")
    return render(request, template, context, status=status)
