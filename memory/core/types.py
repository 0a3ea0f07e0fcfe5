"""Public value types of the thread API (spec: Message, TextContent, ImageContent,
ImageMimeType, ImageRecord, RecordStatus, TimeToLiveAnchor, MemoryRetentionConfig, SearchScope,
SearchResult, MemorySearchConfig, OracleSummary, OracleContextCard).

These are plain Python objects handed to and returned by ``memory.client``; the
database models stay behind the services.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, final

from memory.core.rendering import render_context_card, render_record


@final
class NotSet:
    """The type of ``NOTSET``, the mark of an omitted argument, so that an explicit None can mean something else
    (the sentinel pattern of PEP 661). Annotate ``name: T | NotSet = NOTSET`` and test ``name is NOTSET``: there
    is one instance (``NotSet()``, copies and unpickled ones are it), it is falsy and its repr is ``NOTSET``."""

    __slots__ = ()
    _instance: ClassVar[NotSet | None] = None

    def __new__(cls) -> NotSet:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NOTSET"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "NOTSET"  # pickled, copied and deep-copied as this module's global: the one instance


NOTSET: Final[NotSet] = NotSet()


class RecordStatus(str, enum.Enum):
    """Lifecycle status of a record (spec: RecordStatus)."""

    VALID = "valid"
    INVALID = "invalid"


class TimeToLiveAnchor(str, enum.Enum):
    """What a TTL counts from (spec: TimeToLiveAnchor)."""

    CREATED_AT = "created_at"
    TIMESTAMP = "timestamp"


class ImageMimeType(str, enum.Enum):
    """MIME types supported for image content. Animated PNG and WebP are not supported."""

    JPEG = "image/jpeg"
    PNG = "image/png"
    WEBP = "image/webp"


@dataclass(frozen=True)
class MessageContent:
    """Base of structured message content parts; ``id`` is generated when omitted."""

    id: str = field(default_factory=lambda: str(uuid.uuid4()), kw_only=True)
    timestamp: str | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class TextContent(MessageContent):
    """A text part of a multimodal message."""

    text: str = ""


@dataclass(frozen=True)
class ImageContent(MessageContent):
    """An image part of a multimodal message (``bytes`` is None when not loaded)."""

    bytes: bytes | None = None
    mime_type: ImageMimeType | None = None
    description: str | None = None


@dataclass
class Message:
    """A thread message (spec: Message).

    ``content`` is a string or an ordered tuple of content parts. ``timestamp``
    is the stored event time as given, or the creation time (ISO-8601, UTC)
    when none was given. ``created_at``/``expires_at``/``status``/``thread_id``
    are filled on messages read back from a thread.
    """

    role: str
    content: Any
    timestamp: str | None = None
    metadata: dict[str, Any] | None = None
    id: str | None = None
    thread_id: str | None = None
    status: str = RecordStatus.VALID.value
    created_at: str | None = None
    expires_at: str | None = None

    record_type = "message"

    @property
    def text(self) -> str:
        """The message's text: the string content, or its text parts joined by newlines."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextContent))


class Record:
    """Base of the stored record types (SDK: ``oracleagentmemory.apis.Record``).

    ``linked_results`` is empty on records: linked memories of a search hit are on the
    ``SearchResult`` (``SearchResult.linked_results``).
    """

    @property
    def linked_results(self) -> tuple:
        return ()


@dataclass
class MessageRecord(Message, Record):
    """A stored message as the SDK's ``MessageRecord``: a ``Message`` with its scope and sequence number
    (``seq_no``: its 0-based position in the thread, None when not read)."""

    user_id: str | None = None
    agent_id: str | None = None
    seq_no: int | None = None


@dataclass
class MemoryRecord(Record):
    """A stored memory-like record: memory, fact, guideline or preference (SDK: ``MemoryRecord``; the
    other three types are its subclasses ``FactRecord``, ``GuidelineRecord`` and ``PreferenceRecord``,
    and reads return the subclass of the record's type)."""

    id: str
    content: str
    memory_type: str = "memory"
    user_id: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None
    timestamp: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = RecordStatus.VALID.value
    created_at: str | None = None
    expires_at: str | None = None
    source_message_ids: list[str] = field(default_factory=list)
    #: Valid time (issue #32, ``memory.core.valid_time``): when the fact holds in the world, ISO-8601 or None (open).
    valid_from: str | None = None
    valid_to: str | None = None
    # Dependants (issue #32, not in the SDK): a memory it was derived from changed since (``review_cause`` names
    # the change: ``memory.links.dependants``); kept and searchable until a reviewer clears it.
    needs_review: bool = False
    review_cause: dict[str, Any] | None = None

    @property
    def record_type(self) -> str:
        return self.memory_type

    @property
    def text(self) -> str:
        return self.content


@dataclass
class FactRecord(MemoryRecord):
    """A stored fact (SDK: ``FactRecord``)."""

    memory_type: str = "fact"


@dataclass
class GuidelineRecord(MemoryRecord):
    """A stored guideline (SDK: ``GuidelineRecord``)."""

    memory_type: str = "guideline"


