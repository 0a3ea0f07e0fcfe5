#!/usr/bin/env python
"""Benchmark: another project's searches while one project posts the largest batch the limits allow (issue #29).

    .venv/bin/python bench/fair_embedding.py [--seconds 40] [--searchers 2] [--pass-chars 4000]

One fresh SQLite file (``var/bench-fair/oam.sqlite3``), two projects, ``noisy``
and ``quiet``, each with its own API key. ``quiet`` holds one thread of 200
LoCoMo turns. Two servers, one after the other, both ``python -m oam_site.serve``
(daphne, what ``make serve`` runs) with the default embedder (all-MiniLM-L6-v2),
no LLM, no rate limit, the embedded worker off:

* ``fair``: as served: passes of at most ``OAM_EMBEDDING_PASS_CHARS``
  (``--pass-chars``, default the setting's 4,000) characters, taken in turns
  across projects (``memory.core.batching.MicroBatchingEmbedder``);
* ``one_pass_per_part``: the same with ``OAM_EMBEDDING_PASS_CHARS`` at 10^9, so
  a pass holds a whole part of a call (a call is cut into one part per worker),
  which is how passes were filled before #29: the baseline of the same run.

On each server, in turn:

1. ``alone``: ``--searchers`` clients of ``quiet`` search its thread in a loop
   (``POST /api/threads/{id}/search``, 5 results) for ``--seconds``;
2. ``beside_batch``: the same, while a client of ``noisy`` posts, back to back,
   the largest ``add_messages`` batch the limits allow (``MAX_BATCH_MESSAGES``
   messages of ``MAX_BATCH_CHARS / MAX_BATCH_MESSAGES`` characters of LoCoMo text:
   1,000 x 200, within the per-request embedding budget ``MAX_EMBED_CHARS``),
   each into a new thread.

Searches that start in the window count. Prints one JSON object: per server and
phase, the searches' n, p50/p90/p99/max milliseconds and non-2xx count; the
batches' n, statuses and seconds each, and the server's CPU seconds per batch
(from ``/proc``); and ``target``: whether ``quiet``'s p99 beside the batch stays
under 2 s on the fair server (issue #29 measured 33.6 s before). Progress goes to
stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._database import percentile  # noqa: E402
from bench.api_load import QUERIES, Connection, Server, bench_env, load_turns  # noqa: E402  (plain Python: no Django here)

VAR = ROOT / "var" / "bench-fair"
#: ``memory.core.errors``' limits, read from the module's source so this process stays free of Django.
LIMITS = {name: int(value.replace("_", "")) for name, value in re.findall(
    r"^(MAX_BATCH_MESSAGES|MAX_BATCH_CHARS|MAX_EMBED_CHARS) = ([\d_]+)$",
    (ROOT / "memory" / "core" / "errors.py").read_text(), re.M)}
TARGET_P99_MS = 2_000


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def server_env(pass_chars: int) -> dict[str, str]:
    return bench_env(VAR, "fair", OAM_EMBEDDING_PASS_CHARS=str(pass_chars))


def manage(*args: str) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=server_env(4_000),
                          capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL).stdout


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def largest_batch(turns: list[dict]) -> list[dict]:
    """``MAX_BATCH_MESSAGES`` messages of ``MAX_BATCH_CHARS // MAX_BATCH_MESSAGES`` characters of LoCoMo text."""
    size = LIMITS["MAX_BATCH_CHARS"] // LIMITS["MAX_BATCH_MESSAGES"]
    text = " ".join(t["content"] for t in turns)
    return [{"role": "user", "content": text[i * size % (len(text) - size):][:size]}
            for i in range(LIMITS["MAX_BATCH_MESSAGES"])]


async def create_thread(connection: Connection, user_id: str) -> str:
    status, body = await connection.request("POST", "/api/threads", {"user_id": user_id})
    assert status == 201, body
    return json.loads(body)["thread_id"]


