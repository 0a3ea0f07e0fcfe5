#!/usr/bin/env python
"""Benchmark: import LoCoMo through the service layer, then measure evidence retrieval.

    .venv/bin/python bench/locomo_import.py [--samples conv-26 ...] [--modes HYBRID ...] [--reuse] [--quiet]

Uses its own fresh SQLite file, ``var/bench-locomo.sqlite3`` (removed and
migrated at the start, left in place afterwards), never the development
database. Steps:

1. ``manage.py import_locomo`` (``memory.client.AgentMemory``: one user per
   sample, one thread per session, one ``add_messages`` per session): import
   seconds and turns/s. The embedding model is loaded before the clock starts.
2. In each search mode (HYBRID, the default; VECTOR; KEYWORD), every category 1-4 question (``--categories``
   changes them) with evidence that names turns of its
   conversation: ``client.search(question, user_id=<sample>,
   record_types=["message"], max_results=20)``; evidence recall@1/5/10/20
   (the fraction of a question's evidence turns found in the top k, averaged;
   ``memory.dev.locomo.evidence_recall``) overall and per category,
   and search latency percentiles.
3. Tuning discipline: the same figures for a fixed split of the
   conversations by their order in the data file: the first five samples are
   the TUNING half (constants may be chosen on them), the last five the REPORT
   half (reported, never tuned on); ``splits`` holds tuning, report and all.
   Per split: recall@1/5/10/20 with a normal-approximation 95 % interval on
   the mean of the per-question recalls (mean +- 1.96 sd / sqrt(n)), hit@1
   (the top result is an evidence turn) with a Wilson 95 % interval on the
   per-question hits, both by category, and search p50/p95. ``by_session`` scores the same results
   with the session as the unit (``memory.dev.locomo.session_recall``): the unit of the 0.752 Hit@1 the issue
   cites (arXiv 2606.04194 ranks the sessions of a conversation by their best turn and scores all five
   categories; ``--categories 1 2 3 4 5`` measures the same questions).
4. ``targets``: whether the figures meet the issue's targets (``TARGETS`` of the corpus on all its samples,
   the report half at most ``MAX_REPORT_GAP`` below the tuning half).

``--corpus realtalk`` runs the same steps on REALTALK's four chats (``memory.dev.realtalk``, ``manage.py
import_realtalk``; real human chats, each message with its own timestamp) in ``var/bench-realtalk.sqlite3``:
realtalk-1 and -2 are its tuning half, -3 and -4 its report half. ``bench/retrieval.py`` runs both corpora and
prints them side by side.

``--reuse`` skips the fresh database and the import and searches the
conversations already stored in ``var/bench-locomo.sqlite3`` by an earlier
run (same data, so a ranking change can be measured without re-importing).
``--modes`` runs only the given search modes (default: all three).

``--database postgres`` runs the same import and questions on the PostgreSQL database of
``OAM_DATABASE_URL`` (dropped and recreated first, so never point it at a shared one; ``--reuse`` keeps it):
pgvector's HNSW index for the vector arm and ``tsvector``/``ts_rank_cd`` for the keyword arm instead of
FTS5's BM25. bench/locomo_backends.py runs both backends side by side.

``--db FILE`` uses another SQLite file than ``var/bench-locomo.sqlite3`` (bench/embedders.py runs
this benchmark once per embedder, ``OAM_EMBEDDER`` set, each in its own file).

``--observations FILE`` is a separate, labelled variant, never the headline
figure: it copies the headline database to ``FILE`` (once; SQLite's backup),
adds LoCoMo's per-session ``observation`` facts (written by the dataset's
authors with an LLM, each naming the turns it came from) as ``fact`` memories
whose ``source_message_ids`` are those turns, so they lend the turns fact keys
(``memory.index.writer.add_fact_keys``: what extraction's memories do), then searches
messages exactly as above. The observations stand in for this site's own
extraction, which would need an LLM for every session.

``--mixed`` (with ``--observations``) searches what an agent searches, messages and memories together
(every record type, ``record_types=None``): a memory result stands for the turns it was extracted from (its
``source_message_ids``), so recall@k is the share of a question's evidence turns that the first k results
are or come from, and hit@1 holds when the first result is, or comes from, an evidence turn. It checks the
second stage's rules for memories beside chat turns (``novel`` and ``session`` give them 1), which the
message-only searches above never meet.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import use_postgres, use_sqlite  # noqa: E402
from memory.dev.locomo import CATEGORIES  # noqa: E402  (plain Python: no settings needed before Django is set up)

DB_PATH = ROOT / "var" / "bench-locomo.sqlite3"
#: Each corpus's default file, import command and tuning-half size (the first N samples in file order).
#: REALTALK's four chats: realtalk-1 and -2 are its tuning half, -3 and -4 its report half.
CORPORA = {
    "locomo": {"db": ROOT / "var" / "bench-locomo.sqlite3", "command": "import_locomo", "tuning_count": 5},
    "realtalk": {"db": ROOT / "var" / "bench-realtalk.sqlite3", "command": "import_realtalk", "tuning_count": 2},
}
KS = (1, 5, 10, 20)
#: Session-unit cut-offs (``memory.dev.locomo.session_recall``): sessions ranked by their best turn among the
#: top 20 results, the unit of arXiv 2606.04194's LoCoMo Hit@1 (0.752) (arXiv 2606.04194's training-free CPU figure).
SESSION_KS = (1, 5)
# with the same measure, each turn indexed as "<speaker>: <text> [shares a photo: <caption>]".
BASELINES_SOURCE_MD = {
    "vector all-MiniLM-L6-v2": {"@1": 0.156, "@5": 0.353, "@10": 0.444, "@20": 0.542},
    "bm25": {"@1": 0.229, "@5": 0.431, "@10": 0.502, "@20": 0.585},
    "rrf k=60": {"@1": 0.212, "@5": 0.446, "@10": 0.532, "@20": 0.626},
}


#: Fixed split of the LoCoMo samples by their order in the file: the first TUNING_COUNT are the
#: tuning half (constants are chosen on them only), the rest the report half (what a change is judged on).
#: With the published file: tuning conv-26, -30, -41, -42, -43; report conv-44, -47, -48, -49, -50.
TUNING_COUNT = 5

#: The retrieval targets set for this project (issue #31), per corpus, on all its samples: turn recall@10 and
#: hit@1, and on LoCoMo session hit@1 (``by_session``), at least these; the report half no more than
#: ``MAX_REPORT_GAP`` below the tuning half on each (where both halves were run).
TARGETS = {
    "locomo": {"recall@10": 0.85, "hit@1": 0.60, "session hit@1": 0.80},
    "realtalk": {"recall@10": 0.80, "hit@1": 0.55},
}
MAX_REPORT_GAP = 0.03


def targets(splits: dict, corpus: str = "locomo") -> dict:
    """Whether a mode's ``splits`` (``split_summary`` of tuning, report and all) meet ``TARGETS[corpus]`` and the
    report gap: per measure, the all-samples figure, its target and whether it is met, and the tuning-minus-report
    gap and whether it is within ``MAX_REPORT_GAP``. ``{"met": bool, ...}``."""
    figures = {name: {"recall@10": part["recall"]["@10"]["mean"], "hit@1": part["hit@1"]["rate"],
                      "session hit@1": part.get("by_session", {}).get("hit@1", {}).get("rate")}
               for name, part in splits.items()}
    out: dict = {}
    for measure, target in TARGETS[corpus].items():
        value = figures["all"][measure]
        entry = {"all": value, "target": target, "met": value is not None and value >= target}
        if "tuning" in figures and "report" in figures and value is not None:
            gap = round(figures["tuning"][measure] - figures["report"][measure], 3)
            entry.update(report_gap=gap, report_gap_max=MAX_REPORT_GAP, report_gap_met=gap <= MAX_REPORT_GAP)
        out[measure] = entry
    out["met"] = all(e["met"] and e.get("report_gap_met", True) for e in out.values())
    return out


MODES = ("HYBRID", "VECTOR", "KEYWORD")
Z95 = 1.959964


def _fresh_database(reuse: bool = False) -> None:
    """Point Django at the benchmark's SQLite file, new and empty unless ``reuse``; run before ``django.setup()``."""
    use_sqlite(DB_PATH, fresh=not reuse)


