"""Dramatiq actors of the memory engine: thin, they load ids and call ``memory.extraction``.

``extract_job(job_id)`` runs one ``ExtractionJob``. Delivery is at least once
and a job may be sent more than once (creation, the chain after the previous
job, the sweep): ``memory.services.extraction.job_run`` claims it with a
compare-and-set, so extra deliveries do nothing. A transient error is
re-raised for Dramatiq's retry with backoff, except an unreachable LLM: its job
goes back to the queue and is sent again with a delay of its own until the retry
horizon (``memory.extraction.jobs.retry_later``); permanent ones are recorded on
the job and not raised.

Queue ``extraction``; the broker is ``settings.DRAMATIQ_BROKER``
(django_dramatiq): Redis or RabbitMQ with ``manage.py rundramatiq`` workers in
production, an in-process ``StubBroker`` with an embedded worker otherwise
(``oam_site.worker``, started by its broker middleware before the first send).

Importing this module installs the actor as the engine's queue
(``memory.extraction.queue.install``); ``MemoryConfig.ready`` imports it.
"""

from __future__ import annotations

import logging

import dramatiq
from dramatiq.brokers.stub import StubBroker

from memory.core import conf, degraded
from memory.extraction import queue
from memory.services.extraction import job_run

logger = logging.getLogger(__name__)

QUEUE = "extraction"


@dramatiq.actor(
    queue_name=QUEUE,
    max_retries=conf.extraction_max_attempts(),
    min_backoff=2_000,
    max_backoff=120_000,
    time_limit=conf.extraction_time_limit() * 1000,
)
def extract_job(job_id: int) -> None:
    """Run extraction job ``job_id`` (``memory.services.extraction.job_run``)."""
    job_run(job_id=job_id)


def send_job(job_id: int, *, delay: float | None = None) -> None:
    """Send ``extract_job(job_id)`` to the actor's broker, delivered after ``delay`` seconds when given (a retry's
    backoff, ``memory.extraction.jobs.retry_later``); raises when the broker refuses it."""
    if delay:
        extract_job.send_with_options(args=(job_id,), delay=max(1, int(delay * 1000)))
    else:
        extract_job.send(job_id)


def enqueue_job(job_id: int) -> bool:
    """Send ``extract_job(job_id)``; return whether the broker took it. Never raises.

    A failed send is noted on the job (``memory.extraction.queue.note_not_queued``),
    where the extraction state shows it, and recovered by the sweep.
    """
    return queue.enqueue_job(job_id)


#: Seconds the broker check of ``broker_status`` waits to connect and for the answer.
BROKER_CHECK_TIMEOUT = 1.0


def broker_status() -> dict[str, object]:
    """Whether this process can reach the Dramatiq broker now: ``{"kind", "ok", "error"}``.

    ``kind``: ``redis``, ``rabbitmq``, ``in-process`` (the ``StubBroker``;
    always ok) or the broker's class name. Redis is asked for a ``PING`` on a
    connection of its own with ``BROKER_CHECK_TIMEOUT`` seconds to connect and
    answer, so a broker that is down costs a request at most that long;
    ``error`` is the reason when it fails, in fixed words (no address). A failure pauses the broker part
    (``memory.core.degraded``): for ``RETRY_SECONDS`` the answer is "not reached" at once, with no ping.
    Other brokers are not checked (``ok`` None). Never raises.
    """
    broker = extract_job.broker
    if isinstance(broker, StubBroker):
        return {"kind": "in-process", "ok": True, "error": None}
    from dramatiq.brokers.redis import RedisBroker  # deferred: only a Redis broker needs the redis client

    if not isinstance(broker, RedisBroker):
        kind = "rabbitmq" if type(broker).__name__ == "RabbitmqBroker" else type(broker).__name__
        return {"kind": kind, "ok": None, "error": None}
    import redis  # deferred: as RedisBroker above

    if not degraded.should_try("broker"):  # failed a moment ago: answer at once (a hung Redis cost every
        return {"kind": "redis", "ok": False, "error": "the broker could not be reached"}  # handshake 1 s)
    pool = broker.client.connection_pool
    kwargs = {**pool.connection_kwargs, "socket_connect_timeout": BROKER_CHECK_TIMEOUT,
              "socket_timeout": BROKER_CHECK_TIMEOUT, "retry": None}
    client = redis.Redis(connection_pool=redis.ConnectionPool(connection_class=pool.connection_class, **kwargs))
    try:
        degraded.reported("broker", client.ping)
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        # a fixed text: GET .../extraction shows it to any read key, and redis names its host and port
        return {"kind": "redis", "ok": False, "error": f"the broker could not be reached ({degraded.reason_of(exc)})"}
    finally:
        client.close()
        client.connection_pool.disconnect()
    return {"kind": "redis", "ok": True, "error": None}


queue.install(send=send_job, status=broker_status)
