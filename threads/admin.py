"""Django admin for API keys: list, deactivate, delete. Keys are created by ``create_api_key``."""

from django.contrib import admin

from threads.models import ApiKey


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """Keys are shown by name and prefix; the digest is read-only and new keys come from the command."""

    list_display = ("name", "prefix", "is_active", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name", "prefix")
    fields = ("name", "prefix", "is_active", "created_at", "key_hash")
    readonly_fields = ("prefix", "created_at", "key_hash")

    def has_add_permission(self, request):
        """New keys come from ``manage.py create_api_key``, which is the only place the raw key is shown."""
        return False