def _observation_database(path: Path) -> None:
    """Point Django at ``path``, a copy of the headline database made once (the variant never writes to it)."""
    path = path.resolve()
    if path == DB_PATH.resolve():
        raise SystemExit("--observations needs a file other than the headline database")
    if not path.is_file():
        if not DB_PATH.is_file():
            raise SystemExit(f"--observations: {DB_PATH} does not exist; run once without --observations")
        import sqlite3

        path.parent.mkdir(parents=True, exist_ok=True)
        source, target = sqlite3.connect(DB_PATH), sqlite3.connect(path)
        with target:
            source.backup(target)
        source.close()
        target.close()
    os.environ["OAM_SQLITE_PATH"] = str(path)
    os.environ["OAM_ORACLE_DSN"] = os.environ["OAM_DATABASE_URL"] = ""  # the SQLite copy, whatever the shell names
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")


def _add_observations(data_path: Path, samples) -> dict:
    """Add each session's LoCoMo observations as ``fact`` memories of its thread, sourced on their turns
    (ids ``obs-<sample>-<session>-<n>``; a rerun adds only what is missing). Returns counts and seconds."""
    from memory.client import AgentMemory
    from memory.dev import locomo
    from memory.models import Memory
    from memory.services.memories import memory_add

    raw = {item["sample_id"]: item for item in json.loads(Path(data_path).read_text(encoding="utf-8"))}
    client = AgentMemory()
    added = skipped = 0
    started = time.perf_counter()
    for sample in samples:
        known = sample.dia_ids
        have = {pk.split(":", 1)[1] for pk in Memory.objects.filter(user_id=sample.sample_id, memory_type="fact")
                .values_list("id", flat=True)}
        for session in sample.sessions:
            facts = (raw[sample.sample_id].get("observation") or {}).get(f"session_{session.number}_observation")
            if not facts:
                continue
            thread = client.get_thread(locomo.thread_id(sample.sample_id, session.number))
            n = 0
            for items in facts.values():
                for item in items:
                    n += 1
                    text, evidence = (item[0], item[1:]) if isinstance(item, list) else (str(item), [])
                    sources = [locomo.message_id(sample.sample_id, e) for e in
                               locomo.normalize_evidence(evidence[0] if len(evidence) == 1 and
                                                         isinstance(evidence[0], list) else evidence)
                               if e in known]
                    memory_id = f"obs-{sample.sample_id}-{session.number}-{n}"
                    if not sources or memory_id in have:
                        skipped += 1
                        continue
                    memory_add(thread=thread.row, content=str(text), memory_type="fact",
                                        memory_id=memory_id, source_message_ids=sources,
                                        timestamp=session.timestamp, retention=client.retention_config)
                    added += 1
    return {"added": added, "skipped_present_or_unsourced": skipped,
            "seconds": round(time.perf_counter() - started, 1)}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def mean_interval(values: list[float]) -> dict:
    """Mean of per-question values with a normal-approximation 95 % interval (mean +- 1.96 sd / sqrt(n))."""
    n = len(values)
    if not n:
        return {"mean": 0.0, "ci95": [0.0, 0.0], "n": 0}
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = Z95 * sd / math.sqrt(n)
    return {"mean": round(mean, 3), "ci95": [round(max(0.0, mean - half), 3), round(min(1.0, mean + half), 3)],
            "n": n}


