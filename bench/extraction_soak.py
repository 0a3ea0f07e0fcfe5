"""Kill -9 soak of background extraction on the Redis broker; prints JSON.

Everything runs on 127.0.0.1 and ends by itself: a fresh SQLite file
``var/bench-soak.sqlite3`` (``--database postgres``: a database of its own, ``oam_soak``, recreated on the
server of ``OAM_DATABASE_URL``); Dramatiq on the Redis server at
``--redis`` (default ``redis://127.0.0.1:6379/0``) under a namespace of its own
(its keys are deleted at the end); a scripted OpenAI-compatible LLM
(``tests.browser.harness.ScriptedLlmServer``, one memory per message, each
answer after ``--llm-delay`` seconds) so that kills land inside jobs; and
``--workers`` worker units, each ``manage.py rundramatiq --processes 1
--threads 2`` as in ``deploy/systemd/oam-worker@.service``, kept running by a
loop here that restarts an exited one after ``RESTART_SECONDS`` (what
``Restart=always`` / ``RestartSec`` do under systemd).

While ``--threads`` threads each receive ``--calls`` ``add_messages`` calls
(BACKGROUND extraction, queued to Redis by this process), a worker is killed
with SIGKILL every ``--kill-every`` seconds, ``--kills`` times: alternately its
whole process group (the unit dies) and only its Dramatiq worker process (the
unit's main process then exits, "exited unexpectedly"). The sweep runs every
2 s in each worker and gives a killed worker's jobs to others after
``OAM_EXTRACTION_STALE_SECONDS`` (5 here).

Reported: kills and restarts, seconds from the last kill until every thread's
watermark is at its last message (``--deadline`` bounds the wait), threads
that did not get there, jobs by status, memories per message (more than one
would be a double extraction), and whether every message is still stored.

    .venv/bin/python bench/extraction_soak.py [--threads 6 --calls 8 --workers 2 --kills 8 --kill-every 3]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DB_PATH = ROOT / "var" / "bench-soak.sqlite3"
RESTART_SECONDS = 1.0


def _environment(redis_url: str, namespace: str, llm_url: str, database_url: str | None = None) -> dict[str, str]:
    """The workers' and this process's settings: the soak's own database (``database_url``, a PostgreSQL
    database of its own; else the SQLite file ``DB_PATH``), the Redis broker under ``namespace``, the scripted
    LLM at ``llm_url``, and short sweep, stale and resend intervals."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "oam_site.settings",
        **({"OAM_DATABASE_URL": database_url} if database_url else {"OAM_SQLITE_PATH": str(DB_PATH)}),
        "OAM_DRAMATIQ_BROKER_URL": redis_url,
        "OAM_DRAMATIQ_NAMESPACE": namespace,
        "OAM_LLM_BASE_URL": llm_url,
        "OAM_LLM_MODEL": "scripted",
        "OAM_LLM_TIMEOUT": "30",
        "OAM_EXTRACTION_SWEEP_SECONDS": "2",
        "OAM_EXTRACTION_STALE_SECONDS": "5",
        "OAM_EXTRACTION_RESEND_SECONDS": "3",
        "OAM_EXTRACTION_TIME_LIMIT": "60",
        # every candidate is new (no duplicate or relation checks: no distance is below 0), so each message
        # gets exactly one memory and a second one would show a double extraction. 0 is the settings' floor
        # (memory.core.conf); -1 was refused by the settings check, so the workers never started.
        "OAM_EXTRACTION_DUPLICATE_DISTANCE": "0",
        "OAM_EXTRACTION_RELATED_DISTANCE": "0",
        "PYTHONUNBUFFERED": "1",
    })
    return env


