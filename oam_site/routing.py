"""WebSocket routes (extraction progress streams arrive with the extraction issue)."""

websocket_urlpatterns: list = []
