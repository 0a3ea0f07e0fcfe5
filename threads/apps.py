from django.apps import AppConfig


class ThreadsConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'threads'

    def ready(self):
        """An erasure also clears the erased threads' ids from the access records (``threads.audit``) and
        deletes the keys fixed to the erased user or agent (``threads.auth``), and the periodic purge deletes
        access records past their retention."""
        # Deferred to ready(): these import the models, which cannot load while the app registry fills.
        from memory.signals import purge_ran, subject_erased
        from threads.audit import access_records_purge, scrub_erased
        from threads.auth import subject_keys_erase

        subject_erased.connect(scrub_erased, dispatch_uid="threads.audit.scrub_erased")
        subject_erased.connect(subject_keys_erase, dispatch_uid="threads.auth.subject_keys_erase")
        purge_ran.connect(access_records_purge, dispatch_uid="threads.audit.access_records_purge")
