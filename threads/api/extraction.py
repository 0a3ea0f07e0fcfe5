"""Where a thread's extraction stands, optionally after a long poll until its jobs are done; re-running its
failed ranges."""

from django.http import HttpRequest
from ninja import Query, Router

from memory.core.aio import in_worker
from memory.extraction import waiting
from memory.extraction.recovery import extraction_state, job_summary
from memory.services.extraction import extraction_rerun
from threads.api.common import INVALID, NOT_FOUND, READ, WRITE, thread_for
from threads.schemas.extraction import ExtractionRerunIn, ExtractionRerunOut, ExtractionStateOut

router = Router(tags=["extraction"])


@router.get("/threads/{thread_id}/extraction", auth=READ, response={200: ExtractionStateOut, **NOT_FOUND, **INVALID})
async def thread_extraction(request: HttpRequest, thread_id: str,
                            wait: float = Query(None, ge=0, le=waiting.MAX_EXTRACTION_WAIT_SECONDS, description=(
                                "Seconds (0-60) to wait, first, until none of the thread's extraction jobs is "
                                "queued or running (SDK wait_for_memory_extraction); the answer's settled says "
                                "whether it came to that."))):
    """The thread's extraction state: watermark, last message seq, pending messages and jobs, the last
    job (counts, seconds, error) and the stored config. Live progress: ``/ws/threads/{thread_id}/extraction/``.
    With ``wait``, a long poll: answers as soon as the thread's queued and running jobs are done (failed
    ones count as done), or when ``wait`` seconds have passed (``settled`` false)."""
    thread = await thread_for(request, thread_id)
    settled = None if wait is None else await waiting.wait_until_settled(thread.row.pk, wait)
    state = await in_worker(extraction_state, thread=thread.row)
    return {**state, "settled": settled}


@router.post("/threads/{thread_id}/extraction/rerun", auth=WRITE,
             response={200: ExtractionRerunOut, **NOT_FOUND, **INVALID})
async def thread_extraction_rerun(request: HttpRequest, thread_id: str, data: ExtractionRerunIn):
    """Run the thread's failed extraction ranges again (``failed_ranges`` of GET .../extraction): all of them,
    or job ``job_id`` only (the body is required: ``{}`` for all; another body, an unknown key or a
    ``job_id`` that is not a JSON integer is a 422); answers the jobs queued again (none when nothing
    failed). 404 naming ``thread_id`` for a thread the key cannot see, ``job_id`` for a job that is not a
    failed job of this thread.
    A failure is transient (the retry horizon ended while the LLM was unreachable) or permanent (the LLM
    refused the request or its output); either may be re-run once its cause is fixed."""
    thread = await thread_for(request, thread_id)
    jobs = await in_worker(extraction_rerun, thread=thread.row, job_id=data.job_id, by="api")
    return {"thread_id": thread.thread_id, "jobs": [job_summary(job) for job in jobs]}
