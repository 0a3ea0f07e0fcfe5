"""``Thread``'s messages (spec: add_messages, get_messages, get_message, update_message, delete_message,
wait_for_memory_extraction; not in the spec: get_recent_messages, extract_pending_messages), as the mixin
``ThreadMessages``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings

from memory.client.common import _or
from memory.core.aio import in_worker
from memory.core.types import NOTSET, Message, MessageContent, NotSet, TimeToLiveAnchor
from memory.extraction.tracker import check_timeout, inflight, wait_for_extraction
from memory.records import selectors
from memory.records.validators import reject_unknown
from memory.services.extraction import extraction_after_add, extraction_after_edit
from memory.services.messages import message_delete, message_update, messages_add


class ThreadMessages:
    """A thread's messages: append, read, update and delete them; wait for or run their memory extraction.

    The handle's state (``_row``, ``_client``, ``llm``, the resolved configs) is ``Thread``'s, which mixes
    this class in (``memory.client.thread``).
    """

    def add_messages(self, messages: Sequence[Any],
                     metadata: dict[str, Any] | None | list[dict[str, Any] | None] | NotSet = NOTSET,
                     ttl_days: int | None | list[int | None] | NotSet = NOTSET,
                     ttl_anchor: TimeToLiveAnchor | str | list[TimeToLiveAnchor | str] | NotSet = NOTSET,
                     **store_kwargs: Any) -> list[str]:
        """Append messages (``Message`` objects or ``{"role", "content", "id"?}`` dicts); return their ids.

        ``metadata``, ``ttl_days`` and ``ttl_anchor`` are one value for the
        batch or a list with one per message. The batch is atomic. Raises
        ValueError/TypeError for bad input, TypeError for unknown keywords.

        The messages are committed first. Then, when extraction is on and due
        (``memory_extraction_config``, an LLM), INLINE extracts before this
        returns and BACKGROUND queues it (``memory.extraction``); a full queue
        raises ``TimeoutError`` under WAIT_THEN_RAISE, the messages stored.
        Extraction failures never raise here.
        """
        reject_unknown(store_kwargs, "add_messages")
        with inflight(self._row.pk):
            ids = messages_add(thread=self._row, messages=messages, metadata=metadata, ttl_days=ttl_days,
                                        ttl_anchor=ttl_anchor, retention=self._client.retention_config,
                                        image_limits=self.image_input_limit_config, llm=self.llm)
            extraction_after_add(thread=self._row, llm=self.llm, config=self.memory_extraction_config,
                                            retention=self._client.retention_config)
        return ids

    def get_messages(self, *, start: int | None | NotSet = NOTSET, end: int | None | NotSet = NOTSET,
                     include_image_bytes: bool | NotSet = NOTSET, **kwargs: Any) -> list[Message]:
        """Return live messages in chronological order (see ``selectors.message_list`` for start/end).

        Image parts are ``ImageContent`` with ``bytes=None`` unless
        ``include_image_bytes=True`` (one query for all their bytes).
        """
        reject_unknown(kwargs, "get_messages")
        return selectors.message_list(thread=self._row, start=start, end=end, window=settings.OAM_MESSAGE_WINDOW,
                                      include_image_bytes=_or(include_image_bytes, False))

    async def get_messages_async(self, start: int | None | NotSet = NOTSET, end: int | None | NotSet = NOTSET,
                                 include_image_bytes: bool | NotSet = NOTSET, **kwargs: Any) -> list[Message]:
        """Asynchronous twin of :meth:`get_messages` (positional ``start``/``end`` allowed, as the SDK's twin)."""
        return await in_worker(self.get_messages, start=start, end=end, include_image_bytes=include_image_bytes,
                               **kwargs)

    def get_recent_messages(self, limit: int) -> list[Message]:
        """The thread's ``limit`` most recent live messages, oldest first; only those rows are read. Not in the
        spec (``get_messages`` counts from the start). TypeError/ValueError for a ``limit`` that is not an int
        of at least 1 (``selectors.message_recent``)."""
        return selectors.message_recent(thread=self._row, limit=limit)

    def get_message(self, message_id: str, *, included_image_ids: list[str] | None | NotSet = NOTSET,
                    **kwargs: Any) -> Message:
        """Return one message of this thread. Raises KeyError if absent, expired or another thread's.

        Image parts carry their id, MIME type and description; the bytes of
        those whose ids are in ``included_image_ids`` are loaded (other ids are ignored).
        """
        reject_unknown(kwargs, "get_message")
        return selectors.message_get(thread=self._row, message_id=message_id,
                                     included_image_ids=_or(included_image_ids, None))

    def update_message(self, message_id: str,
                       content: str | Sequence[MessageContent | Mapping[str, Any]] | NotSet = NOTSET,
                       metadata: dict[str, Any] | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                       ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, **kwargs: Any) -> str:
        """Update content, metadata or expiry of a message of this exact thread; return its id.

        Raises KeyError when the message is absent, expired or another thread's.
        New content of a message already extracted is re-extracted (with its
        earlier history as context) when extraction is on: before this returns
        in INLINE mode, queued in BACKGROUND mode; existing memories stay.
        New content replaces the message's images: image parts with bytes are
        new images, an image part with only the id of an attached image keeps
        it, and attached images left out are deleted (``services.message_update``).
        """
        reject_unknown(kwargs, "update_message")
        with inflight(self._row.pk):
            updated = message_update(thread=self._row, message_id=message_id, content=content,
                                              metadata=metadata, ttl_days=ttl_days, ttl_anchor=ttl_anchor,
                                              retention=self._client.retention_config,
                                              image_limits=self.image_input_limit_config, llm=self.llm)
            if content is not NOTSET:
                extraction_after_edit(thread=self._row, message_id=updated, llm=self.llm,
                                                 config=self.memory_extraction_config,
                                                 retention=self._client.retention_config)
        return updated

    def delete_message(self, message_id: str) -> int:
        """Delete a message of this exact thread; return 1, or 0 when absent or another thread's.

        The spec waits for earlier background extraction first; here the
        thread's running extraction is fenced instead (``services.message_delete``):
        it writes nothing and runs again without the message, and the delete
        returns at once (deletes used to wait minutes for a hung LLM).
        """
        return message_delete(thread=self._row, message_id=message_id)

    def wait_for_memory_extraction(self, timeout: float | None = 300) -> None:
        """Wait for background extraction this process accepted for the thread before the call (spec).

        Includes work a concurrent ``add_messages``/``update_message`` of this
        process is about to accept; failed extraction counts as finished.
        ``timeout`` in seconds, None to wait without limit. Raises
        ``TimeoutError`` when it expires first; TypeError/ValueError for a bad timeout.
        """
        wait_for_extraction(thread_id=self._row.pk, timeout=check_timeout(timeout))

    def extract_pending_messages(self) -> int | None:
        """Extract the messages after the watermark now, whatever the frequency; return the job id or None.

        Not in the spec: the staff pages' "Extract now". Same path as after
        ``add_messages`` (INLINE runs before returning, BACKGROUND queues;
        progress events go to the thread's WebSocket group) with the
        frequency rule set aside. None when extraction is off (no LLM, or
        ``extract_memories`` false) or no message is pending. Raises
        ``TimeoutError`` under WAIT_THEN_RAISE when the queue stays full.
        """
        config = self.memory_extraction_config
        llm = self.llm
        if llm is None or not config.extract_memories:
            return None
        with inflight(self._row.pk):
            job = extraction_after_add(
                thread=self._row, llm=llm, config=dataclasses.replace(config, memory_extraction_frequency=-1),
                retention=self._client.retention_config)
        return job.pk if job is not None else None

    async def wait_for_memory_extraction_async(self, timeout: float | None = 300) -> None:
        """Asynchronous twin of :meth:`wait_for_memory_extraction` (same behaviour and errors).

        Waits in a thread of its own rather than the thread-sensitive one, so
        that other ``_async`` calls are not held up meanwhile; that thread's
        database connection is closed after the wait.
        """
        await in_worker(self.wait_for_memory_extraction, timeout, thread_sensitive=False)
