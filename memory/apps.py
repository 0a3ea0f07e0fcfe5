from django.apps import AppConfig


class MemoryConfig(AppConfig):
    default_auto_field = 'django.db.models.BigAutoField'
    name = 'memory'

    def ready(self):
        from memory.profiles import erase_profiles
        from memory.signals import subject_erased

        subject_erased.connect(erase_profiles, dispatch_uid="memory.profiles.erase_profiles")
