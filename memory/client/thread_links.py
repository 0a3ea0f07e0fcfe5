"""``Thread``'s relations between memory-like records (spec: link_records, update_record_link,
delete_record_link), as the mixin ``ThreadLinks``."""

from __future__ import annotations

from typing import Any

from memory.client.common import _or
from memory.core.types import NOTSET, NotSet, RecordRelation
from memory.links.writes import link_create, link_delete, link_get, link_list, link_update
from memory.records.validators import reject_unknown


class ThreadLinks:
    """A thread's relations: create, update, delete and read directed relations between its memories.

    The handle's state (``_row``, ``_client``, ``llm``, the resolved configs) is ``Thread``'s, which mixes
    this class in (``memory.client.thread``).
    """

    def link_records(self, source_record_id: str, source_record_type: str, target_record_id: str,
                     target_record_type: str, relation_type: str, opposite_relation_type: str | NotSet = NOTSET,
                     relation_id: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET, **kwargs: Any) -> str:
        """Create a directed relation between two memory-like records of this thread; return its id.

        Built-in types get their fixed reverse label unless
        ``opposite_relation_type`` is given; custom types default to the same
        label. The target of supersedes/refines/duplicates becomes invalid.
        Raises ValueError for a self-link, an endpoint that is not a live
        memory-like record of this exact thread (or not of the given type), an
        already related pair (either orientation) or a taken ``relation_id``;
        TypeError for unknown keywords. See ``memory.links.writes.link_create``.
        """
        reject_unknown(kwargs, "link_records")
        return link_create(
            thread=self._row, source_record_id=source_record_id, source_record_type=source_record_type,
            target_record_id=target_record_id, target_record_type=target_record_type, relation_type=relation_type,
            opposite_relation_type=opposite_relation_type, relation_id=relation_id, timestamp=_or(timestamp, None),
            metadata=_or(metadata, None), restrict=self._client.tenant.row_filter(),
        )

    def update_record_link(self, relation_id: str, relation_type: str | NotSet = NOTSET,
                           opposite_relation_type: str | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                           metadata: dict[str, Any] | None | NotSet = NOTSET, **kwargs: Any) -> int:
        """Update a relation of this thread; return 1, or 0 when there is none (spec: update_record_link).

        Omitted values are preserved; a new built-in ``relation_type`` brings its
        fixed reverse label. See ``memory.links.writes.link_update``.
        """
        reject_unknown(kwargs, "update_record_link")
        return link_update(thread=self._row, relation_id=relation_id, relation_type=relation_type,
                                 opposite_relation_type=opposite_relation_type, timestamp=timestamp,
                                 metadata=metadata, restrict=self._client.tenant.row_filter())

    def delete_record_link(self, source_record_id: str | NotSet = NOTSET, source_record_type: str | NotSet = NOTSET,
                           target_record_id: str | NotSet = NOTSET, target_record_type: str | NotSet = NOTSET,
                           relation_type: str | NotSet = NOTSET, relation_id: str | NotSet = NOTSET,
                           **kwargs: Any) -> int:
        """Delete a relation of this thread by ``relation_id`` alone or the complete endpoint tuple; return 0 or 1.

        The tuple uses the stored source-to-target orientation. Raises
        ValueError for a mixed or incomplete selector. See ``memory.links.writes.link_delete``.
        """
        reject_unknown(kwargs, "delete_record_link")
        return link_delete(thread=self._row, source_record_id=source_record_id,
                                 source_record_type=source_record_type, target_record_id=target_record_id,
                                 target_record_type=target_record_type, relation_type=relation_type,
                                 relation_id=relation_id, restrict=self._client.tenant.row_filter())

    def get_record_link(self, relation_id: str) -> RecordRelation:
        """Return one relation of this thread (KeyError otherwise). Not in the spec.

        A restricted client does not see a relation to a record of another user
        or agent stored in its thread (``memory.links.writes.visible``): KeyError, as
        for an absent one; ``update_record_link``/``delete_record_link`` then
        answer 0 and ``link_records`` refuses such an endpoint as unknown.
        """
        return link_get(thread=self._row, relation_id=relation_id, restrict=self._client.tenant.row_filter())

    def record_links(self, record_id: str | None = None):
        """This thread's relations, oldest first, read lazily (``selectors.Records``, for paging); with
        ``record_id``, those touching it; a restricted client's as ``get_record_link`` says. Not in the spec."""
        return link_list(thread=self._row, record_id=record_id, restrict=self._client.tenant.row_filter())
