"""Dramatiq actors of the memory engine: thin, they load ids and call ``memory.extraction``.

``extract_job(job_id)`` runs one ``ExtractionJob``. Delivery is at least once
and a job may be sent more than once (creation, the chain after the previous
job, the sweep): ``memory.extraction.job_run`` claims it with a
compare-and-set, so extra deliveries do nothing. A transient error is
re-raised for Dramatiq's retry with backoff; permanent ones are recorded on
the job and not raised.

Queue ``extraction``; the broker is ``settings.DRAMATIQ_BROKER``
(django_dramatiq): Redis or RabbitMQ with ``manage.py rundramatiq`` workers in
production, an in-process ``StubBroker`` with an embedded worker otherwise
(``memory.worker``).
"""

from __future__ import annotations

import logging

import dramatiq
from django.conf import settings

from memory.worker import ensure_embedded_worker

logger = logging.getLogger(__name__)

QUEUE = "extraction"


@dramatiq.actor(
    queue_name=QUEUE,
    max_retries=getattr(settings, "OAM_EXTRACTION_MAX_ATTEMPTS", 4),
    min_backoff=2_000,
    max_backoff=120_000,
    time_limit=int(getattr(settings, "OAM_EXTRACTION_TIME_LIMIT", 1200)) * 1000,
)
def extract_job(job_id: int) -> None:
    """Run extraction job ``job_id`` (``memory.extraction.job_run``)."""
    from memory.extraction import job_run  # the actor module stays importable before the models

    job_run(job_id=job_id)


def enqueue_job(job_id: int) -> bool:
    """Send ``extract_job(job_id)``; return whether the broker took it. Never raises.

    Starts the embedded worker first when this process runs one. A failed
    send is noted on the job (``memory.extraction.note_not_queued``), where
    the extraction state shows it, and recovered by the sweep.
    """
    try:
        ensure_embedded_worker()
        extract_job.send(job_id)
    except Exception as exc:  # noqa: BLE001 - the job row stays queued; memory.extraction.sweep re-sends it
        logger.warning("could not queue extraction job %s; the sweep will retry", job_id, exc_info=True)
        from memory.extraction import note_not_queued

        note_not_queued(job_id, exc)
        return False
    return True