@dataclass
class PreferenceRecord(MemoryRecord):
    """A stored preference (SDK: ``PreferenceRecord``)."""

    memory_type: str = "preference"


#: The record class of each memory type.
MEMORY_RECORD_CLASSES: dict[str, type[MemoryRecord]] = {
    "memory": MemoryRecord, "fact": FactRecord, "guideline": GuidelineRecord, "preference": PreferenceRecord,
}


def memory_record(**fields: Any) -> MemoryRecord:
    """A ``MemoryRecord`` of the subclass its ``memory_type`` names (``memory`` when omitted)."""
    return MEMORY_RECORD_CLASSES.get(fields.get("memory_type", "memory"), MemoryRecord)(**fields)


@dataclass
class ImageRecord(Record):
    """A stored image (spec: list_images -> ImageRecord).

    ``bytes`` is None unless the read asked for it (``list_images(image_id=...,
    include_bytes=True)``); ``description`` is the searchable text (None: not
    described). ``message_id`` names the message the image is a part of (None:
    a standalone image from ``add_image``). ``timestamp`` is the stored event
    time, or the creation time when none was given. ``width``/``height`` are
    pixels, ``size_bytes`` the length of the stored bytes.
    """

    id: str
    mime_type: ImageMimeType
    description: str | None = None
    bytes: bytes | None = None
    thread_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    message_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None
    created_at: str | None = None
    expires_at: str | None = None
    width: int = 0
    height: int = 0
    size_bytes: int = 0
    status: str = RecordStatus.VALID.value

    record_type = "image"

    @property
    def text(self) -> str:
        """The searchable text: the description ('' when there is none)."""
        return self.description or ""

    @property
    def content(self) -> str | None:
        """The description, the image's searchable text (SDK: ``ImageRecord.content``)."""
        return self.description


@dataclass
class UserProfileRecord(Record):
    """A user's profile (SDK: ``UserProfileRecord``): ``id`` the user id, ``content`` the information."""

    id: str
    content: str | None = None
    timestamp: str | None = None
    metadata: dict[str, Any] | None = None
    status: str = RecordStatus.VALID.value

    record_type = "user_profile"


@dataclass
class AgentProfileRecord(Record):
    """An agent's profile (SDK: ``AgentProfileRecord``): ``id`` the agent id, ``content`` the information."""

    id: str
    content: str | None = None
    timestamp: str | None = None
    metadata: dict[str, Any] | None = None
    status: str = RecordStatus.VALID.value

    record_type = "agent_profile"


@dataclass(frozen=True)
class MemoryRetentionConfig:
    """Retention rules (SDK: MemoryRetentionConfig).

    ``default_ttl_days``: the schema default used when ``ttl_days`` is omitted. ``max_ttl_days``: the
    cap; larger values are clamped to it with a warning, an explicit ``ttl_days=None`` resolves to it,
    and so does an omitted one when no default is set. Both default to ``NOTSET``, read as None (no
    default, no cap). Each is an int of 0 or more (0: records expire at once) or None; the default may
    not exceed the cap. ValueError otherwise, as the SDK (``memory.core.ttl.resolve_ttl_days`` applies them).
    """

    default_ttl_days: int | None | NotSet = NOTSET
    max_ttl_days: int | None | NotSet = NOTSET

    def __post_init__(self):
        for name in ("default_ttl_days", "max_ttl_days"):
            value = getattr(self, name)
            if value is NOTSET:
                object.__setattr__(self, name, None)
            elif value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"memory_retention_config.{name} must be a non-negative integer or None")
        if (self.default_ttl_days is not None and self.max_ttl_days is not None
                and self.default_ttl_days > self.max_ttl_days):
            raise ValueError("memory_retention_config.default_ttl_days must be less than or equal to "
                             "memory_retention_config.max_ttl_days")


@dataclass(frozen=True)
class SearchScope:
    """A prebuilt search scope (spec: SearchScope).

    Every field defaults to ``NOTSET``, which the search using the scope
    replaces with its own default (SDK 26.8.0; ``memory.search.request.resolve_scope``):
    a thread's search fills in the thread's user, agent and id. With
    ``exact_*_match=True`` a given id (``None`` included) must equal the stored
    value; with ``False`` the dimension is unconstrained.
    """

    user_id: str | None | NotSet = NOTSET
    agent_id: str | None | NotSet = NOTSET
    thread_id: str | None | NotSet = NOTSET
    exact_user_match: bool | NotSet = NOTSET
    exact_agent_match: bool | NotSet = NOTSET
    exact_thread_match: bool | NotSet = NOTSET


