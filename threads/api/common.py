"""What the resource routers share: permissions, error responses, paging, the request's client, read-backs.

* ``READ``, ``WRITE``, ``ADMIN``: the permission a route needs (``auth=``);
  without one a route needs ``write``, the API's default (``oam_site.api``);
* ``NOT_FOUND``, ``INVALID``: the 404 and 422 responses most routes declare;
* ``Pagination`` (``PER_PAGE`` by default): ``limit``/``offset`` of every list;
* ``client_for``, ``thread_for``: the ``memory.client`` door of a request
  (its key's project, fixed user and agent), ``project_admin``: the key of a
  project-wide admin route;
* ``written_memory``: a memory read back after the request wrote it;
* ``json_text``, ``list_filters``: query parameters and form fields holding JSON text.
"""

from typing import Any

import pydantic_core
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Field, Schema
from ninja.conf import settings as ninja_settings
from ninja.pagination import LimitOffsetPagination

from memory.client import AgentMemory, Thread
from memory.core.aio import in_worker
from memory.core.errors import MAX_SQL_COUNT, InvalidArgument, NotFound
from memory.core.types import MemoryRecord
from memory.records import selectors
from threads.auth import ApiKeyAuth, KeyForbidden, api_key_tenant, permits
from threads.schemas.common import ErrorOut, ValidationErrorOut

#: Route permissions. A route without ``auth=`` needs ``write``, the
#: API's default (``oam_site.api``): forgetting it refuses a read key, never the reverse.
READ, WRITE, ADMIN = ApiKeyAuth("read"), ApiKeyAuth("write"), ApiKeyAuth("admin")


NOT_FOUND = {404: ErrorOut}
INVALID = {422: ValidationErrorOut}


#: Items a list answers when ``limit`` is omitted.
PER_PAGE = ninja_settings.PAGINATION_PER_PAGE


class Pagination(LimitOffsetPagination):
    """ninja's ``limit``/``offset`` pagination: ``limit`` at most ``OAM_API_MAX_PAGE`` (default 1000),
    ``offset`` at most ``memory.core.errors.MAX_SQL_COUNT`` (2**31 - 1).

    A page is bounded work whatever the data holds. ``offset`` becomes SQL
    ``OFFSET``, a 64-bit integer: unbounded, an ``offset`` past 2**63 was a
    500 (SQLite: "datatype mismatch"). Over a cap: 422 naming ``limit`` or
    ``offset`` (``less_than_equal``).
    """

    class Input(Schema):
        limit: int = Field(PER_PAGE, ge=1, le=settings.OAM_API_MAX_PAGE)
        offset: int = Field(0, ge=0, le=MAX_SQL_COUNT)

    async def apaginate_queryset(self, queryset, pagination: Input, request: HttpRequest, **params):
        """The page and the count, read in the request's worker thread (ninja's own reads ``Records`` and
        lists on the event loop): one hop for both."""
        return await in_worker(self._page, queryset, pagination, request, **params)

    def _page(self, queryset, pagination: Input, request: HttpRequest, **params) -> dict:
        page = self.paginate_queryset(queryset, pagination, request, **params)
        page[self.items_attribute] = list(page[self.items_attribute])
        return page


def client_for(request: HttpRequest) -> AgentMemory:
    """A client acting for the request's key: its project, fixed user and agent (``threads.auth.api_key_tenant``),
    with the configured retention (cheap; built per request so settings stay live)."""
    return AgentMemory(tenant=api_key_tenant(request.auth))


async def thread_for(request: HttpRequest, thread_id: str) -> Thread:
    """The thread handle in the request's project, or ``NotFound`` (404) naming ``thread_id``."""
    return await client_for(request).get_thread_async(thread_id)


def written_memory(thread: Thread, memory_id: str) -> MemoryRecord:
    """Read back a memory this request just wrote.

    ``Thread.get_memory`` sees only live memories whose ``thread_id`` is this
    thread's; ``add_memory`` may store another ``thread_id`` (or none), or a TTL
    anchored on an old timestamp that is already over. The write still
    happened, so the answer falls back to the stored row by id.
    """
    try:
        return thread.get_memory(memory_id)
    except NotFound:
        return selectors.memory_stored(project=thread.project, memory_id=memory_id)


def json_text(text: str, field: str, what: str):
    """The JSON value of a form field or query parameter; ``InvalidArgument`` naming ``field`` when it is not JSON.

    Read with pydantic's parser, like request bodies (``oam_site.api.JsonParser``): nesting
    deeper than its limit is an error there, where ``json.loads`` raised ``RecursionError`` (a 500).
    """
    try:
        return pydantic_core.from_json(text)
    except ValueError:
        raise InvalidArgument(field, f"must be JSON text ({what})") from None


#: The response header of an as-of answer (issue #32) whose user or agent was erased since that instant.
ERASED_SINCE_HEADER = "X-OAM-Erased-Since"


def erased_since_header(request: HttpRequest, response: HttpResponse, answer: Any) -> Any:
    """Set ``X-OAM-Erased-Since: true`` on ``response`` when ``answer`` (an as-of list,
    ``memory.records.as_of.AsOfRecords``) says its subject was erased since and the key is an admin key; return
    ``answer``. A header, not a field, so the lists' and search's bodies keep their schemas.

    Admin keys only, as the erasure receipts are (``GET /api/erasures``): told to any read key, the header had
    said whether a guessed user id was erased, and bisecting ``as_of`` when (an outside attack)."""
    if getattr(answer, "erased_since", False) and permits(request.auth.permission, "admin"):
        response[ERASED_SINCE_HEADER] = "true"
    return answer


def list_filters(params) -> dict:
    """The filters of a list's query schema that the client sent, ``metadata_filter`` parsed from JSON text."""
    args = params.model_dump(exclude_unset=True)
    if "metadata_filter" in args:
        args["metadata_filter"] = json_text(args["metadata_filter"], "metadata_filter", "an object")
    return args


def project_admin(request: HttpRequest):
    """The calling key, when it may manage its project (keys, erasure receipts, exports): ``admin`` (the route's auth)
    and no fixed user or agent (such a key acts for one user; this would reach the others)."""
    manager = request.auth
    if manager.user_id is not None or manager.agent_id is not None:
        raise KeyForbidden("a key restricted to a user or an agent cannot manage keys or read erasure receipts")
    return manager


#: Thread and memory ids the JSON API (and so MCP) refuses to create: the LangGraph store
#: (``integrations.langgraph``) derives its holding threads' and memories' ids from the namespace and key, so
#: a key of the same project could otherwise take them first (its store's puts then fail, or land in another
#: user's thread). The Python client, which the store itself uses, is not a door for API keys.
RESERVED_ID_PREFIXES = ("langgraph",)


def refuse_reserved_id(value, field: str) -> None:
    """InvalidArgument (422 naming ``field``) for an id starting with a ``RESERVED_ID_PREFIXES`` entry."""
    if isinstance(value, str) and value.startswith(RESERVED_ID_PREFIXES):
        raise InvalidArgument(field, f"ids starting with {RESERVED_ID_PREFIXES[0]!r} are reserved for the "
                                     "LangGraph store (integrations.langgraph)")
