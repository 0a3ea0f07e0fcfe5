"""Batching for the embedding and reranking models: inputs cut into forward passes, concurrent calls joined.

* ``Embedder``: what the engine needs from an embedding model (``dimensions``, ``embed(texts)``).
* ``length_batches``: inputs split into forward-pass batches that waste the least padding (the embedders of
  ``memory.embedders`` and the reranker of ``memory.rerankers`` cut their calls with it).
* ``MicroBatchingEmbedder``: concurrent ``embed`` calls share forward passes, run by long-lived worker threads
  in fair turns across flows (``memory.embedders.get_embedder`` wraps the process's embedder in it,
  ``OAM_EMBEDDING_MICROBATCH``); ``set_embedding_flow``/``embedding_flow`` name a call's flow (a project).
* ``default_workers``: how many such threads, and how many threads an ONNX model runs on
  (``memory.core.onnx``).

Shapes: an embedder's ``embed(texts)`` returns ``(len(texts), dimensions)`` float32, rows L2-normalised.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict, deque
from collections.abc import Hashable, Iterator
from contextvars import ContextVar, Token
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


#: A text counts at most this many characters toward a pass and toward a request's embedding budget
#: (``memory.core.errors.MAX_EMBED_CHARS``): all-MiniLM-L6-v2 reads 256 word pieces and drops the rest.
TEXT_CHARS = 2_000


def embedding_cost(text: str) -> int:
    """What embedding ``text`` costs, in characters: its length, at most ``TEXT_CHARS``, plus one."""
    return min(len(text), TEXT_CHARS) + 1


#: The flow an ``embed`` call is queued in (``embedding_flow``); None: the call is a flow of its own.
_flow: ContextVar[Hashable | None] = ContextVar("oam_embedding_flow", default=None)


def set_embedding_flow(key: Hashable | None) -> Token:
    """Queue this context's ``MicroBatchingEmbedder.embed`` calls in flow ``key`` (a project: the API sets
    ``("project", pk)`` once a request's key is known, ``threads.auth``) until ``reset_embedding_flow``."""
    return _flow.set(key)


def reset_embedding_flow(token: Token) -> None:
    """Undo the ``set_embedding_flow`` that returned ``token``."""
    _flow.reset(token)


@contextlib.contextmanager
def embedding_flow(key: Hashable | None) -> Iterator[None]:
    """``with embedding_flow(("project", 3)):`` the embeddings asked for inside share that flow's turn."""
    token = set_embedding_flow(key)
    try:
        yield
    finally:
        reset_embedding_flow(token)


@dataclass(eq=False)
class _Call:
    """One caller's texts in ``MicroBatchingEmbedder``: the next text to hand out, the texts still out in
    passes, its rows as they arrive, its error, its wake-up."""

    texts: list[str]
    result: np.ndarray
    bounds: list[int]  # where its parts end (see ``MicroBatchingEmbedder.embed``)
    next: int = 0
    out: int = 0
    error: BaseException | None = None
    wake: threading.Event = field(default_factory=threading.Event)


