"""Signals the engine sends for the layers above it (the engine never imports them)."""

from django.dispatch import Signal

#: Sent inside the transaction of ``memory.services.erasure.subject_erase`` with ``project`` (a ``Project``),
#: ``subject`` ("user" or "agent") and ``subject_id``, ``thread_ids`` (the erased threads' public ids) and
#: ``record_ids`` (public ids of every memory, image and relation erased, in those threads or elsewhere): what
#: other layers keep about them must go too (``threads.audit.scrub_erased``; ``threads.auth.subject_keys_erase``
#: deletes the keys fixed to the subject). A receiver may return a dict of rows it deleted per kind; the
#: receipt adds them to its counts.
subject_erased = Signal()

#: Sent by ``memory.services.erasure.expired_purge`` (the workers' periodic purge and ``manage.py purge_expired``)
#: with ``now`` (an aware datetime) after the expired records are gone: other layers purge what they keep
#: for a bounded time (``threads.audit.access_records_purge``).
purge_ran = Signal()
