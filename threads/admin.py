"""Django admin for API keys: create (the key shown once), list, rotate and revoke.

Every change goes through ``threads.auth`` (``api_key_create``/``_rotate``/``_revoke``),
the functions the commands and ``/api/keys`` use. Keys are revoked, not
deleted: the row stays for the audit trail. A stored key's settings are read-only:
a different permission or restriction is a new key. Staff who are not
superusers see, create, rotate and revoke keys of their projects only, and
read those projects' access records only (``memory.admin.ProjectScopedAdmin``).
"""

from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import reverse

from memory.admin import ProjectScopedAdmin, ReadOnlyAdmin
from threads.auth import api_key_create, api_key_revoke, api_key_rotate
from threads.models import AccessRecord, ApiKey

EDITABLE_ON_ADD = ("name", "project", "permission", "user_id", "agent_id", "expires_at")
SHOWN = ("prefix", "is_active", "revoked_at", "last_used_at", "rotated_at", "created_by", "created_at")


@admin.register(ApiKey)
class ApiKeyAdmin(ProjectScopedAdmin):
    """Keys by name, project, permission and restriction; the digest is never shown."""

    list_display = ("name", "prefix", "project", "permission", "user_id", "agent_id", "is_active", "expires_at",
                    "last_used_at", "created_at")
    list_filter = ("project", "permission", "is_active")
    search_fields = ("name", "prefix", "user_id", "agent_id")
    actions = ["revoke_keys", "rotate_key"]

    def get_fields(self, request, obj=None):
        """A new key: its settings; a stored one: its settings and history, all read-only."""
        return EDITABLE_ON_ADD if obj is None else EDITABLE_ON_ADD + SHOWN

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else EDITABLE_ON_ADD + SHOWN

    def has_delete_permission(self, request, obj=None):
        """Keys are revoked, never deleted: who used which key stays known."""
        return False

    def save_model(self, request, obj, form, change):
        """A new key through ``api_key_create`` (its raw key is shown by ``response_add``, once)."""
        if change:
            return
        row, raw = api_key_create(name=obj.name, project=obj.project, permission=obj.permission,
                                  user_id=obj.user_id or None, agent_id=obj.agent_id or None,
                                  expires_at=obj.expires_at, created_by=f"admin:{request.user.get_username()}")
        obj.pk = row.pk
        request._oam_raw_key = (row, raw)

    def response_add(self, request, obj, post_url_continue=None):
        """The page that shows the new key, once (it is stored hashed)."""
        row, raw = request._oam_raw_key
        return self._show_key(request, row, raw, "API key created")

    def _show_key(self, request, row, raw, title):
        context = {**self.admin_site.each_context(request), "title": title, "key": row, "raw": raw,
                   "back": reverse("admin:threads_apikey_changelist"), "opts": self.model._meta}
        return TemplateResponse(request, "admin/threads/apikey/key_shown.html", context)

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request, queryset):
        """``api_key_revoke`` each selected key (their WebSockets close)."""
        for row in queryset:
            api_key_revoke(key=row)
        self.message_user(request, f"Revoked {queryset.count()} API key(s).", messages.SUCCESS)

    @admin.action(description="Rotate the selected API key (shows its new secret once)")
    def rotate_key(self, request, queryset):
        """``api_key_rotate`` the one selected key and show its new secret once."""
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one key to rotate.", messages.ERROR)
            return None
        try:
            row, raw = api_key_rotate(key=queryset.get())
        except ValueError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        return self._show_key(request, row, raw, "API key rotated")


@admin.register(AccessRecord)
class AccessRecordAdmin(ReadOnlyAdmin):
    """Access records (``threads.audit``): read-only, filtered by project, door, key and status."""

    list_display = ("at", "project", "channel", "api_key", "staff_user", "method", "route", "thread_id", "record_id",
                    "status")
    list_filter = ("project", "channel", "status", "method")
    search_fields = ("route", "thread_id", "record_id", "staff_user", "api_key__name", "api_key__prefix")
    list_select_related = ("project", "api_key")
