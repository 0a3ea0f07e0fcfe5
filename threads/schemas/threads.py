"""Bodies of ``threads/api/threads.py``: a thread, its extraction settings and image limits."""

from __future__ import annotations

from typing import Any, Union

from ninja import Field, Schema
from pydantic import StrictBool, StrictInt

from memory.client import Thread as ThreadHandle
from memory.extraction.config import (
    BackgroundExtractionQueueFullBehavior,
    MemoryExtractionImageContext,
    MemoryExtractionMode,
    MemoryLinkExtractionMode,
)
from memory.records.image_rules import IMAGE_LIMIT_MAXIMA
from threads.schemas.common import InSchema, MemoryType, Metadata


class MemoryExtractionConfigIn(InSchema):
    """Automatic extraction settings of a thread (SDK: MemoryExtractionConfig); omitted keys keep the client's,
    else the SDK defaults. Enum values are case-insensitive (the SDK's upper-case names too)."""

    memory_extraction_window: StrictInt = Field(
        None, description="Messages the LLM sees per call, targets included; <= 0 (default -1): the batch."
    )
    context_summary_update_frequency: StrictInt = Field(
        None, description="Messages after the summary before a refresh; <= 0 (default -1): every check."
    )
    memory_extraction_frequency: StrictInt = Field(
        None, description="New messages after which extraction is due; <= 0 (default -1): every add_messages call."
    )
    memory_extraction_token_limit: StrictInt = Field(
        None, description="Prompt token cap (default 100000); <= 0 disables it."
    )
    extract_memories: StrictBool = Field(None, description="Extraction on (default true; it also needs an LLM).")
    enable_context_summary: StrictBool = Field(None, description="Keep a durable summary (default true).")
    memory_extraction_custom_instructions: str | None = Field(None, description="Appended to the system prompt.")
    memory_link_extraction_custom_instructions: str | None = Field(
        None, description="Appended to the linking prompt (kept for SDK configs).")
    memory_extraction_image_context: MemoryExtractionImageContext = Field(
        None, description="disabled (default), image, caption or memory (extraction reads text parts here).")
    memory_extraction_inherit_message_metadata: Union[StrictBool, list[str]] = Field(
        None, description="Metadata memories inherit from their source messages: true (default), false, or keys."
    )
    extraction_mode: MemoryExtractionMode = Field(
        None, description="INLINE or BACKGROUND (default), the SDK's values; any case accepted.")
    memory_link_extraction_mode: MemoryLinkExtractionMode = Field(
        None, description="DISABLED, DURING_EXTRACTION or POST_EXTRACTION (default; any case accepted): relations "
                    "from extraction.")
    memory_link_extraction_token_limit: StrictInt = Field(None, description="Linking prompt cap (default 100000).")
    background_extraction_queue_full_behavior: BackgroundExtractionQueueFullBehavior = Field(
        None, description="DROP (default), WAIT_THEN_DROP or WAIT_THEN_RAISE, the SDK's values; any case accepted."
    )
    background_extraction_queue_put_timeout_seconds: float = Field(
        None, ge=0, description="Seconds to wait for room in a full queue (default 300)."
    )
    review_memory_types: list[MemoryType] = Field(
        None, description="Not the SDK's: extracted memories of these types wait for review (default "
                          "[\"guideline\", \"preference\"]; [] for none): stored, but not searched, listed or put "
                          "in context cards until approved (GET /api/review/memories).")
    review_added_memories: StrictBool = Field(
        None, description="Not the SDK's: add_memory of those types waits for review too (default false).")


class ImageInputLimitConfigIn(InSchema):
    """Image limits of a thread (SDK: ImageInputLimitConfig); omitted keys keep the client's, else the SDK
    defaults (10 MiB, 100 images, 100 MiB; 50,000,000 pixels)."""

    max_raw_image_bytes: StrictInt = Field(None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_raw_image_bytes"])
    max_images_per_llm_request: StrictInt = Field(None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_images_per_llm_request"])
    max_total_raw_image_bytes_per_llm_request: StrictInt = Field(
        None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_total_raw_image_bytes_per_llm_request"])
    max_image_pixels: StrictInt = Field(None, ge=1, le=IMAGE_LIMIT_MAXIMA["max_image_pixels"])


class ThreadIn(InSchema):
    """Create a thread. Omitted ids are generated UUIDs; an explicit null user/agent id stores null."""

    thread_id: str | None = Field(None, description="Omit or null for a generated UUID.")
    user_id: str | None = Field(None, description="Omit for a generated UUID; null stores no user.")
    agent_id: str | None = Field(None, description="Omit for a generated UUID; null stores no agent.")
    metadata: Metadata = None
    memory_extraction_config: MemoryExtractionConfigIn | None = Field(
        None, description="Extraction settings stored with the thread; omit for the defaults."
    )
    image_input_limit_config: ImageInputLimitConfigIn | None = Field(
        None, description="Image limits stored with the thread; omit for the defaults."
    )


class ThreadPatchIn(InSchema):
    """Replace a thread's metadata (null clears it; omitted leaves it) and store settings (SDK update_thread):
    each config laid over the thread's stored one field by field."""

    metadata: Metadata = None
    memory_extraction_config: MemoryExtractionConfigIn | None = Field(
        None, description="Extraction settings laid over the stored ones; omit to keep them."
    )
    image_input_limit_config: ImageInputLimitConfigIn | None = Field(
        None, description="Image limits laid over the stored ones; omit to keep them."
    )


class ThreadOut(Schema):
    """A thread's identity and metadata."""

    thread_id: str
    user_id: str | None
    agent_id: str | None
    metadata: dict[str, Any]

    @staticmethod
    def resolve_thread_id(obj) -> str:
        """Read the id from a ``memory.client.Thread`` handle or a stored thread row."""
        return obj.thread_id if isinstance(obj, ThreadHandle) else obj.public_id

    @staticmethod
    def resolve_metadata(obj) -> dict[str, Any]:
        """Stored metadata, ``{}`` when none."""
        return dict(obj.metadata or {})
