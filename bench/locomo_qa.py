#!/usr/bin/env python
"""Benchmark: answer LoCoMo questions from the context OAM gives an agent, scored by token F1 and an LLM judge.

    .venv/bin/python bench/locomo_qa.py [--samples conv-26 ...] [--sessions N] [--questions N] [--seed S]
        [--context search|card] [--token-budget T] [--max-results K] [--mode HYBRID|VECTOR|KEYWORD]
        [--base-url URL] [--model NAME] [--api-key KEY] [--judge-base-url URL] [--judge-model NAME]
        [--judge-api-key KEY] [--timeout S] [--answer-max-tokens N] [--reuse | --db PATH] [--details] [--quiet]

Steps:

1. The conversations are imported through ``memory.client`` by ``manage.py
   import_locomo`` (one user per sample, one thread per session; no
   extraction: the import runs without an LLM). ``--reuse`` uses
   ``bench/locomo_import.py``'s database, ``var/bench-locomo.sqlite3``, as an
   earlier run left it (the import resumes and adds only what is missing);
   otherwise a fresh SQLite file (``--db``, default a temporary file removed
   at the end). ``--sessions N`` imports only each sample's first N sessions.
2. Questions: LoCoMo categories 1-4 (5, adversarial, has no answer and is
   excluded, as in the mem0 paper's protocol) whose evidence turns are all
   stored (``--sessions`` drops questions about later sessions).
   ``--questions N`` draws N of them with ``random.Random(--seed)``, kept in
   file order.
3. Per question, the context an agent would get, within ``--token-budget``
   tokens (``memory.core.chunking.estimate_tokens``, characters / 4, on the exact
   text given to the model):

   * ``--context search`` (default): ``client.search(question,
     user_id=<sample>, record_types=["message"], max_results=K,
     token_budget=T)``; the results' ``formatted_content`` (record id,
     session date, speaker, text), best first, one per line;
   * ``--context card``: a thread of the sample's user (no LLM) holding the
     question as its one message, and its ``get_context_card(token_budget=T,
     max_relevant_results=K)`` rendered text; the thread is deleted after.
     The card searches memories of the user (spec: get_context_card), so
     it carries the conversation only as far as memories were extracted.

4. An answer from an OpenAI-compatible endpoint (``--base-url``, ``--model``,
   ``--api-key``; default the service's ``OAM_LLM_BASE_URL``,
   ``OAM_LLM_MODEL``, ``OAM_LLM_API_KEY``) at temperature 0, asked for a short
   phrase (``ANSWER_SYSTEM_PROMPT``).
5. Scores: token F1 against the gold answer after the SQuAD normalisation
   that LoCoMo's and mem0's evaluation use (lowercase, punctuation and the
   articles a/an/the removed, whitespace collapsed; ``token_f1``), and an LLM
   judge's CORRECT/WRONG given question, gold answer and generated answer
   (``JUDGE_PROMPT``, the mem0 paper's protocol: Chhikara et al. 2025,
   arXiv 2504.19413, github.com/mem0ai/mem0 ``evaluation/metrics/llm_judge.py``);
   the judge endpoint defaults to the answering one (``--judge-*``).
6. Per question: context tokens, the answer and judge calls' prompt and
   completion tokens as the endpoint reports them in ``usage`` (0 when it
   reports none), and latency (context, answer, judge, milliseconds).

Prints one JSON object on stdout: F1 mean (95 % normal interval), judge
accuracy (Wilson 95 % interval over the questions the judge labelled),
both by category and by split (tuning/report halves of
``bench/locomo_import.py``), context/prompt/completion tokens and latency
p50/p95; ``--details`` adds one row per question (with the context text). Progress goes to stderr.
An answer or judge call that fails (``memory.llm.adapters.LlmError``) is recorded in
the row (``answer_error``/``judge_error``) and counted in ``failures``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import re
import string
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.locomo_import import DB_PATH as REUSE_DB_PATH  # noqa: E402
from bench.locomo_import import TUNING_COUNT, mean_interval, wilson  # noqa: E402

CONTEXTS = ("search", "card")
MODES = ("HYBRID", "VECTOR", "KEYWORD")
#: Context budget in estimated tokens when --token-budget is omitted: 20 LoCoMo turns as formatted results
#: take about 1,300 on average; 1,000 keeps a small model's 4,096-token window with room to answer.
DEFAULT_TOKEN_BUDGET = 1000
DEFAULT_MAX_RESULTS = 20
#: Reply cap of an answer, in tokens ("a short phrase").
ANSWER_MAX_TOKENS = 64
#: Reply cap of a judge call, in tokens (the JSON label).
JUDGE_MAX_TOKENS = 32

ANSWER_SYSTEM_PROMPT = (
    "You answer questions about a long conversation between two people, using only the memories given. "
    "Each memory is a message with its date (timestamp) and speaker (role). "
    "Answer with a short phrase, using the exact words of the memories where you can. "
    "For questions about time, answer with the date or period, worked out from the message dates "
    "(a message on 2023-05-08 saying 'yesterday' means 7 May 2023). "
    "If the memories do not contain the answer, give your best short guess."
)

#: The mem0 paper's judge prompt (see the module docstring), asking for a JSON label.
JUDGE_PROMPT = (
    "Your task is to label an answer to a question as 'CORRECT' or 'WRONG'. "
    "You will be given the following data:\n"
    "    (1) a question (posed by one user to another user),\n"
    "    (2) a 'gold' (ground truth) answer,\n"
    "    (3) a generated answer\n"
    "which you will score as CORRECT/WRONG.\n"
    "\n"
    "The point of the question is to ask about something one user should know about the other user "
    "based on their prior conversations.\n"
    "The gold answer will usually be a concise and short answer that includes the referenced topic, for example:\n"
    "Question: Do you remember what I got the last time I went to Hawaii?\n"
    "Gold answer: A shell necklace\n"
    "The generated answer might be much longer, but you should be generous with your grading - "
    "as long as it touches on the same topic as the gold answer, it should be counted as CORRECT.\n"
    "\n"
    "For time related questions, the gold answer will be a specific date, month, year, etc. "
    'The generated answer might be much longer or use relative time references (like "last Tuesday" or '
    '"next month"), but you should be generous with your grading - as long as it refers to the same date or '
    "time period as the gold answer, it should be counted as CORRECT. "
    'Even if the format differs (e.g., "May 7th" vs "7 May"), '
    "consider it CORRECT if it's the same date.\n"
    "\n"
    "Now it's time for the real question:\n"
    "Question: {question}\n"
    "Gold answer: {gold_answer}\n"
    "Generated answer: {generated_answer}\n"
    "\n"
    'Return the label CORRECT or WRONG in JSON format with the key "label".'
)

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["CORRECT", "WRONG"]}},
    "required": ["label"],
    "additionalProperties": False,
}

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD answer normalisation as LoCoMo and mem0 score F1: lowercase, punctuation removed, the articles
    a/an/the removed, whitespace collapsed. ``"The Shell-Necklace!"`` -> ``"shellnecklace"``."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 (0.0-1.0) of ``prediction`` against ``gold`` after ``normalize_answer``: harmonic mean of
    precision and recall over the multiset of shared tokens; 1.0 when both normalise to nothing, 0.0 when one does."""
    pred, truth = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not truth:
        return float(pred == truth)
    common = sum((Counter(pred) & Counter(truth)).values())
    if not common:
        return 0.0
    precision, recall = common / len(pred), common / len(truth)
    return 2 * precision * recall / (precision + recall)


