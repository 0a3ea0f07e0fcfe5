"""ONNX models shipped inside installed packages, run by onnxruntime on the CPU (``OnnxModel``).

The optional ``memory.embedders.BgeSmallEmbedder`` and ``memory.rerankers.CrossEncoderReranker`` run their
models through it; ``memory.checks`` asks ``OnnxModel.missing`` what keeps a configured model from loading.
onnxruntime and tokenizers are imported when a model loads, not with this module.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from memory.core.batching import default_workers


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
        # Deferred: optional packages (the default embedder needs neither), and onnxruntime is heavy.
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
        """The model's first output for ``inputs`` (texts or pairs), shape ``(len(inputs), ...)``; ``one_core``
        runs the one-thread session, concurrently with other calls (see the class docstring)."""
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
