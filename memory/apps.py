from django.apps import AppConfig


class MemoryConfig(AppConfig):
    """The memory engine (``docs/architecture.md``).

    ``ready`` imports the Dramatiq actor module, which installs itself as the
    engine's extraction queue (``memory.extraction.queue``), registers the
    system checks of the engine's settings (``memory.checks``), and installs the
    OpenTelemetry SDK when the ``OTEL_*`` variables ask for traces and no provider
    is set yet (``memory.core.telemetry.configure_from_env``; it raises
    ``TelemetryConfigError`` for an exporter whose package is missing).
    """

    default_auto_field = 'django.db.models.BigAutoField'
    name = 'memory'

    def ready(self) -> None:
        # Deferred to ready(): these import the models, which cannot load while the app registry fills.
        from memory import checks, tasks  # noqa: F401  (registers the checks, installs the extraction queue)
        from memory.core.telemetry import configure_from_env
        from memory.services.profiles import erase_profiles
        from memory.signals import subject_erased

        subject_erased.connect(erase_profiles, dispatch_uid="memory.services.profiles.erase_profiles")
        configure_from_env()
