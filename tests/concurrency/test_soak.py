"""The short soak (issue #34): ``bench/extraction_soak.py`` with a few kills and a few dozen messages, on the
real Redis broker at 127.0.0.1:6379, worker units killed with SIGKILL and restarted, bounded in time. It runs
in a process of its own (its database is its own: the SQLite file ``var/bench-soak.sqlite3``, or on the
PostgreSQL pass a database of its own on the same server) and prints JSON; nothing may be lost, nothing
extracted twice, and every thread's watermark must reach its last message."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]

THREADS, CALLS = 3, 4  # 2 messages a call: 24 messages


@pytest.mark.slow
def test_a_short_soak_loses_nothing_and_extracts_each_message_once():
    database = "postgres" if connection.vendor == "postgresql" and os.environ.get("OAM_DATABASE_URL") else "sqlite"
    done = subprocess.run(
        [sys.executable, "bench/extraction_soak.py", "--threads", str(THREADS), "--calls", str(CALLS),
         "--workers", "2", "--kills", "4", "--kill-every", "2.5", "--llm-delay", "0.2", "--deadline", "150",
         "--database", database],
        cwd=ROOT, capture_output=True, text=True, timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    sent = THREADS * CALLS * 2
    assert result["database"] == database
    assert result["kills"] >= 2 and result["restarts"] >= 1, result
    assert result["messages_sent"] == result["messages_stored"] == sent, result
    assert result["all_watermarks_at_last_message"], result["threads_behind"]
    assert result["messages_with_a_memory"] == sent, result
    assert result["messages_extracted_twice"] == 0, result
