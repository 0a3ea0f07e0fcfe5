"""Routes of the staff pages, mounted at ``/staff/`` (namespace ``staff``).

Pages of records live under their project, ``projects/<slug>/`` (
ids are unique within a project only). Thread, message, memory and relation
ids are public ids and path segments (``str``: no slash), as in the JSON API
and the WebSocket route. Each view lives in its resource's module of
``staff.views``.
"""

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import views as auth_views
from django.urls import path

from staff.views import (
    context,
    extraction,
    images,
    memories,
    messages,
    projects,
    quality,
    relations,
    review,
    search,
    threads,
)

app_name = "staff"

P = "projects/<slug:project>/"
T = P + "threads/<str:thread_id>/"

urlpatterns = [
    path("", projects.home, name="home"),
    # Django's auth views; the form refuses accounts that are not staff (the admin's form).
    path("login/", auth_views.LoginView.as_view(template_name="staff/login.html",
                                                authentication_form=AdminAuthenticationForm), name="login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="staff:login"), name="logout"),
    path("projects/", projects.project_list, name="project_list"),
    path("threads/", threads.default_thread_list, name="default_thread_list"),
    path(P + "threads/", threads.thread_list, name="thread_list"),
    path(T, threads.thread_detail, name="thread_detail"),
    path(T + "timeline/", threads.timeline_region, name="timeline"),
    path(T + "memories/", threads.memories_region, name="memories"),
    path(T + "extraction/", extraction.extraction_region, name="extraction"),
    path(T + "extract/", extraction.extract_now, name="extract_now"),
    path(T + "extraction/rerun/", extraction.extraction_rerun_view, name="extraction_rerun"),
    path(T + "context-card/", context.context_card, name="context_card"),
    path(T + "context-card/log/", context.card_log, name="card_log"),
    path(T + "quality/", quality.thread_quality, name="thread_quality"),
    path(T + "messages/<str:message_id>/edit/", messages.message_edit, name="message_edit"),
    path(T + "messages/<str:message_id>/delete/", messages.message_delete, name="message_delete"),
    path(T + "memories/add/", memories.memory_add, name="memory_add"),
    path(T + "memories/<str:memory_id>/edit/", memories.memory_edit, name="memory_edit"),
    path(T + "memories/<str:memory_id>/delete/", memories.memory_delete, name="memory_delete"),
    path(T + "memories/<str:memory_id>/restore/", memories.memory_restore, name="memory_restore"),
    path(T + "images/<str:image_id>/", images.image, name="image"),
    path(T + "images/<str:image_id>/edit/", images.image_edit, name="image_edit"),
    path(T + "images/<str:image_id>/delete/", images.image_delete, name="image_delete"),
    path(T + "relations/add/", relations.relation_add, name="relation_add"),
    path(T + "relations/<str:relation_id>/delete/", relations.relation_delete, name="relation_delete"),
    path(P + "review/", review.review_queue, name="review"),
    path(P + "review/<str:memory_id>/approve/", review.review_approve, name="review_approve"),
    path(P + "review/<str:memory_id>/edit/", review.review_edit, name="review_edit"),
    path(P + "review/<str:memory_id>/reject/", review.review_reject, name="review_reject"),
    path(P + "review/dependants/<str:memory_id>/clear/", review.review_dependant_clear, name="review_dependant_clear"),
    path("search/", search.default_search, name="default_search"),
    path(P + "search/", search.search, name="search"),
    path(P + "quality/", quality.quality, name="quality"),
]
