"""WebSocket routes: a thread's extraction progress (``threads.consumers``).

``websocket_router`` is Channels' ``URLRouter`` over them that refuses a path
no route matches before ``accept`` (``threads.consumers.deny``: HTTP 404 under
daphne, close code 4404 elsewhere). Channels' own raises ``ValueError: No
route found``, which daphne answered with a 500 and logged with its traceback
(``/ws/nothing/``, ``/ws/threads/a%2Fb/extraction/``, ``/api/threads`` and
``/staff/`` from an outside attack, issue #29).
"""

from channels.routing import URLRouter
from django.urls import Resolver404, path

from threads.consumers import NO_SUCH_THREAD, ExtractionConsumer, deny

websocket_urlpatterns = [
    path("ws/threads/<str:thread_id>/extraction/", ExtractionConsumer.as_asgi()),
]

#: What a client that upgrades a path no route matches is told.
NOT_ROUTED = "Not found: no WebSocket route for this path"


class RefusingURLRouter(URLRouter):
    """``URLRouter`` that refuses (``deny``, 404) a WebSocket scope whose path no route matches, rather than
    raising; it tells so by the routes' patterns, as ``URLRouter`` matches them, before calling any."""

    def routed(self, scope) -> bool:
        """Whether a route matches the scope's path (``URLRouter.__call__``'s test, root path included)."""
        found = scope.get("path")
        root_path = scope.get("root_path", "")
        if found is None or (root_path and not found.startswith(root_path)):
            return False
        found = found[len(root_path):].lstrip("/")
        for route in self.routes:
            try:
                if route.pattern.match(found):
                    return True
            except Resolver404:
                continue
        return False

    async def __call__(self, scope, receive, send):
        if scope.get("type") == "websocket" and "path_remaining" not in scope and not self.routed(scope):
            if (await receive())["type"] == "websocket.connect":  # else the client left already
                await deny(scope, send, NO_SUCH_THREAD, NOT_ROUTED)
            return
        return await super().__call__(scope, receive, send)


websocket_router = RefusingURLRouter(websocket_urlpatterns)
