"""Template filters of the staff pages: DOM ids, JSON text, expiry, inline-edit lookups and record URLs.

Records are shown and linked by their public ids (``memory.records.tenancy``); URLs
name the project (``staff/urls.py``).
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from django.utils.encoding import iri_to_uri
from django.utils.http import RFC3986_SUBDELIMS

from memory.core.ids import public_id

register = template.Library()

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@register.filter
def domid(value: Any) -> str:
    """A record id usable in an HTML id and a URL fragment: itself when made of ``[A-Za-z0-9_-]``,
    else the safe characters plus a short hash (so two ids never share a DOM id)."""
    text = str(value)
    if not _UNSAFE.search(text):
        return text
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', text)[:40]}-{digest}"


@register.filter
def as_json(value: Any) -> str:
    """A JSON value as compact text for a form field or a ``<pre>`` ("" for None or an empty object)."""
    if value in (None, {}):
        return ""
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@register.filter
def expired(record: Any, now=None) -> bool:
    """True when the record's ``expires_at`` has passed (``now`` from the context, else the clock)."""
    expires_at = getattr(record, "expires_at", None)
    return expires_at is not None and expires_at <= (now or timezone.now())


@register.filter
def public(value: Any) -> str | None:
    """The public id of a stored id (``memory.core.ids.public_id``): for id columns such as ``source_id``."""
    return public_id(value)


@register.filter
def form_for(edit: Any, record: Any):
    """The bound form of a failed inline edit when it is about ``record`` (same kind and public id), else None.

    The kind (``Edit.kind``: message, memory, image) is the record's model name, so a
    message and an image that share an id do not both open the failed form.
    """
    if edit is None or getattr(edit, "id", None) != getattr(record, "public_id", None):
        return None
    if getattr(edit, "kind", None) != record._meta.model_name:
        return None
    return edit.form


@register.filter
def job_state(status: str | None) -> str:
    """An extraction job status as the live-progress state the page script uses (done -> finished)."""
    return {"done": "finished", None: "idle", "": "idle"}.get(status, status)


@register.filter
def value_of(form: Any, name: str):
    """The submitted value of field ``name`` of a bound form ("" when absent): for dynamic field names."""
    if form is None or name not in getattr(form, "fields", {}):
        return ""
    value = form[name].value()
    return "" if value is None else value


#: Per-record routes under a thread's page (staff/urls.py), for ``record_url``.
RECORD_ROUTES = {
    "message_edit": "messages/{}/edit/",
    "message_delete": "messages/{}/delete/",
    "memory_edit": "memories/{}/edit/",
    "memory_delete": "memories/{}/delete/",
    "memory_restore": "memories/{}/restore/",
    "relation_delete": "relations/{}/delete/",
    "image": "images/{}/",
    "image_edit": "images/{}/edit/",
    "image_delete": "images/{}/delete/",
}


@lru_cache(maxsize=256)
def _thread_url(project: str, thread_id: str) -> str:
    return reverse("staff:thread_detail", args=[project, thread_id])


@register.simple_tag
def record_url(name: str, project: Any, thread_id: str, record_id: str) -> str:
    """The URL of ``staff:<name>`` for a record (public id) of a thread (public id) of ``project`` (a
    ``Project`` or its slug), as ``{% url %}`` gives it, without a reverse per record.

    A thread page links four routes per record; reversing each costs more
    than the rest of the record's markup. The thread's URL is reversed once
    (cached) and the record id quoted the way ``reverse`` quotes a path
    segment; tests/staff check both agree for every route.
    """
    segment = quote(str(record_id), safe=RFC3986_SUBDELIMS + "~:@")
    return iri_to_uri(_thread_url(getattr(project, "slug", project), thread_id) + RECORD_ROUTES[name].format(segment))


@register.simple_tag
def thread_url(project: Any, thread_id: str) -> str:
    """The staff page of a thread (public id) of ``project`` (a ``Project`` or its slug), or "" when its id
    cannot be a path segment (it holds a ``/``).

    The API accepts any id string, but a routed segment stops at ``/``: such a
    thread's list row links to the admin and a search hit names it unlinked,
    rather than the whole page failing with ``NoReverseMatch``.
    """
    try:
        return _thread_url(getattr(project, "slug", project), str(thread_id))
    except NoReverseMatch:
        return ""
