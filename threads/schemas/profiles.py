"""Bodies of ``threads/api/profiles.py``: a user's or agent's profile in and out, and its list filter."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Field, Schema

from threads.schemas.common import InSchema, Metadata


class ProfileIn(InSchema):
    """A user's or agent's profile (SDK ``add_user``/``add_agent``); replaces a stored one."""

    information: str = Field(description="Free-form information about the user or agent.")
    metadata: Metadata = None


class ProfileQuery(Schema):
    """Filter of the profile listing."""

    metadata_filter: str = Field(None, description="A metadata filter as JSON text (the search grammar).")


class ProfileOut(Schema):
    """A profile (SDK ``UserProfileRecord``/``AgentProfileRecord``): ``id`` is the user or agent id."""

    record_type: Literal["user_profile", "agent_profile"]
    id: str
    content: str | None
    metadata: dict[str, Any] | None
    timestamp: str | None
