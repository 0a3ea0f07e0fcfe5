"""``Thread``'s memory-like records (spec: add_memory, update_memory, delete_memory) and their history (not in
the spec: ``memory.records.history``), as the mixin ``ThreadMemories``."""

from __future__ import annotations

import logging
from datetime import date, datetime
from typing import Any

from memory.client.common import _extensions, _or
from memory.core.aio import in_worker
from memory.core.errors import NotFound, OutOfScope
from memory.core.types import NOTSET, MemoryRecord, NotSet, RecordStatus, TimeToLiveAnchor
from memory.core.valid_time import WINDOW_FIELDS, check_instant
from memory.links.autonomous import propose_links
from memory.llm.adapters import LlmError
from memory.records import history, selectors
from memory.records.as_of import AsOfRecords, answer, check_as_of, erased_since, memories_at, memory_at
from memory.records.as_of import scope_q as as_of_scope_q
from memory.records.history import MemoryVersionRecord
from memory.records.validators import check_id, reject_unknown
from memory.services.memories import memory_add, memory_delete, memory_restore, memory_update

logger = logging.getLogger(__name__)


class ThreadMemories:
    """A thread's memories, facts, guidelines and preferences: add, read, update, delete; history and undo.

    The handle's state (``_row``, ``_client``, ``llm``, the resolved configs) is ``Thread``'s, which mixes
    this class in (``memory.client.thread``).
    """

    def add_memory(self, content: str, *, memory_type: str | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                   agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                   memory_id: str | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                   timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                   ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, status: RecordStatus | str | NotSet = NOTSET,
                   autonomous_linking: bool | NotSet = NOTSET, memory_id_to_link: str | NotSet = NOTSET,
                   link_type: str | NotSet = NOTSET, link_id: str | NotSet = NOTSET,
                   link_timestamp: str | None | NotSet = NOTSET, link_metadata: dict[str, Any] | None | NotSet = NOTSET,
                   derived_from: list[str] | None | NotSet = NOTSET, **store_kwargs: Any) -> str:
        """Store a manual memory and index it; return its id (``memory_id`` when given).

        ``valid_from=``/``valid_to=`` (issue #32, not in the SDK, so in ``store_kwargs``): when the fact holds in
        the world, the half-open window ``[valid_from, valid_to)``; each a datetime, date or ISO-8601 string (no
        zone: UTC) or None/omitted (open on that side). TypeError/ValueError naming the field for another type or an
        unreadable string, ValueError naming ``valid_to`` when it is before ``valid_from``
        (``memory.core.valid_time``).

        ``memory_id_to_link`` with ``link_type`` (a built-in relation) also
        stores a relation from the new memory to that memory of this thread, in
        the same transaction; omitted scopes then inherit from the target
        (``services.memory_add``, ``memory.links.writes.pending_link``). ``autonomous_linking`` (default on when
        the thread has an LLM) then lets the LLM relate the new memory to its
        nearest memories (``memory.links.autonomous.propose_links``); an LLM failure is
        logged and leaves the memory stored. Raises ValueError for an unknown
        ``memory_type`` (allowed: memory, fact, guideline, preference), a taken
        id, or bad link arguments.

        With the thread's ``review_added_memories`` (``MemoryExtractionConfig``, default False) a memory of
        a ``review_memory_types`` type is stored awaiting review (``memory.records.review_rules``): no read returns it,
        and no relation is made from it (ValueError naming ``memory_id_to_link`` for link arguments),
        until it is approved.

        ``derived_from`` (not in the spec; issue #32): ids of memories of this project the new memory was
        inferred from (at most 100; any thread, each one this client may read: KeyError naming
        ``derived_from`` otherwise, as for a missing memory). When one of them is later superseded,
        invalidated, edited or deleted, the new memory is flagged for review (``needs_review``,
        ``memory.links.dependants``).
        """
        window = _extensions(store_kwargs, *WINDOW_FIELDS)
        reject_unknown(store_kwargs, "add_memory")
        if autonomous_linking is not NOTSET and not isinstance(autonomous_linking, bool):
            raise TypeError("autonomous_linking: must be a bool")
        tenant = self._client.tenant
        user_id, agent_id = tenant.fill("user_id", user_id), tenant.fill("agent_id", agent_id)
        if tenant.restricted and thread_id is not NOTSET and thread_id is not None and thread_id != self.thread_id:
            try:  # another thread, which must be one of the restricted client's own
                self._client.thread_row(check_id(thread_id, "thread_id"))
            except NotFound:
                raise OutOfScope("thread_id", "a restricted client can give only the ids of its own threads") from None
        memory_id = memory_add(
            thread=self._row, content=content, memory_type=memory_type, user_id=user_id, agent_id=agent_id,
            thread_id=thread_id, memory_id=memory_id, metadata=_or(metadata, None), timestamp=_or(timestamp, None),
            ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status, retention=self._client.retention_config,
            memory_id_to_link=memory_id_to_link, link_type=link_type, link_id=link_id, link_timestamp=link_timestamp,
            link_metadata=link_metadata, link_restrict=tenant.row_filter(), derived_from=derived_from,
            review_types=self.memory_extraction_config.review_types(extracted=False),
            **window,
        )
        llm = self.llm if autonomous_linking is not False else None
        if llm is not None:
            try:
                propose_links(self._row, memory_id, llm, restrict=tenant.row_filter())
            except LlmError as exc:  # spec: "Failure leaves the memory stored."
                logger.warning("autonomous linking of memory %s failed: %s", memory_id, exc)
        return memory_id

    def update_memory(self, memory_id: str, content: str | NotSet = NOTSET,
                      metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                      ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                      status: RecordStatus | str | NotSet = NOTSET, **kwargs: Any) -> str:
        """Update a memory-like record owned by this exact thread; return its id.

        ``valid_from=``/``valid_to=`` (issue #32, in ``kwargs``): omitted keeps the bound, None clears it (open), a
        value sets it (as ``add_memory``; the resulting window is checked). A change is a version of the memory's
        history.
        Raises KeyError when absent, expired or another thread's.
        """
        window = _extensions(kwargs, *WINDOW_FIELDS)
        reject_unknown(kwargs, "update_memory")
        if self._client.tenant.restricted:
            self.get_memory(memory_id)  # another user's/agent's record in this thread is "not found"
        return memory_update(thread=self._row, memory_id=memory_id, content=content, metadata=metadata,
                                      timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status,
                                      retention=self._client.retention_config, **window)

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this exact thread; return 1, or 0 when absent.

        Fences the thread's running extraction instead of waiting for it, as
        ``delete_message`` does (``services.memory_delete``).
        """
        if self._client.tenant.restricted:
            try:
                self.get_memory(memory_id)
            except NotFound:
                return 0  # absent, or another user's/agent's record in this thread
        return memory_delete(thread=self._row, memory_id=memory_id)

    def get_memory(self, memory_id: str, *, as_of: datetime | date | str | None | NotSet = NOTSET) -> MemoryRecord:
        """Return one memory-like record of this exact thread (KeyError otherwise). Not in the spec.

        A restricted client (``Tenant``) does not see records of another user or
        agent stored in its thread: KeyError, as for an absent one.

        ``as_of`` (issue #32, recorded time: a datetime, date or ISO-8601 string, not in the future): the record
        as the store held it then (``memory.records.as_of``): KeyError when it did not exist yet, had been deleted
        or expired by then, or was another thread's then; its content, status and metadata as they were.
        """
        at = check_as_of(as_of)
        if at is None:
            return selectors.memory_get(thread=self._row, memory_id=memory_id,
                                        restrict=self._client.tenant.row_filter())
        return memory_at(project_id=self._row.project_id, memory_id=memory_id, at=at, scope=self._as_of_scope())

    def _as_of_scope(self):
        """The version rows this handle may read as of an instant: this thread's, a restricted client's own."""
        return as_of_scope_q(thread_id=self._row.pk, **self._client.tenant.row_filter())

    def memory_records(self, memory_type: str | None = None, *,
                       valid_at: datetime | date | str | None | NotSet = NOTSET,
                       as_of: datetime | date | str | None | NotSet = NOTSET):
        """This thread's live memory-like records, oldest first, read lazily (``selectors.Records``, for
        paging); a restricted client's as ``get_memory`` says. ``valid_at`` (issue #32): only those whose
        validity window contains that instant (``selectors.memory_records``). ``as_of`` (issue #32, recorded
        time): this thread's memories as the store held them then, an ``AsOfRecords`` list
        (``memory.records.as_of``; ``erased_since`` when the thread's user or agent was erased since).
        Not in the spec."""
        at = check_as_of(as_of)
        if at is None:
            return selectors.memory_records(thread=self._row, memory_type=memory_type,
                                            restrict=self._client.tenant.row_filter(), valid_at=_or(valid_at, None))
        when = check_instant(_or(valid_at, None), "valid_at")
        found = memories_at(project_id=self._row.project_id, at=at, scope=self._as_of_scope(), valid_at=when,
                            memory_types={memory_type} if memory_type else None)
        subjects = {"user_id": self._row.user_id, "agent_id": self._row.agent_id,
                    **self._client.tenant.row_filter()}
        return answer([item.record for item in found], at,
                      erased_since(project_id=self._row.project_id, at=at, **subjects))

    def list_memories(self, memory_type: str | None = None, *,
                      valid_at: datetime | date | str | None | NotSet = NOTSET,
                      as_of: datetime | date | str | None | NotSet = NOTSET) -> list[MemoryRecord]:
        """Return this thread's live memory-like records, oldest first (see ``memory_records``, ``valid_at``
        and ``as_of`` too: with ``as_of`` the list is an ``AsOfRecords``). Not in the spec."""
        records = self.memory_records(memory_type, valid_at=valid_at, as_of=as_of)
        return records if isinstance(records, AsOfRecords) else list(records)

    def get_memory_history(self, memory_id: str, *, unreviewed: bool = True) -> list[MemoryVersionRecord]:
        """The history of a memory-like record of this thread, oldest version first (``memory.records.history``).

        Each entry says who acted (API key, staff user, extraction job, TTL
        expiry, relation), when, before -> after and why. Answers for a deleted
        memory too, until its user is erased. A restricted client sees only its
        own user's and agent's. ``unreviewed=False``: none for a memory awaiting
        review or rejected in review (what an API read key gets). Raises
        KeyError when the thread has no history of that id.
        """
        return history.history_list(project_id=self.project.pk, memory_id=memory_id, thread_id=self._row.pk,
                                    restrict=self._client.tenant.row_filter(), unreviewed=unreviewed)

    def restore_memory_version(self, memory_id: str, version: int) -> int:
        """Undo: restore version ``version`` of a memory of this thread as a new version; return its number.

        Content, type, metadata, status, expiry and event time come back and the
        search chunks are re-indexed (``services.memory_restore``). Raises
        KeyError for a missing memory or version, ValueError/TypeError for bad arguments.
        """
        return memory_restore(thread=self._row, memory_id=memory_id, version=version,
                                       restrict=self._client.tenant.row_filter())

    async def get_memory_history_async(self, memory_id: str, *, unreviewed: bool = True) -> list[MemoryVersionRecord]:
        """Asynchronous twin of :meth:`get_memory_history` (same arguments, result and errors)."""
        return await in_worker(self.get_memory_history, memory_id, unreviewed=unreviewed)

    async def restore_memory_version_async(self, memory_id: str, version: int) -> int:
        """Asynchronous twin of :meth:`restore_memory_version` (same arguments, result and errors)."""
        return await in_worker(self.restore_memory_version, memory_id, version)
