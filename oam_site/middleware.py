"""Project middleware: response headers that every private response needs."""

from __future__ import annotations

from django.http import JsonResponse
from django.utils.cache import patch_cache_control
from django.utils.deprecation import MiddlewareMixin

#: Paths whose responses hold a tenant's records or a staff user's view of them.
PRIVATE_PREFIXES = ("/api/", "/staff/", "/admin/", "/ws/")
#: Public pages under those prefixes: the API's own documentation.
PUBLIC_PATHS = ("/api/docs", "/api/openapi.json")


class PrivateApiResponsesMiddleware(MiddlewareMixin):
    """``Cache-Control: no-store, private`` on API and staff responses (issue #13).

    A shared cache or the browser's disk must not keep a user's memories, image
    bytes or context cards. The API documentation stays cacheable. Works in sync
    and async stacks (``MiddlewareMixin``).
    """

    def process_response(self, request, response):
        path = request.path
        if path.startswith(PRIVATE_PREFIXES) and not path.startswith(PUBLIC_PATHS):
            response.headers.pop("Cache-Control", None)
            patch_cache_control(response, no_store=True, private=True)
        return response


class ApiJsonErrorsMiddleware(MiddlewareMixin):
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