def wilson(hits: int, n: int) -> dict:
    """Share ``hits / n`` with its Wilson score 95 % interval."""
    if not n:
        return {"rate": 0.0, "ci95": [0.0, 0.0], "n": 0}
    p = hits / n
    denom = 1 + Z95 ** 2 / n
    centre = (p + Z95 ** 2 / (2 * n)) / denom
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / denom
    return {"rate": round(p, 3), "ci95": [round(max(0.0, centre - half), 3), round(min(1.0, centre + half), 3)],
            "n": n}


def split_summary(rows: list[dict], categories: dict[int, str]) -> dict:
    """Recall@k (mean, normal interval) and hit@1 (Wilson) overall and by category, and latency, for ``rows``
    (one per question: ``recall`` {k: value}, ``hit1`` bool, ``category``, ``latency_ms``; optionally
    ``session_recall`` {k: value} for ``SESSION_KS`` and ``session_hit1`` bool, summarised as ``by_session``:
    its hit@1 is the share of questions whose top result lies in a session that holds evidence)."""

    def figures(part: list[dict]) -> dict:
        out = {"questions": len(part),
               "recall": {f"@{k}": mean_interval([r["recall"][k] for r in part]) for k in KS},
               "hit@1": wilson(sum(r["hit1"] for r in part), len(part))}
        if part and "session_recall" in part[0]:
            out["by_session"] = {
                "hit@1": wilson(sum(r["session_hit1"] for r in part), len(part)),
                "recall": {f"@{k}": mean_interval([r["session_recall"][k] for r in part]) for k in SESSION_KS}}
        return out

    latencies = sorted(r["latency_ms"] for r in rows)
    out = figures(rows)
    out["per_category"] = {f"{c} {categories[c]}": figures([r for r in rows if r["category"] == c])
                           for c in sorted({r["category"] for r in rows})}
    if latencies:
        import numpy as np

        out["latency_ms"] = {"p50": round(float(np.percentile(latencies, 50)), 1),
                             "p95": round(float(np.percentile(latencies, 95)), 1)}
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="locomo",
                        help="locomo (ten LLM-written conversations) or realtalk (four real human chats, "
                             "memory.dev.realtalk; its own file var/bench-realtalk.sqlite3); default locomo")
    parser.add_argument("--samples", nargs="+", metavar="SAMPLE_ID", help="only these samples (default: all)")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument("--reuse", action="store_true",
                        help="search the conversations an earlier run imported into the same file; no import")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES), help="search modes to run")
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: the database of OAM_DATABASE_URL, dropped and recreated (default sqlite)")
    parser.add_argument("--db", metavar="FILE", type=Path, default=None,
                        help="the benchmark's SQLite file (default var/bench-locomo.sqlite3; "
                             "bench/embedders.py gives each embedder its own)")
    parser.add_argument("--observations", metavar="FILE", type=Path,
                        help="variant: copy the headline database to FILE and add LoCoMo's observations as fact "
                             "memories of their turns (fact keys) before searching")
    parser.add_argument("--mixed", action="store_true",
                        help="with --observations: search every record type together; a memory counts as "
                             "the turns it came from")
    parser.add_argument("--rerank-depth", type=int, default=None, metavar="N",
                        help="HYBRID's first N results read by the cross-encoder (OAM_RERANK_DEPTH; default: the "
                             "setting, 0 = off)")
    parser.add_argument("--categories", nargs="+", type=int, choices=sorted(CATEGORIES),
                        default=[1, 2, 3, 4],
                        help="question categories scored (default 1-4, the issue's; 5 is adversarial, which "
                             "arXiv 2606.04194 also scores)")
    args = parser.parse_args(argv)
    if args.rerank_depth is not None:
        if not 0 <= args.rerank_depth <= 100:
            parser.error("--rerank-depth must be 0 to 100 (OAM_RERANK_DEPTH's bounds)")
        os.environ["OAM_RERANK_DEPTH"] = str(args.rerank_depth)
    if args.mixed and args.observations is None:
        parser.error("--mixed needs --observations (the memories it searches beside the messages)")
    global DB_PATH, TUNING_COUNT
    corpus = CORPORA[args.corpus]
    DB_PATH = args.db.resolve() if args.db is not None else corpus["db"]
    TUNING_COUNT = corpus["tuning_count"]
    if args.corpus != "locomo" and args.observations is not None:
        parser.error("--observations reads LoCoMo's observations: --corpus locomo only")
    if args.corpus == "realtalk" and args.categories == [1, 2, 3, 4]:
        args.categories = [1, 2, 3]  # REALTALK's three categories

    sys.path.insert(0, str(ROOT))
    if args.database == "postgres":
        if args.observations is not None or args.db is not None:
            parser.error("--database postgres takes neither --db nor --observations (SQLite files)")
        if not os.environ.get("OAM_DATABASE_URL"):
            parser.error("--database postgres needs OAM_DATABASE_URL (python -m memory.dev.postgres_server -- ...)")
        use_postgres(os.environ["OAM_DATABASE_URL"], fresh=not args.reuse)
    elif args.observations is not None:
        _observation_database(args.observations)
    else:
        _fresh_database(reuse=args.reuse)
    import django

    django.setup()

    import numpy as np
    import torch
    from django.conf import settings
    from django.core.management import call_command
    from tqdm import tqdm

    from memory.client import AgentMemory
    from memory.core.types import MemorySearchConfig
    from memory.dev import locomo, realtalk
    from memory.embedders import get_embedder
    from memory.models import Message, Thread

    source = realtalk if args.corpus == "realtalk" else locomo
    verbosity = 0 if args.quiet else 1
    data_path = source.default_data_path()
    samples = list(source.iter_samples(data_path, sample_ids=args.samples))
    file_order = [s.sample_id for s in source.iter_samples(data_path)]
    tuning_ids, report_ids = file_order[:TUNING_COUNT], file_order[TUNING_COUNT:]

    call_command("migrate", verbosity=0, interactive=False)
    load_average = [round(x, 2) for x in os.getloadavg()]
    started = time.perf_counter()
    # The model loader draws its own progress bar on stderr; --quiet hides it.
    with contextlib.redirect_stderr(io.StringIO()) if args.quiet else contextlib.nullcontext():
        get_embedder()
    model_load_s = time.perf_counter() - started

    observations = _add_observations(data_path, samples) if args.observations is not None else None
    started = time.perf_counter()
    # With --reuse the import finds every session complete and adds nothing (import_locomo resumes).
    call_command(corpus["command"], str(data_path), samples=[s.sample_id for s in samples], verbosity=verbosity,
                 stdout=sys.stderr, stderr=sys.stderr)
    import_s = time.perf_counter() - started
    turns = sum(s.turn_count for s in samples)

    jobs = []
    partial = unresolved = 0
    for sample in samples:
        dia_ids = sample.dia_ids
        for question in sample.questions:
            if question.category not in args.categories:
                continue
            evidence = question.known_evidence(dia_ids)
            if not evidence:
                unresolved += 1
                continue
            partial += len(evidence) < len(question.evidence)
            jobs.append((sample.sample_id, question, evidence))

    record_types = None if args.mixed else ["message"]  # None: every type (messages, facts, memories, images)

    def run(mode: str) -> dict:
        """Every question through ``client.search`` in one search mode, on the same stored chunks."""
        client = AgentMemory(search_config=MemorySearchConfig(mode=mode))
        client.search("warm-up", user_id=samples[0].sample_id, record_types=["message"], max_results=20)
        per_cat: dict[int, dict[int, list[float]]] = {}
        overall: dict[int, list[float]] = {k: [] for k in KS}
        latencies: list[float] = []
        rows: list[dict] = []
        for sample_id, question, evidence in tqdm(jobs, unit="q", disable=args.quiet, file=sys.stderr, ncols=100,
                                                  desc=f"search {mode}"):
            t0 = time.perf_counter()
            results = client.search(question.question, user_id=sample_id, record_types=record_types,
                                    max_results=20)
            latencies.append((time.perf_counter() - t0) * 1000)
            covered = [locomo.record_turns(r.record) for r in results]
            cat = per_cat.setdefault(question.category, {k: [] for k in KS})
            row = {"sample": sample_id, "category": question.category, "latency_ms": latencies[-1], "recall": {},
                   "hit1": bool(covered) and bool(set(covered[0]) & set(evidence))}
            for k in KS:
                # the turns of the first k results (a memory may stand for several)
                seen = [t for turns in covered[:k] for t in turns]
                score = locomo.evidence_recall(seen, evidence, len(seen))
                overall[k].append(score)
                cat[k].append(score)
                row["recall"][k] = score
            ranked = [t for turns in covered for t in turns]
            row["session_recall"] = {k: locomo.session_recall(ranked, evidence, k) for k in SESSION_KS}
            row["session_hit1"] = bool(covered) and locomo.session_hit(covered[0], evidence)
            rows.append(row)
        lat = np.asarray(latencies)
        splits = {
            "tuning": [r for r in rows if r["sample"] in tuning_ids],
            "report": [r for r in rows if r["sample"] in report_ids],
            "all": rows,
        }
        return {
            "recall": {f"@{k}": _mean(overall[k]) for k in KS},
            "per_category": {
                f"{c} {source.CATEGORIES[c]}": {"questions": len(per_cat[c][1]),
                                                 **{f"@{k}": _mean(per_cat[c][k]) for k in KS}}
                for c in sorted(per_cat)
            },
            "latency_ms": {"n": int(lat.size), "p50": round(float(np.percentile(lat, 50)), 1),
                           "p95": round(float(np.percentile(lat, 95)), 1), "mean": round(float(lat.mean()), 1)},
            "splits": (summaries := {name: split_summary(part, source.CATEGORIES)
                                     for name, part in splits.items() if part}),
            "targets": targets(summaries, args.corpus),
        }

    modes = {mode: run(mode) for mode in args.modes}

    return {
        "benchmark": "locomo_import",
        "corpus": args.corpus,
        **({"variant": "fact keys from LoCoMo observations (LLM-written by the dataset's authors, standing in "
                       "for extraction): NOT the headline figure", "observations": observations}
           if observations is not None else {}),
        "database": (f"sqlite + sqlite-vec + FTS5, file {Path(os.environ['OAM_SQLITE_PATH']).name}"
                     if args.database == "sqlite" else "postgresql + pgvector HNSW + tsvector (OAM_DATABASE_URL)"),
        "keyword_arm": ("FTS5 MATCH ranked by bm25()" if args.database == "sqlite"
                        else "tsvector @@ to_tsquery('english') ranked by ts_rank_cd"),
        "embedder": settings.OAM_EMBEDDER,
        "reranker": ({"reranker": settings.OAM_RERANKER, "depth": settings.OAM_RERANK_DEPTH}
                     if settings.OAM_RERANK_DEPTH > 0 else None),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_1_5_15_min_at_start": load_average,  # the CPUs may be shared
        "import": {
            "samples": len(samples),
            "sessions": sum(len(s.sessions) for s in samples),
            "turns": turns,
            "threads_stored": Thread.objects.filter(agent_id=source.AGENT_ID).count(),
            "messages_stored": Message.objects.filter(thread__agent_id=source.AGENT_ID).count(),
            "model_load_seconds": round(model_load_s, 2),
            "reused_earlier_import": args.reuse,
            "seconds": round(import_s, 2),
            "turns_per_s": round(turns / import_s, 1),
        },
        "retrieval": {
            "search": f'client.search(q, user_id=<sample_id>, record_types={record_types}, max_results=20)',
            **({"mixed": "a memory result counts as the turns it came from"} if args.mixed else {}),
            "questions": len(jobs),
            "categories": sorted(args.categories),
            "by_session": "sessions ranked by their best turn in the top 20 results (memory.dev.locomo.session_recall):"
                          " the unit of arXiv 2606.04194's LoCoMo Hit@1 0.752; recall@5 is a lower bound",
            "questions_scored_on_partial_evidence": partial,
            "questions_skipped_no_resolvable_evidence": unresolved,
            "split": {"tuning": tuning_ids, "report": report_ids,
                      "recall_interval": "normal approximation on the mean of per-question recalls",
                      "hit@1_interval": "Wilson score on per-question hits"},
            **({"hybrid (default)": modes["HYBRID"]} if "HYBRID" in modes else {}),
            **({"vector_only (same chunks)": modes["VECTOR"]} if "VECTOR" in modes else {}),
            **({"keyword_only_bm25 (same chunks)": modes["KEYWORD"]} if "KEYWORD" in modes else {}),
            "baselines_source_md": BASELINES_SOURCE_MD,
        },
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