class Unit:
    """One worker unit: ``rundramatiq`` in its own process group, restarted after it exits."""

    def __init__(self, index: int, env: dict[str, str], log_dir: Path):
        self.index, self.env, self.log_path = index, env, log_dir / f"worker-{index}.log"
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.exit_codes: list[int] = []

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "manage.py", "rundramatiq", "--processes", "1", "--threads", "2"],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        self.starts += 1

    def children(self) -> list[int]:
        """Pids of the unit's Dramatiq worker processes (children of its main process), from ``/proc``."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == self.process.pid:  # field 4 of stat: the parent's pid
                found.append(int(stat.parent.name))
        return found

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
            except ProcessLookupError:
                pass


def _supervise(units: list[Unit], stop: threading.Event) -> None:
    """Restart a unit RESTART_SECONDS after its main process exits (systemd's Restart=always)."""
    while not stop.wait(0.2):
        for unit in units:
            if unit.process.poll() is not None:
                unit.exit_codes.append(unit.process.returncode)
                try:
                    os.killpg(unit.process.pid, signal.SIGKILL)  # what KillMode=mixed leaves behind
                except ProcessLookupError:
                    pass
                time.sleep(RESTART_SECONDS)
                if not stop.is_set():
                    unit.start()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--calls", type=int, default=8, help="add_messages calls per thread (2 messages each)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kills", type=int, default=8)
    parser.add_argument("--kill-every", type=float, default=3.0, help="seconds between kills")
    parser.add_argument("--llm-delay", type=float, default=0.3, help="seconds before each LLM answer")
    parser.add_argument("--deadline", type=float, default=180.0, help="seconds to wait for the watermarks")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite",
                        help="postgres: a database of its own, oam_soak, recreated on the server of "
                             "OAM_DATABASE_URL (default: the SQLite file var/bench-soak.sqlite3)")
    args = parser.parse_args(argv)
    database_url = None
    if args.database == "postgres":
        if not os.environ.get("OAM_DATABASE_URL"):
            parser.error("--database postgres needs OAM_DATABASE_URL (python -m memory.dev.postgres_server -- ...)")
        sys.path.insert(0, str(ROOT))
        from memory.dev.postgres_server import fresh_database

        database_url = fresh_database(os.environ["OAM_DATABASE_URL"], "oam_soak")
    if not args.redis.startswith("redis://127.0.0.1"):
        parser.error("--redis must be on 127.0.0.1")

    sys.path.insert(0, str(ROOT))
    from tests.browser.harness import ScriptedLlmServer

    rng = random.Random(args.seed)
    namespace = f"oam-soak-{os.getpid()}"
    llm = ScriptedLlmServer(delay=args.llm_delay).start()
    env = _environment(args.redis, namespace, llm.base_url, database_url)
    os.environ.update(env)
    DB_PATH.parent.mkdir(parents=True, exist_ok=True)
    if database_url is None:  # the SQLite file (a PostgreSQL run leaves another run's file alone)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{DB_PATH}{suffix}").unlink(missing_ok=True)
    log_dir = ROOT / "var" / "bench-soak-logs"
    log_dir.mkdir(parents=True, exist_ok=True)

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.db.models import Count, Max

    from memory.client import AgentMemory, MemoryExtractionConfig
    from memory.embedders import get_embedder
    from memory.models import ExtractionJob, Memory, Message, Thread
    from memory.tasks import extract_job

    call_command("migrate", verbosity=0, interactive=False)
    get_embedder().embed(["warm up"])
    units = [Unit(i, env, log_dir) for i in range(1, args.workers + 1)]
    stop = threading.Event()
    supervisor = threading.Thread(target=_supervise, args=(units, stop), daemon=True)
    result: dict = {"database": args.database, "threads": args.threads, "calls_per_thread": args.calls,
                    "workers": args.workers,
                    "broker": "redis (127.0.0.1)", "llm_delay_s": args.llm_delay}
    try:
        for unit in units:
            unit.start()
        supervisor.start()
        config = MemoryExtractionConfig(extraction_mode="background", enable_context_summary=False)
        client = AgentMemory()
        handles = [client.create_thread(thread_id=f"soak-{t}", user_id=f"u{t}", agent_id="a",
                                        memory_extraction_config=config) for t in range(args.threads)]

        load_errors: list[str] = []

        def load() -> None:
            try:
                for call in range(args.calls):
                    for t, handle in enumerate(handles):
                        handle.add_messages([{"role": "user", "content": f"Thread {t} call {call} fact {k}: "
                                                                          f"the code word is w{t}x{call}x{k}."}
                                             for k in range(2)])
                    time.sleep(0.2)
            except Exception as exc:  # reported, and the run fails: a soak that sent nothing proves nothing
                load_errors.append(repr(exc))
                raise
            finally:
                connection.close()

        started = time.monotonic()
        loader = threading.Thread(target=load)
        loader.start()
        kills = []
        for n in range(args.kills):
            time.sleep(args.kill_every)
            booted = [(unit, children) for unit in units if (children := unit.children())]
            if n % 2 == 1 and booted:
                unit, children = rng.choice(booted)
                os.kill(children[0], signal.SIGKILL)
                kills.append({"unit": unit.index, "what": "worker process"})
            else:
                unit = rng.choice(units)
                try:
                    os.killpg(unit.process.pid, signal.SIGKILL)
                except ProcessLookupError:  # the unit is down, between its exit and its restart: not a kill
                    continue
                kills.append({"unit": unit.index, "what": "process group"})
        loader.join()
        if load_errors:
            result["load_error"] = load_errors[0]
        last_kill = time.monotonic()
        result["load_seconds"] = round(last_kill - started, 1)

        # Stored thread keys (a thread's public id is not its primary key), and the last sequence number as the
        # database has it now (a handle's row was read before the load).
        expected = {pk: next_seq - 1 for pk, next_seq in Thread.objects.filter(
            pk__in=[t.row.pk for t in handles]).values_list("pk", "next_seq")}
        deadline = last_kill + args.deadline
        while time.monotonic() < deadline:
            marks = dict(Thread.objects.filter(pk__in=expected).values_list("pk", "extracted_through_seq"))
            if all(marks[t] == last for t, last in expected.items()):
                break
            time.sleep(0.5)
        converged = time.monotonic()
        marks = dict(Thread.objects.filter(pk__in=expected).values_list("pk", "extracted_through_seq"))
        per_message = collections.Counter(
            source for ids in Memory.objects.values_list("source_message_ids", flat=True) for source in ids)
        stored = Message.objects.count()
        result.update({
            "kills": len(kills),
            "kills_by_kind": dict(collections.Counter(k["what"] for k in kills)),
            "restarts": sum(u.starts - 1 for u in units),
            "unit_exit_codes": sorted({code for u in units for code in u.exit_codes}),
            "seconds_to_converge_after_load": round(converged - last_kill, 1),
            "all_watermarks_at_last_message": all(marks[t] == last for t, last in expected.items()),
            "threads_behind": {t: {"watermark": marks[t], "last": last}
                               for t, last in expected.items() if marks[t] != last},
            "messages_sent": sum(expected.values()),
            "messages_stored": stored,
            "jobs_by_status": dict(ExtractionJob.objects.values_list("status").annotate(n=Count("id"))),
            "max_job_attempts": ExtractionJob.objects.aggregate(m=Max("attempts"))["m"],
            "messages_with_a_memory": len(per_message),
            "messages_extracted_twice": sum(1 for n in per_message.values() if n > 1),
            "llm_requests": len(llm.requests),
        })
    finally:
        stop.set()
        for unit in units:
            unit.stop()
        llm.stop()
        broker = extract_job.broker
        client_ = getattr(broker, "client", None)
        if client_ is not None:
            for key in client_.scan_iter(f"{namespace}*"):
                client_.delete(key)
    print(json.dumps(result, indent=2))
    if result.get("load_error") or not result.get("messages_sent"):
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
