"""Bodies of ``threads/api/keys.py``: a new API key, a stored key, and a key shown once with its secret."""

from __future__ import annotations

from typing import Literal

from ninja import Field, Schema
from pydantic import AwareDatetime

from threads.schemas.common import InSchema


class KeyIn(InSchema):
    """A new API key of the calling key's project."""

    name: str = Field(min_length=1, max_length=100, description="A label, e.g. the application using it.")
    permission: Literal["read", "write", "admin"] = Field(
        "write", description="read: reads and searches; write: also writes and deletes; admin: also manages keys "
                             "and erases users and agents.")
    user_id: str | None = Field(None, description="Act for this end user only (omit or null: any user).")
    agent_id: str | None = Field(None, description="Act for this agent only (omit or null: any agent).")
    expires_at: AwareDatetime | None = Field(None, description="Refused from this instant on (ISO 8601 with a "
                                                                "zone); omit or null: never.")


class KeyOut(Schema):
    """An API key as stored: never the key itself."""

    key_id: int = Field(description="Names the key in /api/keys/{key_id}.")
    name: str
    prefix: str = Field(description="The key's first characters, to recognise it.")
    project: str = Field(description="The project's slug.")
    permission: str
    user_id: str | None
    agent_id: str | None
    expires_at: str | None
    active: bool = Field(description="False once revoked.")
    created_at: str
    created_by: str
    last_used_at: str | None
    rotated_at: str | None
    revoked_at: str | None

    @staticmethod
    def resolve_key_id(obj) -> int:
        return obj.pk

    @staticmethod
    def resolve_project(obj) -> str:
        return obj.project.slug

    @staticmethod
    def resolve_active(obj) -> bool:
        return obj.is_active

    @staticmethod
    def _iso(value) -> str | None:
        return value.isoformat() if value is not None else None

    @staticmethod
    def resolve_expires_at(obj) -> str | None:
        return KeyOut._iso(obj.expires_at)

    @staticmethod
    def resolve_created_at(obj) -> str:
        return obj.created_at.isoformat()

    @staticmethod
    def resolve_last_used_at(obj) -> str | None:
        return KeyOut._iso(obj.last_used_at)

    @staticmethod
    def resolve_rotated_at(obj) -> str | None:
        return KeyOut._iso(obj.rotated_at)

    @staticmethod
    def resolve_revoked_at(obj) -> str | None:
        return KeyOut._iso(obj.revoked_at)


class KeyCreatedOut(KeyOut):
    """A key just created or rotated, with the raw key: shown this once, never stored."""

    key: str = Field(description="Send as `Authorization: Bearer <key>`. It cannot be shown again.")
