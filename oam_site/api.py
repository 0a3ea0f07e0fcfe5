"""The NinjaAPI instance: API-key auth on every operation, domain errors mapped to HTTP.

``memory`` raises the spec's built-in error types carrying the field at fault
(``memory.core.errors``); here they become JSON:

* ``InvalidArgument``/``InvalidType`` -> 422 in ninja's own shape,
  ``{"detail": [{"loc": [source, field], "msg": ..., "type": ...}]}``;
* ``NotFound`` -> 404 ``{"detail": ..., "field": ...}``;
* a key whose permission is too weak (``threads.auth.KeyForbidden``) -> 403
  ``{"detail": ..., "field": null}``; a value beyond a restricted key's user or
  agent (``memory.core.errors.OutOfScope``) -> 403 naming the field;
* ``Conflict`` -> 409 ``{"detail": ..., "field": ...}``;
* ``memory.llm.adapters.LlmError`` raised by a request that needs the LLM (an image
  caption) -> 503 when the LLM is unreachable, 502 when it answered badly;
* a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, or more fields or files than
  ``DATA_UPLOAD_MAX_NUMBER_FIELDS``/``_FILES`` -> 413;
* a body that is not JSON (``JsonParser``) or not well-formed multipart ->
  422 ``{"detail": [{"loc": ["body"], "msg": ..., "type": ...}]}`` (ninja
  alone answers 400 ``{"detail": "Cannot parse request body"}``, Django a bare
  HTML 400); a string holding a lone UTF-16 surrogate -> the same 422 with
  ``loc`` naming the field that holds it (``["body", "messages", 0, "content"]``).

Schema errors name the field as the docs show it: ``loc`` is
``[source, field, ...]``, without the name of the view's body parameter
that ninja puts after ``"body"`` (``OamNinjaAPI.validation_error_from_error_contexts``).

The OpenAPI schema documents, besides each route's own responses, 401 and 403
on every operation (all need a key, with a permission) and 413 on those with a
body (``OamNinjaAPI.get_openapi_schema``). Routes need ``write`` unless they
say otherwise (``threads.api.common``: ``READ``, ``ADMIN``). An operationId is
``threads_api_<function>`` whichever module of ``threads.api`` holds the route
(``OamNinjaAPI.get_openapi_operation_id``).

Docs (Swagger UI, served with its assets by the app itself) are at ``/api/docs`` and the schema at
``/api/openapi.json``; both answer without a key.

The operations are ``async def`` (``threads.api``, one router per resource joined in
``threads.api.routes``). ``api_urls`` mounts them,
or with ``OAM_API_SYNC`` the same operations as sync views (the old way, kept
for ``bench/api_load.py`` to compare): Django then runs each request's whole
operation in one worker thread, each ``memory.core.aio.in_worker`` it awaits called
inline (``memory.core.aio.run_inline``).
"""

from __future__ import annotations

import json
import math
import re

from asgiref.sync import iscoroutinefunction
from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import DataError
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import URLPattern
from ninja import NinjaAPI, Swagger
from ninja.errors import HttpError, Throttled, ValidationError, ValidationErrorContext
from ninja.parser import Parser

from memory.core.aio import run_inline
from memory.core.errors import Conflict, InvalidArgument, InvalidType, NotFound, OutOfScope
from memory.llm.adapters import LlmError, LlmUnavailable
from threads.api.routes import router as threads_router
from threads.auth import ApiKeyAuth, KeyForbidden
from threads.json_body import InvalidJsonBody, parse_json_body
from threads.throttling import ApiKeyRateThrottle, seconds_to_next_window


class JsonParser(Parser):
    """Request bodies read by ``threads.json_body.parse_json_body`` (pydantic's JSON parser), as the image
    upload reads them, rather than ``json.loads``.

    Besides malformed JSON it refuses a string holding a lone UTF-16 surrogate
    (storing or embedding it was a 500) and nesting deeper than pydantic's
    limit (about 200 levels). Raises ``InvalidJsonBody``; ninja turns any
    parser error into ``HttpError(400)`` caused by it, which ``http_error``
    answers as a 422 naming the body, or the field holding the surrogate.
    """

    def parse_body(self, request: HttpRequest):
        """The JSON value of ``request.body`` (dict, list, str, number, bool or None)."""
        return parse_json_body(request.body)


#: pydantic's names for the members of a union in an error's ``loc`` (``str``, ``int``, ``list[...]``,
#: ``nullable[int]``, ``function-wrap[_run_root_validator()]``, ``tagged-union[...]``...). Schema field
#: names are identifiers, so none matches this.
_UNION_TAG = re.compile(r"^(str|int|float|bool|none|bytes|dict|list|json-or-python|is-instance|[a-z-]+\[.*\])$")


