#!/usr/bin/env python
"""Benchmark: how the embedder cuts a call into forward passes, on LoCoMo turns, in one run.

    .venv/bin/python bench/embed_batches.py [--overheads 0 300 600 1500 1e9] [--repeat 3]

``MiniLMEmbedder`` cuts each call into length batches (``memory.core.batching.length_batches``)
whose cost model has one constant, the fixed cost of a forward pass
(``MiniLMEmbedder.PASS_OVERHEAD``, in characters of padded input). Each value in
``--overheads`` is measured on two shapes of call over the same turns (the text
the service embeds for each chunk):

* ``one_call``: every turn in one call (``bench/ingest.py``'s baseline);
* ``passes``: the turns of 4 sessions per call, the size of the passes that
  8 concurrent clients make through ``MicroBatchingEmbedder`` (~80 texts).

The largest value given (default ``1e9``) is the baseline: a pass costs more than
any padding, so the fewest passes (whole batches of ``OAM_EMBEDDING_BATCH_SIZE``
over the sorted texts, the padding least among those), as the fixed batches
before. The
constant is chosen on the tuning conversations (``--tune``, default conv-26 and
conv-30) and reported on others (``--report``, default conv-44 and conv-47); the
rounds interleave every variant so a drifting machine load hits each alike.
Prints one JSON object: texts/s medians per split, variant and shape, and each
variant's ratio to the baseline on the same shape.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")

import django  # noqa: E402

django.setup()

from ingest import embedding_texts, load_sessions, log  # noqa: E402

from memory.embedders import MiniLMEmbedder  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--overheads", nargs="+", type=float, default=[0, 300, 600, 1500, 1e9])
    parser.add_argument("--tune", nargs="+", default=["conv-26", "conv-30"])
    parser.add_argument("--report", nargs="+", default=["conv-44", "conv-47"])
    parser.add_argument("--sessions-per-pass", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    embedder = MiniLMEmbedder()
    splits = {}
    for name, samples in (("tune", args.tune), ("report", args.report)):
        per_session = [embedding_texts([s]) for s in load_sessions(samples)]
        k = args.sessions_per_pass
        splits[name] = {
            "one_call": [sum(per_session, [])],
            "passes": [sum(per_session[i:i + k], []) for i in range(0, len(per_session), k)],
        }
    embedder.embed(splits["tune"]["one_call"][0][:32])  # load and warm up

    runs = {(split, overhead, shape): [] for split in splits for overhead in args.overheads
            for shape in ("one_call", "passes")}
    for round_number in range(args.repeat):
        for split, overhead, shape in runs:
            calls = splits[split][shape]
            embedder.PASS_OVERHEAD = overhead
            started = time.perf_counter()
            for texts in calls:
                embedder.embed(texts)
            runs[(split, overhead, shape)].append(sum(map(len, calls)) / (time.perf_counter() - started))
        log(f"round {round_number + 1} of {args.repeat} done")

    results = {"command": "bench/embed_batches.py " + " ".join(sys.argv[1:]), "tune": args.tune,
               "report": args.report, "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    for split in splits:
        table = {}
        for shape in ("one_call", "passes"):
            base = statistics.median(runs[(split, max(args.overheads), shape)])
            for overhead in args.overheads:
                median = statistics.median(runs[(split, overhead, shape)])
                table.setdefault(str(overhead), {})[shape] = {
                    "texts_per_s": round(median, 1), "ratio_to_baseline": round(median / base, 3),
                    "texts": sum(map(len, splits[split][shape])), "calls": len(splits[split][shape])}
        results[split] = table
    print(json.dumps(results))


if __name__ == "__main__":
    main()
