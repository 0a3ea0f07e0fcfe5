from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """The memory engine (``docs/architecture.md``).

    ``ready`` imports the Dramatiq actor module, which installs itself as the
    engine's extraction queue (``memory.extraction.queue``).
    """

    default_auto_field = 'django.db.models.BigAutoField'
    name = 'memory'

    def ready(self) -> None:
        from memory import tasks  # noqa: F401  (installs the extraction queue)
