"""Extraction benchmark: LoCoMo sessions imported with BACKGROUND extraction on a local LLM; prints JSON.

Reads one LoCoMo conversation in place (``../shared/data/locomo/locomo10.json``
via ``memory.dev.locomo``; nothing is copied) and imports its first ``--sessions``
sessions the way ``manage.py import_locomo`` does (one thread per session, one
``add_messages`` per session, ``memory.client.AgentMemory``), into a fresh
SQLite file ``var/bench-extraction.sqlite3``, with extraction on:

* LLM: llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct
  (``memory.dev.llm_server``, started and stopped here) or ``--base-url``;
* mode BACKGROUND: the embedded Dramatiq worker of this process (one thread, as
  the local server answers one request at a time);
* every thread watched through ``/ws/threads/<id>/extraction/`` (the ASGI
  application, API-key auth) with a ``WebsocketCommunicator`` opened before its
  messages are added: the events are counted as they arrive.

Reported: messages per second through extraction (messages / seconds from the
first ``add_messages`` to the last ``finished`` event), the share of the time
spent in the LLM (the jobs' LLM seconds over the jobs' seconds, and over the
wall time), memories by type and decision, their source messages (as LoCoMo
``dia_id``), and the WebSocket events seen. The embedding model loads before the clock starts.

    .venv/bin/python bench/extraction.py [--sample conv-26] [--sessions 3] [--base-url URL --model NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench._database import use_sqlite  # noqa: E402

DB_PATH = ROOT / "var" / "bench-extraction.sqlite3"


def _fresh_database() -> None:
    """A new, empty SQLite file with the embedded default's in-process broker and channel layer."""
    use_sqlite(DB_PATH, OAM_REDIS_URL="", OAM_DRAMATIQ_BROKER_URL="")
    # One worker thread: the local server answers one request at a time, and with jobs
    # overlapping their LLM waits would be counted twice in the LLM's share of the time.
    os.environ.setdefault("OAM_EMBEDDED_WORKER_THREADS", "1")


