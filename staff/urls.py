"""Routes of the staff pages, mounted at ``/staff/`` (namespace ``staff``).

Pages of records live under their project, ``projects/<slug>/`` (
ids are unique within a project only). Thread, message, memory and relation
ids are public ids and path segments (``str``: no slash), as in the JSON API
and the WebSocket route.
"""

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.urls import path

from staff import views

app_name = "staff"

P = "projects/<slug:project>/"
T = P + "threads/<str:thread_id>/"

urlpatterns = [
    path("", views.home, name="home"),
    # Django's auth views; the form refuses accounts that are not staff (the admin's form).
    path("login/", auth_views.LoginView.as_view(template_name="staff/login.html",
                                                authentication_form=AdminAuthenticationForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="staff:login"), name="logout"),
    path("projects/", views.project_list, name="project_list"),
    path("threads/", views.default_thread_list, name="default_thread_list"),
    path(P + "threads/", views.thread_list, name="thread_list"),
    path(T, views.thread_detail, name="thread_detail"),
    path(T + "timeline/", views.timeline_region, name="timeline"),
    path(T + "memories/", views.memories_region, name="memories"),
    path(T + "extraction/", views.extraction_region, name="extraction"),
    path(T + "extract/", views.extract_now, name="extract_now"),
    path(T + "context-card/", views.context_card, name="context_card"),
    path(T + "quality/", views.thread_quality, name="thread_quality"),
    path(T + "messages/<str:message_id>/edit/", views.message_edit, name="message_edit"),
    path(T + "messages/<str:message_id>/delete/", views.message_delete, name="message_delete"),
    path(T + "memories/add/", views.memory_add, name="memory_add"),
    path(T + "memories/<str:memory_id>/edit/", views.memory_edit, name="memory_edit"),
    path(T + "memories/<str:memory_id>/delete/", views.memory_delete, name="memory_delete"),
    path(T + "memories/<str:memory_id>/restore/", views.memory_restore, name="memory_restore"),
    path(T + "images/<str:image_id>/", views.image, name="image"),
    path(T + "images/<str:image_id>/edit/", views.image_edit, name="image_edit"),
    path(T + "images/<str:image_id>/delete/", views.image_delete, name="image_delete"),
    path(T + "relations/add/", views.relation_add, name="relation_add"),
    path(T + "relations/<str:relation_id>/delete/", views.relation_delete, name="relation_delete"),
    path(P + "review/", views.review_queue, name="review"),
    path(P + "review/<str:memory_id>/approve/", views.review_approve, name="review_approve"),
    path(P + "review/<str:memory_id>/edit/", views.review_edit, name="review_edit"),
    path(P + "review/<str:memory_id>/reject/", views.review_reject, name="review_reject"),
    path("search/", views.default_search, name="default_search"),
    path(P + "search/", views.search, name="search"),
    path(P + "quality/", views.quality, name="quality"),
]
