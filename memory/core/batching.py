"""Batching for the embedding and reranking models: inputs cut into forward passes, concurrent calls joined.

* ``Embedder``: what the engine needs from an embedding model (``dimensions``, ``embed(texts)``).
* ``length_batches``: inputs split into forward-pass batches that waste the least padding (the embedders of
  ``memory.embedders`` and the reranker of ``memory.rerankers`` cut their calls with it).
* ``MicroBatchingEmbedder``: concurrent ``embed`` calls share forward passes, run by long-lived worker threads
  (``memory.embedders.get_embedder`` wraps the process's embedder in it, ``OAM_EMBEDDING_MICROBATCH``).
* ``default_workers``: how many such threads, and how many threads an ONNX model runs on
  (``memory.core.onnx``).

Shapes: an embedder's ``embed(texts)`` returns ``(len(texts), dimensions)`` float32, rows L2-normalised.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np
from django.conf import settings


class Embedder(Protocol):
    """What the engine needs from an embedding model."""

    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - protocol
        ...


def length_batches(lengths: Sequence[int], *, max_batch: int, overhead: float) -> list[list[int]]:
    """Split inputs into forward-pass batches that waste the least padding; return lists of input indexes.

    A transformer pads every input of a batch to the batch's longest, so a
    batch costs about ``size * longest`` plus a fixed ``overhead`` per pass
    (in the same unit as ``lengths``). Sorted by length, the inputs are cut
    into runs of at most ``max_batch`` that minimise the total of that cost
    (dynamic programming, O(n * max_batch)). Fixed batches of 16 over
    sorted inputs pad 1.8 % more tokens than the texts hold when one call
    embeds all 788 turns of LoCoMo conv-26/30, but 15.1 % in the ~80-text
    calls that concurrent requests make (``MicroBatchingEmbedder``); this
    split keeps both small (``bench/ingest.py``, ``bench/embed_batches.py``).
    """
    if max_batch < 1:
        raise ValueError("max_batch must be at least 1")
    if not 0 <= overhead < float("inf"):
        raise ValueError("overhead must be a finite number >= 0")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sorted_lengths = [lengths[i] for i in order]
    n = len(order)
    best = [0.0] + [float("inf")] * n  # best[j]: least cost of the first j sorted inputs
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest = sorted_lengths[j - 1]
        for i in range(max(0, j - max_batch), j):
            cost = best[i] + (j - i) * longest + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    batches, j = [], n
    while j:
        batches.append(order[cut[j]:j])
        j = cut[j]
    return batches[::-1]


@dataclass(eq=False)
class _Call:
    """One caller's texts in ``MicroBatchingEmbedder``: its rows as parts arrive, its error, its wake-up."""

    texts: list[str]
    result: np.ndarray
    parts_left: int = 0
    error: BaseException | None = None
    wake: threading.Event = field(default_factory=threading.Event)


@dataclass(eq=False)
class _Part:
    """Texts ``start:end`` of one call: what a worker takes from the queue."""

    call: _Call
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


