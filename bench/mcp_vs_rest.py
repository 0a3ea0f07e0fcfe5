#!/usr/bin/env python
"""Benchmark: the MCP path (``/mcp``, tools/call) against the REST path (``/api``) for the same calls, in one run.

    .venv/bin/python bench/mcp_vs_rest.py [--clients 1 8] [--seconds 6] [--warmup 1] [--rounds 2]

One daphne (``python -m oam_site.serve``, what ``make serve`` runs) on 127.0.0.1 over a fresh SQLite file,
``var/bench-mcp-vs-rest/oam.sqlite3`` (removed at the start, left afterwards), with the default embedder
(all-MiniLM-L6-v2), no LLM, no rate limit, the embedded worker off (``bench.api_load.bench_env``). Seeded
through REST before any clock: ``--threads`` threads of ``--seed-messages`` LoCoMo turns each.

Two operations, each made both ways with the same arguments:

* ``search``: ``POST /api/threads/{id}/search`` ``{"query", "max_results": 5}`` against MCP ``tools/call``
  ``search`` ``{"thread_id", "query", "max_results": 5}``;
* ``add_messages``: ``POST /api/threads/{id}/messages`` (one LoCoMo turn) against ``tools/call``
  ``add_messages``.

An MCP request is what the official ``mcp`` 2.x client sends as a 2026-07-28 client (captured on the wire):
``MCP-Protocol-Version: 2026-07-28``, ``Mcp-Method``, ``Mcp-Name``, the request's ``_meta`` envelope; its
answer is one JSON body. A tool error (``isError``) or a JSON-RPC error counts as an error, as a non-2xx does
on REST. The load generator is plain HTTP/1.1 keep-alive on asyncio (``bench.api_load.Connection``), so the
client side costs the same both ways. A cell is (path, operation, clients): ``--warmup`` unrecorded
seconds, then ``--seconds`` recorded; each round measures every cell, REST and MCP back to back, the order
flipped every round.

Prints one JSON object on stdout: per cell requests/s (median of the rounds) and p50/p95 milliseconds, and
per (operation, clients) the MCP overhead: p50 difference in ms, and the ratios of p50 and of requests/s.
Progress goes to stderr.
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

from bench.api_load import Connection, Server, bench_env, load_turns, log, percentile, seed  # noqa: E402

VAR = ROOT / "var" / "bench-mcp-vs-rest"
OPERATIONS = ("search", "add_messages")
PATHS = ("rest", "mcp")
QUERIES = ("what does she like to do on weekends?", "where did they travel last summer?",
           "which books were mentioned?", "how does he feel about his new job?")
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
MCP_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}


def env() -> dict[str, str]:
    return bench_env(VAR, "mcp-vs-rest")


def manage(*args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env(), capture_output=True,
                          text=True, check=True, stdin=subprocess.DEVNULL).stdout


def arguments(op: str, thread_id: str, turn: dict) -> dict:
    """The call's arguments, the same for both paths (REST takes thread_id in its path)."""
    if op == "search":
        return {"thread_id": thread_id, "query": QUERIES[len(turn["content"]) % len(QUERIES)], "max_results": 5}
    return {"thread_id": thread_id, "messages": [{"role": turn["role"], "content": turn["content"]}]}


async def call(connection: Connection, path: str, op: str, args: dict, request_id: int) -> bool:
    """Make one call; True when it succeeded."""
    if path == "rest":
        body = {k: v for k, v in args.items() if k != "thread_id"}
        route = "search" if op == "search" else "messages"
        status, _ = await connection.request("POST", f"/api/threads/{args['thread_id']}/{route}", body)
        return 200 <= status < 300
    envelope = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": op, "arguments": args, "_meta": MCP_META}}
    status, payload = await connection.request("POST", "/mcp", envelope,
                                               {**MCP_HEADERS, "Mcp-Method": "tools/call", "Mcp-Name": op})
    if status != 200:
        return False
    answer = json.loads(payload)
    return "result" in answer and not answer["result"].get("isError")


async def run_cell(port: int, key: str, threads: list[str], turns: list[dict], *, path: str, op: str,
                   clients: int, warmup: float, seconds: float) -> dict:
    """``clients`` clients making ``op`` through ``path`` for ``warmup`` + ``seconds`` seconds."""
    latencies, errors = [], 0
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup
    end = start + seconds

    async def client(index: int) -> None:
        nonlocal errors
        connection = Connection(port, key)
        step = 0
        try:
            while (began := loop.time()) < end:
                args = arguments(op, threads[(index + step) % len(threads)], turns[(index * 7919 + step) % len(turns)])
                step += 1
                try:
                    ok = await call(connection, path, op, args, step)
                except (ConnectionError, asyncio.IncompleteReadError, OSError, ValueError):
                    ok = False
                    await connection.close()
                if began >= start:
                    latencies.append((loop.time() - began) * 1000)
                    errors += not ok
        finally:
            await connection.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return {"req_per_s": round(len(latencies) / seconds, 1), "latencies_ms": latencies, "errors": errors}


