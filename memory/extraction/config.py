from __future__ import annotations

import logging
from typing import Any
from django.conf import settings
from memory.types import MemoryRetentionConfig


logger = logging.getLogger(__name__)


TRIGGER_ADD = "add_messages"


TRIGGER_EDIT = "update_message"


ACTIVE = ("queued", "running")


#: Earlier messages shown with an edited message when the window is unbounded.
REEXTRACT_CONTEXT_MESSAGES = 10


#: Tokens kept for the prompt's own words besides the system text and schema.
PROMPT_OVERHEAD_TOKENS = 100


MIN_MESSAGE_BUDGET = 200


#: Stored memories compared with each candidate.
NEAREST_MEMORIES = 5


POLL_SECONDS = 0.1




#: Relation stored from the new memory to the existing one (memory.links built-ins).
LINK_TYPES = {"updates": "supersedes", "contradicts": "contradicts"}


def _setting(name: str, default: Any) -> Any:
    return getattr(settings, name, default)


def duplicate_distance() -> float:
    """Cosine distance under which a candidate restates a stored memory (``OAM_EXTRACTION_DUPLICATE_DISTANCE``, 0.08)."""
    return float(_setting("OAM_EXTRACTION_DUPLICATE_DISTANCE", 0.08))


def related_distance() -> float:
    """Cosine distance under which a candidate may update or contradict one (``OAM_EXTRACTION_RELATED_DISTANCE``, 0.25)."""
    return float(_setting("OAM_EXTRACTION_RELATED_DISTANCE", 0.25))


def max_attempts() -> int:
    """Claims of one job before it fails for good (``OAM_EXTRACTION_MAX_ATTEMPTS``, 4)."""
    return int(_setting("OAM_EXTRACTION_MAX_ATTEMPTS", 4))


def default_retention() -> MemoryRetentionConfig:
    """Retention of extracted memories when no client says otherwise (the settings' defaults)."""
    return MemoryRetentionConfig(default_ttl_days=settings.OAM_DEFAULT_TTL_DAYS, max_ttl_days=settings.OAM_MAX_TTL_DAYS)
