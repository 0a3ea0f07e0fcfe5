"""Access records: which key, or which staff member, did what, through which door.

``record_access`` writes one ``threads.models.AccessRecord``. ``AuditMiddleware``
records, for the JSON API, every request that may change something (any
method but GET/HEAD/OPTIONS: creations, edits, deletes, erasures, key
management, searches) and every refused one (401, 403), plus reads when
``OAM_AUDIT_READS`` is on; for the staff pages and the Django admin, every
POST (the admin's own history, ``django_admin_log``, is erased with the records
it names, so this is what keeps who changed or deleted what). The WebSocket
consumer records each connection, accepted (101) or refused (its close code).
A record keeps the route's template and the public thread and record ids its
path named, never a user or agent id, and no ids at all when no project is
known (a request refused before its key was: 401, a WebSocket's 4401/4403;
such ids could not be found again by an erasure, which works per project:
found by a security review); erasing a user clears the thread and
record ids of the erased threads, and the record ids of every erased record
wherever it lived (``scrub_erased``, on ``memory.signals.subject_erased``).
Recording never breaks the request: a failure is logged.
"""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.admin.utils import unquote
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse

from memory.core.ids import SEPARATOR, project_of, public_id
from memory.models import Project, Thread
from threads.middleware import ResponseMiddleware
from threads.models import AccessRecord, ApiKey

logger = logging.getLogger(__name__)

#: Path parameters kept as ``record_id``, in this order (user and agent ids are never kept).
RECORD_PARAMETERS = ("message_id", "memory_id", "image_id", "relation_id", "key_id", "receipt_id")
READ_METHODS = ("GET", "HEAD", "OPTIONS")
_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def record_access(*, channel: str, method: str, route: str, status: int, project: Any = None,
                  api_key: ApiKey | None = None, staff_user: str = "", thread_id: str | None = None,
                  record_id: str | None = None) -> AccessRecord | None:
    """Store one access record; return it, or None when it could not be written (logged, never raised).

    Without a ``project`` the ``thread_id`` and ``record_id`` are not kept: the route, method, status and
    time describe an unauthenticated attempt well enough, and an erasure finds ids by project only.
    """
    if project is None:
        thread_id = record_id = None
    fields = dict(channel=channel, method=method[:10], route=route[:200], status=status, project=project,
                  staff_user=staff_user[:150], thread_id=(thread_id or None) and thread_id[:255],
                  record_id=(record_id or None) and str(record_id)[:255])
    try:
        try:
            with transaction.atomic():
                return AccessRecord.objects.create(api_key=api_key, **fields)
        except IntegrityError:
            if api_key is None:
                raise
            # the key is gone: the request erased its own user or agent (threads.auth.subject_keys_erase)
            return AccessRecord.objects.create(api_key=None, **fields)
    except Exception:  # noqa: BLE001 - an audit failure must not fail the request it describes
        logger.warning("could not record %s %s", method, route, exc_info=True)
        return None


def route_template(request: HttpRequest) -> str:
    """The matched route with ``{name}`` placeholders (``/api/threads/{thread_id}``), else the path."""
    match = getattr(request, "resolver_match", None)
    if match is None or not match.route:
        return request.path
    return "/" + _CONVERTER.sub(r"{\1}", match.route)


def _ids(request: HttpRequest) -> tuple[str | None, str | None]:
    kwargs = getattr(getattr(request, "resolver_match", None), "kwargs", None) or {}
    record = next((kwargs[name] for name in RECORD_PARAMETERS if name in kwargs), None)
    return kwargs.get("thread_id"), record


def _admin_object(request: HttpRequest, object_id: str) -> tuple[Any, str | None, str | None]:
    """(project, thread id, record id) of an admin change/delete page's object.

    Rows of a project have stored ids ``"<project pk>:<public id>"``
    (``memory.records.tenancy``): the record keeps the project and the public id, as a
    staff page's record does, so an erasure finds it (``scrub_erased``). A
    thread's id goes in ``thread_id``, any other row's in ``record_id``;
    objects without a project (users, projects themselves) keep no id.
    """

    model = getattr(getattr(request.resolver_match.func, "model_admin", None), "model", None)
    object_id = unquote(object_id)  # the admin quotes pks in its URLs (":" is "_3A")
    if SEPARATOR not in object_id:  # keys, projects, users: integer pks, no project in them
        return None, None, None
    try:
        project = Project.objects.filter(pk=project_of(object_id)).first()
    except ValueError:
        return None, None, None
    if project is None:
        return None, None, None
    public = public_id(object_id)
    return (project, public, None) if model is Thread else (project, None, public)