def summarize(samples: list[dict]) -> dict:
    values = [v for s in samples for v in s["latencies_ms"]]
    return {"req_per_s": round(statistics.median(s["req_per_s"] for s in samples), 1),
            "req_per_s_by_round": [s["req_per_s"] for s in samples], "n": len(values),
            "p50_ms": round(percentile(values, 0.5), 1), "p95_ms": round(percentile(values, 0.95), 1),
            "errors": sum(s["errors"] for s in samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--seconds", type=float, default=6.0, help="measured seconds per cell and round")
    parser.add_argument("--warmup", type=float, default=1.0, help="unrecorded seconds before each cell")
    parser.add_argument("--rounds", type=int, default=2, help="each round measures every cell; the order flips")
    parser.add_argument("--threads", type=int, default=8, help="threads seeded (clients share them)")
    parser.add_argument("--seed-messages", type=int, default=20, help="LoCoMo turns seeded in each thread")
    args = parser.parse_args()

    shutil.rmtree(VAR, ignore_errors=True)
    VAR.mkdir(parents=True)
    started = time.monotonic()
    manage("migrate", "--noinput", "-v0")
    key = re.findall(r"\S{32,}", manage("create_api_key", "bench-mcp-vs-rest"))[-1]
    *batches, spare = load_turns(args.threads, args.seed_messages)
    server = Server("daphne", env(), log_dir=VAR)
    try:
        server.wait()
        thread_ids = asyncio.run(seed(server.port, key, batches))
        log(f"seeded {len(thread_ids)} threads x {args.seed_messages} turns on port {server.port}")
        for path in PATHS:  # the embedder, the vector cache and the MCP catalogue load before any clock
            for op in OPERATIONS:
                sample = asyncio.run(run_cell(server.port, key, thread_ids, spare, path=path, op=op, clients=1,
                                              warmup=0, seconds=1))
                assert sample["errors"] == 0, (path, op, "failed while warming up")
        cells: dict[tuple[str, str, int], list[dict]] = {}
        for round_number in range(args.rounds):
            order = PATHS if round_number % 2 == 0 else PATHS[::-1]
            for op in OPERATIONS:
                for clients in args.clients:
                    for path in order:
                        sample = asyncio.run(run_cell(server.port, key, thread_ids, spare, path=path, op=op,
                                                      clients=clients, warmup=args.warmup, seconds=args.seconds))
                        cells.setdefault((path, op, clients), []).append(sample)
                        log(f"round {round_number + 1} {path:4} {op:12} clients={clients:2}: "
                            f"{sample['req_per_s']} req/s, errors {sample['errors']}")
    finally:
        server.stop()

    report = {
        "command": "bench/mcp_vs_rest.py " + " ".join(sys.argv[1:]),
        "database": str((VAR / "oam.sqlite3").relative_to(ROOT)),
        "embedder": "memory.embedders.MiniLMEmbedder (all-MiniLM-L6-v2, the default)",
        "mcp_protocol": "2026-07-28, stateless Streamable HTTP, JSON answers",
        "seconds_per_cell": args.seconds, "warmup_seconds": args.warmup, "rounds": args.rounds,
        "cpu_count": os.cpu_count(), "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "total_seconds": round(time.monotonic() - started, 1), "cells": [], "mcp_overhead": [],
    }
    for op in OPERATIONS:
        for clients in args.clients:
            pair = {path: summarize(cells[path, op, clients]) for path in PATHS}
            for path in PATHS:
                report["cells"].append({"path": path, "operation": op, "clients": clients, **pair[path]})
            report["mcp_overhead"].append({
                "operation": op, "clients": clients,
                "p50_ms_added": round(pair["mcp"]["p50_ms"] - pair["rest"]["p50_ms"], 1),
                "p50_ratio": round(pair["mcp"]["p50_ms"] / pair["rest"]["p50_ms"], 3),
                "req_per_s_ratio": round(pair["mcp"]["req_per_s"] / pair["rest"]["req_per_s"], 3),
            })
    print(json.dumps(report))


if __name__ == "__main__":
    main()
