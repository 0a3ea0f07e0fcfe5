#!/usr/bin/env python
"""Retrieval on both corpora side by side: LoCoMo (LLM-written) and REALTALK 1-4 (real human chats).

    .venv/bin/python bench/retrieval.py [--reuse] [--baseline REV] [--quiet]

Runs ``bench/locomo_import.py --modes HYBRID`` once per corpus (``--corpus locomo``, ``--corpus realtalk``;
each in its own process and SQLite file, ``var/bench-locomo.sqlite3`` and ``var/bench-realtalk.sqlite3``) and
prints one JSON object: per corpus and split (tuning, report, all), turn recall@10 (normal 95 % interval),
turn hit@1 and session hit@1 (Wilson 95 % intervals), the same by category, search p50/p95, and issue #31's
``targets``; ``table`` repeats the headline figures as rows to read at a glance.

``--reuse`` searches the conversations an earlier run imported (no import: a ranking change measured alone).

``--baseline REV`` measures search latency against another revision in the same run: REV is checked out in a
temporary git worktree and its own ``bench/locomo_import.py --reuse --db var/bench-locomo.sqlite3 --modes
HYBRID`` searches the same stored LoCoMo conversations (so it needs ``--reuse`` or a first run without it);
``baseline`` gives its figures and ``p50_ratio`` ours over its (issue #31 asks for at most 1.5). After this
tree's run the two alternate, ``--rounds`` times (default 1), and the ratio is of the medians of their p50s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ("locomo", "realtalk")
#: Issue #31: LoCoMo search p50 at most this many times the baseline's in the same run.
MAX_P50_RATIO = 1.5


def _run(tree: Path, args: list[str], quiet: bool) -> dict:
    """``bench/locomo_import.py`` of ``tree`` with ``args``, run by this interpreter; its JSON."""
    command = [sys.executable, str(tree / "bench" / "locomo_import.py"), "--modes", "HYBRID", "--quiet", *args]
    if not quiet:
        print("$ " + " ".join(command[1:]), file=sys.stderr)
    # The data folders as this tree finds them (a baseline worktree elsewhere would look next to itself).
    sys.path.insert(0, str(ROOT))
    from memory.dev import locomo, realtalk

    env = {**os.environ, "OAM_LOCOMO_PATH": str(locomo.default_data_path().resolve()),
           "OAM_REALTALK_PATH": str(realtalk.default_data_path().resolve())}
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, env=env)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def headline(result: dict) -> dict:
    """The figures of one ``locomo_import.py`` run that this benchmark prints, per split."""
    hybrid = result["retrieval"]["hybrid (default)"]
    out = {}
    for name, part in hybrid["splits"].items():
        out[name] = {
            "questions": part["questions"],
            "turn": {"recall@10": part["recall"]["@10"], "hit@1": part["hit@1"]},
            "session": {"hit@1": part["by_session"]["hit@1"], "recall@5": part["by_session"]["recall"]["@5"]},
            "by_category": {cat: {"questions": fig["questions"], "turn recall@10": fig["recall"]["@10"]["mean"],
                                  "turn hit@1": fig["hit@1"]["rate"],
                                  "session hit@1": fig["by_session"]["hit@1"]["rate"]}
                            for cat, fig in part["per_category"].items()},
            "latency_ms": part.get("latency_ms"),
        }
    return {"splits": out, "targets": hybrid["targets"], "embedder": result["embedder"],
            "import": result["import"], "load_average_at_start": result["load_average_1_5_15_min_at_start"]}


def table(corpora: dict) -> list[str]:
    """One line per corpus and split: turn recall@10, turn hit@1, session hit@1, questions, p50/p95."""
    rows = ["corpus    split   questions  turn recall@10  turn hit@1  session hit@1  p50/p95 ms"]
    for corpus, data in corpora.items():
        for split, fig in data["splits"].items():
            lat = fig["latency_ms"] or {}
            rows.append(f"{corpus:<9} {split:<7} {fig['questions']:>9}  {fig['turn']['recall@10']['mean']:>14.3f}  "
                        f"{fig['turn']['hit@1']['rate']:>10.3f}  {fig['session']['hit@1']['rate']:>13.3f}  "
                        f"{lat.get('p50', 0):.0f}/{lat.get('p95', 0):.0f}")
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reuse", action="store_true", help="search the earlier import of each corpus again")
    parser.add_argument("--baseline", metavar="REV", help="a git revision whose search p50 on LoCoMo is measured "
                                                          "in the same run (needs the LoCoMo import)")
    parser.add_argument("--rounds", type=int, default=1, help="baseline/current alternations (default 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    started = time.perf_counter()
    reuse = ["--reuse"] if args.reuse else []
    corpora = {corpus: headline(_run(ROOT, ["--corpus", corpus, *reuse], args.quiet)) for corpus in CORPORA}
    out: dict = {"benchmark": "retrieval", "date": time.strftime("%Y-%m-%d"), "cpu_count": os.cpu_count(),
                 "search": "client.search(question, user_id=<sample>, record_types=['message'], max_results=20), "
                           "HYBRID, default settings",
                 "corpora": corpora, "table": table(corpora)}
    if args.baseline:
        out["baseline"] = _baseline(args, corpora["locomo"])
    out["seconds"] = round(time.perf_counter() - started, 1)
    return out


def _baseline(args, current: dict) -> dict:
    """LoCoMo search p50 of ``args.baseline`` and of this tree, alternating on the same stored conversations."""
    db = ROOT / "var" / "bench-locomo.sqlite3"
    if not db.is_file():
        raise SystemExit(f"--baseline needs {db}: run once without --reuse")
    ours, theirs = [current["splits"]["all"]["latency_ms"]["p50"]], []
    with tempfile.TemporaryDirectory(prefix="oam-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.baseline],
                       check=True, capture_output=True)
        try:
            for n in range(args.rounds):
                base = _run(tree, ["--reuse", "--db", str(db)], args.quiet)
                theirs.append(base["retrieval"]["hybrid (default)"]["splits"]["all"]["latency_ms"]["p50"])
                if n:  # the first round's current run is the one printed above
                    again = _run(ROOT, ["--corpus", "locomo", "--reuse"], args.quiet)
                    ours.append(again["retrieval"]["hybrid (default)"]["splits"]["all"]["latency_ms"]["p50"])
            figures = headline(base)["splits"]["all"]
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    ratio = round(statistics.median(ours) / statistics.median(theirs), 2)
    return {"rev": args.baseline, "locomo_all": {"turn": figures["turn"], "session": figures["session"]},
            "p50_ms": {"baseline": theirs, "current": ours}, "p50_ratio": ratio, "p50_ratio_max": MAX_P50_RATIO,
            "met": ratio <= MAX_P50_RATIO}


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
