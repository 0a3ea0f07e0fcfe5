#!/usr/bin/env python
"""Benchmark: the API's async views against the same operations as sync views, side by side in one run.

    .venv/bin/python bench/api_load.py [--clients 16 64] [--processes 1 2] [--seconds 8] [--warmup 2] [--rounds 2]

Async views. Two kinds of server, both ``python -m oam_site.serve``
(daphne, what ``make serve`` runs) on 127.0.0.1 over one fresh SQLite file,
``var/bench-api-load/oam.sqlite3`` (removed at the start, left afterwards):

* ``async``: the API as it is served, ``async def`` operations awaiting the
  client's ``_async`` methods (``threads.api``);
* ``sync``: ``OAM_API_SYNC=true``, the same operations mounted as sync views
  (``oam_site.api.api_urls``): Django runs each request's whole operation in
  one worker thread, as the views did before they were async.

Both share everything else (middleware, auth, services), so what differs is
how a request's operation runs: on the event loop with hops to its worker
thread, or in that thread from start to end.

Both run with the project's default embedder (all-MiniLM-L6-v2 through
sentence-transformers, offline), no LLM (so no extraction; context cards use
the transcript summary), no rate limit (``OAM_API_RATE_LIMIT=0``) and the
embedded worker off. Each kind has two daphne processes on two ports: a
"1 process" cell sends every client to the first, a "2 processes" cell splits
the clients evenly between both (two ports, not one port shared with
SO_REUSEPORT: daphne has no option for it).

Seeding (through the API, before any clock): ``--threads`` threads of LoCoMo
turns (``--seed-messages`` each). A cell is one (kind, clients, processes):
``clients`` concurrent clients, each on its own keep-alive connection and its
own thread, loop over the operations in turn: ``add_messages`` (one message),
``get_thread``, ``list_messages`` (``limit=20``), ``search`` (from the thread,
5 results) and ``context_card``. ``--warmup`` seconds are not recorded, then
``--seconds`` are: every request that starts in the window counts. Each round
measures every cell, sync and async back to back for the same clients and
processes, the order flipped every round (sync first, then async first), so
a drift in the machine's load hits both alike.

Prints one JSON object on stdout: per cell, requests/s (median of the rounds,
and each round's) and p50/p95 milliseconds per operation over all rounds, the
non-2xx count, and per (clients, processes) the async/sync ratios of
requests/s and of each operation's p95. Progress goes to stderr.
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
sys.path.insert(0, str(ROOT))

from memory.dev import locomo  # noqa: E402  (plain Python: no Django, no model in this process)

VAR = ROOT / "var" / "bench-api-load"
OPERATIONS = ("add_messages", "get_thread", "list_messages", "search", "context_card")
QUERIES = ("what does she like to do on weekends?", "where did they travel last summer?",
           "which books were mentioned?", "how does he feel about his new job?")


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# --- the servers --------------------------------------------------------------------------------------


def bench_env(var: Path, name: str, **settings: str) -> dict[str, str]:
    """The environment of a benchmark's servers and manage.py runs: this process's without any ``OAM_``/``DJANGO_``
    variable, the SQLite file ``var/oam.sqlite3`` (no PostgreSQL, no Oracle, even when ``.env`` names one), no
    LLM, no rate limit, the embedded worker off; then ``settings`` (e.g. ``OAM_DATABASE_URL``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
    env.update({
        "DJANGO_SETTINGS_MODULE": "oam_site.settings",
        "DJANGO_SECRET_KEY": f"bench-{name}-not-a-secret",
        "OAM_VAR_DIR": str(var),
        "OAM_SQLITE_PATH": str(var / "oam.sqlite3"),
        "OAM_DATABASE_URL": "",
        "OAM_ORACLE_DSN": "",
        "OAM_LLM_BASE_URL": "",
        "OAM_API_RATE_LIMIT": "0",
        "OAM_EMBEDDED_WORKER": "false",
        "PYTHONUNBUFFERED": "1",
        **settings,
    })
    return env


def server_env(sync: bool) -> dict[str, str]:
    return bench_env(VAR, "api-load", OAM_API_SYNC="true" if sync else "false")


def manage(*args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=server_env(False),
                          capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL).stdout


class Server:
    """One daphne process (``python -m oam_site.serve -p 0``); ``port`` once ``wait()`` returned."""

    def __init__(self, name: str, env: dict[str, str], *, log_dir: Path = VAR):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "oam_site.serve", "-b", "127.0.0.1", "-p", "0", "oam_site.asgi:application"],
            cwd=ROOT, env=env, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        self.port = 0

    def wait(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while not (
            found := re.search(r"ready on http://127\.0\.0\.1:(\d+)", self.log_path.read_text(errors="replace"))
        ):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start:\n{self.log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        self.port = int(found[1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


# --- a small HTTP/1.1 keep-alive client (the load generator must stay cheap: it shares the 2 cores) --------


class Connection:
    """One keep-alive connection to 127.0.0.1:``port``; ``request`` returns (status, body bytes)."""

    def __init__(self, port: int, key: str):
        self.port, self.key = port, key
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: dict | None = None,
                      headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        data = b"" if body is None else json.dumps(body).encode()
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {self.key}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{extra}\r\n")
        self.writer.write(head.encode() + data)
        status_line = await self.reader.readline()
        if not status_line:
            await self.close()
            raise ConnectionError("the server closed the connection")
        status, length, close = int(status_line.split()[1]), 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
            elif name.lower() == "connection" and value.strip().lower() == "close":
                close = True
        payload = await self.reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return status, payload

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


def operation_request(op: str, thread_id: str, turn: dict) -> tuple[str, str, dict | None]:
    base = f"/api/threads/{thread_id}"
    if op == "add_messages":
        return "POST", f"{base}/messages", {"messages": [{"role": turn["role"], "content": turn["content"]}]}
    if op == "get_thread":
        return "GET", base, None
    if op == "list_messages":
        return "GET", f"{base}/messages?limit=20", None
    if op == "search":
        return "POST", f"{base}/search", {"query": QUERIES[len(turn["content"]) % len(QUERIES)], "max_results": 5}
    return "POST", f"{base}/context-card", {"max_relevant_results": 3, "max_recent_messages": 5}


async def run_cell(ports: list[int], key: str, threads: list[str], turns: list[dict], *, clients: int,
                   warmup: float, seconds: float) -> dict:
    """``clients`` clients for ``warmup`` + ``seconds`` seconds; latencies of the requests started in the window."""
    latencies = {op: [] for op in OPERATIONS}
    errors = {op: 0 for op in OPERATIONS}
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    end = start + seconds

    async def client(index: int) -> None:
        connection = Connection(ports[index % len(ports)], key)
        thread_id = threads[index % len(threads)]
        step = index  # clients start at different operations
        try:
            while (began := loop.time()) < end:
                op = OPERATIONS[step % len(OPERATIONS)]
                method, path, body = operation_request(op, thread_id, turns[(index * 7919 + step) % len(turns)])
                step += 1
                try:
                    status, _ = await connection.request(method, path, body)
                except (ConnectionError, asyncio.IncompleteReadError, OSError):
                    status = 0
                    await connection.close()
                if began >= start:
                    latencies[op].append((loop.time() - began) * 1000)
                    if not 200 <= status < 300:
                        errors[op] += 1
        finally:
            await connection.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    done = sum(len(v) for v in latencies.values())
    return {"requests": done, "req_per_s": round(done / seconds, 1), "latencies_ms": latencies, "errors": errors}


# --- setup, rounds and the report -------------------------------------------------------------------------


def load_turns(threads: int, per_thread: int) -> list[list[dict]]:
    """``threads`` lists of ``per_thread`` LoCoMo turns (``{"role", "content"}``), from the sessions in file order."""
    turns = [{"role": m["role"], "content": m["content"]}
             for sample in locomo.iter_samples()
             for session in sample.sessions
             for m in locomo.session_messages(sample.sample_id, session)]
    needed = threads * per_thread
    if len(turns) < needed:
        raise SystemExit(f"LoCoMo holds {len(turns)} turns; {needed} needed")
    return [turns[i * per_thread:(i + 1) * per_thread] for i in range(threads)] + [turns[needed:]]


async def seed(port: int, key: str, batches: list[list[dict]]) -> list[str]:
    connection = Connection(port, key)
    thread_ids = []
    for i, batch in enumerate(batches):
        status, body = await connection.request("POST", "/api/threads", {"user_id": f"bench-u{i % 8}",
                                                                          "agent_id": "bench-agent"})
        assert status == 201, body
        thread_id = json.loads(body)["thread_id"]
        status, body = await connection.request("POST", f"/api/threads/{thread_id}/messages", {"messages": batch})
        assert status == 201, body
        thread_ids.append(thread_id)
    await connection.close()
    return thread_ids


async def warm(port: int, key: str, thread_id: str) -> None:
    """One request of each operation: the server loads its embedder and vector cache before any clock."""
    connection = Connection(port, key)
    for op in OPERATIONS:
        status, body = await connection.request(*operation_request(op, thread_id, {"role": "user", "content": "hi"}))
        assert 200 <= status < 300, (op, status, body[:300])
    await connection.close()


def summarize(samples: list[dict]) -> dict:
    """One cell over its rounds: req/s (median, per round), p50/p95 per operation, errors."""
    ops = {}
    for op in OPERATIONS:
        values = [v for s in samples for v in s["latencies_ms"][op]]
        ops[op] = {"n": len(values), "p50_ms": round(percentile(values, 0.5), 1) if values else None,
                   "p95_ms": round(percentile(values, 0.95), 1) if values else None,
                   "errors": sum(s["errors"][op] for s in samples)}
    rates = [s["req_per_s"] for s in samples]
    return {"req_per_s": round(statistics.median(rates), 1), "req_per_s_by_round": rates, "operations": ops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2], choices=[1, 2])
    parser.add_argument("--seconds", type=float, default=8.0, help="measured seconds per cell and round")
    parser.add_argument("--warmup", type=float, default=2.0, help="unrecorded seconds before each cell")
    parser.add_argument("--rounds", type=int, default=2, help="each round measures every cell; the order flips")
    parser.add_argument("--threads", type=int, default=32, help="threads seeded (clients share them beyond)")
    parser.add_argument("--seed-messages", type=int, default=20, help="LoCoMo turns seeded in each thread")
    args = parser.parse_args()

    shutil.rmtree(VAR, ignore_errors=True)
    VAR.mkdir(parents=True)
    started = time.monotonic()
    log("migrating", VAR / "oam.sqlite3")
    manage("migrate", "--noinput", "-v0")
    key = re.findall(r"\S{32,}", manage("create_api_key", "bench-api-load"))[-1]
    *batches, spare = load_turns(args.threads, args.seed_messages)

    servers = {(kind, n): Server(f"{kind}-{n}", server_env(kind == "sync")) for kind in ("sync", "async")
               for n in (1, 2)}
    try:
        for server in servers.values():
            server.wait()
        log("servers:", {f"{kind}-{n}": s.port for (kind, n), s in servers.items()})
        thread_ids = asyncio.run(seed(servers["async", 1].port, key, batches))
        log(f"seeded {len(thread_ids)} threads x {args.seed_messages} turns in {time.monotonic() - started:.0f} s")
        for server in servers.values():
            asyncio.run(warm(server.port, key, thread_ids[0]))

        cells: dict[tuple[str, int, int], list[dict]] = {}
        for round_number in range(args.rounds):
            kinds = ("sync", "async") if round_number % 2 == 0 else ("async", "sync")
            for clients in args.clients:
                for processes in args.processes:
                    for kind in kinds:
                        ports = [servers[kind, n].port for n in range(1, processes + 1)]
                        sample = asyncio.run(run_cell(ports, key, thread_ids, spare, clients=clients,
                                                      warmup=args.warmup, seconds=args.seconds))
                        cells.setdefault((kind, clients, processes), []).append(sample)
                        log(f"round {round_number + 1} {kind:5} clients={clients:3} processes={processes}: "
                            f"{sample['req_per_s']} req/s, errors {sum(sample['errors'].values())}")
    finally:
        for server in servers.values():
            server.stop()

    report = {
        "command": "bench/api_load.py " + " ".join(sys.argv[1:]),
        "database": str((VAR / "oam.sqlite3").relative_to(ROOT)),
        "embedder": "memory.embedders.MiniLMEmbedder (all-MiniLM-L6-v2, the default)",
        "two_processes": "two daphne processes on two ports, clients split evenly (no SO_REUSEPORT)",
        "operations": list(OPERATIONS),
        "seconds_per_cell": args.seconds, "warmup_seconds": args.warmup, "rounds": args.rounds,
        "threads": args.threads, "seed_messages_per_thread": args.seed_messages,
        "cpu_count": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "total_seconds": round(time.monotonic() - started, 1),
        "cells": [], "async_vs_sync": [],
    }
    for clients in args.clients:
        for processes in args.processes:
            pair = {}
            for kind in ("sync", "async"):
                pair[kind] = summarize(cells[kind, clients, processes])
                report["cells"].append({"views": kind, "clients": clients, "processes": processes, **pair[kind]})
            report["async_vs_sync"].append({
                "clients": clients, "processes": processes,
                "req_per_s_ratio": round(pair["async"]["req_per_s"] / pair["sync"]["req_per_s"], 3),
                "p95_ratio": {op: round(pair["async"]["operations"][op]["p95_ms"]
                                        / pair["sync"]["operations"][op]["p95_ms"], 3) for op in OPERATIONS},
            })
    print(json.dumps(report))


if __name__ == "__main__":
    main()