class AuditMiddleware(ResponseMiddleware):
    """Records API and staff accesses after the response is made (see the module docstring).

    Sync and async (``threads.middleware.ResponseMiddleware``): under ASGI it
    runs on the event loop and goes to a worker thread only for a request it
    records, so Django does not adapt the requests below it to sync and back.
    """

    def needs_worker(self, request: HttpRequest, response: HttpResponse) -> bool:
        """Whether this request may be recorded; decided without the database (``request.user`` is not read)."""
        path = request.path
        if path.startswith("/api/") and not path.startswith(("/api/docs", "/api/openapi.json")):
            return (request.method not in READ_METHODS or response.status_code in (401, 403)
                    or getattr(settings, "OAM_AUDIT_READS", False))
        return path.startswith(("/staff/", "/admin/")) and request.method == "POST"

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if self.needs_worker(request, response):
            if request.path.startswith("/api/"):
                self._api(request, response)
            elif request.user.is_authenticated:
                self._staff(request, response)
        return response

    @staticmethod
    def _api(request: HttpRequest, response: HttpResponse) -> None:
        key = getattr(request, "auth", None)
        key = key if isinstance(key, ApiKey) else None
        thread_id, record_id = _ids(request)
        record_access(channel="api", method=request.method, route=route_template(request),
                      status=response.status_code, project=key.project if key else None, api_key=key,
                      thread_id=thread_id, record_id=record_id)

    @staticmethod
    def _staff(request: HttpRequest, response: HttpResponse) -> None:
        kwargs = getattr(getattr(request, "resolver_match", None), "kwargs", None) or {}
        project = Project.objects.filter(slug=kwargs["project"]).first() if "project" in kwargs else None
        thread_id, record_id = _ids(request)
        if project is None and "object_id" in kwargs:
            project, thread_id, record_id = _admin_object(request, kwargs["object_id"])
        record_access(channel="staff", method=request.method, route=route_template(request),
                      status=response.status_code, project=project, staff_user=request.user.get_username(),
                      thread_id=thread_id, record_id=record_id)


#: Ids per UPDATE of ``scrub_erased``: under SQLite's bound-parameter limit and Oracle's 1,000-item IN list.
SCRUB_BATCH = 500


def scrub_erased(sender, *, project, thread_ids: list[str], record_ids: list[str] = (), **kwargs) -> None:
    """``memory.signals.subject_erased``: access records forget the erased threads and records.

    Records of the erased threads (public ids) lose their thread and record
    ids; records naming an erased record (``record_ids``: memories, images and
    relations, also those that lived in threads that remain, such as a user's
    memory stored in another user's thread, or in no thread) lose their
    record id. Another kind of record with the same id loses it too (ids are
    per kind; a record id alone cannot say which): a gap in the log, never a leak.
    """
    for start in range(0, len(thread_ids), SCRUB_BATCH):
        AccessRecord.objects.filter(project=project, thread_id__in=thread_ids[start:start + SCRUB_BATCH]).update(
            thread_id=None, record_id=None)
    record_ids = list(record_ids)
    for start in range(0, len(record_ids), SCRUB_BATCH):
        AccessRecord.objects.filter(project=project, record_id__in=record_ids[start:start + SCRUB_BATCH]).update(
            record_id=None)


def access_records_purge(sender=None, *, now, **kwargs) -> int:
    """``memory.signals.purge_ran``: delete access records older than ``OAM_ACCESS_LOG_DAYS``; return how many.

    Keeps the log bounded (kept bounded by a retention setting); 0 or
    less keeps them forever.
    """

    days = settings.OAM_ACCESS_LOG_DAYS
    if days <= 0:
        return 0
    deleted, _ = AccessRecord.objects.filter(at__lt=now - timedelta(days=days)).delete()
    return deleted
