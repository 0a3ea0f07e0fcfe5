"""Project middleware: response headers that every private response needs, and static files.

Each runs natively in both of Django's modes (``threads.middleware.ResponseMiddleware``:
``sync_capable`` and ``async_capable`` without ``MiddlewareMixin``, whose async
mode sends every ``process_response`` to a worker thread and back): under ASGI
no middleware of the project adapts a request to sync, so an ``async def`` API
operation runs on the event loop from the server to the view. Django's own
middleware in ``MIDDLEWARE`` (security, sessions, CSRF...) are
``MiddlewareMixin``: each of their hooks still costs one hop to the request's
worker thread, as it did before the views were async.
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.http import JsonResponse
from django.utils.cache import patch_cache_control
from whitenoise.middleware import WhiteNoiseMiddleware

from memory.core.batching import reset_embedding_flow, set_embedding_flow
from memory.records import history
from threads.middleware import ResponseMiddleware

#: Paths whose responses hold a tenant's records or a staff user's view of them.
PRIVATE_PREFIXES = ("/api/", "/staff/", "/admin/", "/ws/")
#: Public pages under those prefixes: the API's own documentation.
PUBLIC_PATHS = ("/api/docs", "/api/openapi.json")


class PrivateApiResponsesMiddleware(ResponseMiddleware):
    """``Cache-Control: no-store, private`` on API and staff responses.

    A shared cache or the browser's disk must not keep a user's memories, image
    bytes or context cards. The API documentation stays cacheable.
    """

    def process_response(self, request, response):
        path = request.path
        if path.startswith(PRIVATE_PREFIXES) and not path.startswith(PUBLIC_PATHS):
            response.headers.pop("Cache-Control", None)
            patch_cache_control(response, no_store=True, private=True)
        return response


class ApiJsonErrorsMiddleware(ResponseMiddleware):
    """404 and 405 under ``/api/`` answer JSON ``{"detail": ...}`` like every other API error.

    Django answers an unknown path with an HTML page and django-ninja a wrong
    method with plain text; a client of a JSON API should never have to parse
    either. The ``Allow`` header of a 405 is kept.
    """

    MESSAGES = {404: "Not Found: no such API path", 405: "Method not allowed"}

    def process_response(self, request, response):
        if (request.path.startswith("/api/") and response.status_code in self.MESSAGES
                and not response.get("Content-Type", "").startswith("application/json")):
            replaced = JsonResponse({"detail": self.MESSAGES[response.status_code]}, status=response.status_code)
            if "Allow" in response:
                replaced["Allow"] = response["Allow"]
            return replaced
        return response


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise's middleware, async-capable: a request for a static file is served by WhiteNoise in a
    worker thread (file I/O); any other request goes on at once, in the handler's mode.

    WhiteNoise's own middleware is sync only, which made Django adapt every
    request (API calls included) to sync and back under ASGI.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None, **kwargs):
        super().__init__(get_response, **kwargs)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return super().__call__(request)

    async def __acall__(self, request):
        if self.autorefresh:  # DEBUG: looks on disk for every request
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)


class HistoryActorMiddleware:
    """Scope the actor of memory history (``memory.records.history``), and the embedding flow an API key
    names (``memory.core.batching.set_embedding_flow``, set by ``threads.auth.ApiKeyAuth``), to one request.

    Each request starts with no actor and ends by restoring the one before it,
    so an API key named by ``threads.auth.ApiKeyAuth`` (or a staff user named
    by ``staff.views.common.staff_required``) never leaks into the next request served
    in the same context (the test client, ``OAM_API_SYNC``). Requests to the
    Django admin (``/admin/``) act as ``admin`` with the signed-in username.
    Native in both modes, like ``ResponseMiddleware``.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    @staticmethod
    def _actor(request, user) -> tuple:
        if request.path.startswith("/admin/") and user is not None and user.is_authenticated:
            return ("admin", user.get_username(), f"{request.method} {request.path}")
        return ("client", "", "")

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)

        user = getattr(request, "user", None) if request.path.startswith("/admin/") else None
        token, flow = history.set_actor(*self._actor(request, user)), set_embedding_flow(None)
        try:
            return self.get_response(request)
        finally:
            reset_embedding_flow(flow)
            history.reset_actor(token)

    async def __acall__(self, request):
        user = await request.auser() if request.path.startswith("/admin/") and hasattr(request, "auser") else None
        token, flow = history.set_actor(*self._actor(request, user)), set_embedding_flow(None)
        try:
            return await self.get_response(request)
        finally:
            reset_embedding_flow(flow)
            history.reset_actor(token)
