from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'threads'

    def ready(self):
        """An erasure also clears the erased threads' ids from the access records, and the periodic purge
        deletes access records past their retention (``threads.audit``)."""
        from memory.signals import purge_ran, subject_erased
        from threads.audit import access_records_purge, scrub_erased

        subject_erased.connect(scrub_erased, dispatch_uid="threads.audit.scrub_erased")
        purge_ran.connect(access_records_purge, dispatch_uid="threads.audit.access_records_purge")
