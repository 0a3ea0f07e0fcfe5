"""One user's memory as streamed JSON Lines (``memory.services.portability``)."""

import json

from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from memory.core.aio import in_worker
from memory.services import portability
from threads.api.common import ADMIN, INVALID, project_admin

router = Router(tags=["export"])


#: Lines of an export serialised per trip to the worker thread: the response streams, so a request
#: holds about this many lines in memory (an image line at most its image's base64), whatever the user holds.
EXPORT_LINES_PER_CHUNK = 200


def _export_chunk(lines) -> bytes:
    """The next ``EXPORT_LINES_PER_CHUNK`` lines of ``lines`` as JSON Lines bytes (empty when it is done)."""
    out = []
    for line in lines:
        out.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
        if len(out) >= EXPORT_LINES_PER_CHUNK:
            break
    return "".join(out).encode()


def _export_start(project, user_id: str):
    """The export's generator and its first chunk (the header: the user id is checked here, a 422 before any
    byte is sent)."""
    lines = portability.export_lines(project=project, user_id=user_id)
    return lines, _export_chunk(lines)


@router.get("/users/{user_id}/export", auth=ADMIN, response={200: None, **INVALID})
async def user_export(request: HttpRequest, user_id: str):
    """One user's memory as JSON Lines (``application/x-ndjson``; the format of ``manage.py export_memory``,
    ``memory.services.portability``): threads, messages, images base64, memories, relations, summaries and memory
    history, never vectors. An admin key with no fixed user or agent (403 otherwise); a user with nothing
    stored gets the header line only. ``manage.py import_memory`` loads it. The answer streams
    (``EXPORT_LINES_PER_CHUNK`` lines per chunk): memory per request is bounded, not the user's whole data."""
    project = project_admin(request).project
    lines, first = await in_worker(_export_start, project, user_id)

    async def chunks():
        chunk = first
        while chunk:
            yield chunk
            chunk = await in_worker(_export_chunk, lines)  # the request's thread: its cursor stays open there

    return StreamingHttpResponse(chunks(), content_type="application/x-ndjson; charset=utf-8",
                                 headers={"Content-Disposition": 'attachment; filename="memory-export.jsonl"'})
