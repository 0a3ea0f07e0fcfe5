from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """The memory engine (``docs/architecture.md``).

    ``ready`` imports the Dramatiq actor module, which installs itself as the
    engine's extraction queue (``memory.extraction.queue``), and registers the
    system checks of the engine's settings (``memory.checks``).
    """

    default_auto_field = 'django.db.models.BigAutoField'
    name = 'memory'

    def ready(self) -> None:
        # Deferred to ready(): these import the models, which cannot load while the app registry fills.
        from memory import checks, tasks  # noqa: F401  (registers the checks, installs the extraction queue)
        from memory.services.profiles import erase_profiles
        from memory.signals import subject_erased

        subject_erased.connect(erase_profiles, dispatch_uid="memory.services.profiles.erase_profiles")
