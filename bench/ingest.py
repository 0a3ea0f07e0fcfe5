#!/usr/bin/env python
"""Benchmark: ingest through the HTTP API against the embedder's best throughput, in one run.

    .venv/bin/python bench/ingest.py [--samples conv-26 conv-30] [--clients 8] [--repeat 3]

Ingest at the embedder's speed. The same LoCoMo turns (the
``--samples`` conversations, every session) are measured three ways, one after
the other on the same machine:

* ``embedder_one_call``: this process embeds every turn's embedding text (the
  text the service embeds: ``memory.index.writer.embedding_text`` of each chunk) in
  one call to the bare model (``MiniLMEmbedder``): the best this hardware does.
* ``api_microbatch``: a real server (``python -m oam_site.serve`` on 127.0.0.1,
  a fresh SQLite file, no LLM) with ``OAM_EMBEDDING_MICROBATCH=true`` (the
  default), fed by ``--clients`` concurrent clients, each request one session
  (``POST /api/threads/{id}/messages``). Threads are created before the clock.
* ``api_per_request``: the same server with ``OAM_EMBEDDING_MICROBATCH=false``
  (each request embeds alone): the baseline the issue measured.

Each of ``--repeat`` rounds measures the embedder, then each API variant
followed by the embedder again (a fresh server each time; the two API variants
swap places every round), so a change in the machine's load hits each alike.
The report gives every round's turns/s, the medians, each API figure's ratio to
the embedder's median, and the fairest pairing under a drifting load: each API
run against the mean of the embedder runs just before and just after it
(``ratio_to_adjacent_embedder_runs`` and its median). The issue's target: ``api_microbatch`` at
least 0.8 of ``embedder_one_call``. Prints one JSON object; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oam_site.settings")

import django  # noqa: E402

django.setup()

from memory.core.chunking import chunk_text  # noqa: E402
from memory.dev import locomo  # noqa: E402
from memory.embedders import MiniLMEmbedder  # noqa: E402
from memory.index.writer import embedding_text, message_chunk_text  # noqa: E402


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def load_sessions(sample_ids: list[str]) -> list[tuple[str, list[dict]]]:
    sessions = []
    for sample in locomo.iter_samples(sample_ids=sample_ids):
        for session in sample.sessions:
            sessions.append((locomo.thread_id(sample.sample_id, session.number),
                             locomo.session_messages(sample.sample_id, session)))
    return sessions


def embedding_texts(sessions) -> list[str]:
    return [
        embedding_text(chunk, m["timestamp"])
        for _, messages in sessions for m in messages
        for chunk in chunk_text(message_chunk_text(m["role"], m["content"]))
    ]


class Server:
    """``python -m oam_site.serve`` on 127.0.0.1 with a var folder of its own; stop() ends it."""

    def __init__(self, directory: Path, microbatch: bool):
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("OAM_", "DJANGO_"))}
        self.env.update({
            "OAM_VAR_DIR": str(directory),
            "OAM_EMBEDDING_MICROBATCH": "true" if microbatch else "false",
            "OAM_VECTOR_CACHE": "false",
            "DJANGO_SECRET_KEY": "bench-ingest",
        })
        self._manage("migrate", "--noinput", "-v0")
        out = self._manage("create_api_key", "bench-ingest")
        self.key = re.findall(r"\S{32,}", out)[-1]
        self.log_path = directory / "server.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "oam_site.serve", "-b", "127.0.0.1", "-p", "0", "oam_site.asgi:application"],
            cwd=ROOT, env=self.env, stdout=open(self.log_path, "wb"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while not (m := re.search(r"ready on (http://\S+)", self.log_path.read_text(errors="replace"))):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.2)
        self.url = m.group(1)

    def _manage(self, *args: str) -> str:
        return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, check=True).stdout

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.url + path, data=json.dumps(body).encode(), method="POST",
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.loads(response.read() or b"null")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()


def api_ingest(sessions, *, microbatch: bool, clients: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        server = Server(Path(tmp), microbatch)
        try:
            for i, (thread_id, _) in enumerate(sessions):
                server.post("/api/threads", {"thread_id": thread_id, "user_id": f"u{i % 10}", "agent_id": "a"})
            server.post(f"/api/threads/{sessions[0][0]}/search", {"query": "warm up the embedder"})
            turns = sum(len(m) for _, m in sessions)
            started = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(lambda s: server.post(f"/api/threads/{s[0]}/messages", {"messages": s[1]}), sessions))
            seconds = time.perf_counter() - started
        finally:
            server.stop()
    return {"turns": turns, "seconds": round(seconds, 2), "turns_per_s": round(turns / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", nargs="+", default=["conv-26", "conv-30"])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3,
                        help="rounds; each round measures all three, interleaved, so load drifts hit each alike")
    args = parser.parse_args()

    sessions = load_sessions(args.samples)
    texts = embedding_texts(sessions)
    turns = sum(len(m) for _, m in sessions)
    log(f"{len(sessions)} sessions, {turns} turns, {len(texts)} chunks")

    embedder = MiniLMEmbedder()
    embedder.embed(texts[:16])  # load and warm up

    def embedder_turns_per_s() -> float:
        started = time.perf_counter()
        embedder.embed(texts)
        return turns / (time.perf_counter() - started)

    rounds = {"embedder_one_call": [], "api_microbatch": [], "api_per_request": []}
    paired = {"api_microbatch": [], "api_per_request": []}  # (embedder just before, API, embedder just after)
    for round_number in range(args.repeat):
        order = [("api_microbatch", True), ("api_per_request", False)]
        if round_number % 2:
            order.reverse()  # so neither API variant always runs first in a round
        before = embedder_turns_per_s()
        embedder_runs = [before]
        for name, microbatch in order:
            api = api_ingest(sessions, microbatch=microbatch, clients=args.clients)["turns_per_s"]
            after = embedder_turns_per_s()
            embedder_runs.append(after)
            rounds[name].append(api)
            paired[name].append((before, api, after))
            before = after
        rounds["embedder_one_call"].append(round(statistics.median(embedder_runs), 1))
        log(f"round {round_number + 1}:", {k: v[-1] for k, v in rounds.items()})

    results = {"command": "bench/ingest.py " + " ".join(sys.argv[1:]), "samples": args.samples, "turns": turns,
               "clients": args.clients, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
               "turns_per_s_by_round": rounds}
    best = statistics.median(rounds["embedder_one_call"])
    for name, values in rounds.items():
        results[name] = {"median_turns_per_s": round(statistics.median(values), 1)}
        if name != "embedder_one_call":
            results[name]["ratio_to_embedder"] = round(statistics.median(values) / best, 3)
            # each API run against the embedder measured just before and just after it (their mean):
            # the fairest pairing when the machine's load drifts
            sandwich = [round(api / ((b + a) / 2), 3) for b, api, a in paired[name]]
            results[name]["ratio_to_adjacent_embedder_runs"] = sandwich
            results[name]["median_ratio_to_adjacent_embedder_runs"] = round(statistics.median(sandwich), 3)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
