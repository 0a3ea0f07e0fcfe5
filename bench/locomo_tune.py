#!/usr/bin/env python
"""Choose the second stage's constants on the TUNING half of LoCoMo, and show the REPORT half beside them.

    .venv/bin/python bench/locomo_tune.py [--rounds 3] [--pool var/locomo-pool.pkl]

Needs the database ``bench/locomo_import.py`` left (``var/bench-locomo.sqlite3``; it never imports). For
every category 1-4 question it runs the first stage of HYBRID search as ``client.search(question,
user_id=<sample>, record_types=["message"], max_results=20)`` does (``ranking.candidate_pool`` at
``--depth``, default 200) and keeps the candidates and their signals (``second_stage.signals``), cached in
``--pool`` (delete it after a change to the first stage or the signals). Then, offline:

* ``current``: ``second_stage.WEIGHTS`` as committed;
* ``speaker_only``: the stage before this one (RRF + speaker bonus 0.5, pool 100);
* coordinate ascent over each weight on a grid and over ``POOL_DEPTH`` in {50, 100, 200}, maximising the
  TUNING half's (recall@10 + hit@1) / 2 only; the REPORT half is printed for the chosen point, never used to
  choose it.

``--rerank-depth N`` adds ``cross_encoder``: the optional cross-encoder (``memory.rerankers``) over the
committed ranking's first N records, at each weight, the one the TUNING half prefers named.

``ablation`` leaves each signal out of the chosen point in turn; ``ablation_by_conversation`` gives what
it adds to each conversation's (recall@10 + hit@1) / 2, so a signal whose gain comes from one conversation
shows. Each setting prints recall@1/5/10/20 and hit@1 for tuning, report and all (no intervals here: the real
figures, with intervals and latency, come from ``bench/locomo_import.py --reuse --modes HYBRID``, which runs
the committed code). The score here is ``second_stage.score``'s weighted sum as a matrix product, so the
ranking is the same as search's (ties keep the fused order in both).

Prints one JSON object on stdout; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from memory.dev.locomo import evidence_recall  # noqa: E402  (needs ROOT on the path; imports no Django model)

KS = (1, 5, 10, 20)
GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
DEPTHS = (50, 100, 200)


def _pool(args) -> list[dict]:
    """Per question: sample, category, evidence, query and the candidates (depth ``args.depth``)."""
    path = Path(args.pool)
    if path.is_file():
        with path.open("rb") as fh:
            return pickle.load(fh)
    from django.utils import timezone

    from bench._database import message_search_request
    from memory.dev import locomo
    from memory.embedders import embed_query
    from memory.models import Message
    from memory.search import ranking, second_stage

    out = []
    samples = list(locomo.iter_samples(locomo.default_data_path()))
    started = time.perf_counter()
    old_depth = second_stage.POOL_DEPTH
    ranking.POOL_DEPTH = args.depth
    try:
        for sample in samples:
            dia_ids = sample.dia_ids
            for question in sample.questions:
                if question.category > 4 or not (evidence := question.known_evidence(dia_ids)):
                    continue
                request = message_search_request(question.question, sample.sample_id)
                now = timezone.now()
                vector = embed_query(request.query)
                candidates, _ = ranking.candidate_pool(request, vector, now)
                dia = {("message", pk): (metadata or {}).get("dia_id") for pk, metadata in Message.objects.filter(
                    pk__in=[c.key[1] for c in candidates if c.key[0] == "message"]).values_list("pk", "metadata")}
                out.append({"sample": sample.sample_id, "category": question.category, "evidence": evidence,
                            "query": question.question, "now": now, "candidates": candidates, "dia": dia})
            print(f"{sample.sample_id}: {len(out)} questions, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
    finally:
        ranking.POOL_DEPTH = old_depth
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        pickle.dump(out, fh)
    return out


def _restrict(question: dict, depth: int):
    """The question's candidates as a pool of ``depth`` would hold them, with their signal matrix."""
    import numpy as np

    from memory.search import ranking, second_stage

    kept = []
    for c in question["candidates"]:
        ranks = {arm: r for arm, r in c.ranks.items() if r <= depth}
        if not ranks:
            continue
        copy = second_stage.Candidate(**{**c.__dict__, "signals": {}, "ranks": ranks})
        if "vector" not in ranks:
            copy.similarity = None
        if "text" not in ranks:
            copy.text_bm25 = 0.0
        if "context" not in ranks:
            copy.context_bm25 = 0.0
        copy.rrf = sum(ranking.ARM_WEIGHTS[arm] / (ranking.RRF_K + r) for arm, r in ranks.items())
        kept.append(copy)
    kept.sort(key=lambda c: -c.rrf)  # the fused order, as candidate_pool gives it
    second_stage.signals(kept, question["query"], question["now"])
    matrix = np.array([[c.signals[name] for name in second_stage.SIGNALS] for c in kept], dtype=float)
    invalid = np.array([c.status == "invalid" for c in kept], dtype=bool)
    dia = [question["dia"].get(c.key) for c in kept]
    return matrix.reshape(len(kept), len(second_stage.SIGNALS)), invalid, dia, [c.role for c in kept], \
        [c.content for c in kept]


