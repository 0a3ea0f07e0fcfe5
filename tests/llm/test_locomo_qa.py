"""``bench/locomo_qa.py``: the LoCoMo answer benchmark, end to end.

The main test runs the benchmark as a user would (a subprocess with its own
SQLite file) against the real llama.cpp server with SmolLM2-135M on two
questions of one conversation's first two sessions. It checks the pipeline:
every question got a context within its token budget, an answer and a judge
verdict, and the JSON carries F1, judge accuracy, tokens and latency. The
quality of a 135M model's answers and verdicts is not asserted.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bench.locomo_qa import normalize_answer, token_f1
from memory.core.chunking import estimate_tokens
from memory.dev import locomo

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "locomo_qa.py"
DATA = locomo.default_data_path()
needs_data = pytest.mark.skipif(not DATA.is_file(),
                                reason=f"LoCoMo data file not found at {DATA} (set OAM_LOCOMO_PATH)")


def run_bench(*args: str, timeout: float = 600) -> dict:
    """Run the benchmark in a subprocess; return its JSON (stdout). Fails with its stderr when it exits non-zero."""
    env = {**os.environ, "OAM_LOCOMO_PATH": str(DATA)}
    proc = subprocess.run([sys.executable, str(BENCH), *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


# --- scoring -------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "normal"), [
    ("The Shell-Necklace!", "shellnecklace"),
    ("A  cat, an owl and THE dog.", "cat owl and dog"),
    ("7 May 2023", "7 may 2023"),
    ("theatre", "theatre"),  # articles only as whole words
])
def test_normalize_answer(raw, normal):
    assert normalize_answer(raw) == normal


def test_token_f1():
    assert token_f1("A shell necklace", "shell necklace") == 1.0
    # 6 tokens after normalisation, 2 shared: precision 2/6, recall 1
    assert token_f1("she bought a shell necklace in Hawaii", "shell necklace") == pytest.approx(
        2 * (2 / 6) / (2 / 6 + 1))
    assert token_f1("a dog", "the cat") == 0.0
    assert token_f1("", "cat") == 0.0
    assert token_f1("the", "a") == 1.0  # both normalise to nothing
    assert token_f1("cat cat", "cat") == pytest.approx(2 * 0.5 * 1 / 1.5)  # a repeated token counts once per match


def test_bad_arguments_exit_with_usage():
    proc = subprocess.run([sys.executable, str(BENCH), "--questions", "0"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--questions must be >= 1" in proc.stderr


# --- end to end ------------------------------------------------------------------------------


def check_output(out: dict, *, questions: int, budget: int, categories: set[int]) -> None:
    """What every run must carry, whatever the model answered."""
    rows = out["rows"]
    assert out["questions"] == len(rows) == questions
    assert out["failures"] == {"answer": 0, "judge": 0}
    for row in rows:
        assert row["category"] in categories
        assert row["token_budget"] == budget
        assert row["context_tokens"] == estimate_tokens(row["context"]) <= budget
        assert row["answer_error"] is None and row["answer"].strip()
        assert row["judge_error"] is None and row["judge"] in ("CORRECT", "WRONG")
        assert row["f1"] == round(token_f1(row["answer"], row["gold"]), 4)
        assert row["answer_prompt_tokens"] > row["context_tokens"] // 2  # the endpoint's usage, context included
        assert row["answer_completion_tokens"] > 0 and row["judge_prompt_tokens"] > 0
        assert row["answer_ms"] > 0 and row["judge_ms"] > 0 and row["context_ms"] > 0
    f1s = [row["f1"] for row in rows]
    assert out["f1"]["n"] == questions and out["f1"]["mean"] == round(sum(f1s) / len(f1s), 3)
    correct = sum(row["judge"] == "CORRECT" for row in rows)
    assert out["judge_accuracy"]["n"] == questions and out["judge_accuracy"]["rate"] == round(correct / questions, 3)
    for name in ("context", "answer_prompt", "answer_completion", "judge_prompt", "judge_completion"):
        assert set(out["tokens"][name]) == {"p50", "p95", "mean", "n"}
    assert out["tokens"]["context"]["p95"] <= budget
    for name in ("context", "answer", "judge", "context_plus_answer"):
        assert out["latency_ms"][name]["p50"] > 0 and out["latency_ms"][name]["p95"] >= out["latency_ms"][name]["p50"]
    assert sum(part["questions"] for part in out["per_category"].values()) == questions
    assert sum(part["questions"] for part in out["splits"].values()) == questions


@needs_data
@pytest.mark.slow
def test_locomo_qa_on_the_local_model(local_llm_server, tmp_path):
    """Two questions of conv-26's first two sessions, search context, answered and judged by SmolLM2-135M."""
    budget = 300
    out = run_bench("--samples", "conv-26", "--sessions", "2", "--questions", "2", "--seed", "1",
                    "--token-budget", str(budget), "--answer-max-tokens", "24", "--details", "--quiet",
                    "--base-url", local_llm_server.base_url, "--model", local_llm_server.model,
                    "--db", str(tmp_path / "qa.sqlite3"))
    check_output(out, questions=2, budget=budget, categories={1, 2, 3, 4})
    assert out["context"]["kind"] == "search" and out["sessions_per_sample"] == 2
    sample = next(locomo.iter_samples(DATA, sample_ids=["conv-26"]))
    first_two = {t.dia_id for s in sample.sessions[:2] for t in s.turns}
    by_question = {q.question: q for q in sample.questions}
    for row in out["rows"]:
        question = by_question[row["question"]]
        assert question.resolves(first_two) and row["gold"] == question.answer  # only answerable questions
        assert row["context_records"] >= 1 and "<message>" in row["context"]
    # llama.cpp reports usage: real token counts, not zeros
    assert out["tokens"]["answer_prompt"]["p50"] > 0 and out["tokens"]["judge_completion"]["p50"] > 0


@needs_data
@pytest.mark.slow
def test_locomo_qa_card_context_leaves_no_thread(fake_openai, tmp_path):
    """``--context card`` builds a card per question in a thread of the user and deletes it afterwards."""

    def handler(body: dict) -> tuple[int, dict]:
        judged = body.get("response_format") is not None
        content = '{"label": "WRONG"}' if judged else "a shell necklace"
        return 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                  "finish_reason": "stop"}],
                     "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}}

    fake_openai.handler = handler
    db = tmp_path / "qa.sqlite3"
    out = run_bench("--samples", "conv-26", "--sessions", "1", "--questions", "2", "--context", "card",
                    "--token-budget", "200", "--details", "--quiet", "--base-url", fake_openai.base_url,
                    "--model", "fake", "--db", str(db))
    check_output(out, questions=2, budget=200, categories={1, 2, 3, 4})
    assert out["context"]["kind"] == "card"
    for row in out["rows"]:
        assert row["context"].startswith("<context_card>") and row["question"] in row["context"]
        assert row["judge"] == "WRONG" and row["answer"] == "a shell necklace"
    assert out["judge_accuracy"]["rate"] == 0.0
    answers = [r for r in fake_openai.requests if r.get("response_format") is None]
    assert len(answers) == 2 and all(r["temperature"] == 0 for r in answers)
    with sqlite3.connect(db) as conn:
        threads = [row[0] for row in conn.execute("SELECT id FROM oam_threads")]
        messages = conn.execute("SELECT COUNT(*) FROM oam_messages").fetchone()[0]
    sample = next(locomo.iter_samples(DATA, sample_ids=["conv-26"]))
    assert len(threads) == 1 and threads[0].endswith(":conv-26-s1")  # the question threads are gone
    assert messages == len(sample.sessions[0].turns)
