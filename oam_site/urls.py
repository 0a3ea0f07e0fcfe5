"""URL configuration: the Django admin and the JSON API (docs at ``/api/docs``)."""

from django.contrib import admin
from django.urls import path

from oam_site.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