class MicroBatchingEmbedder:
    """Concurrent ``embed`` calls share forward passes (group commit for embeddings), taken in fair turns
    by worker threads.

    Each request embeds its own few texts; one call per session reached 84
    turns/s where one call over all turns reached 132 (sentence-transformers
    sorts a call's texts by length into fewer, fuller batches). Here a call is
    queued and its caller waits; each of ``workers`` long-lived threads
    (``oam-embedder-N``) fills a pass from the queue, embeds it, and hands
    each call its rows; a call returns when all its texts are in. Texts that
    arrive while the workers are busy go into the next passes, so nothing
    waits on a timer: an idle service embeds at once, a busy one in fuller
    passes. An error in a pass is raised in each call it held texts of.

    Fair turns (issue #29: one project's 1,000-message batch made another
    project's searches wait 33.6 s, because the batch was queued as two
    parts of 500+ texts and a search's one text waited behind them): calls
    are queued in *flows*, a flow per project when the caller set one
    (``set_embedding_flow``; the API does, per request) and per call
    otherwise. A worker fills its pass round-robin: from each flow in turn,
    from that flow's calls in turn, at most ``quantum`` characters, until the
    pass holds ``pass_chars`` characters (``embedding_cost``: a text counts at
    most ``TEXT_CHARS``, the model truncates longer ones) or ``max_texts`` texts.
    So one pass runs at most about ``pass_chars`` of work, and a call queued
    behind any amount of other flows' work is in the next pass a worker
    starts: its wait is bounded by the passes running when it came, not by
    the queue (``bench/fair_embedding.py`` measures it). A flow with much to
    embed gets the passes nobody else wants.

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

    #: A call is cut into up to ``workers`` parts of at least this many texts (one model batch,
    #: ``OAM_EMBEDDING_BATCH_SIZE``), so one large call still uses every worker.
    MIN_PART = 16

    def __init__(self, inner: Embedder, max_texts: int = 512, workers: int | None = None,
                 pass_chars: int = 4_000, quantum: int | None = None):
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        if pass_chars < 1:
            raise ValueError("pass_chars must be at least 1")
        one_core = getattr(inner, "embed_on_one_core", None)
        if workers is None:
            workers = default_workers() if one_core else 1
        if workers < 1:
            raise ValueError("workers must be at least 1")
        self.inner = inner
        self.dimensions = inner.dimensions
        self.max_texts = max_texts
        self.workers = workers
        self.pass_chars = pass_chars
        self.quantum = max(1, quantum if quantum is not None else pass_chars // 4)
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
        #: flow key -> its calls with texts not yet handed out, in turn order (the head flow goes next)
        self._flows: OrderedDict[Hashable, deque[_Call]] = OrderedDict()
        self._queued = 0  # characters (``embedding_cost``) not yet handed out
        self._running = 0  # passes running now
        self._threads: list[threading.Thread] = []

    @property
    def _busy(self) -> bool:
        return self._running > 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``inner``'s vectors of ``texts``, shape ``(len(texts), dimensions)``, computed in shared passes;
        blocks until every text is in, and raises what a pass holding one of its texts raised (the call's
        other passes still run first). The call is cut into up to ``workers`` parts of at least
        ``MIN_PART`` texts; a part larger than a pass is embedded over several."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        pieces = max(1, min(self.workers, len(texts) // self.MIN_PART))
        call = _Call(texts, np.zeros((len(texts), self.dimensions), dtype=np.float32),
                     bounds=[round(i * len(texts) / pieces) for i in range(1, pieces + 1)])
        flow = _flow.get()
        with self._work:
            self._flows.setdefault(call if flow is None else flow, deque()).append(call)
            self._queued += sum(map(embedding_cost, texts))
            self._threads = [t for t in self._threads if t.is_alive()]
            for n in range(len(self._threads), self.workers):
                thread = threading.Thread(target=self._run, name=f"oam-embedder-{n}", daemon=True)
                thread.start()
                self._threads.append(thread)
            self._work.notify(self.workers)
        call.wake.wait()
        if call.error is not None:
            raise call.error
        return call.result

    def _take(self) -> list[tuple[_Call, int, int]]:
        """A pass's slices ``(call, start, end)``, taken round-robin over flows and their calls (the lock held).

        The pass stops at ``pass_chars`` (a first text always goes in), at ``max_texts``, and once it
        holds its even share of what is queued (the queued characters over ``workers``), so that one
        call's parts (see ``embed``) go to different workers; nor does it take a second part of a call.
        A turn takes at most ``quantum`` characters and never runs past the end of a part. With several
        flows queued, a pass is one round, a turn of each: the calls that complete in it (a search's one
        text) wait for a short pass, not for ``pass_chars`` of another flow's texts.
        """
        share = min(self.pass_chars, -(-self._queued // self.workers))
        batch: list[tuple[_Call, int, int]] = []
        chars = count = 0
        several, served = len(self._flows) > 1, set()
        while self._flows and count < self.max_texts and chars < share:
            key, calls = next(iter(self._flows.items()))
            if several and key in served:
                break  # one round: a flow that waits is served in a short pass, not a full one
            served.add(key)
            call = calls[0]
            start = end = call.next
            if start in call.bounds and any(c is call for c, _, _ in batch):
                break  # the pass holds a part of this call already: its next part is another worker's
            stop = next(b for b in call.bounds if b > start)
            turn = 0
            while end < stop and count < self.max_texts and turn < self.quantum:
                cost = embedding_cost(call.texts[end])
                if count and chars + cost > self.pass_chars:
                    break
                end += 1
                turn += cost
                chars += cost
                count += 1
            if end == start:  # the next text does not fit this pass: it leads the next one
                break
            self._queued -= turn
            call.next = end
            call.out += end - start
            batch.append((call, start, end))
            if call.next == len(call.texts):
                calls.popleft()
            else:
                calls.rotate(-1)
            if calls:
                self._flows.move_to_end(key)
            else:
                del self._flows[key]
        return batch

    def _run(self) -> None:
        while True:
            with self._work:
                while not self._flows:
                    self._work.wait()
                batch = self._take()
                self._running += 1
            error, vectors = None, None
            try:
                vectors = self._pass([t for call, a, b in batch for t in call.texts[a:b]])
            except BaseException as exc:  # every call of this pass sees the failure; the worker goes on
                error = exc
            done = []
            with self._work:
                self._running -= 1
                self.passes += 1
                offset = 0
                for call, a, b in batch:
                    self.texts_embedded += b - a
                    if error is None:
                        call.result[a:b] = vectors[offset:offset + b - a]
                    elif call.error is None:
                        call.error = error
                    offset += b - a
                    call.out -= b - a
                    if call.out == 0 and call.next == len(call.texts):
                        done.append(call)
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