class MicroBatchingEmbedder:
    """Concurrent ``embed`` calls share forward passes (group commit for embeddings), run by worker threads.

    Each request embeds its own few texts; one call per session reached 84
    turns/s where one call over all turns reached 132 (sentence-transformers
    sorts a call's texts by length into fewer, fuller batches). Here a call is
    queued (cut into up to ``workers`` parts of at least ``MIN_PART`` texts,
    so one large call still uses every worker) and its caller waits. Each of
    ``workers`` long-lived threads (``oam-embedder-N``) takes what is queued,
    whole parts in arrival order up to an even share of the queue (its texts
    over ``workers``) and at most ``max_texts`` texts (a larger single part
    alone), embeds it in one pass and hands each part its rows; a call
    returns when all its parts are in. Parts that arrive while the workers
    are busy go into the next passes, so nothing waits on a timer: an idle
    service embeds at once, a busy one in larger batches. An error in a pass
    is raised in each call it held a part of.

    Workers: with an inner embedder that has ``embed_on_one_core`` (the
    MiniLM one), one worker per core (``OAM_EMBEDDING_WORKERS``, default the
    CPUs this process may use, at most 8), each pass on one torch thread:
    single-threaded passes side by side are faster than two-threaded ones in
    turn and do not stall when request threads take a core for database work
    (``MiniLMEmbedder.embed_on_one_core``); otherwise one worker calling
    ``embed``. Long-lived threads matter too: torch keeps its OpenMP team and
    oneDNN caches per thread, and passes led by a new thread each time (the
    server gives each request a thread) took 15-20 % longer. Threads start on
    first use, and again in a forked child (``os.register_at_fork``).
    ``dimensions`` and the output contract are ``inner``'s.
    """

    #: A call is cut into parts of at least this many texts (one model batch; ``OAM_EMBEDDING_BATCH_SIZE``).
    MIN_PART = 16

    def __init__(self, inner: Embedder, max_texts: int = 512, workers: int | None = None):
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        one_core = getattr(inner, "embed_on_one_core", None)
        if workers is None:
            workers = default_workers() if one_core else 1
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.inner = inner
        self.dimensions = inner.dimensions
        self.max_texts = max_texts
        self.workers = workers
        self._pass = one_core if (one_core and workers > 1) else inner.embed
        self._reset()
        #: forward passes run and texts embedded (for tests and benchmarks)
        self.passes = 0
        self.texts_embedded = 0
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        """Fresh lock, queue and no threads (at start, and in a forked child, where the threads are gone)."""
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._queue: list[_Part] = []
        self._running = 0  # passes running now
        self._threads: list[threading.Thread] = []

    @property
    def _busy(self) -> bool:
        return self._running > 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``inner``'s vectors of ``texts``, shape ``(len(texts), dimensions)``, computed in shared passes;
        blocks until every part is in, and raises what a pass holding one of its parts raised."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        call = _Call(texts, np.zeros((len(texts), self.dimensions), dtype=np.float32))
        pieces = max(1, min(self.workers, len(texts) // self.MIN_PART))
        bounds = [round(i * len(texts) / pieces) for i in range(pieces + 1)]
        parts = [_Part(call, a, b) for a, b in zip(bounds, bounds[1:])]
        call.parts_left = len(parts)
        with self._work:
            self._queue.extend(parts)
            self._threads = [t for t in self._threads if t.is_alive()]
            for n in range(len(self._threads), self.workers):
                thread = threading.Thread(target=self._run, name=f"oam-embedder-{n}", daemon=True)
                thread.start()
                self._threads.append(thread)
            self._work.notify(len(parts))
        call.wake.wait()
        if call.error is not None:
            raise call.error
        return call.result

    def _run(self) -> None:
        while True:
            with self._work:
                while not self._queue:
                    self._work.wait()
                # at most an even share of what is queued, so the other workers get the rest
                share = min(self.max_texts, -(-sum(map(len, self._queue)) // self.workers))
                batch, size = [], 0
                for part in list(self._queue):
                    if size >= share:
                        break
                    if not batch or size + len(part) <= self.max_texts:
                        batch.append(part)
                        size += len(part)
                        self._queue.remove(part)
                self._running += 1
            error, vectors = None, None
            try:
                vectors = self._pass([t for p in batch for t in p.call.texts[p.start:p.end]])
            except BaseException as exc:  # every call of this pass sees the failure; the worker goes on
                error = exc
            done = []
            with self._work:
                self._running -= 1
                self.passes += 1
                self.texts_embedded += size
                offset = 0
                for p in batch:
                    if error is None:
                        p.call.result[p.start:p.end] = vectors[offset:offset + len(p)]
                    elif p.call.error is None:
                        p.call.error = error
                    offset += len(p)
                    p.call.parts_left -= 1
                    if p.call.parts_left == 0:
                        done.append(p.call)
            for call in done:
                call.wake.set()


def default_workers() -> int:
    """``OAM_EMBEDDING_WORKERS``, or the CPUs this process may run on (at most 8): ``MicroBatchingEmbedder``'s
    threads, and ``OnnxModel``'s on every core."""
    configured = getattr(settings, "OAM_EMBEDDING_WORKERS", None)
    if configured:
        return configured
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))
