"""The NinjaAPI instance: API-key auth on every operation, domain errors mapped to HTTP.

``memory`` raises the spec's built-in error types carrying the field at fault
(``memory.errors``); here they become JSON:

* ``InvalidArgument``/``InvalidType`` -> 422 in ninja's own shape,
  ``{"detail": [{"loc": [source, field], "msg": ..., "type": ...}]}``;
* ``NotFound`` -> 404 ``{"detail": ..., "field": ...}``;
* ``Conflict`` -> 409 ``{"detail": ..., "field": ...}``;
* ``memory.llm.LlmError`` raised by a request that needs the LLM (an image
  caption) -> 503 when the LLM is unreachable, 502 when it answered badly;
* a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` -> 413.

Docs are served at ``/api/docs`` and the schema at ``/api/openapi.json``.
"""

from __future__ import annotations

import re

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI

from memory.errors import Conflict, InvalidArgument, InvalidType, NotFound
from memory.llm import LlmError, LlmUnavailable
from threads.api import router as threads_router
from threads.auth import ApiKeyAuth

api = NinjaAPI(
    title="OAM Site API",
    version="1",
    description="Durable, searchable memory for AI agents (OracleThread API over HTTP). "
    "Send `Authorization: Bearer <key>`; keys come from `manage.py create_api_key <name>`.",
    auth=ApiKeyAuth(),
    urls_namespace="api",
)
api.add_router("/", threads_router)


def _loc_source(request: HttpRequest, field: str) -> str:
    """Where a domain error's field came from: a path parameter, the query string, or the body."""
    root = re.split(r"[\[.]", field, maxsplit=1)[0]
    match = getattr(request, "resolver_match", None)
    if match is not None and root in match.kwargs:
        return "path"
    return "query" if request.method in ("GET", "DELETE") else "body"


def _invalid(request: HttpRequest, exc: InvalidArgument | InvalidType, error_type: str) -> HttpResponse:
    item = {"loc": [_loc_source(request, exc.field), exc.field], "msg": exc.message, "type": error_type}
    return api.create_response(request, {"detail": [item]}, status=422)


@api.exception_handler(InvalidArgument)
def invalid_argument(request: HttpRequest, exc: InvalidArgument) -> HttpResponse:
    """A value breaks a rule of the spec: 422, like a schema error."""
    return _invalid(request, exc, "value_error")


@api.exception_handler(InvalidType)
def invalid_type(request: HttpRequest, exc: InvalidType) -> HttpResponse:
    """A value has the wrong type: 422, like a schema error."""
    return _invalid(request, exc, "type_error")


@api.exception_handler(NotFound)
def not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
    """A thread, message or memory is absent, expired or another thread's: 404."""
    return api.create_response(request, {"detail": exc.message, "field": exc.field}, status=404)


@api.exception_handler(TimeoutError)
def timed_out(request: HttpRequest, exc: TimeoutError) -> HttpResponse:
    """Earlier background extraction did not finish in time (deletes wait for it): 503, nothing deleted."""
    return api.create_response(request, {"detail": str(exc) or "timed out", "field": None}, status=503)


@api.exception_handler(Conflict)
def conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    """A caller-chosen id is taken: 409."""
    return api.create_response(request, {"detail": exc.message, "field": exc.field}, status=409)


@api.exception_handler(LlmError)
def llm_failed(request: HttpRequest, exc: LlmError) -> HttpResponse:
    """The LLM a request needed (an image caption) failed; nothing was stored. 503 if unreachable, else 502."""
    status = 503 if isinstance(exc, LlmUnavailable) else 502
    return api.create_response(request, {"detail": f"LLM request failed: {exc}", "field": None}, status=status)


@api.exception_handler(RequestDataTooBig)
def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    """The body is over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``OAM_MAX_REQUEST_BYTES``): 413."""
    return api.create_response(request, {"detail": str(exc) or "request body too large", "field": None}, status=413)