async def _watch(communicator, started: float, timeout: float) -> list[tuple[str, float, dict]]:
    """Collect one thread's events until its job finishes or fails: (name, seconds since start, event)."""
    events = []
    while not events or events[-1][0] not in ("finished", "failed"):
        event = await communicator.receive_json_from(timeout=timeout)
        events.append((event["event"], time.perf_counter() - started, event))
    await communicator.disconnect()
    return events


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", default="conv-26", help="LoCoMo sample id (default conv-26)")
    parser.add_argument("--sessions", type=int, default=3, help="first N sessions of it (default 3)")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint instead of the local server")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--token-limit", type=int, default=2500, help="memory_extraction_token_limit (default 2500)")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    _fresh_database()
    import django

    django.setup()

    from asgiref.sync import sync_to_async
    from channels.testing import WebsocketCommunicator
    from django.conf import settings
    from django.core.management import call_command

    from memory.client import AgentMemory, MemoryExtractionConfig
    from memory.dev import locomo
    from memory.dev.llm_server import local_llm_server
    from memory.embedders import get_embedder
    from memory.llm.adapters import OpenAICompatibleLlm
    from memory.models import ExtractionJob, Memory, Message
    from oam_site.worker import stop_embedded_worker
    from threads.auth import api_key_create

    call_command("migrate", verbosity=0, interactive=False)
    [sample] = locomo.iter_samples(locomo.default_data_path(), sample_ids=[args.sample])
    sessions = sample.sessions[: args.sessions]
    with contextlib.redirect_stderr(io.StringIO()):
        get_embedder()
    load_average = [round(x, 2) for x in os.getloadavg()]
    config = MemoryExtractionConfig(extraction_mode="background", enable_context_summary=False,
                                    memory_extraction_token_limit=args.token_limit)
    _, key = api_key_create(name="bench")

    server = contextlib.nullcontext() if args.base_url else local_llm_server(startup_timeout=180.0)
    with server as local:
        base_url = args.base_url or local.base_url
        llm = OpenAICompatibleLlm(base_url=base_url, model=args.model, timeout=600.0, max_retries=2)
        client = AgentMemory(llm=llm, memory_extraction_config=config)
        from oam_site.asgi import application

        async def run() -> tuple[float, float, list]:
            started = time.perf_counter()
            watchers = []
            for session in sessions:
                tid = locomo.thread_id(sample.sample_id, session.number)
                thread = await sync_to_async(client.create_thread)(
                    thread_id=tid, user_id=sample.sample_id, agent_id=locomo.AGENT_ID,
                    metadata={"source": "locomo", "sample_id": sample.sample_id, "session": session.number})
                communicator = WebsocketCommunicator(application, f"/ws/threads/{tid}/extraction/?api_key={key}")
                connected, _ = await communicator.connect(timeout=60)
                assert connected, "the WebSocket refused the connection"
                assert (await communicator.receive_json_from(timeout=60))["event"] == "state"
                watchers.append(asyncio.create_task(_watch(communicator, started, timeout=1800)))
                await sync_to_async(thread.add_messages)(locomo.session_messages(sample.sample_id, session))
            stored = time.perf_counter() - started
            events = await asyncio.gather(*watchers)
            return stored, time.perf_counter() - started, events

        try:
            store_s, wall_s, per_thread = asyncio.run(run())
        finally:
            stop_embedded_worker()

    messages = Message.objects.count()
    jobs = list(ExtractionJob.objects.all())
    rows = list(Memory.objects.all())
    dia = dict(Message.objects.values_list("pk", "metadata__dia_id"))
    job_s = sum(j.seconds for j in jobs)
    llm_s = sum(j.llm_seconds for j in jobs)
    events = [e for thread_events in per_thread for e in thread_events]
    finished = [e[2] for e in events if e[0] == "finished"]
    return {
        "benchmark": "extraction",
        "data": f"LoCoMo {sample.sample_id}, sessions 1-{len(sessions)} (read in place from shared/data/locomo)",
        "llm": args.base_url or "SmolLM2-135M-Instruct Q4_1, llama-cpp-python server, n_ctx 4096, "
                                "response_format json_object + schema",
        "embedder": settings.OAM_EMBEDDER,
        "database": f"sqlite + sqlite-vec, fresh file {DB_PATH.relative_to(ROOT)}",
        "mode": f"BACKGROUND, embedded Dramatiq worker with {settings.OAM_EMBEDDED_WORKER_THREADS} thread(s) "
                "in this process, in-memory channel layer",
        "cpu_count": os.cpu_count(),
        "load_average_before": load_average,
        "config": {"memory_extraction_token_limit": args.token_limit, "memory_extraction_window": -1,
                   "memory_extraction_frequency": -1, "enable_context_summary": False,
                   "duplicate_distance": settings.OAM_EXTRACTION_DUPLICATE_DISTANCE,
                   "related_distance": settings.OAM_EXTRACTION_RELATED_DISTANCE},
        "messages": messages,
        "sessions": len(sessions),
        "seconds_until_messages_stored": round(store_s, 2),
        "wall_seconds": round(wall_s, 2),
        "messages_per_second_through_extraction": round(messages / wall_s, 3),
        "jobs": dict(collections.Counter(j.status for j in jobs)),
        "job_seconds_total": round(job_s, 2),
        "llm_seconds_total": round(llm_s, 2),
        "llm_share_of_job_time": round(llm_s / job_s, 3) if job_s else None,
        "llm_share_of_wall_time": round(llm_s / wall_s, 3),
        "llm_calls": {**llm.totals.as_dict(), "seconds": round(llm.totals.seconds, 2),
                      "response_format": llm.json_form, "model": args.model},
        "memories": {
            "total": len(rows),
            "by_type": dict(collections.Counter(r.memory_type for r in rows)),
            "decisions": dict(collections.Counter(r.metadata["extraction"]["decision"] for r in rows)),
            "with_source_messages": sum(bool(r.source_message_ids) for r in rows),
            "sources_are_stored_messages": all(s in dia for r in rows for s in r.source_message_ids),
            "duplicates_skipped": sum(e["duplicates_skipped"] for e in finished),
            "rejected_candidates": sum(e["rejected_candidates"] for e in finished),
            "linked": sum(e["memories_linked"] for e in finished),
        },
        "websocket": {
            "events_by_type": dict(collections.Counter(e[0] for e in events)),
            "first_event_after_s": round(min(e[1] for e in events), 3) if events else None,
            "finished_after_s": sorted(round(e[1], 1) for e in events if e[0] in ("finished", "failed")),
        },
        "examples": [{"memory_type": r.memory_type, "content": r.content,
                      "sources": [dia.get(s) for s in r.source_message_ids]} for r in rows[:6]],
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