@dataclass(frozen=True)
class MemorySearchConfig:
    """Default search settings of a thread (SDK: MemorySearchConfig, whose fields come first).

    Token budgets are off (``NOTSET``, read as None) by default. ``max_results`` (the SDK's
    ``TopKMemorySearchConfig`` field) defaults to 10. ``mode`` (an OAM Site extension) ranks by VECTOR,
    KEYWORD or HYBRID (vector and keyword fused, ``memory.search``); None uses
    ``settings.OAM_SEARCH_MODE``, HYBRID unless configured.
    """

    token_budget: int | None | NotSet = NOTSET
    soft_token_budget: int | None | NotSet = NOTSET
    max_results: int = 10
    mode: str | None = None

    def __post_init__(self):
        for name in ("token_budget", "soft_token_budget"):
            if getattr(self, name) is NOTSET:
                object.__setattr__(self, name, None)


class _RecordView:
    """Shortcuts to the wrapped ``record``: its type, id and text."""

    record: Any

    @property
    def record_type(self) -> str:
        return self.record.record_type

    @property
    def record_id(self) -> str:
        return self.record.id

    @property
    def content(self) -> str:
        return self.record.text


@dataclass
class LinkedRecord(_RecordView):
    """A memory reached from a direct search result by following relations (spec: search ``num_hops``).

    ``relation_type`` is the label as traversed from ``from_record_id`` to this
    record (``relation_type`` source -> target, ``opposite_relation_type``
    target -> source); ``relation_id`` is that relation; ``hops`` counts edges
    from the direct result (1 = directly related).
    """

    record: MemoryRecord
    relation_type: str
    relation_id: str
    hops: int
    from_record_id: str


@dataclass
class RecordRelation:
    """A stored directed relation between two memory-like records of one thread (spec: link_records)."""

    relation_id: str
    thread_id: str
    source_record_id: str
    source_record_type: str
    target_record_id: str
    target_record_type: str
    relation_type: str
    opposite_relation_type: str
    timestamp: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None


@dataclass
class SearchResult(_RecordView):
    """One search hit: the typed record, its distance and score (SDK: ``OracleSearchResult``).

    ``distance`` is the cosine distance of the best matching chunk (0 is
    identical, 2 opposite); ``score`` is the ranking score, higher is better:
    the fused RRF score in HYBRID and KEYWORD modes, ``1 - distance`` in VECTOR
    mode (``memory.search``). ``formatted_content`` (and ``format_content()``)
    is the record rendered as in a context card's ``<relevant_information>``.
    ``linked`` holds the memories reached through relations when the search
    asked for ``num_hops`` (memory-like results only; empty otherwise);
    ``linked_results`` gives them as the SDK's ``(relation, result)`` pairs.
    ``id``, ``metadata``, ``status`` and ``timestamp`` are the record's.
    """

    record: Message | MemoryRecord | ImageRecord
    distance: float
    score: float
    linked: list[LinkedRecord] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def metadata(self) -> dict[str, Any] | None:
        return self.record.metadata

    @property
    def status(self) -> RecordStatus:
        status = self.record.status
        return status if isinstance(status, RecordStatus) else RecordStatus(status)

    @property
    def timestamp(self) -> str | None:
        return self.record.timestamp

    @property
    def linked_results(self) -> list[tuple[LinkedRecord, SearchResult]]:
        """``(link, result)`` per linked memory: ``link`` carries ``relation_id``, ``relation_type`` (as
        traversed), ``hops`` and ``from_record_id``; ``result`` wraps the memory (linked memories are not
        ranked: distance NaN, score 0)."""
        return [(link, SearchResult(record=link.record, distance=float("nan"), score=0.0)) for link in self.linked]

    @property
    def formatted_content(self) -> str:
        return render_record(self.record)

    def format_content(self, format_config: NotSet = NOTSET) -> str:
        """The record as ``formatted_content`` (one fixed format here: ``format_config`` is not supported, any
        value given raises TypeError, hence its type)."""
        if format_config is not NOTSET:
            raise TypeError("format_config: not supported; results render in one fixed format")
        return self.formatted_content

    def __str__(self) -> str:
        return self.formatted_content


@dataclass(frozen=True)
class Summary:
    """A thread summary (spec: OracleSummary). ``str()`` and ``formatted_content`` are the text itself."""

    content: str

    @property
    def formatted_content(self) -> str:
        """The summary as pasted into prompts: the text as is (no markup)."""
        return self.content

    def __str__(self) -> str:
        return self.content


@dataclass
class ContextCard:
    """A context card (spec: OracleContextCard): summary, topics, relevant records, recent messages.

    ``content``/``formatted_content``/``str()`` render the XML-like text of
    ``memory.core.rendering.render_context_card``; a card with nothing in it renders
    as the empty string.
    """

    summary: str = ""
    topics: list[str] | None = None
    relevant_results: list[SearchResult] | None = None
    recent_messages: list[Message] | None = None

    @property
    def formatted_content(self) -> str:
        """The rendered ``<context_card>`` text ('' for an empty card)."""
        return render_context_card(self)

    @property
    def content(self) -> str:
        """Same as ``formatted_content`` (the spec gives both)."""
        return self.formatted_content

    def __str__(self) -> str:
        return self.formatted_content


OracleSummary = Summary
OracleContextCard = ContextCard
OracleSearchResult = SearchResult
