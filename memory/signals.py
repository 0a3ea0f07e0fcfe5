"""Signals the engine sends for the layers above it (the engine never imports them)."""

from django.dispatch import Signal

#: Sent inside the transaction of ``memory.erasure.subject_erase`` with ``project`` (a ``Project``) and
#: ``thread_ids`` (the erased threads' public ids): what other layers keep about those threads must go too
#: (``threads.audit.scrub_erased``).
subject_erased = Signal()
