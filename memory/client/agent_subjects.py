"""``AgentMemory``'s users and agents (SDK: add_user, add_agent, list_users, list_agents, delete_user,
delete_agent; not in the SDK: erase_user, erase_agent), as the mixin ``AgentSubjects``."""

from __future__ import annotations

import time
from typing import Any

from memory.core.errors import InvalidArgument
from memory.core.types import (
    NOTSET,
    AgentProfileRecord,
    NotSet,
    UserProfileRecord,
)
from memory.extraction.tracker import wait_for_extraction
from memory.models import (
    Profile as ProfileRow,
)
from memory.records.validators import check_id
from memory.services import erasure, profiles


class AgentSubjects:
    """A project's end users and agents: their profiles, and the erasure of all held about one.

    The client's state (``project``, ``tenant``, ``llm``, the configs) is ``AgentMemory``'s, which mixes
    this class in (``memory.client.agent``).
    """

    def add_user(self, user_id: str, information: str, metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
        """Store (or replace) a user's profile: free-form ``information`` and ``metadata``; return ``user_id``
        (``memory.services.profiles.profile_add``)."""
        return profiles.profile_add(tenant=self.tenant, kind="user", subject_id=user_id, information=information,
                                    metadata=metadata)

    def add_agent(self, agent_id: str, information: str, metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
        """Store (or replace) an agent's profile; return ``agent_id`` (see ``add_user``)."""
        return profiles.profile_add(tenant=self.tenant, kind="agent", subject_id=agent_id, information=information,
                                    metadata=metadata)

    def list_users(self, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                   limit: int | None | NotSet = NOTSET) -> list[UserProfileRecord]:
        """User profiles of this project, oldest first (``memory.services.profiles.profile_list``)."""
        return profiles.profile_list(tenant=self.tenant, kind="user", metadata_filter=metadata_filter, limit=limit)

    def list_agents(self, metadata_filter: dict[str, Any] | None | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET) -> list[AgentProfileRecord]:
        """Agent profiles of this project, oldest first (``memory.services.profiles.profile_list``)."""
        return profiles.profile_list(tenant=self.tenant, kind="agent", metadata_filter=metadata_filter, limit=limit)

    def erase_user(self, user_id: str, cascade: bool = True, *, requested_by: str = "python") -> erasure.Erasure:
        """Erase everything this project holds about one end user and return the receipt (GDPR Art. 17).

        Not in the SDK, which returns a count (``delete_user``). Waits first,
        up to 300 s in all, for background extraction this process accepted
        for the user's threads (``TimeoutError`` then, nothing erased); then
        ``memory.services.erasure.subject_erase``: the user's threads with all they
        hold, every record still scoped to the user, the storage scrubbed, a
        stored ``ErasureReceipt``. ``cascade=False`` erases nothing (the SDK
        then deletes only a profile row; there are none here). A restricted
        client may erase only its own user (``OutOfScope``).
        """
        return self._erase("user", user_id, cascade, requested_by)

    def erase_agent(self, agent_id: str, cascade: bool = True, *, requested_by: str = "python") -> erasure.Erasure:
        """``erase_user`` for an agent: its threads and every record scoped to it (not in the SDK)."""
        return self._erase("agent", agent_id, cascade, requested_by)

    def delete_user(self, user_id: str, cascade: bool = True) -> int:
        """Delete a user's profile and, with ``cascade``, everything held about the user (SDK:
        ``OracleAgentMemory.delete_user``); return 1 or 0.

        ``cascade=False`` deletes the profile row only (``memory.services.profiles``) and returns 1 when there was
        one. With ``cascade`` (``erase_user``, whose receipt this does not return): 1 when a profile or
        anything else was erased (the SDK counts the profile row only; a user exists here through the
        records scoped to it too), else 0. Raises ``TimeoutError`` as ``erase_user``; ValueError/TypeError
        for a bad id.
        """
        return self._delete_subject("user", user_id, cascade)

    def delete_agent(self, agent_id: str, cascade: bool = True) -> int:
        """Delete an agent's profile and, with ``cascade``, everything held about the agent (SDK:
        ``OracleAgentMemory.delete_agent``); return 1 or 0 (see ``delete_user``)."""
        return self._delete_subject("agent", agent_id, cascade)

    def _delete_subject(self, subject: str, value: Any, cascade: Any) -> int:
        if not isinstance(cascade, bool):
            raise InvalidArgument("cascade", "must be a bool")
        if not cascade:
            return profiles.profile_delete(tenant=self.tenant, kind=subject, subject_id=value)
        key = check_id(value, f"{subject}_id")
        had_profile = ProfileRow.objects.filter(project=self.project, kind=subject, subject_id=key).exists()
        return int(self._erase(subject, value, True, "python").found or had_profile)

    def _erase(self, subject: str, value: Any, cascade: Any, requested_by: str) -> erasure.Erasure:
        field = f"{subject}_id"
        value = check_id(value, field)
        if cascade:
            deadline = time.monotonic() + 300
            for key in erasure.subject_threads(self.tenant, subject, value):
                wait_for_extraction(thread_id=key, timeout=max(0.0, deadline - time.monotonic()))
        return erasure.subject_erase(tenant=self.tenant, subject=subject, value=value, cascade=cascade,
                                     requested_by=requested_by)
