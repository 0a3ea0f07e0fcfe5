"""WebSocket routes: a thread's extraction progress (``threads.consumers``)."""

from django.urls import path

from threads.consumers import ExtractionConsumer

websocket_urlpatterns = [
    path("ws/threads/<str:thread_id>/extraction/", ExtractionConsumer.as_asgi()),
]
