"""Tables of the delivery layer: API keys for the JSON API.

Keys are never stored: only the SHA-256 of the key (``key_hash``) and a short
``prefix`` to recognise it in the admin. Explicit short table and index names,
because Django's Oracle backend truncates identifiers to 30 characters.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class ApiKey(models.Model):
    """A bearer key an agent application sends as ``Authorization: Bearer <key>``."""

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=12, help_text="First characters of the key, for display only.")
    key_hash = models.CharField(max_length=64, help_text="SHA-256 hex digest of the key (unique).")
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_api_keys"
        ordering = ["-created_at"]
        verbose_name = "API key"
        verbose_name_plural = "API keys"
        constraints = [models.UniqueConstraint(fields=["key_hash"], name="oam_apikey_hash_uq")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"
