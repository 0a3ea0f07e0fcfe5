"""Extraction end to end against llama.cpp's server with SmolLM2-135M (the ``local_llm`` fixture).

A 135M model writes poor memories: this checks the pipeline (schema-valid
typed records stored with their chunks, linked to real source messages, the
watermark and the job recorded), not what the memories say.
"""

import jsonschema
import pytest

from memory.client import AgentMemory, MemoryExtractionConfig
from memory.llm.prompts import extraction_schema
from memory.models import MEMORY_TYPES, ExtractionJob, Memory, SearchChunk, Thread
from tests.ids import key


@pytest.mark.slow
def test_extraction_with_a_real_llm_stores_typed_memories_with_their_sources(
    db, local_llm, fresh_extraction_tracker
):
    config = MemoryExtractionConfig(extraction_mode="inline", enable_context_summary=False,
                                    memory_extraction_token_limit=2500)
    thread = AgentMemory(llm=local_llm).create_thread(thread_id="t-real-extract", user_id="u", agent_id="a",
                                                      memory_extraction_config=config)
    ids = thread.add_messages([
        {"role": "Caroline", "content": "I went to an LGBTQ support group yesterday and it was so powerful.",
         "timestamp": "2023-05-08T13:56:00"},
        {"role": "Melanie", "content": "Wow, that's cool! I just finished painting a sunset with my kids.",
         "timestamp": "2023-05-08T13:57:00"},
        {"role": "Caroline", "content": "I'm planning to study counseling next year.",
         "timestamp": "2023-05-08T13:58:00"},
    ])
    job = ExtractionJob.objects.get()
    assert job.status == "done", job.error
    assert Thread.objects.get(pk=key("t-real-extract")).extracted_through_seq == 3
    rows = list(Memory.objects.filter(thread_id=key("t-real-extract")))
    assert rows and job.memories_created == len(rows)
    for row in rows:
        assert row.memory_type in MEMORY_TYPES and row.content.strip()
        assert row.source_message_ids and set(row.source_message_ids) <= set(ids)
        assert row.metadata["extraction"]["job_id"] == job.pk
        assert row.timestamp in {"2023-05-08T13:56:00", "2023-05-08T13:57:00", "2023-05-08T13:58:00"}
        assert SearchChunk.objects.filter(source_kind="memory", record_id=row.pk).exists()
    assert job.llm_seconds > 0 and job.seconds >= job.llm_seconds
    stats = local_llm.last_call
    assert stats.ok and stats.response_format == "json_object"
    request_schema = extraction_schema(["m1", "m2", "m3"])
    jsonschema.validate({"memories": [{"memory_type": r.memory_type, "content": r.content,
                                       "source_message_ids": ["m1"]} for r in rows]}, request_schema)
    print("REAL EXTRACTION", job.seconds, job.llm_seconds, [(r.memory_type, r.content) for r in rows])
