#!/usr/bin/env python
"""Benchmark: add_messages throughput with 1, 2 and 4 server processes, PostgreSQL against SQLite, in one run.

    .venv/bin/python bench/add_messages_scale.py [--processes 1 2 4] [--clients 16] [--seconds 15] [--warmup 3]
        [--rounds 2] [--pgdata DIR]

Two databases, each fresh: SQLite (``var/bench-add-messages/oam.sqlite3``, WAL:
one writer at a time, every process waits on the file's write lock) and
PostgreSQL (a database ``throughput`` on the benchmark's own embedded
PostgreSQL 18, ``memory.dev.postgres_server.embedded_postgres`` in ``--pgdata``,
default ``var/pgbench``, on a Unix socket; row locks, many writers). Per
database, ``max(--processes)`` daphne processes (``python -m oam_site.serve -p 0``,
what ``make serve`` runs; as bench/api_load.py starts them), each on its own
port: a cell of P processes sends the clients evenly to the first P (no
SO_REUSEPORT in daphne; a load balancer would do the same). Settings as
served: the default embedder (all-MiniLM-L6-v2, each process embeds its own
messages), no LLM (no extraction), no rate limit, the embedded worker off,
``CONN_MAX_AGE`` 0 (a database connection per request, the setting's default).

A cell: ``--clients`` concurrent clients, each on its own keep-alive
connection and its own thread (so no two wait on one thread's row lock),
``POST /api/threads/{id}/messages`` with one LoCoMo turn, again and again;
``--warmup`` seconds unrecorded, then ``--seconds`` recorded (requests that start
in the window). Each round measures every (processes, database) cell, the two
databases back to back for the same P, the order flipped every round, so a
drift in the machine's load (shared by other work) hits both alike.

``--embedder hash`` swaps the model for ``bench.hash_embedder.HashEmbedder`` (feature hashing, next to no
CPU): the same requests then measure the write path (HTTP, services, database) without the forward pass,
which is where the single writer and the connection per request show.

Prints one JSON object: per cell, messages/s (median of the rounds, and each
round's), p50/p95 latency over all rounds, non-2xx count; per P, the
PostgreSQL/SQLite ratio of messages/s. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import percentile  # noqa: E402
from bench.api_load import Connection, Server, bench_env, load_turns  # noqa: E402  (plain Python: no Django here)
from memory.dev.postgres_server import recreate_database  # noqa: E402

VAR = ROOT / "var" / "bench-add-messages"
DATABASES = ("sqlite", "postgresql")


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


EMBEDDERS = {"minilm": "memory.embedders.MiniLMEmbedder", "hash": "bench.hash_embedder.HashEmbedder"}


def server_env(database: str, url: str, embedder: str = "minilm") -> dict[str, str]:
    """The environment of every server and manage.py run on ``database``."""
    return bench_env(VAR, "add-messages", OAM_DATABASE_URL=url if database == "postgresql" else "",
                     OAM_EMBEDDER=EMBEDDERS[embedder])


def manage(env: dict[str, str], *args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True, stdin=subprocess.DEVNULL).stdout


async def make_threads(port: int, key: str, count: int) -> list[str]:
    """``count`` new threads, one per client."""
    connection = Connection(port, key)
    ids = []
    for i in range(count):
        status, body = await connection.request("POST", "/api/threads", {"user_id": f"bench-u{i}",
                                                                          "agent_id": "bench-agent"})
        assert status == 201, body
        ids.append(json.loads(body)["thread_id"])
    await connection.close()
    return ids


async def warm(ports: list[int], key: str, thread_id: str) -> None:
    """One add_messages per server: each loads its embedder before any clock."""
    for port in ports:
        connection = Connection(port, key)
        status, body = await connection.request("POST", f"/api/threads/{thread_id}/messages",
                                                {"messages": [{"role": "user", "content": "warming up"}]})
        assert status == 201, (status, body[:300])
        await connection.close()


async def run_cell(ports: list[int], key: str, threads: list[str], turns: list[dict], *, warmup: float,
                   seconds: float) -> dict:
    """One client per thread for ``warmup`` + ``seconds``; latencies of the requests started in the window."""
    latencies: list[float] = []
    errors = 0
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    end = start + seconds

    async def client(index: int) -> None:
        nonlocal errors
        connection = Connection(ports[index % len(ports)], key)
        step = index
        try:
            while (began := loop.time()) < end:
                turn = turns[(index * 7919 + step) % len(turns)]
                step += 1
                try:
                    status, _ = await connection.request(
                        "POST", f"/api/threads/{threads[index]}/messages",
                        {"messages": [{"role": turn["role"], "content": turn["content"]}]})
                except (ConnectionError, asyncio.IncompleteReadError, OSError):
                    status = 0
                    await connection.close()
                if began >= start:
                    latencies.append((loop.time() - began) * 1000)
                    errors += not 200 <= status < 300
        finally:
            await connection.close()

    await asyncio.gather(*(client(i) for i in range(len(threads))))
    return {"messages": len(latencies), "messages_per_s": round(len(latencies) / seconds, 1),
            "latencies_ms": latencies, "errors": errors}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients, each on its own thread")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per cell and round")
    parser.add_argument("--warmup", type=float, default=3.0, help="unrecorded seconds before each cell")
    parser.add_argument("--rounds", type=int, default=2, help="each round measures every cell; the order flips")
    parser.add_argument("--pgdata", type=Path, default=ROOT / "var" / "pgbench",
                        help="the embedded PostgreSQL's data folder (the benchmark's own)")
    parser.add_argument("--embedder", choices=sorted(EMBEDDERS), default="minilm",
                        help="hash: bench.hash_embedder.HashEmbedder, no model (the write path alone)")
    args = parser.parse_args(argv)
    from memory.dev.postgres_server import embedded_postgres

    shutil.rmtree(VAR, ignore_errors=True)
    VAR.mkdir(parents=True)
    started = time.monotonic()
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    turns = [t for batch in load_turns(1, 1) for t in batch]
    cells: dict[tuple[str, int], list[dict]] = {}
    servers: dict[tuple[str, int], Server] = {}
    with embedded_postgres(args.pgdata, database="throughput") as url:
        recreate_database(url)
        envs = {database: server_env(database, url, args.embedder) for database in DATABASES}
        keys, threads = {}, {}
        try:
            for database in DATABASES:
                log(f"{database}: migrating")
                manage(envs[database], "migrate", "--noinput", "-v0")
                keys[database] = re.findall(r"\S{32,}", manage(envs[database], "create_api_key", "bench"))[-1]
                for n in range(1, max(args.processes) + 1):
                    servers[database, n] = Server(f"{database}-{n}", envs[database], log_dir=VAR)
            for server in servers.values():
                server.wait(timeout=300)
            log("servers:", {f"{d}-{n}": s.port for (d, n), s in servers.items()})
            for database in DATABASES:
                ports = [servers[database, n].port for n in range(1, max(args.processes) + 1)]
                threads[database] = asyncio.run(make_threads(ports[0], keys[database], args.clients))
                asyncio.run(warm(ports, keys[database], threads[database][0]))
            for round_number in range(args.rounds):
                order = DATABASES if round_number % 2 == 0 else DATABASES[::-1]
                for processes in args.processes:
                    for database in order:
                        ports = [servers[database, n].port for n in range(1, processes + 1)]
                        sample = asyncio.run(run_cell(ports, keys[database], threads[database], turns,
                                                      warmup=args.warmup, seconds=args.seconds))
                        cells.setdefault((database, processes), []).append(sample)
                        log(f"round {round_number + 1} {database:10} processes={processes}: "
                            f"{sample['messages_per_s']} messages/s, errors {sample['errors']}")
        finally:
            for server in servers.values():
                server.stop()

    report = {
        "benchmark": "add_messages_scale", "command": "bench/add_messages_scale.py " + " ".join(argv or sys.argv[1:]),
        "databases": {"sqlite": "var/bench-add-messages/oam.sqlite3 (WAL, one writer)",
                      "postgresql": "embedded PostgreSQL 18.3 + pgvector 0.8.2, Unix socket, CONN_MAX_AGE 0"},
        "request": "POST /api/threads/{id}/messages, one LoCoMo turn, one client per thread",
        "embedder": EMBEDDERS[args.embedder] + " in every server process" + (
            " (all-MiniLM-L6-v2, the default)" if args.embedder == "minilm" else " (no model: the write path alone)"),
        "processes": "daphne processes on their own ports, clients split evenly (no SO_REUSEPORT)",
        "clients": args.clients, "seconds_per_cell": args.seconds, "warmup_seconds": args.warmup,
        "rounds": args.rounds, "cpu_count": os.cpu_count(), "load_average_at_start": load_at_start,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "total_seconds": round(time.monotonic() - started, 1), "cells": [], "postgresql_vs_sqlite": [],
    }
    for processes in args.processes:
        rates = {}
        for database in DATABASES:
            samples = cells[database, processes]
            values = [v for s in samples for v in s["latencies_ms"]]
            rates[database] = statistics.median(s["messages_per_s"] for s in samples)
            report["cells"].append({
                "database": database, "processes": processes, "messages_per_s": round(rates[database], 1),
                "messages_per_s_by_round": [s["messages_per_s"] for s in samples],
                "p50_ms": round(percentile(values, 0.5), 1) if values else None,
                "p95_ms": round(percentile(values, 0.95), 1) if values else None,
                "errors": sum(s["errors"] for s in samples)})
        report["postgresql_vs_sqlite"].append({
            "processes": processes,
            "messages_per_s_ratio": round(rates["postgresql"] / rates["sqlite"], 3) if rates["sqlite"] else None})
    return report


if __name__ == "__main__":
    print(json.dumps(main()))
