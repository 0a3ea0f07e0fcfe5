"""Profiles of users and agents (SDK ``add_user``/``add_agent``, ``list_users``/``list_agents``): store, list,
delete."""

from typing import Literal

from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate
from ninja.responses import Status

from memory.core.aio import in_worker
from memory.core.errors import NotFound
from memory.core.types import NOTSET
from memory.records import selectors
from memory.services import profiles
from threads.api.common import INVALID, NOT_FOUND, READ, Pagination, client_for, list_filters
from threads.schemas.profiles import ProfileIn, ProfileOut, ProfileQuery

router = Router(tags=["profiles"])


ProfileKind = Literal["users", "agents"]


@router.put("/profiles/{kind}/{subject_id}", response={200: ProfileOut, **INVALID})
async def profile_put(request: HttpRequest, kind: ProfileKind, subject_id: str, payload: ProfileIn):
    """Store or replace the profile of a user (``kind`` ``users``) or agent (``agents``) (SDK ``add_user`` /
    ``add_agent``). A restricted key writes only its own user's or agent's (403 otherwise)."""
    memory = client_for(request)
    data = payload.model_dump(exclude_unset=True)
    single = kind[:-1]
    await in_worker(profiles.profile_add, tenant=memory.tenant, kind=single, subject_id=subject_id,
                    information=data["information"], metadata=data.get("metadata", NOTSET))
    return await in_worker(profiles.profile_get, tenant=memory.tenant, kind=single, subject_id=subject_id)


@router.get("/profiles/{kind}", auth=READ, response={200: list[ProfileOut], **INVALID})
@paginate(Pagination)
async def profile_list(request: HttpRequest, kind: ProfileKind, params: Query[ProfileQuery]):
    """User or agent profiles of the key's project, oldest first (SDK ``list_users``/``list_agents``)."""
    args = list_filters(params)
    qs = profiles.profile_queryset(tenant=client_for(request).tenant, kind=kind[:-1], limit=None, **args)
    return selectors.Records(qs, profiles.profile_record)


@router.delete("/profiles/{kind}/{subject_id}", response={204: None, **NOT_FOUND, **INVALID})
async def profile_delete(request: HttpRequest, kind: ProfileKind, subject_id: str):
    """Delete one profile, and nothing else (SDK ``delete_user(..., cascade=False)``; erasing everything
    about a user is ``DELETE /api/users/{user_id}``). 404 when there is none."""
    memory = client_for(request)
    if not await in_worker(profiles.profile_delete, tenant=memory.tenant, kind=kind[:-1], subject_id=subject_id):
        raise NotFound(f"{kind[:-1]}_id", subject_id)
    return Status(204, None)
