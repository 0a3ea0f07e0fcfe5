"""The staff web UI: Django templates and htmx on top of ``memory``."""

from django.apps import AppConfig


class StaffConfig(AppConfig):
    """Pages under ``/staff/``: threads, a thread's timeline and memories, search, context cards."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "staff"
    verbose_name = "Staff pages"
