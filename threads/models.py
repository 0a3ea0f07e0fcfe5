"""Tables of the delivery layer: API keys for the JSON API.

Keys are never stored: only the SHA-256 of the key (``key_hash``) and a short
``prefix`` to recognise it in the admin. Explicit short table and index names,
because Django's Oracle backend truncates identifiers to 30 characters.

A key belongs to one project and acts with one permission:
``read`` < ``write`` < ``admin``; with ``user_id``/``agent_id`` it acts for that
end user/agent only (``memory.records.tenancy.Tenant``). It may expire, is revoked
rather than deleted (``is_active`` False, ``revoked_at`` set), and records
when it was last used. ``threads.auth`` holds the functions that create,
rotate, revoke and check keys.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from memory.models import Project

#: Permissions, weakest first: each includes the ones before it.
PERMISSIONS = ("read", "write", "admin")


class ApiKey(models.Model):
    """A bearer key an agent application sends as ``Authorization: Bearer <key>``."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="First characters of the key, for display only.")
    key_hash = models.CharField(max_length=64, help_text="SHA-256 hex digest of the key (unique).")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="api_keys")
    permission = models.CharField(
        max_length=8, choices=[(p, p) for p in PERMISSIONS], default="write",
        help_text="read: reads and searches; write: also creates, changes and deletes records; "
                  "admin: also manages the project's keys and erases users and agents.")
    user_id = models.CharField(max_length=255, null=True, blank=True,
                               help_text="When set, the key acts for this end user only.")
    agent_id = models.CharField(max_length=255, null=True, blank=True,
                                help_text="When set, the key acts for this agent only.")
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from this moment on (empty: never).")
    is_active = models.BooleanField(default=True, help_text="False once revoked.")
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True, help_text="Updated at most once a minute.")
    rotated_at = models.DateTimeField(null=True, blank=True)
    created_by = models.CharField(max_length=200, blank=True, default="",
                                  help_text='Who created it: "manage.py", "admin:<username>" or "api-key:<id>".')
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_api_keys"
        ordering = ["-created_at"]
        verbose_name = "API key"
        verbose_name_plural = "API keys"
        constraints = [models.UniqueConstraint(fields=["key_hash"], name="oam_apikey_hash_uq")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class AccessRecord(models.Model):
    """Who did what through which door: one row per API write, refused request, WebSocket
    connection and staff write (``threads.audit``).

    ``route`` is the route's template (``/api/threads/{thread_id}/messages``),
    ``thread_id`` and ``record_id`` the public ids the path named (never a
    user or agent id: an erasure would have to find them), kept only when
    ``project`` is known (a request refused before its key was has neither:
    ``threads.audit.record_access``). An erasure clears
    them for the erased threads, and the record id of every erased record
    wherever it lived (``threads.audit.scrub_erased``).
    """

    CHANNELS = ("api", "websocket", "staff")

    project = models.ForeignKey(Project, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    api_key = models.ForeignKey(ApiKey, on_delete=models.SET_NULL, null=True, blank=True, related_name="accesses")
    staff_user = models.CharField(max_length=150, blank=True, default="")
    channel = models.CharField(max_length=16, choices=[(c, c) for c in CHANNELS])
    method = models.CharField(max_length=10)
    route = models.CharField(max_length=200)
    thread_id = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    record_id = models.CharField(max_length=255, null=True, blank=True)
    status = models.IntegerField(help_text="HTTP status; a WebSocket's 101 (accepted) or close code.")
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "oam_access_log"
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["project", "at"], name="oam_access_project_ix")]

    def __str__(self) -> str:
        return f"{self.method} {self.route} {self.status}"
