"""A base for middleware that works on the response, native in both of Django's modes.

Django's ``MiddlewareMixin`` runs under ASGI by sending each ``process_response``
to a worker thread and back; a sync-only middleware makes Django run every
request below it in a worker thread. ``ResponseMiddleware`` does neither: it
is ``sync_capable`` and ``async_capable``, calls ``process_response`` inline,
and goes to the request's worker thread (``memory.core.aio.in_worker``) only for a
response that ``needs_worker`` says needs I/O (the database...).
"""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from memory.core.aio import in_worker


class ResponseMiddleware:
    """Subclasses define ``process_response`` (and ``needs_worker`` when it may do I/O)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        return self.process_response(request, self.get_response(request))

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        response = await self.get_response(request)
        if self.needs_worker(request, response):
            return await in_worker(self.process_response, request, response)
        return self.process_response(request, response)

    def needs_worker(self, request: HttpRequest, response: HttpResponse) -> bool:
        """Whether ``process_response`` may do I/O for this response (under ASGI: run it in a worker thread)."""
        return False

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        return response  # pragma: no cover - subclasses say
