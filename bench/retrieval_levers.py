#!/usr/bin/env python
"""The retrieval levers of issue #31, measured offline on both corpora's candidate pools.

    .venv/bin/python bench/retrieval_levers.py [--rebuild] [--rounds 1]

Needs the databases ``bench/retrieval.py`` (or ``bench/locomo_import.py --corpus ...``) left:
``var/bench-locomo.sqlite3`` and ``var/bench-realtalk.sqlite3``. For every scored question it runs HYBRID's
first stage as ``client.search(question, user_id=<sample>, record_types=["message"], max_results=20)`` does,
with and without the speaker-name step (``ranking.aliased_pool``), and keeps the pools in
``var/levers-<corpus>.pkl`` (``--rebuild`` after a change to the first stage). It also embeds each speaker's run
of consecutive messages (a message with the messages the same speaker sent just before and after it, in its
thread) for the ``run key`` lever. Then, offline, each lever against the committed ranking, per corpus and half:

* ``names off``: the query as asked, no speaker-name step (the committed ranking has it);
* ``session cap k``: at most k results per session in the top 20 (for questions asking for a set: "What",
  "Which", "Who", "Where" questions that do not ask when or how many; or for all questions);
* ``session spread p``: greedy diversity, each result already taken from a session costing the next one of it p;
* ``run key w``: each message's run embedded as a second vector key: its similarity to the query, min-max
  normalised over the pool, at weight w beside the message's own (within the pool: a run key could also bring
  new candidates, which this does not measure);
* ``weights re-chosen``: coordinate ascent of the second stage's weights over the grid on BOTH tuning halves
  at once ((recall@10 + hit@1) / 2, averaged over the corpora), the report halves printed beside.

A lever is ``kept`` (issue #31's rule) only when on the report halves it helps both corpora, or helps one and
costs the other less than half that corpus's 95 % interval on recall@10 and on hit@1. Every figure: turn recall@10,
turn hit@1, session hit@1. Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPORA = {"locomo": 5, "realtalk": 2}  # corpus: tuning-half size (first samples in file order)
GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
#: A question that asks for a set of things (issue #31: "what foods", "which places", "who").
SET_QUESTION = re.compile(r"^\s*(what|which|who|where)\b(?!.*\b(when|how long|how many|how often)\b)", re.I)
Z95 = 1.959964


def _build(corpus: str) -> None:
    """In a process of its own (one database each): the pools of ``corpus``, written to ``var/levers-<corpus>.pkl``."""
    from bench._database import message_search_request, use_sqlite

    use_sqlite(ROOT / "var" / f"bench-{corpus}.sqlite3", fresh=False)
    import django

    django.setup()
    import numpy as np
    from django.utils import timezone

    from memory.dev import locomo, realtalk
    from memory.embedders import embed_query, get_embedder
    from memory.index.writer import embedding_text, message_chunk_text
    from memory.models import Message
    from memory.search import ranking

    source = realtalk if corpus == "realtalk" else locomo
    samples = list(source.iter_samples(source.default_data_path()))
    tuning = {s.sample_id for s in samples[: CORPORA[corpus]]}
    if not Message.objects.filter(thread__agent_id=source.AGENT_ID).exists():
        raise SystemExit(f"var/bench-{corpus}.sqlite3 holds no {corpus}: run bench/retrieval.py first")
    # Each message's run: the consecutive messages of its speaker around it, in its thread, embedded as a chunk
    # is (``embedding_text``: the date of the run's first message before "<role>: <text>"); a message alone is
    # its own run, embedded the same way, so every candidate's run similarity is on one scale.
    rows = list(Message.objects.filter(thread__agent_id=source.AGENT_ID).order_by("thread_id", "seq")
                .values_list("pk", "thread_id", "role", "content", "event_at"))
    runs: dict[str, str] = {}
    i = 0
    while i < len(rows):
        j = i
        while j + 1 < len(rows) and rows[j + 1][1] == rows[i][1] and rows[j + 1][2] == rows[i][2]:
            j += 1
        stamp = rows[i][4].isoformat() if rows[i][4] else None
        text = embedding_text(message_chunk_text(rows[i][2], " ".join(r[3] for r in rows[i:j + 1])), stamp)
        for r in rows[i:j + 1]:
            runs[r[0]] = text
        i = j + 1
    texts = sorted(set(runs.values()))
    vectors = dict(zip(texts, get_embedder().embed(texts)))
    out = []
    for sample in samples:
        for question in sample.questions:
            if question.category > 4 or not (evidence := question.known_evidence(sample.dia_ids)):
                continue
            request = message_search_request(question.question, sample.sample_id)
            now = timezone.now()
            vector = embed_query(request.query)
            plain, _ = ranking.candidate_pool(request, vector, now)
            named, _, query = ranking.aliased_pool(request, vector, now)
            qv = embed_query(query)
            keys = {c.key[1] for c in plain} | {c.key[1] for c in named}
            dia = {("message", pk): (meta or {}).get("dia_id")
                   for pk, meta in Message.objects.filter(pk__in=keys).values_list("pk", "metadata")}
            run_sim = {("message", pk): float(np.dot(vectors[runs[pk]], qv)) for pk in keys if pk in runs}
            out.append({"sample": sample.sample_id, "half": "tuning" if sample.sample_id in tuning else "report",
                        "category": question.category, "evidence": evidence, "asked": question.question,
                        "query": query, "now": now, "plain": plain, "named": named, "dia": dia, "run": run_sim})
        print(f"{corpus} {sample.sample_id}: {len(out)} questions", file=sys.stderr)
    path = ROOT / "var" / f"levers-{corpus}.pkl"
    path.write_bytes(pickle.dumps(out))


def _prepare(pool: list[dict], names: bool = True) -> list[dict]:
    """Per question: the signal matrix of its pool (the committed signals plus ``run``), evidence flags, sessions."""
    import numpy as np

    from memory.dev.locomo import session_of
    from memory.search import second_stage

    out = []
    for q in pool:
        cands = [second_stage.Candidate(**{**c.__dict__, "signals": {}}) for c in q["named" if names else "plain"]]
        second_stage.signals(cands, q["query"] if names else q["asked"], q["now"])
        matrix = np.array([[c.signals[s] for s in second_stage.SIGNALS] for c in cands], dtype=float)
        matrix = matrix.reshape(len(cands), len(second_stage.SIGNALS))
        run = np.array([q["run"].get(c.key, np.nan) for c in cands], dtype=float)
        known = run[~np.isnan(run)]
        lo, hi = (known.min(), known.max()) if known.size else (0.0, 0.0)
        run = np.where(np.isnan(run), 0.0, (run - lo) / (hi - lo) if hi > lo else 0.0)
        dia = [q["dia"].get(c.key) for c in cands]
        evidence = set(q["evidence"])
        sessions = {session_of(e) for e in evidence}
        out.append({"half": q["half"], "category": q["category"], "matrix": matrix, "run": run,
                    "evidence": np.array([d in evidence for d in dia], dtype=bool),
                    "session_hit": np.array([session_of(d) in sessions for d in dia], dtype=bool),
                    "session": [second_stage.session_key(c) for c in cands], "n": len(evidence),
                    "set": bool(SET_QUESTION.search(q["asked"]))})
    return out


def _order(item: dict, weights, run_weight: float = 0.0, cap: int | None = None, spread: float = 0.0,
           sets_only: bool = True) -> list[int]:
    """The first 20 candidates' indices under ``weights`` (a vector over ``SIGNALS``) and the lever's setting."""
    import numpy as np

    if not len(item["matrix"]):
        return []
    scores = item["matrix"] @ weights + run_weight * item["run"]
    order = [int(i) for i in np.argsort(-scores, kind="stable")]
    if (cap is None and not spread) or (sets_only and not item["set"]):
        return order[:20]
    taken: dict = {}
    out: list[int] = []
    rest = order[:60]
    while rest and len(out) < 20:
        if cap is not None:
            pick = next((i for i in rest if taken.get(item["session"][i], 0) < cap), rest[0])
        else:
            pick = max(rest, key=lambda i: scores[i] - spread * taken.get(item["session"][i], 0))
        rest.remove(pick)
        out.append(pick)
        taken[item["session"][pick]] = taken.get(item["session"][pick], 0) + 1
    return out


def _score(prepared: list[dict], weights, **lever) -> dict:
    """Turn recall@10, turn hit@1 and session hit@1 per half and for all, under ``weights`` and ``lever``."""
    rows: dict[str, list] = {"tuning": [], "report": [], "all": []}
    for item in prepared:
        order = _order(item, weights, **lever)
        row = (float(item["evidence"][order[:10]].sum() / item["n"]) if order else 0.0,
               float(bool(order) and item["evidence"][order[0]]), float(bool(order) and item["session_hit"][order[0]]))
        rows[item["half"]].append(row)
        rows["all"].append(row)
    return {half: {"turn recall@10": round(sum(r[0] for r in part) / len(part), 4),
                   "turn hit@1": round(sum(r[1] for r in part) / len(part), 4),
                   "session hit@1": round(sum(r[2] for r in part) / len(part), 4), "questions": len(part)}
            for half, part in rows.items() if part}


def _half_width(prepared: list[dict], weights, measure: str) -> float:
    """Half of the 95 % interval of ``measure`` on the report half under ``weights`` (normal approximation)."""
    values = []
    for item in prepared:
        if item["half"] != "report":
            continue
        order = _order(item, weights)
        values.append(item["evidence"][order[:10]].sum() / item["n"] if measure == "turn recall@10"
                      else float(bool(order) and item["evidence"][order[0]]))
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return float(Z95 * sd / math.sqrt(n))


def _verdict(results: dict, base: dict, widths: dict) -> dict:
    """Change per corpus and measure on each half, and whether issue #31's rule keeps the lever. On a half, a
    lever helps a corpus when its two changes (turn recall@10, turn hit@1) sum above 0 and neither falls by more
    than half that measure's 95 % report interval; it costs a corpus nothing when neither falls by more than
    that; it passes when it helps every corpus, or helps one and costs the others nothing. Kept: it passes on
    the TUNING halves (where constants are chosen) and on the REPORT halves (never tuned on)."""
    measures = ("turn recall@10", "turn hit@1")
    out: dict = {}
    for half in ("tuning", "report"):
        delta = {c: {m: round(float(results[c][half][m] - base[c][half][m]), 4) for m in measures} for c in results}
        harmless = {c: all(d[m] >= -widths[c][m] / 2 for m in measures) for c, d in delta.items()}
        helps = {c: harmless[c] and sum(d.values()) > 0 for c, d in delta.items()}
        passes = all(helps.values()) or any(helps[c] and all(harmless[o] for o in delta if o != c) for c in delta)
        out[f"{half}_delta"] = delta
        out[f"{half}_passes"] = bool(passes)
    out["kept"] = out["tuning_passes"] and out["report_passes"]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="build the pools again")
    parser.add_argument("--rounds", type=int, default=1, help="coordinate-ascent rounds (default 1; 0: none)")
    parser.add_argument("--build", choices=sorted(CORPORA), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.build:
        _build(args.build)
        return {}
    started = time.perf_counter()
    for corpus in CORPORA:
        if args.rebuild or not (ROOT / "var" / f"levers-{corpus}.pkl").is_file():
            subprocess.run([sys.executable, __file__, "--build", corpus], check=True, cwd=ROOT)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")
    os.environ["OAM_SQLITE_PATH"] = str(ROOT / "var" / "bench-realtalk.sqlite3")  # settings only; nothing is read
    import django

    django.setup()
    import numpy as np

    from memory.search import second_stage

    pools = {c: pickle.loads((ROOT / "var" / f"levers-{c}.pkl").read_bytes()) for c in CORPORA}
    prepared = {c: _prepare(p) for c, p in pools.items()}
    committed = np.array([getattr(second_stage.WEIGHTS, s) for s in second_stage.SIGNALS], dtype=float)
    base = {c: _score(p, committed) for c, p in prepared.items()}
    widths = {c: {m: round(_half_width(p, committed, m), 4) for m in ("turn recall@10", "turn hit@1")}
              for c, p in prepared.items()}
    levers: dict[str, dict] = {}

    def lever(name: str, results: dict) -> None:
        levers[name] = {**results, **_verdict(results, base, widths)}
        print(f"{name}: kept={levers[name]['kept']} tuning {levers[name]['tuning_delta']} "
              f"report {levers[name]['report_delta']}", file=sys.stderr)

    lever("names off", {c: _score(_prepare(p, names=False), committed) for c, p in pools.items()})
    for sets_only in (True, False):
        which = "set questions" if sets_only else "all questions"
        for cap in (2, 3, 4):
            lever(f"session cap {cap}, {which}",
                  {c: _score(p, committed, cap=cap, sets_only=sets_only) for c, p in prepared.items()})
        for spread in (0.05, 0.1, 0.2):
            lever(f"session spread {spread}, {which}",
                  {c: _score(p, committed, spread=spread, sets_only=sets_only) for c, p in prepared.items()})
    for weight in (0.05, 0.1, 0.2, 0.3, 0.5):
        lever(f"run key {weight}", {c: _score(p, committed, run_weight=weight) for c, p in prepared.items()})

    def objective(weights) -> float:
        total = 0.0
        for p in prepared.values():
            tuning = _score([i for i in p if i["half"] == "tuning"], weights)["tuning"]
            total += (tuning["turn recall@10"] + tuning["turn hit@1"]) / 2
        return total / len(prepared)

    weights, best = committed.copy(), objective(committed)
    for _ in range(args.rounds):
        for i, name in enumerate(second_stage.SIGNALS):
            for value in GRID:
                trial = weights.copy()
                trial[i] = value
                try:
                    second_stage.Weights(**dict(zip(second_stage.SIGNALS, trial.tolist())))
                except ValueError:
                    continue
                if (score := objective(trial)) > best + 1e-4:
                    best, weights = score, trial
            print(f"ascent: {name} {weights[i]} -> {best:.4f}", file=sys.stderr)
    if args.rounds:
        lever("weights re-chosen on both tuning halves", {c: _score(p, weights) for c, p in prepared.items()})
        levers["weights re-chosen on both tuning halves"]["weights"] = dict(zip(second_stage.SIGNALS,
                                                                                weights.tolist()))
    evidence_words = {}
    for corpus in CORPORA:
        from memory.dev import locomo, realtalk

        source = realtalk if corpus == "realtalk" else locomo
        lengths, short = [], 0
        for sample in source.iter_samples(source.default_data_path()):
            words = {t.dia_id: len(t.text.split()) for s in sample.sessions for t in s.turns}
            lengths += list(words.values())
            for q in sample.questions:
                if q.category <= 4:
                    short += sum(words[e] < 8 for e in q.known_evidence(sample.dia_ids))
        scored = sum(len(q["evidence"]) for q in pools[corpus])
        evidence_words[corpus] = {"turns_under_8_words": round(sum(n < 8 for n in lengths) / len(lengths), 3),
                                  "evidence_turns_under_8_words": round(short / scored, 3)}
    return {"benchmark": "retrieval_levers", "committed": base, "report_interval_half_widths": widths,
            "levers": levers, "short_turns": evidence_words, "seconds": round(time.perf_counter() - started, 1)}


if __name__ == "__main__":
    result = main()
    if result:
        print(json.dumps(result, indent=2))
