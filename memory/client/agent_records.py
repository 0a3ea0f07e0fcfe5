"""``AgentMemory``'s records by id, whatever thread holds them (SDK: add_memory, update_memory,
delete_memory, add_image, update_image, delete_image, link_records, update_record_link, delete_record_link),
as the mixin ``AgentRecords``."""

from __future__ import annotations

from typing import Any

from memory.client.common import _extensions
from memory.client.thread import Thread
from memory.core.errors import InvalidArgument, NotFound
from memory.core.ids import stored_id
from memory.core.types import (
    NOTSET,
    ImageMimeType,
    NotSet,
    RecordStatus,
    TimeToLiveAnchor,
)
from memory.core.valid_time import WINDOW_FIELDS
from memory.extraction.tracker import wait_for_extraction
from memory.models import (
    Image as ImageRow,
)
from memory.models import (
    Memory as MemoryRow,
)
from memory.models import (
    RecordLink as RecordLinkRow,
)
from memory.models import (
    Thread as ThreadRow,
)
from memory.records.validators import check_id, reject_unknown
from memory.services.memories import memory_delete_by_id, memory_update


class AgentRecords:
    """A project's memories, images and relations, written by id through the thread that owns them.

    The client's state (``project``, ``tenant``, ``llm``, the configs) is ``AgentMemory``'s, which mixes
    this class in (``memory.client.agent``).
    """

    def _owner(self, model, record_id: Any, field: str) -> Thread:
        """A handle on the thread owning record ``record_id`` of ``model`` in this project; KeyError when none."""
        key = stored_id(self.project.pk, check_id(record_id, field))
        owner = model.objects.filter(pk=key).values_list("thread_id", flat=True).first()
        if owner is None:
            raise NotFound(field, record_id)
        row = ThreadRow.objects.filter(pk=owner, project=self.project).first()
        if row is None or not self.tenant.allows(row):
            raise NotFound(field, record_id)
        return Thread(row, self)

    def add_memory(self, content: str, *, memory_type: str | NotSet = NOTSET, user_id: str | None | NotSet = NOTSET,
                   agent_id: str | None | NotSet = NOTSET, thread_id: str | None | NotSet = NOTSET,
                   memory_id: str | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                   timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                   ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, status: RecordStatus | str | NotSet = NOTSET,
                   autonomous_linking: bool | NotSet = NOTSET, memory_id_to_link: str | NotSet = NOTSET,
                   link_type: str | NotSet = NOTSET, link_id: str | NotSet = NOTSET,
                   link_timestamp: str | None | NotSet = NOTSET, link_metadata: dict[str, Any] | None | NotSet = NOTSET,
                   derived_from: list[str] | None | NotSet = NOTSET, **store_kwargs: Any) -> str:
        """Store a memory in a thread of this project (SDK: ``OracleAgentMemory.add_memory``); see
        ``Thread.add_memory`` (``valid_from``/``valid_to`` in ``store_kwargs`` too: issue #32). ``thread_id``
        names the thread and is required here (every memory of this service is stored through a thread:
        ValueError without one; KeyError for an unknown thread); ``user_id``/``agent_id`` omitted inherit the
        thread's."""
        if thread_id is NOTSET or thread_id is None:
            raise InvalidArgument("thread_id", "required: memories are stored through a thread here")
        handle = Thread(self.thread_row(thread_id), self)
        return handle.add_memory(
            content, memory_type=memory_type, user_id=user_id, agent_id=agent_id, memory_id=memory_id,
            metadata=metadata, timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, status=status,
            autonomous_linking=autonomous_linking, memory_id_to_link=memory_id_to_link, link_type=link_type,
            link_id=link_id, link_timestamp=link_timestamp, link_metadata=link_metadata, derived_from=derived_from,
            **store_kwargs)

    def update_memory(self, memory_id: str, content: str | NotSet = NOTSET,
                      metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                      ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                      status: RecordStatus | str | NotSet = NOTSET, **kwargs: Any) -> str:
        """Update a live memory-like record of this project by id, whatever thread owns it or none (SDK:
        ``OracleAgentMemory.update_memory``; arguments as ``Thread.update_memory``, ``valid_from``/``valid_to``
        of issue #32 in ``kwargs`` too). Found and scoped as
        ``delete_memory`` finds them (``services.memory_update`` with ``project`` and the tenant's ``allows``):
        a restricted client updates its own user's and agent's records, in any thread. KeyError when there
        is none, it expired, or it is outside a restricted client's user and agent."""
        window = _extensions(kwargs, *WINDOW_FIELDS)
        reject_unknown(kwargs, "update_memory")
        return memory_update(project=self.project, allows=self.tenant.allows, memory_id=memory_id,
                                      content=content, metadata=metadata, timestamp=timestamp, ttl_days=ttl_days,
                                      ttl_anchor=ttl_anchor, status=status, retention=self.retention_config,
                                      **window)

    def delete_memory(self, memory_id: str) -> int:
        """Delete a memory-like record of this project by id, whatever thread owns it or none (SDK:
        ``OracleAgentMemory.delete_memory``); return 1, or 0 when there is none.

        Waits first, up to 300 s, for background extraction this process
        accepted for its thread (``TimeoutError`` then, nothing deleted). An
        expired record is deleted too; a restricted client deletes only its
        own user's and agent's (another counts as none). See
        ``services.memory_delete_by_id``.
        """
        key = stored_id(self.project.pk, check_id(memory_id, "memory_id"))
        owner = MemoryRow.objects.filter(pk=key).values_list("thread_id", flat=True).first()
        if owner is not None:
            wait_for_extraction(thread_id=owner, timeout=300)
        return memory_delete_by_id(project=self.project, memory_id=memory_id, allows=self.tenant.allows)

    def add_image(self, image: bytes, description: str | None | NotSet = NOTSET,
                  mime_type: ImageMimeType | str | None | NotSet = NOTSET, image_id: str | None | NotSet = NOTSET,
                  user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                  thread_id: str | None | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                  timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                  ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, **store_kwargs: Any) -> str:
        """Store an image in a thread of this project (``Thread.add_image``); ``thread_id`` is required here
        (ValueError without one, KeyError for an unknown thread)."""
        if thread_id is NOTSET or thread_id is None:
            raise InvalidArgument("thread_id", "required: images are stored through a thread here")
        handle = Thread(self.thread_row(thread_id), self)
        return handle.add_image(image, description=description, mime_type=mime_type, image_id=image_id,
                                user_id=user_id, agent_id=agent_id, metadata=metadata, timestamp=timestamp,
                                ttl_days=ttl_days, ttl_anchor=ttl_anchor, **store_kwargs)

    def update_image(self, image_id: str, image: bytes | NotSet = NOTSET, description: str | None | NotSet = NOTSET,
                     mime_type: ImageMimeType | str | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                     **kwargs: Any) -> str:
        """Update an image of this project by id, through its thread (``Thread.update_image``)."""
        return self._owner(ImageRow, image_id, "image_id").update_image(
            image_id, image=image, description=description, mime_type=mime_type, metadata=metadata,
            timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor, **kwargs)

    def delete_image(self, image_id: str) -> int:
        """Delete an image of this project by id (``Thread.delete_image``); 1, or 0 when there is none."""
        try:
            handle = self._owner(ImageRow, image_id, "image_id")
        except NotFound:
            return 0
        return handle.delete_image(image_id)

    def link_records(self, source_record_id: str, source_record_type: str, target_record_id: str,
                     target_record_type: str, relation_type: str, opposite_relation_type: str | NotSet = NOTSET,
                     relation_id: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET) -> str:
        """Relate two memory-like records of this project (``Thread.link_records`` on the source's thread:
        both must be of the same thread here; KeyError for an unknown source)."""
        return self._owner(MemoryRow, source_record_id, "source_record_id").link_records(
            source_record_id, source_record_type, target_record_id, target_record_type, relation_type,
            opposite_relation_type=opposite_relation_type, relation_id=relation_id, timestamp=timestamp,
            metadata=metadata)

    def update_record_link(self, relation_id: str, relation_type: str | NotSet = NOTSET,
                           opposite_relation_type: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                           metadata: dict[str, Any] | None | NotSet = NOTSET) -> int:
        """Update a relation of this project by id (``Thread.update_record_link``); 1, or 0 when none."""
        try:
            handle = self._owner(RecordLinkRow, relation_id, "relation_id")
        except NotFound:
            return 0
        return handle.update_record_link(relation_id, relation_type=relation_type,
                                         opposite_relation_type=opposite_relation_type, timestamp=timestamp,
                                         metadata=metadata)

    def delete_record_link(self, source_record_id: str | NotSet = NOTSET, source_record_type: str | NotSet = NOTSET,
                           target_record_id: str | NotSet = NOTSET, target_record_type: str | NotSet = NOTSET,
                           relation_type: str | NotSet = NOTSET, relation_id: str | NotSet = NOTSET) -> int:
        """Delete a relation of this project by ``relation_id`` alone or the complete endpoint tuple
        (``Thread.delete_record_link`` on its thread); 1, or 0 when there is none."""
        try:
            if relation_id is not NOTSET:
                handle = self._owner(RecordLinkRow, relation_id, "relation_id")
            elif source_record_id is NOTSET:
                raise InvalidArgument("relation_id", "give relation_id alone, or the complete endpoint tuple")
            else:
                handle = self._owner(MemoryRow, source_record_id, "source_record_id")
        except NotFound:
            return 0
        return handle.delete_record_link(source_record_id=source_record_id, source_record_type=source_record_type,
                                         target_record_id=target_record_id, target_record_type=target_record_type,
                                         relation_type=relation_type, relation_id=relation_id)