def _evaluate(prepared: list, questions: list[dict], weights) -> dict:
    import numpy as np

    vector = _vector(weights)
    rows = {"tuning": [], "report": [], "all": []}
    for item, question in zip(prepared, questions):
        ranked = _ranked(item, vector, weights, 20)
        row = [evidence_recall(ranked, question["evidence"], k) for k in KS]
        row.append(_hit(ranked, question))
        rows[question["half"]].append(row)
        rows["all"].append(row)
    out = {}
    for half, values in rows.items():
        arr = np.array(values)
        out[half] = {**{f"recall@{k}": round(float(arr[:, i].mean()), 4) for i, k in enumerate(KS)},
                     "hit@1": round(float(arr[:, 4].mean()), 4), "n": len(values)}
    return out


def _signals():
    from memory.search import second_stage

    return second_stage.SIGNALS


def _vector(weights):
    import numpy as np

    return np.array([getattr(weights, name) for name in _signals()], dtype=float)


def _ranked(item, vector, weights, k: int) -> list:
    """The first ``k`` dia ids of one prepared question (``_restrict``) under ``weights`` (as ``_vector``)."""
    return [dia for dia, _ in _scored(item, vector, weights, k)]


def _scored(item, vector, weights, k: int | None = None) -> list:
    """[(dia id, score)] of one prepared question (``_restrict``), best first, as ``second_stage.rank``; the
    first ``k`` (all when None)."""
    import numpy as np

    matrix, invalid, dia = item[:3]
    scores = matrix @ vector if len(dia) else np.zeros(0)
    scores = np.where(invalid, scores * weights.invalid, scores)
    return [(dia[i], float(scores[i])) for i in np.argsort(-scores, kind="stable")[:k]]


def _cross_encoder(prepared: list, questions: list[dict], weights, depth: int, cache: Path) -> dict:
    """The cross-encoder (``memory.rerankers.CrossEncoderReranker``) over each question's first ``depth``
    records under ``weights``, added by ``second_stage.with_cross_encoder`` at each weight of ``GRID``: the
    weight with the best TUNING objective is ``chosen``; the model's order alone (no second stage beneath
    it) is ``model_only``. The model's scores are kept in ``cache`` (one forward pass per question)."""
    import numpy as np

    from memory.index.writer import message_chunk_text
    from memory.rerankers import CrossEncoderReranker
    from memory.search import second_stage

    vector = _vector(weights)
    orders = [_scored(item, vector, weights) for item in prepared]
    queries = [q["query"] for q in questions]
    stored = pickle.loads(cache.read_bytes()) if cache.is_file() else {}
    scores = stored.get("scores", {}) if stored.get("queries") == queries else {}
    if len(scores) != len(questions) or any(len(v) < min(depth, len(o)) for v, o in zip(scores.values(), orders)):
        model, started = CrossEncoderReranker(), time.perf_counter()
        for n, (item, question, order) in enumerate(zip(prepared, questions, orders)):
            index = {d: i for i, d in enumerate(item[2])}
            texts = [message_chunk_text(item[3][index[d]], item[4][index[d]]) for d, _ in order[:depth]]
            scores[n] = model.score(question["query"], texts).tolist()
            if n % 200 == 0:
                print(f"cross-encoder: {n} questions, {time.perf_counter() - started:.0f} s", file=sys.stderr)
        cache.write_bytes(pickle.dumps({"queries": queries, "scores": scores}))

    def evaluate(weight: float | None) -> dict:
        rows = {"tuning": [], "report": [], "all": []}
        for n, (question, order) in enumerate(zip(questions, orders)):
            read = scores[n][:depth]
            if weight is None:  # the model alone orders what it read
                head = sorted(zip(order[:len(read)], read), key=lambda pair: -pair[1])
                ranked = [d for (d, _), _ in head] + [d for d, _ in order[len(read):]]
            else:
                ranked = [d for d, _ in second_stage.with_cross_encoder(order, read, weight)]
            row = (evidence_recall(ranked, question["evidence"], 10), _hit(ranked, question))
            rows[question["half"]].append(row)
            rows["all"].append(row)
        return {half: {"recall@10": round(float(np.mean([r[0] for r in v])), 4),
                       "hit@1": round(float(np.mean([r[1] for r in v])), 4), "n": len(v)} for half, v in rows.items()}

    by_weight = {w: evaluate(w) for w in GRID}
    chosen = max(GRID, key=lambda w: _objective(by_weight[w]))
    return {"depth": depth, "by_weight": by_weight, "model_only": evaluate(None),
            "chosen": {"weight": chosen, "by": "TUNING half (recall@10 + hit@1) / 2", **by_weight[chosen]}}


