"""URL configuration: the Django admin, the JSON API (docs at ``/api/docs``), the staff pages (``/staff/``), the
documentation site (``/docs/``: ``oam_site.docs``) and the health probes (``/healthz``, ``/readyz``:
``oam_site.health``)."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from oam_site.api import api_urls
from oam_site.docs import docs_site
from oam_site.health import healthz, readyz

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api_urls(sync=settings.OAM_API_SYNC)),
    path("staff/", include("staff.urls")),
    path("docs/", docs_site, name="docs"),
    path("docs/<path:path>", docs_site, name="docs_file"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("", RedirectView.as_view(pattern_name="staff:home", permanent=False)),
]
