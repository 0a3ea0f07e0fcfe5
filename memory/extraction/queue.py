"""The extraction queue seen from the engine: send a job id to whatever runs jobs, and say whether it can.

The engine does not import the Dramatiq actor module (``memory.tasks``
imports the engine): the actor module installs its sender here when it is
imported (``MemoryConfig.ready`` imports it), the way a Django app connects
its signal receivers. ``enqueue_job`` never raises: a failed send is noted on
the job (``note_not_queued``; the extraction state shows it) and the sweep
(``memory.extraction.recovery.sweep``) sends the job again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from memory.core import degraded
from memory.models import ExtractionJob

logger = logging.getLogger(__name__)

NOT_QUEUED = "not queued"

_send: Callable[..., None] | None = None
_status: Callable[[], dict[str, object]] | None = None


def install(*, send: Callable[..., None], status: Callable[[], dict[str, object]]) -> None:
    """Set how a job id is sent (``send(job_id, delay=seconds or None)``, may raise) and how the broker is
    checked (``status()``)."""
    global _send, _status
    _send, _status = send, status


def enqueue_job(job_id: int, *, delay: float | None = None) -> bool:
    """Send job ``job_id`` to the queue, to run after ``delay`` seconds when given; return whether it was taken.
    Never raises (see the module docstring)."""
    try:
        if _send is None:
            raise RuntimeError("no extraction queue installed (memory.tasks is not imported)")
        _send(job_id, delay=delay)
    except Exception as exc:  # noqa: BLE001 - the job row stays queued; the sweep re-sends it
        degraded.report_failure("broker", exc)  # logged at most once a minute; /readyz shows it
        note_not_queued(job_id, exc)
        return False
    degraded.report_ok("broker")
    return True


def broker_status() -> dict[str, object]:
    """``{"kind", "ok", "error"}`` of the installed queue's broker (``memory.tasks.broker_status``)."""
    if _status is None:
        return {"kind": "none", "ok": False, "error": "no extraction queue installed"}
    return _status()


def note_not_queued(job_id: int, exc: BaseException) -> None:
    """Note on a queued job that sending it to the broker failed (``queue_stall`` reports it); never raises."""
    try:
        ExtractionJob.objects.filter(pk=job_id, status="queued").update(
            error=f"{NOT_QUEUED}: the broker refused it ({degraded.reason_of(exc)})")  # no address: read keys see it
    except Exception:  # noqa: BLE001 - the database may be what failed; the sweep re-sends the job anyway
        logger.warning("could not note the failed send of extraction job %s", job_id, exc_info=True)
