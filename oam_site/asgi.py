"""ASGI entry point: HTTP through Django, WebSockets through Channels (served by daphne).

With the embedded (in-process) Dramatiq broker, the first connection starts
this server's worker threads (``oam_site.worker``), whose start-up sweep picks
up extraction work left queued by an earlier run. Under daphne, request
bodies that are too large, or sent to the API without a valid key, are
refused before they are read (``oam_site.request_gate``), a WebSocket peer has
``oam_site.websocket_timeouts.CLOSE_HANDSHAKE_TIMEOUT`` seconds to answer a close,
and a refused WebSocket handshake gets the application's HTTP answer
(``oam_site.websocket_denial``: 401, 403, 404, 429 instead of daphne's 403).
A WebSocket path no route matches is refused (404), not an error
(``oam_site.routing.RefusingURLRouter``). HTTP requests to ``/mcp`` and below go
to the MCP server (``threads.mcp.http``), every other one to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")
django_asgi_app = get_asgi_application()

from asgiref.sync import sync_to_async  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter  # noqa: E402

from memory.index.vector_cache import warm_in_background  # noqa: E402
from oam_site.health import PROBE_PATHS, asgi_probe  # noqa: E402
from oam_site.request_gate import install as install_request_gate  # noqa: E402
from oam_site.routing import websocket_router  # noqa: E402
from oam_site.websocket_denial import install as install_websocket_denial  # noqa: E402
from oam_site.websocket_timeouts import install as install_websocket_timeouts  # noqa: E402
from oam_site.worker import ensure_embedded_worker  # noqa: E402
from threads.consumers import OriginValidatorUnlessApiKey  # noqa: E402
from threads.mcp.http import McpHttpApp, mcp_path  # noqa: E402


class StartEmbeddedWorker:
    """ASGI middleware: on the first HTTP or WebSocket scope, start the embedded Dramatiq
    worker and load the search vector cache in the background (``memory.index.vector_cache``)."""

    def __init__(self, app):
        self.app = app
        self.started = False

    async def __call__(self, scope, receive, send):
        if not self.started and scope["type"] in ("http", "websocket"):
            self.started = True
            warm_in_background()
            await sync_to_async(ensure_embedded_worker, thread_sensitive=False)()
        return await self.app(scope, receive, send)


class HttpRouter:
    """HTTP by path: ``/healthz`` and ``/readyz`` to the probes (``oam_site.health.asgi_probe``: any Host, no
    middleware), ``/mcp`` and below to the MCP server, the rest to Django."""

    def __init__(self, django_app, mcp_app):
        self.django_app, self.mcp_app = django_app, mcp_app

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if path in PROBE_PATHS:
            return await asgi_probe(scope, receive, send)
        app = self.mcp_app if mcp_path(path) else self.django_app
        return await app(scope, receive, send)


install_request_gate()
install_websocket_timeouts()
install_websocket_denial()
application = StartEmbeddedWorker(ProtocolTypeRouter(
    {
        "http": HttpRouter(django_asgi_app, McpHttpApp()),
        "websocket": OriginValidatorUnlessApiKey(AuthMiddlewareStack(websocket_router)),
    }
))
