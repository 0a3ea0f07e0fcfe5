from __future__ import annotations

import logging
from typing import Any

from memory.core import conf
from memory.core.types import MemoryRetentionConfig

logger = logging.getLogger(__name__)


TRIGGER_ADD = "add_messages"


TRIGGER_EDIT = "update_message"


#: A failed range run again (``memory.services.extraction.extraction_rerun``) after the watermark passed it:
#: like ``TRIGGER_EDIT`` it never moves the watermark.
TRIGGER_RERUN = "rerun"


#: Triggers of jobs outside the ``add_messages`` chain: claimed whenever they are queued, sent again by the sweep.
SIDE_TRIGGERS = (TRIGGER_EDIT, TRIGGER_RERUN)


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


def _setting(name: str, default: Any = None) -> Any:
    """The setting ``name`` (``memory.core.conf.get``: its default lives there; ``default`` is ignored)."""
    return conf.get(name)


def duplicate_distance() -> float:
    """Cosine distance under which a candidate restates a stored memory
    (``OAM_EXTRACTION_DUPLICATE_DISTANCE``, 0.08)."""
    return float(conf.get("OAM_EXTRACTION_DUPLICATE_DISTANCE"))


def related_distance() -> float:
    """Cosine distance under which a candidate may update or contradict one
    (``OAM_EXTRACTION_RELATED_DISTANCE``, 0.25)."""
    return float(conf.get("OAM_EXTRACTION_RELATED_DISTANCE"))


def max_attempts() -> int:
    """Claims of one job before it fails for good (``OAM_EXTRACTION_MAX_ATTEMPTS``, 4)."""
    return conf.extraction_max_attempts()


def default_retention() -> MemoryRetentionConfig:
    """Retention of extracted memories when no client says otherwise (the settings' defaults)."""
    return MemoryRetentionConfig(default_ttl_days=conf.get("OAM_DEFAULT_TTL_DAYS"),
                                 max_ttl_days=conf.get("OAM_MAX_TTL_DAYS"))


def retry_horizon() -> float:
    """Seconds a job keeps retrying while its LLM is unreachable, counted from the first such failure
    (``OAM_EXTRACTION_RETRY_HORIZON_SECONDS``, 21600: six hours; issue #34, "Degrade, don't fall over")."""
    return float(conf.get("OAM_EXTRACTION_RETRY_HORIZON_SECONDS"))


def retry_backoff(elapsed: float) -> float:
    """Seconds to wait before the next claim of a job that has failed transiently for ``elapsed`` seconds:
    ``elapsed`` itself, at least ``OAM_EXTRACTION_RETRY_BACKOFF_SECONDS`` (2) and at most
    ``OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS`` (300), so the waits double (2, 2, 4, 8 ... 300 s)."""
    first = float(conf.get("OAM_EXTRACTION_RETRY_BACKOFF_SECONDS"))
    cap = float(conf.get("OAM_EXTRACTION_RETRY_BACKOFF_MAX_SECONDS"))
    return min(cap, max(first, elapsed))