def _by_conversation(prepared: list, questions: list[dict], weights) -> dict[str, float]:
    """(recall@10 + hit@1) / 2 of each conversation's questions under ``weights``."""
    import numpy as np

    vector = _vector(weights)
    per: dict[str, list[float]] = {}
    for item, question in zip(prepared, questions):
        ranked = _ranked(item, vector, weights, 10)
        per.setdefault(question["sample"], []).append(
            (evidence_recall(ranked, question["evidence"], 10) + _hit(ranked, question)) / 2)
    return {sample: round(float(np.mean(values)), 4) for sample, values in per.items()}


def _hit(ranked: list, question: dict) -> float:
    """1.0 when the first ranked dia id is one of the question's evidence turns (hit@1), else 0.0."""
    return float(bool(ranked) and ranked[0] in set(question["evidence"]))


def _objective(figures: dict) -> float:
    return (figures["tuning"]["recall@10"] + figures["tuning"]["hit@1"]) / 2


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool", default=str(ROOT / "var" / "locomo-pool.pkl"))
    parser.add_argument("--db", default=None,
                        help="the database bench/locomo_import.py left (default var/bench-locomo.sqlite3; "
                             "bench/embedders.py leaves var/bench-locomo-<embedder>.sqlite3)")
    parser.add_argument("--depth", type=int, default=max(DEPTHS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rerank-depth", type=int, default=0, metavar="N",
                        help="also choose second_stage.CROSS_ENCODER_WEIGHT: the cross-encoder over the first N "
                             "records of the committed weights (scores cached beside --pool)")
    args = parser.parse_args(argv)

    import locomo_import
    from locomo_import import TUNING_COUNT, _fresh_database

    if args.db:
        locomo_import.DB_PATH = Path(args.db).resolve()
    _fresh_database(reuse=True)
    import dataclasses

    import django

    django.setup()
    from memory.dev import locomo
    from memory.search import second_stage

    questions = _pool(args)
    order = [s.sample_id for s in locomo.iter_samples(locomo.default_data_path())]
    tuning = set(order[:TUNING_COUNT])
    for q in questions:
        q["half"] = "tuning" if q["sample"] in tuning else "report"
    prepared = {depth: [_restrict(q, depth) for q in questions] for depth in DEPTHS if depth <= args.depth}

    results = {"questions": len(questions), "objective": "TUNING half (recall@10 + hit@1) / 2",
               "speaker_only": _evaluate(prepared[100], questions, second_stage.Weights()),
               "current": {"depth": second_stage.POOL_DEPTH, "weights": dataclasses.asdict(second_stage.WEIGHTS),
                           **_evaluate(prepared[second_stage.POOL_DEPTH], questions, second_stage.WEIGHTS)}}
    best_depth, best = second_stage.POOL_DEPTH, second_stage.WEIGHTS
    best_score = _objective(_evaluate(prepared[best_depth], questions, best))
    trace = []
    for round_no in range(args.rounds):
        improved = False
        for depth in prepared:
            score = _objective(_evaluate(prepared[depth], questions, best))
            if score > best_score + 1e-9:
                best_depth, best_score, improved = depth, score, True
        for name in (*second_stage.SIGNALS, "invalid"):
            for value in (GRID if name != "invalid" else (1.0,)):
                try:
                    candidate = dataclasses.replace(best, **{name: value})
                except ValueError:
                    continue
                score = _objective(_evaluate(prepared[best_depth], questions, candidate))
                if score > best_score + 1e-9:
                    best, best_score, improved = candidate, score, True
            trace.append({"round": round_no + 1, "after": name, "objective": round(best_score, 4)})
        print(f"round {round_no + 1}: {best_score:.4f} depth {best_depth} {best}", file=sys.stderr)
        if not improved:
            break
    results["tuned"] = {"depth": best_depth, "weights": dataclasses.asdict(best),
                        **_evaluate(prepared[best_depth], questions, best)}
    # Each signal left out of the tuned point, one at a time: what it adds on each half, and on each
    # conversation (a signal whose gain comes from one conversation is fitted to it, not general).
    results["ablation"] = {}
    results["ablation_by_conversation"] = {}
    tuned_by_conversation = _by_conversation(prepared[best_depth], questions, best)
    for name in second_stage.SIGNALS:
        if getattr(best, name) == 0:
            continue
        try:
            without = dataclasses.replace(best, **{name: 0.0})
        except ValueError:
            # the signals whose weight must stay below this one's go with it (``Weights``' rules)
            without = dataclasses.replace(best, **{name: 0.0, "neighbour": 0.0, "neighbour_vector": 0.0,
                                                   "answer": 0.0, "session": 0.0})
        results["ablation"][f"without {name}"] = _evaluate(prepared[best_depth], questions, without)
        without_by_conversation = _by_conversation(prepared[best_depth], questions, without)
        results["ablation_by_conversation"][f"gain of {name}"] = {
            sample: round(value - without_by_conversation[sample], 4)
            for sample, value in tuned_by_conversation.items()}
    results["trace"] = trace
    if args.rerank_depth > 0:
        results["cross_encoder"] = _cross_encoder(
            prepared[second_stage.POOL_DEPTH], questions, second_stage.WEIGHTS, args.rerank_depth,
            Path(args.pool).with_suffix(f".cross-encoder-{args.rerank_depth}.pkl"))
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2, default=str))