async def phase(port: int, keys: dict[str, str], quiet_thread: str, batch: list[dict] | None, *,
                seconds: float, searchers: int, pid: int) -> dict:
    """``searchers`` search loops of ``quiet`` for ``seconds``; beside them, with ``batch``, ``noisy``'s batches."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    searches: list[float] = []
    search_errors = 0
    batches: list[dict] = []

    async def searcher(index: int) -> None:
        nonlocal search_errors
        connection = Connection(port, keys["quiet"])
        step = index
        while (began := loop.time()) < end:
            body = {"query": QUERIES[step % len(QUERIES)], "max_results": 5}
            step += 1
            try:
                status, _ = await connection.request("POST", f"/api/threads/{quiet_thread}/search", body)
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                status = 0
                await connection.close()
            searches.append((loop.time() - began) * 1000)
            search_errors += not 200 <= status < 300
        await connection.close()

    async def noisy() -> None:
        connection = Connection(port, keys["noisy"])
        n = 0
        while loop.time() < end:
            thread_id = await create_thread(connection, f"noisy-u{n}")
            n += 1
            cpu, began = cpu_seconds(pid), loop.time()
            status, body = await connection.request("POST", f"/api/threads/{thread_id}/messages", {"messages": batch})
            batches.append({"status": status, "seconds": round(loop.time() - began, 2),
                            "cpu_s": round(cpu_seconds(pid) - cpu, 2),
                            **({} if status == 201 else {"detail": body[:300].decode(errors="replace")})})
        await connection.close()

    await asyncio.gather(*(searcher(i) for i in range(searchers)), *([noisy()] if batch else []))
    report = {"searches": {"n": len(searches), "errors": search_errors,
                           **{f"p{q}_ms": round(percentile(searches, q / 100), 1) for q in (50, 90, 99)},
                           "max_ms": round(max(searches), 1)}}
    if batch:
        report["batches"] = {"n": len(batches), "statuses": sorted({b["status"] for b in batches}),
                             "seconds_each": [b["seconds"] for b in batches],
                             "server_cpu_s_each": [b["cpu_s"] for b in batches],
                             **({"refused": batches[0].get("detail")} if any(b["status"] != 201 for b in batches)
                                else {})}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="seconds of each phase")
    parser.add_argument("--searchers", type=int, default=2, help="concurrent search clients of the quiet project")
    parser.add_argument("--pass-chars", type=int, default=4_000, help="OAM_EMBEDDING_PASS_CHARS of the fair server")
    args = parser.parse_args()

    shutil.rmtree(VAR, ignore_errors=True)
    VAR.mkdir(parents=True)
    log("migrating", VAR / "oam.sqlite3")
    manage("migrate", "--noinput", "-v0")
    keys = {}
    for slug in ("noisy", "quiet"):
        manage("create_project", slug)
        keys[slug] = re.findall(r"\S{32,}", manage("create_api_key", f"bench-{slug}", "--project", slug))[-1]
    seed, *_ = load_turns(1, 200)
    batch = largest_batch(load_turns(1, 2_000)[0])
    report = {"limits": LIMITS, "batch": {"messages": len(batch), "characters": sum(len(m["content"]) for m in batch)},
              "seconds": args.seconds, "searchers": args.searchers, "servers": {}}
    for name, pass_chars in (("fair", args.pass_chars), ("one_pass_per_part", 10**9)):
        server = Server(name, server_env(pass_chars), log_dir=VAR)
        try:
            server.wait()

            async def run() -> dict:
                connection = Connection(server.port, keys["quiet"])
                thread_id = await create_thread(connection, "quiet-u1")
                status, body = await connection.request("POST", f"/api/threads/{thread_id}/messages",
                                                        {"messages": seed})
                assert status == 201, body
                for query in QUERIES:  # the embedder and the vector cache load before any clock
                    await connection.request("POST", f"/api/threads/{thread_id}/search", {"query": query})
                await connection.close()
                out = {}
                for label, load in (("alone", None), ("beside_batch", batch)):
                    log(f"{name}: {label} for {args.seconds:g} s")
                    out[label] = await phase(server.port, keys, thread_id, load, seconds=args.seconds,
                                             searchers=args.searchers, pid=server.process.pid)
                    log(f"  {json.dumps(out[label]['searches'])}")
                return out

            report["servers"][name] = {"pass_chars": pass_chars, **asyncio.run(run())}
        finally:
            server.stop()
    fair = report["servers"]["fair"]["beside_batch"]
    report["target"] = {"quiet_p99_beside_batch_ms": fair["searches"]["p99_ms"], "under_ms": TARGET_P99_MS,
                        "met": fair["searches"]["p99_ms"] < TARGET_P99_MS and fair["searches"]["errors"] == 0
                        and fair.get("batches", {}).get("statuses") == [201]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
