from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'threads'

    def ready(self):
        """An erasure also clears the erased threads' ids from the access records (``threads.audit``)."""
        from memory.signals import subject_erased
        from threads.audit import scrub_erased

        subject_erased.connect(scrub_erased, dispatch_uid="threads.audit.scrub_erased")
