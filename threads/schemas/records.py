"""Bodies of ``threads/api/records.py``: filters of the project-wide lists of messages, memories and images."""

from __future__ import annotations

from ninja import Field, Schema

from threads.schemas.memories import AS_OF, VALID_AT


class ProjectListQuery(Schema):
    """Filters of a project-wide list (SDK ``list_messages``/``list_memories``/``list_images``): each scope
    field omitted is no filter, given matches exactly; ``metadata_filter`` is JSON text (the search grammar)."""

    user_id: str = Field(None, description="Only records of this user.")
    agent_id: str = Field(None, description="Only records of this agent.")
    thread_id: str = Field(None, description="Only records of this thread.")
    metadata_filter: str = Field(None, description="A metadata filter as JSON text (the search grammar).")


class ProjectMemoryListQuery(ProjectListQuery):
    """``ProjectListQuery`` with valid time (issue #32): ``valid_at`` keeps the memories valid at that instant;
    and recorded time: ``as_of`` answers as the store stood then (``metadata_filter`` not with it)."""

    valid_at: str = Field(None, description=VALID_AT)
    as_of: str = Field(None, description=AS_OF)


class ProjectImageListQuery(ProjectListQuery):
    """``ProjectListQuery`` with an image id (standalone images only, as the SDK's client-level list)."""

    image_id: str = Field(None, description="Only this image.")
