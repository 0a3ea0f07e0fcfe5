"""A benchmark-only embedder with next to no CPU cost: ``OAM_EMBEDDER=bench.hash_embedder.HashEmbedder``.

Each word of a text adds +1 or -1 (from a CRC32 of the word) to one of 384 dimensions; the row is
L2-normalised (a zero row for a text without words). It has no meaning as an embedding: it lets a
benchmark (bench/add_messages_scale.py ``--embedder hash``) measure the write path of ``add_messages``
(HTTP, the services, the database) without the model's forward pass, which on 2 cores is most of
a request's time. Never for a database that is searched for real.
"""

from __future__ import annotations

import re
import zlib
from typing import Sequence

import numpy as np


class HashEmbedder:
    """Signed feature hashing of words into 384 dimensions."""

    dimensions = 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                code = zlib.crc32(word.encode())
                out[row, code % self.dimensions] += 1.0 if code & 0x8000_0000 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