def _is_union_tag(part) -> bool:
    return isinstance(part, str) and bool(_UNION_TAG.match(part))


class OamNinjaAPI(NinjaAPI):
    """``NinjaAPI`` whose OpenAPI schema also documents the statuses every operation shares (see module doc)."""

    def get_openapi_operation_id(self, operation) -> str:
        """The package of the route's module and the function's name: ``threads_api_thread_create`` for
        ``threads.api.threads.thread_create``.

        ninja's default takes the whole module path, so moving a route between
        the resource modules of ``threads.api`` would rename its operation (and
        the method a client generated from the schema calls).
        """
        module = operation.view_func.__module__
        package = module.rpartition(".")[0] or module
        return f"{package}_{operation.view_func.__name__}".replace(".", "_")

    def validation_error_from_error_contexts(self, error_contexts: list[ValidationErrorContext]) -> ValidationError:
        """ninja's 422 with each body error's ``loc`` as ``["body", field, ...]``.

        ninja reads a body into the view's one body parameter and puts that
        parameter's name (``payload``) after ``"body"``: an internal name the
        docs never show. It is dropped (a body that is not an object at all
        is then ``["body"]``). So are the names pydantic gives the members of a
        field that takes several types (``str``, ``list[...]``,
        ``nullable[int]``, ``function-wrap[...]``): ``content`` given a number
        is ``["body", "content"]`` once per member's message.
        """
        error = super().validation_error_from_error_contexts(error_contexts)
        names = {getattr(c.model, "__read_from_single_attr__", None) for c in error_contexts
                 if c.model.__ninja_param_source__ == "body"} - {None}
        seen, errors = set(), []
        for item in error.errors:
            loc = tuple(item.get("loc", ()))
            if len(loc) > 1 and loc[0] == "body" and loc[1] in names:
                loc = (loc[0], *loc[2:])
            item["loc"] = tuple(part for part in loc if not _is_union_tag(part))
            key = (item["loc"], item.get("type"), item.get("msg"))
            if key not in seen:
                seen.add(key)
                errors.append(item)
        error.errors[:] = errors
        return error

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        """ninja's schema, plus 401 and 403 (``ErrorOut``) on each operation with ``security`` and 413 on each
        with a ``requestBody``; a response a route declares itself is kept."""
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                if operation.get("security"):
                    responses.setdefault(401, {"description": "No usable API key (missing, wrong, revoked or "
                                                             "expired)", "content": error})
                    responses.setdefault(403, {"description": "The key's permission or its fixed user or agent "
                                                             "does not allow this", "content": error})
                if "requestBody" in operation:
                    responses.setdefault(413, {"description": "Request body too large", "content": error})
        return schema


api = OamNinjaAPI(
    title="OAM Site API",
    version="1",
    description="Durable, searchable memory for AI agents (OracleThread API over HTTP). "
    "Send `Authorization: Bearer <key>`; keys come from `manage.py create_api_key <name>` or `POST /api/keys`. "
    "A key works in one project, with a permission (read, write, admin) and, when it has them, for one end "
    "user and agent only.",
    auth=ApiKeyAuth("write"),
    urls_namespace="api",
    # Swagger UI from ninja's own static files ("ninja" in INSTALLED_APPS), not a CDN; "none": no spec
    # validation badge fetched from validator.swagger.io. The page works with no Internet access.
    docs=Swagger(settings={"validatorUrl": "none"}),
    parser=JsonParser(),
    throttle=[ApiKeyRateThrottle()],
)
api.add_router("/", threads_router)


def _sync_view(view):
    """A sync view running the async ``view`` to its end in Django's worker thread (``run_inline``)."""

    def sync_view(request, *args, **kwargs):
        return run_inline(view(request, *args, **kwargs))

    sync_view.csrf_exempt = getattr(view, "csrf_exempt", False)
    sync_view.__name__ = sync_view.__qualname__ = f"sync_{getattr(view, '__name__', 'view')}"
    return sync_view


def api_urls(*, sync: bool = False):
    """What ``path("api/", ...)`` includes: ``api.urls``, or with ``sync`` its async views as sync views."""
    patterns, app_name, namespace = api.urls
    if sync:
        patterns = [URLPattern(p.pattern, _sync_view(p.callback), p.default_args, p.name)
                    if iscoroutinefunction(p.callback) else p for p in patterns]
    return patterns, app_name, namespace


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


