"""Settings of the memory engine with their defaults: the one place that reads ``settings.OAM_*`` for it.

Each function reads the setting when called (tests override settings), so a
module asks ``conf.extraction_queue_capacity()`` instead of repeating
``getattr(settings, "OAM_EXTRACTION_QUEUE_CAPACITY", 1000)``. ``DEFAULTS``
names every setting read here with its default; ``oam_site/settings.py`` sets
them from the environment. ``memory.checks`` reports a bad value by name
(``manage.py check``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

#: Every ``OAM_*`` setting the engine reads, with the default used when the settings module leaves it out.
DEFAULTS: dict[str, Any] = {
    "OAM_EXTRACTION_MAX_ATTEMPTS": 4,
    "OAM_EXTRACTION_TIME_LIMIT": 1200,
}


def get(name: str) -> Any:
    """The value of setting ``name``, or its default from ``DEFAULTS`` (KeyError for a name not listed there)."""
    return getattr(settings, name, DEFAULTS[name])


def extraction_max_attempts() -> int:
    """Claims of one extraction job before it fails for good (``OAM_EXTRACTION_MAX_ATTEMPTS``, 4)."""
    return int(get("OAM_EXTRACTION_MAX_ATTEMPTS"))


def extraction_time_limit() -> int:
    """Seconds one extraction job may run in a worker (``OAM_EXTRACTION_TIME_LIMIT``, 1200)."""
    return int(get("OAM_EXTRACTION_TIME_LIMIT"))
