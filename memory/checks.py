"""Django system checks of the engine's settings (registered by ``MemoryConfig.ready``).

A bad ``OAM_*`` value is reported by ``manage.py check`` (and before
``runserver``/``migrate``) with the setting's name and its rule, instead of
surfacing at the first request that reads it. The rules are ``memory.conf.SETTINGS``.
"""

from __future__ import annotations

from django.core import checks

from memory import conf


@checks.register(checks.Tags.compatibility)
def check_settings(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """One ``memory.E001`` error per ``OAM_*`` setting whose value breaks its rule (``memory.conf.problems``)."""
    return [
        checks.Error(f"{name} {problem}", hint=conf.SETTINGS[name].help or None, obj="settings", id="memory.E001")
        for name, problem in conf.problems()
    ]
