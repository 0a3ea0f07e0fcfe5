"""Where Dramatiq work runs: the embedded in-process worker and the extraction sweep.

Production: ``DRAMATIQ_BROKER`` is Redis (or RabbitMQ) and workers are
``manage.py rundramatiq`` processes. Embedded default (no service to start):
a ``StubBroker`` (an in-memory queue) and one ``dramatiq.Worker`` with
``OAM_EMBEDDED_WORKER_THREADS`` threads inside the process that queues the
work, started by ``ensure_embedded_worker()`` the first time work is queued
(``EmbeddedWorkerMiddleware``, in ``DRAMATIQ_BROKER["MIDDLEWARE"]``) or when the ASGI server takes its
first connection (``oam_site.asgi``).
``OAM_EMBEDDED_WORKER=false`` turns it off (tests start their own).

``ExtractionSweepMiddleware`` (in ``DRAMATIQ_BROKER["MIDDLEWARE"]``) runs
``memory.extraction.recovery.sweep`` in a background thread of every worker: once when
the worker boots (recovering work lost while no worker ran) and then every
``OAM_EXTRACTION_SWEEP_SECONDS`` (0: boot only). Not in ``AppConfig.ready``:
start-up must not touch the database.

This module imports no models: django_dramatiq loads the middleware while the
app registry is still being populated.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time

import dramatiq
from django.db import close_old_connections, connection
from dramatiq.brokers.stub import StubBroker

from memory.core import conf

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_embedded: dramatiq.Worker | None = None


def _actor_broker() -> dramatiq.Broker:
    # Deferred (and below): django_dramatiq imports this module for its middleware while the app registry
    # fills, before the engine's models can load.
    from memory.tasks import extract_job

    return extract_job.broker


def broker_status() -> dict[str, object]:
    """Whether this process reaches the Dramatiq broker now (``memory.tasks.broker_status``)."""
    from memory.tasks import broker_status as status  # deferred: as in _actor_broker

    return status()


def ensure_embedded_worker() -> dramatiq.Worker | None:
    """Start this process's embedded worker if the broker is in-process and none runs; return it.

    Returns None when the broker is an external one (Redis, RabbitMQ) or
    ``settings.OAM_EMBEDDED_WORKER`` is off.
    """
    global _embedded
    if _embedded is not None or not conf.get("OAM_EMBEDDED_WORKER"):
        return _embedded
    broker = _actor_broker()
    if not isinstance(broker, StubBroker):
        return None
    with _lock:
        if _embedded is None:
            worker = dramatiq.Worker(broker, worker_threads=int(conf.get("OAM_EMBEDDED_WORKER_THREADS")),
                                     worker_timeout=100)
            worker.start()
            _embedded = worker
            atexit.register(stop_embedded_worker, timeout=5_000)
    return _embedded


def stop_embedded_worker(timeout: int = 30_000) -> None:
    """Stop the embedded worker (waits up to ``timeout`` ms for running messages); a later send starts a new one."""
    global _embedded
    with _lock:
        worker, _embedded = _embedded, None
    if worker is not None:
        worker.stop(timeout=timeout)


class EmbeddedWorkerMiddleware(dramatiq.Middleware):
    """Start this process's embedded worker (``ensure_embedded_worker``) before a message is sent.

    The engine sends extraction jobs without knowing where they run
    (``memory.extraction.queue``); with the in-process broker this is what
    makes the first send start the worker that will run it.
    """

    def before_enqueue(self, broker, message, delay) -> None:
        ensure_embedded_worker()


class ExtractionSweepMiddleware(dramatiq.Middleware):
    """Run ``memory.extraction.recovery.sweep`` when a worker boots and then on a timer, in a daemon thread; on the same
    thread, purge expired records (``memory.services.erasure.expired_purge``) at boot and then at the first sweep
    after each ``OAM_PURGE_EXPIRED_SECONDS`` (default 3600; 0 or less: never).

    ``interval`` seconds between sweeps (default ``OAM_EXTRACTION_SWEEP_SECONDS``,
    60; 0 or less: only at boot).
    """

    def __init__(self, interval: float | None = None):
        self.interval = interval
        self._stops: dict[int, threading.Event] = {}

    def after_worker_boot(self, broker, worker) -> None:
        stop = threading.Event()
        self._stops[id(worker)] = stop
        interval = self.interval if self.interval is not None else float(conf.get("OAM_EXTRACTION_SWEEP_SECONDS"))
        threading.Thread(target=self._loop, args=(stop, interval), name="oam-extraction-sweep", daemon=True).start()

    def before_worker_shutdown(self, broker, worker) -> None:
        stop = self._stops.pop(id(worker), None)
        if stop is not None:
            stop.set()

    @staticmethod
    def _loop(stop: threading.Event, interval: float) -> None:
        boot = True
        purge_every = float(conf.get("OAM_PURGE_EXPIRED_SECONDS"))
        next_purge = time.monotonic()
        while not stop.is_set():
            try:
                from memory.extraction.recovery import sweep  # deferred: as in _actor_broker

                counts = sweep(boot=boot)
                if any(counts.values()):
                    logger.info("extraction sweep%s: %s", " at boot" if boot else "", counts)
                if purge_every > 0 and time.monotonic() >= next_purge:
                    from memory.services.erasure import expired_purge  # deferred: as in _actor_broker

                    next_purge = time.monotonic() + purge_every
                    purged = expired_purge()
                    if purged:
                        logger.info("purged expired records: %s", dict(purged))
            except Exception:  # noqa: BLE001 - a failed sweep is retried on the next tick
                logger.warning("extraction sweep or expiry purge failed", exc_info=True)
            finally:
                close_old_connections()
                connection.close()
            boot = False
            if interval <= 0 or stop.wait(interval):
                return
