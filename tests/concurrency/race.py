"""Tools to force an interleaving of transactions on a database with row locks (tests/concurrency).

``Worker`` runs a callable in a thread with its own Django connection (closed when it ends) and keeps its
result or exception; ``Pause`` stops one worker inside a function of the engine until the test lets it go;
``wait_blocked`` waits until a number of database sessions wait for a lock (PostgreSQL's ``pg_locks``), so a
test knows a worker is queued behind a lock before it releases the lock. Nothing here sleeps for a guessed
time: each step waits for an observable state, with a timeout that fails the test (``TimeoutError``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from django.db import connection, connections

#: Seconds a step waits for a state it expects before the test fails.
TIMEOUT = 30.0


class Worker(threading.Thread):
    """Run ``fn()`` in a thread with its own database connection; ``result`` or ``error`` after ``join``."""

    def __init__(self, name: str, fn: Callable[[], Any]):
        super().__init__(name=name, daemon=True)
        self.fn = fn
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            self.error = exc
        finally:
            connections.close_all()  # this thread's connections only (they are thread-local)

    def outcome(self, timeout: float = TIMEOUT) -> Any:
        """Join; return the result, or raise the worker's exception (a test failure names it)."""
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"worker {self.name} still running after {timeout:g} s")
        if self.error is not None:
            raise self.error
        return self.result


def start(*workers: Worker) -> tuple[Worker, ...]:
    """Start the workers; return them."""
    for worker in workers:
        worker.start()
    return workers


def waiting_sessions() -> int:
    """Sessions of this database server waiting for a lock now (``pg_locks`` rows not granted)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted")
        return cursor.fetchone()[0]


def wait_blocked(n: int, timeout: float = TIMEOUT) -> None:
    """Return once at least ``n`` sessions wait for a lock; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while waiting_sessions() < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"expected {n} session(s) waiting for a lock, saw {waiting_sessions()}")
        time.sleep(0.01)


def wait_for(condition: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Return once ``condition()`` is true; ``TimeoutError`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the expected state never came")
        time.sleep(0.01)


def wait_done(worker: Worker, timeout: float = TIMEOUT) -> None:
    """Join ``worker`` (``TimeoutError`` if it is still running after ``timeout`` seconds)."""
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"worker {worker.name} still running after {timeout:g} s")


class Pause:
    """Stop the worker named ``who`` in ``module.name`` (before the call, or ``after`` it) until ``go()``.

    Other threads pass through. ``arrived`` is set when the worker stops there;
    ``wait_arrived()`` waits for it. Installed with pytest's ``monkeypatch``, so it is undone after the test.
    """

    def __init__(self, monkeypatch, module: Any, name: str, *, who: str, after: bool = False):
        self.arrived, self.released = threading.Event(), threading.Event()
        original = getattr(module, name)

        def paused(*args, **kwargs):
            mine = threading.current_thread().name == who and not self.arrived.is_set()
            if mine and not after:
                self._stop()
            value = original(*args, **kwargs)
            if mine and after:
                self._stop()
            return value

        monkeypatch.setattr(module, name, paused)

    def _stop(self) -> None:
        self.arrived.set()
        if not self.released.wait(TIMEOUT):
            raise TimeoutError("a paused worker was never released")

    def wait_arrived(self, timeout: float = TIMEOUT) -> None:
        """Wait until the worker stopped at the pause (``TimeoutError`` otherwise)."""
        if not self.arrived.wait(timeout):
            raise TimeoutError("the worker never reached its pause")

    def go(self) -> None:
        """Let the worker continue."""
        self.released.set()
