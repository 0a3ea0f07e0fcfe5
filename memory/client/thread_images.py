"""``Thread``'s standalone images (spec: add_image, update_image, delete_image, list_images), as the mixin
``ThreadImages``."""

from __future__ import annotations

from typing import Any

from memory.client.common import _or
from memory.core.types import NOTSET, ImageMimeType, ImageRecord, NotSet, TimeToLiveAnchor
from memory.records import selectors
from memory.records.validators import reject_unknown
from memory.services.images import image_add, image_delete, image_update


class ThreadImages:
    """A thread's images: store, update, delete and list them (bytes validated, descriptions searchable).

    The handle's state (``_row``, ``_client``, ``llm``, the resolved configs) is ``Thread``'s, which mixes
    this class in (``memory.client.thread``).
    """

    def add_image(self, image: bytes, description: str | None | NotSet = NOTSET,
                  mime_type: ImageMimeType | str | None | NotSet = NOTSET, image_id: str | None | NotSet = NOTSET,
                  user_id: str | None | NotSet = NOTSET, agent_id: str | None | NotSet = NOTSET,
                  thread_id: str | None | NotSet = NOTSET, metadata: dict[str, Any] | None | NotSet = NOTSET,
                  timestamp: str | None | NotSet = NOTSET, ttl_days: int | None | NotSet = NOTSET,
                  ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET, **store_kwargs: Any) -> str:
        """Store one image owned by this thread; return its id (spec: add_image).

        ``image`` is validated (PNG, JPEG or WEBP; size, pixel count, no
        animation, not corrupt or truncated: ``memory.records.image_rules``) against the
        thread's ``image_input_limit_config``; ``mime_type`` omitted is
        detected, given must match the bytes. ``description`` omitted or None
        is a caption by the thread's LLM; without an LLM it is refused
        (ValueError naming ``description``, as the SDK). ``user_id``/``agent_id``/``thread_id`` must equal the
        thread's when given. Raises ValueError for a refused image or a
        mismatch (``Conflict`` for a taken ``image_id``), TypeError for
        unknown keywords, ``memory.llm.adapters.LlmError`` when captioning fails (nothing stored).
        """
        reject_unknown(store_kwargs, "add_image")
        llm = self.llm
        return image_add(
            thread=self._row, image=image, description=description, mime_type=_or(mime_type, None),
            image_id=image_id, user_id=user_id, agent_id=agent_id, thread_id=thread_id,
            metadata=_or(metadata, None), timestamp=_or(timestamp, None),
            ttl_days=ttl_days, ttl_anchor=ttl_anchor, retention=self._client.retention_config,
            limits=self.image_input_limit_config, llm=llm, caption_required=True,
        )

    def update_image(self, image_id: str, image: bytes | NotSet = NOTSET, description: str | None | NotSet = NOTSET,
                     mime_type: ImageMimeType | str | NotSet = NOTSET,
                     metadata: dict[str, Any] | None | NotSet = NOTSET, timestamp: str | None | NotSet = NOTSET,
                     ttl_days: int | None | NotSet = NOTSET, ttl_anchor: TimeToLiveAnchor | str | NotSet = NOTSET,
                     **kwargs: Any) -> str:
        """Update an image owned by this thread; return its id (spec: update_image).

        Omitted values are kept; new ``image`` bytes need ``mime_type``;
        ``description=None`` asks the thread's LLM for a new caption. Raises
        ValueError for expiration settings on an image attached to a message
        (use ``update_message``), KeyError when the image is absent, expired or
        another thread's. See ``services.image_update``.
        """
        reject_unknown(kwargs, "update_image")
        return image_update(
            thread=self._row, image_id=image_id, image=image, description=description, mime_type=mime_type,
            metadata=metadata, timestamp=timestamp, ttl_days=ttl_days, ttl_anchor=ttl_anchor,
            retention=self._client.retention_config, limits=self.image_input_limit_config, llm=self.llm,
        )

    def delete_image(self, image_id: str) -> int:
        """Delete an image owned by this thread; return 1, or 0 when absent or another thread's (spec: delete_image).

        Raises ValueError for an image attached to a message: delete or update the message instead.
        """
        return image_delete(thread=self._row, image_id=image_id)

    def list_images(self, image_id: str | None | NotSet = NOTSET,
                    metadata_filter: dict[str, Any] | None | NotSet = NOTSET, include_bytes: bool | NotSet = NOTSET,
                    limit: int | None | NotSet = NOTSET, **kwargs: Any) -> list[ImageRecord]:
        """This thread's live images in store order (spec: list_images).

        Bytes are loaded only with ``include_bytes=True`` and an ``image_id``
        (ValueError without one). ``limit`` omitted: at most 100; None: all.
        See ``selectors.image_list``.
        """
        reject_unknown(kwargs, "list_images")
        return selectors.image_list(thread=self._row, image_id=image_id, metadata_filter=_or(metadata_filter, None),
                                    include_bytes=_or(include_bytes, False), limit=limit)

    def get_image(self, image_id: str, include_bytes: bool = False) -> ImageRecord:
        """Return one live image of this thread (KeyError otherwise). Not in the spec."""
        return selectors.image_get(thread=self._row, image_id=image_id, include_bytes=include_bytes)