def answer_messages(question: str, context: str) -> list[dict[str, str]]:
    """Chat messages asking for a short answer to ``question`` from ``context``."""
    return [
        {"role": "system", "content": ANSWER_SYSTEM_PROMPT},
        {"role": "user", "content": f"Memories:\n{context or '(none)'}\n\nQuestion: {question}\nShort answer:"},
    ]


def judge_messages(question: str, gold: str, generated: str) -> list[dict[str, str]]:
    """Chat messages of one judge call (``JUDGE_PROMPT``)."""
    return [
        {"role": "system", "content": "You are an expert grader that determines if answers to questions "
                                      "match a gold standard answer."},
        {"role": "user", "content": JUDGE_PROMPT.format(question=question, gold_answer=gold,
                                                        generated_answer=generated)},
    ]


def percentiles(values: list[float]) -> dict:
    """``{"p50", "p95", "mean", "n"}`` of ``values`` (linear interpolation, numpy's default), rounded to 0.1."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "mean": 0.0, "n": 0}
    import numpy as np

    arr = np.asarray(values, dtype=float)
    return {"p50": round(float(np.percentile(arr, 50)), 1), "p95": round(float(np.percentile(arr, 95)), 1),
            "mean": round(float(arr.mean()), 1), "n": int(arr.size)}


def summarize(rows: list[dict]) -> dict:
    """Aggregates of per-question rows: F1 mean with interval, judge accuracy (Wilson) over labelled rows,
    tokens and latency percentiles."""
    judged = [r for r in rows if r["judge"] in ("CORRECT", "WRONG")]
    return {
        "questions": len(rows),
        "f1": mean_interval([r["f1"] for r in rows]),
        "judge_accuracy": wilson(sum(r["judge"] == "CORRECT" for r in judged), len(judged)),
        "tokens": {
            "context": percentiles([r["context_tokens"] for r in rows]),
            "answer_prompt": percentiles([r["answer_prompt_tokens"] for r in rows]),
            "answer_completion": percentiles([r["answer_completion_tokens"] for r in rows]),
            "judge_prompt": percentiles([r["judge_prompt_tokens"] for r in rows]),
            "judge_completion": percentiles([r["judge_completion_tokens"] for r in rows]),
        },
        "latency_ms": {
            "context": percentiles([r["context_ms"] for r in rows]),
            "answer": percentiles([r["answer_ms"] for r in rows]),
            "judge": percentiles([r["judge_ms"] for r in rows]),
            "context_plus_answer": percentiles([r["context_ms"] + r["answer_ms"] for r in rows]),
        },
    }


def _database(path: Path, fresh: bool) -> None:
    """Point Django at ``path`` (removed first when ``fresh``); run before ``django.setup()``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if fresh:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.environ["OAM_SQLITE_PATH"] = str(path)
    os.environ["OAM_ORACLE_DSN"] = os.environ["OAM_DATABASE_URL"] = ""  # SQLite whatever the shell or .env names
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", nargs="+", metavar="SAMPLE_ID", help="only these samples (default: all ten)")
    parser.add_argument("--sessions", type=int, metavar="N", help="import only the first N sessions of each sample")
    parser.add_argument("--questions", type=int, metavar="N", help="a random sample of N questions (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the question sample (default 0)")
    parser.add_argument("--context", choices=CONTEXTS, default="search", help="what the agent is given")
    parser.add_argument("--token-budget", type=int, default=DEFAULT_TOKEN_BUDGET,
                        help=f"context budget in estimated tokens (default {DEFAULT_TOKEN_BUDGET})")
    parser.add_argument("--max-results", type=int, default=DEFAULT_MAX_RESULTS,
                        help=f"search results / card records asked for (default {DEFAULT_MAX_RESULTS})")
    parser.add_argument("--mode", type=str.upper, choices=MODES, default="HYBRID", help="search mode")
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint incl. /v1 (default: OAM_LLM_BASE_URL)")
    parser.add_argument("--model", help="model name (default: OAM_LLM_MODEL)")
    parser.add_argument("--api-key", help="API key (default: OAM_LLM_API_KEY)")
    parser.add_argument("--judge-base-url", help="judge endpoint (default: the answering one)")
    parser.add_argument("--judge-model", help="judge model (default: the answering one)")
    parser.add_argument("--judge-api-key", help="judge API key (default: the answering one)")
    parser.add_argument("--timeout", type=float, help="seconds per LLM request (default: OAM_LLM_TIMEOUT)")
    parser.add_argument("--answer-max-tokens", type=int, default=ANSWER_MAX_TOKENS,
                        help=f"reply cap of an answer (default {ANSWER_MAX_TOKENS})")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--reuse", action="store_true", help=f"use {REUSE_DB_PATH.relative_to(ROOT)} as left by "
                                                            "bench/locomo_import.py (import resumes)")
    where.add_argument("--db", type=Path, help="fresh SQLite file to import into (default: a temporary file)")
    parser.add_argument("--details", action="store_true", help="add one row per question")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    for name in ("sessions", "questions", "token_budget", "max_results", "answer_max_tokens"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.timeout is not None and args.timeout <= 0:
        parser.error("--timeout must be > 0")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    temp_dir = None
    if args.reuse:
        if not REUSE_DB_PATH.is_file():
            raise SystemExit(f"--reuse: {REUSE_DB_PATH} does not exist; run bench/locomo_import.py once")
        db_path = REUSE_DB_PATH
    elif args.db:
        db_path = args.db.resolve()
    else:
        temp_dir = tempfile.TemporaryDirectory(prefix="locomo-qa-")
        db_path = Path(temp_dir.name) / "qa.sqlite3"
    _database(db_path, fresh=not args.reuse)
    try:
        return run(args, db_path)
    finally:
        if temp_dir is not None:
            temp_dir.cleanup()


def run(args: argparse.Namespace, db_path: Path) -> dict:
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from memory.client import AgentMemory
    from memory.core import conf
    from memory.core.chunking import estimate_tokens
    from memory.core.types import MemorySearchConfig
    from memory.dev import locomo
    from memory.embedders import get_embedder
    from memory.llm.adapters import LlmError, OpenAICompatibleLlm, reset_llm

    base_url = args.base_url or conf.get("OAM_LLM_BASE_URL")
    model = args.model or conf.get("OAM_LLM_MODEL")
    api_key = args.api_key or conf.get("OAM_LLM_API_KEY") or None
    timeout = args.timeout or conf.get("OAM_LLM_TIMEOUT")
    if not base_url:
        raise SystemExit("no endpoint: pass --base-url (and --model) or set OAM_LLM_BASE_URL")
    answerer = OpenAICompatibleLlm(base_url=base_url, model=model or "local", api_key=api_key, timeout=timeout,
                                   max_retries=0)
    judge_url = args.judge_base_url or base_url
    judge = OpenAICompatibleLlm(base_url=judge_url, model=args.judge_model or model or "local",
                                api_key=args.judge_api_key or api_key, timeout=timeout, max_retries=2)
    # The import and the card threads store only: no extraction, no summaries from the service's LLM.
    settings.OAM_LLM_BASE_URL = ""
    reset_llm()

    def say(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    data_path = locomo.default_data_path()
    file_order = [s.sample_id for s in locomo.iter_samples(data_path)]
    unknown = sorted(set(args.samples or ()) - set(file_order))
    if unknown:
        raise SystemExit(f"unknown sample id(s): {', '.join(unknown)}")
    samples = list(locomo.iter_samples(data_path, sample_ids=args.samples))
    tuning_ids = set(file_order[:TUNING_COUNT])

    call_command("migrate", verbosity=0, interactive=False)
    with contextlib.redirect_stderr(io.StringIO()) if args.quiet else contextlib.nullcontext():
        get_embedder()
    started = time.perf_counter()
    call_command("import_locomo", str(data_path), samples=[s.sample_id for s in samples], sessions=args.sessions,
                 verbosity=0 if args.quiet else 1, stdout=sys.stderr, stderr=sys.stderr)
    import_s = time.perf_counter() - started

    jobs = []
    for sample in samples:
        sessions = sample.sessions[:args.sessions] if args.sessions else sample.sessions
        stored = frozenset(t.dia_id for s in sessions for t in s.turns)
        for question in sample.questions:
            if question.category in (1, 2, 3, 4) and question.answer is not None and question.resolves(stored):
                jobs.append((sample, question))
    available = len(jobs)
    if args.questions and args.questions < len(jobs):
        picked = sorted(random.Random(args.seed).sample(range(len(jobs)), args.questions))
        jobs = [jobs[i] for i in picked]
    if not jobs:
        raise SystemExit("no category 1-4 question has all its evidence in the imported sessions")

    client = AgentMemory(search_config=MemorySearchConfig(mode=args.mode), llm=None)
    budget = args.token_budget

    def search_context(sample_id: str, question: str) -> tuple[str, int]:
        results = client.search(question, user_id=sample_id, record_types=["message"],
                                max_results=args.max_results, token_budget=budget)
        parts = [r.formatted_content for r in results]
        while parts and estimate_tokens("\n".join(parts)) > budget:  # the separators count too
            parts.pop()
        return "\n".join(parts), len(parts)

    def card_context(sample_id: str, question: str, index: int) -> tuple[str, int]:
        thread = client.create_thread(thread_id=f"locomo-qa-{sample_id}-{index}-{os.getpid()}", user_id=sample_id,
                                      agent_id=locomo.AGENT_ID, llm=None)
        try:
            thread.add_messages([{"role": "user", "content": question}])
            card = thread.get_context_card(token_budget=budget, max_relevant_results=args.max_results)
            results = list(card.relevant_results or [])
            while True:
                card.relevant_results = results
                text = card.formatted_content
                if estimate_tokens(text) <= budget or not results:
                    break
                results.pop()
            if estimate_tokens(text) > budget:  # the summary alone is over: keep its start
                text = text[:budget * 4]
            return text, len(results)
        finally:
            client.delete_thread(thread.thread_id)

    rows = []
    failures = {"answer": 0, "judge": 0}
    say(f"locomo_qa: {len(jobs)} of {available} questions, context={args.context}, budget={budget} tokens, "
        f"endpoint {base_url}")
    for index, (sample, question) in enumerate(jobs, 1):
        t0 = time.perf_counter()
        if args.context == "search":
            context, records = search_context(sample.sample_id, question.question)
        else:
            context, records = card_context(sample.sample_id, question.question, index)
        context_ms = (time.perf_counter() - t0) * 1000
        row = {"sample": sample.sample_id, "category": question.category, "question": question.question,
               "gold": question.answer, "context": context, "context_tokens": estimate_tokens(context),
               "context_records": records,
               "token_budget": budget, "context_ms": round(context_ms, 1)}
        t0 = time.perf_counter()
        try:
            answer = answerer.complete_text(answer_messages(question.question, context),
                                            max_tokens=args.answer_max_tokens).strip()
            row["answer_error"] = None
        except LlmError as exc:
            answer, row["answer_error"] = "", f"{type(exc).__name__}: {exc}"
            failures["answer"] += 1
        stats = answerer.last_call
        row.update(answer=answer, answer_ms=round((time.perf_counter() - t0) * 1000, 1),
                   answer_prompt_tokens=stats.prompt_tokens if stats else 0,
                   answer_completion_tokens=stats.completion_tokens if stats else 0,
                   f1=round(token_f1(answer, question.answer), 4))
        t0 = time.perf_counter()
        try:
            verdict = judge.complete_json(judge_messages(question.question, question.answer, answer), JUDGE_SCHEMA,
                                          schema_name="judge_label", max_tokens=JUDGE_MAX_TOKENS)
            row["judge"], row["judge_error"] = verdict["label"], None
        except LlmError as exc:
            row["judge"], row["judge_error"] = None, f"{type(exc).__name__}: {exc}"
            failures["judge"] += 1
        stats = judge.last_call
        row.update(judge_ms=round((time.perf_counter() - t0) * 1000, 1),
                   judge_prompt_tokens=stats.prompt_tokens if stats else 0,
                   judge_completion_tokens=stats.completion_tokens if stats else 0)
        rows.append(row)
        say(f"[{index}/{len(jobs)}] {sample.sample_id} cat {question.category}: F1 {row['f1']:.2f} "
            f"judge {row['judge']} ({row['context_tokens']} ctx tokens, {row['answer_ms']:.0f} ms)")

    by_split = {"tuning": [r for r in rows if r["sample"] in tuning_ids],
                "report": [r for r in rows if r["sample"] not in tuning_ids]}
    out = {
        "benchmark": "locomo_qa",
        "database": str(db_path.relative_to(ROOT)) if db_path.is_relative_to(ROOT) else "temporary SQLite file",
        "embedder": settings.OAM_EMBEDDER,
        "import_seconds": round(import_s, 2),
        "samples": [s.sample_id for s in samples],
        "sessions_per_sample": args.sessions or "all",
        "questions_available": available,
        "seed": args.seed if args.questions else None,
        "context": {"kind": args.context, "mode": args.mode, "token_budget": budget,
                    "max_results": args.max_results, "tokens": "estimate_tokens (characters / 4)"},
        "answer_endpoint": {"base_url": base_url, "model": answerer.model, "max_tokens": args.answer_max_tokens},
        "judge_endpoint": {"base_url": judge_url, "model": judge.model, "protocol": "mem0 LLM judge, CORRECT/WRONG"},
        "failures": failures,
        "load_average_1_5_15_min_at_end": [round(x, 2) for x in os.getloadavg()],
        **summarize(rows),
        "per_category": {f"{c} {locomo.CATEGORIES[c]}": summarize([r for r in rows if r["category"] == c])
                         for c in sorted({r["category"] for r in rows})},
        "splits": {name: summarize(part) for name, part in by_split.items() if part},
    }
    if args.details:
        out["rows"] = rows
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
