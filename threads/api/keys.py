"""API keys of the project (an admin key with no fixed user or agent): list, create, rotate, revoke."""

from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory.core.aio import in_worker
from threads.api.common import ADMIN, INVALID, NOT_FOUND, Pagination, project_admin
from threads.auth import api_key_create, api_key_get, api_key_list, api_key_revoke, api_key_rotate
from threads.schemas.keys import KeyCreatedOut, KeyIn, KeyOut

router = Router(tags=["keys"])


def _with_raw(row, raw: str):
    row.key = raw  # KeyCreatedOut shows it this once
    return row


@router.get("/keys", auth=ADMIN, response={200: list[KeyOut]})
@paginate(Pagination)
async def key_list(request: HttpRequest):
    """The project's API keys, newest first, revoked ones included (never the keys themselves), as
    ``{"items": [...], "count": N}`` paged by ``limit``/``offset`` like every list."""
    return await in_worker(api_key_list, project=project_admin(request).project)


@router.post("/keys", auth=ADMIN, response={201: KeyCreatedOut, **INVALID})
async def key_create(request: HttpRequest, payload: KeyIn):
    """Create a key in the project; the answer holds the key itself, shown this once."""
    manager = project_admin(request)
    row, raw = await in_worker(api_key_create, project=manager.project, created_by=f"api-key:{manager.pk}",
                               **payload.model_dump(exclude_unset=True))
    return Status(201, _with_raw(row, raw))


@router.post("/keys/{key_id}/rotate", auth=ADMIN, response={200: KeyCreatedOut, **NOT_FOUND, **INVALID})
async def key_rotate(request: HttpRequest, key_id: int):
    """Give a key a new secret (the old one stops working at once); the answer holds it, shown this once."""
    project = project_admin(request).project
    key = await in_worker(api_key_get, project=project, key_id=key_id)
    row, raw = await in_worker(api_key_rotate, key=key)
    row.project = project  # KeyOut names it; not read again on the event loop
    return _with_raw(row, raw)


@router.delete("/keys/{key_id}", auth=ADMIN, response={204: None, **NOT_FOUND})
async def key_revoke(request: HttpRequest, key_id: int):
    """Revoke a key of the project for good; revoking twice is harmless."""
    key = await in_worker(api_key_get, project=project_admin(request).project, key_id=key_id)
    await in_worker(api_key_revoke, key=key)
    return Status(204, None)