def _nul_field(request: HttpRequest) -> tuple[str, str]:
    """(source, field) of the first path parameter, query parameter or JSON body value holding U+0000."""
    match = getattr(request, "resolver_match", None)
    for name, value in (match.kwargs.items() if match is not None else ()):
        if "\x00" in str(value):
            return "path", name
    for name, values in request.GET.lists():
        if "\x00" in name or any("\x00" in value for value in values):
            return "query", name
    try:
        stack = [("", json.loads(request.body or b"null"))]
    except (ValueError, UnicodeDecodeError):
        stack = []
    while stack:
        path, value = stack.pop()
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, child in items:
            where = f"{path}.{key}" if path and isinstance(key, str) else f"{path}[{key}]" if path else str(key)
            if (isinstance(key, str) and "\x00" in key) or (isinstance(child, str) and "\x00" in child):
                return "body", where
            stack.append((where, child))
    return "body", "body"


@api.exception_handler(DataError)
def data_error(request: HttpRequest, exc: DataError) -> HttpResponse:
    """A lookup value holding U+0000 reached PostgreSQL, which refuses NUL in text ("text fields cannot contain
    NUL (0x00) bytes"; no stored record can hold one: ``memory.core.errors.check_text``): 422 naming the field,
    whichever door the value came through (an id in the path, a list filter, a search scope). Any other
    ``DataError`` is a bug and stays a 500."""
    if "NUL (0x00)" not in str(exc):
        raise exc
    source, field = _nul_field(request)
    item = {"loc": [source, field], "msg": "must not hold U+0000 (NUL): no database here stores it in text",
            "type": "value_error"}
    return api.create_response(request, {"detail": [item]}, status=422)


@api.exception_handler(OutOfScope)
def out_of_scope(request: HttpRequest, exc: OutOfScope) -> HttpResponse:
    """A value names another end user or agent than the key's fixed ones: 403 naming the field."""
    return api.create_response(request, {"detail": exc.message, "field": exc.field}, status=403)


@api.exception_handler(KeyForbidden)
def key_forbidden(request: HttpRequest, exc: KeyForbidden) -> HttpResponse:
    """The key is usable but its permission does not cover the operation: 403."""
    return api.create_response(request, {"detail": exc.message, "field": None}, status=403)


@api.exception_handler(NotFound)
def not_found(request: HttpRequest, exc: NotFound) -> HttpResponse:
    """A thread, message or memory is absent, expired or another thread's: 404."""
    return api.create_response(request, {"detail": exc.message, "field": exc.field}, status=404)


@api.exception_handler(TimeoutError)
def timed_out(request: HttpRequest, exc: TimeoutError) -> HttpResponse:
    """The extraction queue stayed full under ``wait_then_raise``: 503 (the messages are stored)."""
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
@api.exception_handler(TooManyFieldsSent)
@api.exception_handler(TooManyFilesSent)
def too_big(request: HttpRequest, exc: RequestDataTooBig | TooManyFieldsSent | TooManyFilesSent) -> HttpResponse:
    """The body is over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``OAM_MAX_REQUEST_BYTES``), or the query string or
    body carries more parameters or files than ``DATA_UPLOAD_MAX_NUMBER_FIELDS``/``_FILES``: 413 (Django
    alone answers these with an HTML 400)."""
    if isinstance(exc, RequestDataTooBig):
        detail = f"the request body is over OAM_MAX_REQUEST_BYTES ({settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes)"
        return api.create_response(request, {"detail": detail, "field": "body"}, status=413)
    return api.create_response(request, {"detail": str(exc) or "request body too large", "field": None}, status=413)


def _body_invalid(request: HttpRequest, msg: str, error_type: str, loc: tuple = ()) -> HttpResponse:
    item = {"loc": ["body", *loc], "msg": msg, "type": error_type}
    return api.create_response(request, {"detail": [item]}, status=422)


@api.exception_handler(InvalidJsonBody)
def json_invalid(request: HttpRequest, exc: InvalidJsonBody) -> HttpResponse:
    """A body that is not JSON, or holds a lone surrogate: 422 ``type: json_invalid``, as pydantic reports it,
    naming the body, or the field that holds the surrogate."""
    return _body_invalid(request, f"Invalid JSON: {exc}", "json_invalid", exc.loc)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    """ninja's own HTTP errors as ninja answers them (``{"detail": ...}``: 401 no key, ...), except a body
    ``JsonParser`` could not read (``json_invalid``). 429 (``threads.throttling``) carries ``Retry-After``."""
    if isinstance(exc.__cause__, InvalidJsonBody):
        return json_invalid(request, exc.__cause__)
    response = api.create_response(request, {"detail": str(exc)}, status=exc.status_code)
    if isinstance(exc, Throttled):
        response["Retry-After"] = str(math.ceil(exc.wait or seconds_to_next_window()))
    return response


@api.exception_handler(MultiPartParserError)
def multipart_invalid(request: HttpRequest, exc: MultiPartParserError) -> HttpResponse:
    """A ``multipart/form-data`` body Django cannot parse (no boundary, truncated...): 422 naming the body."""
    return _body_invalid(request, f"Invalid multipart/form-data: {exc}", "multipart_invalid")
