"""Erasure: everything the project holds about one user or agent erased, and the receipts read back."""

from django.http import HttpRequest
from ninja import Router
from ninja.pagination import paginate

from memory.core.aio import in_worker
from memory.services import erasure
from threads.api.common import ADMIN, INVALID, NOT_FOUND, Pagination, client_for, project_admin
from threads.schemas.erasure import ErasureOut

router = Router(tags=["erasure"])


@router.delete("/users/{user_id}", auth=ADMIN, response={200: ErasureOut, **INVALID})
async def user_erase(request: HttpRequest, user_id: str, cascade: bool = True):
    """Erase everything the project holds about one end user (GDPR Art. 17; SDK ``delete_user``): their
    threads with all they hold and every record scoped to them; answers the stored receipt. 503 (nothing
    erased) when earlier background extraction of their threads does not finish within 300 s."""
    return await client_for(request).erase_user_async(user_id, cascade, requested_by=f"api-key:{request.auth.pk}")


@router.delete("/agents/{agent_id}", auth=ADMIN, response={200: ErasureOut, **INVALID})
async def agent_erase(request: HttpRequest, agent_id: str, cascade: bool = True):
    """Erase everything the project holds about one agent (SDK ``delete_agent``); answers the stored receipt."""
    return await client_for(request).erase_agent_async(agent_id, cascade, requested_by=f"api-key:{request.auth.pk}")


@router.get("/erasures", auth=ADMIN, response={200: list[ErasureOut]})
@paginate(Pagination)
async def erasure_list(request: HttpRequest):
    """The project's erasure receipts, newest first (subjects named by digest only: ``subject_id`` is empty)."""
    return await in_worker(erasure.receipt_list, project=project_admin(request).project)


@router.get("/erasures/{receipt_id}", auth=ADMIN, response={200: ErasureOut, **NOT_FOUND, **INVALID})
async def erasure_get(request: HttpRequest, receipt_id: str):
    """One erasure receipt of the project."""
    return await in_worker(erasure.receipt_get, project=project_admin(request).project, receipt_id=receipt_id)
