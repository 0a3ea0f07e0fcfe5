"""Automatic memory extraction settings (spec: MemoryExtractionConfig, MemoryExtractionMode).

``MemoryExtractionConfig`` groups what the spec's OracleThread constructor
also accepts as deprecated inline parameters (``memory_extraction_window`` ...,
deprecated since 26.6.0): pass either the grouped config or the inline
parameters, never both (``resolve_extraction_config``).

A thread's config is stored flat in ``Thread.config`` under the spec's
parameter names (``to_thread_config``/``from_thread_config``), the same keys
``memory.context.summaries`` reads (``enable_context_summary``,
``context_summary_update_frequency``), so a thread opened later, in any
process, keeps its settings.

Defaults: the spec's where it states one (window -1, summary update frequency
-1, context summary on, inherit message metadata True); ours elsewhere, each
said why in ``MemoryExtractionConfig``.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memory.core.errors import InvalidArgument, InvalidType
from memory.core.types import MEMORY_RECORD_CLASSES as MEMORY_TYPES
from memory.core.types import NOTSET, NotSet


class _CaseInsensitiveEnum(str, enum.Enum):
    """A str enum that also takes its members' names and values in any case: values are the SDK's
    (upper case for the extraction modes and queue-full behaviour), while API bodies, Python callers and
    thread configs stored before 26.8 parity may spell them lower case."""

    @classmethod
    def _missing_(cls, value):
        if isinstance(value, str):
            wanted = value.lower()
            for name, member in cls.__members__.items():  # aliases included (earlier names)
                if wanted in (member.value.lower(), name.lower()):
                    return member
            return cls._LEGACY_VALUES().get(wanted)
        return None

    @classmethod
    def _LEGACY_VALUES(cls) -> dict[str, Any]:
        return {}


class MemoryExtractionMode(_CaseInsensitiveEnum):
    """When extraction runs (SDK: MemoryExtractionMode; the SDK's values, taken in any case).

    ``INLINE``: before ``add_messages``/``update_message`` return.
    ``BACKGROUND``: a Dramatiq actor runs it after the call returns.
    """

    INLINE = "INLINE"
    BACKGROUND = "BACKGROUND"


class MemoryExtractionImageContext(_CaseInsensitiveEnum):
    """What extraction sees of a message's images (SDK 26.8: ``MemoryExtractionImageContext``, default DISABLED).

    ``DISABLED``: nothing. ``IMAGE``: the image itself (needs a vision LLM). ``CAPTION``: its stored
    description. ``MEMORY``: its description, also stored as a memory. Here extraction reads a message's
    text parts only, DISABLED's behaviour, whatever the value: the others are accepted and kept so that
    an SDK application's config constructs (docs/python.md, "Switching from oracleagentmemory").
    """

    DISABLED = "disabled"
    IMAGE = "image"
    CAPTION = "caption"
    MEMORY = "memory"


class MemoryLinkExtractionMode(_CaseInsensitiveEnum):
    """When extracted memories are related to stored ones (SDK 26.8: ``MemoryLinkExtractionMode``).

    ``DISABLED``: never. ``DURING_EXTRACTION``: in the extraction call. ``POST_EXTRACTION`` (default):
    in a call of its own after it. Here an extracted memory that updates or contradicts a stored one is
    related to it from the extraction's own decision (``memory.extraction``) unless the mode is DISABLED;
    the two other modes behave alike.
    """

    DISABLED = "DISABLED"
    DURING_EXTRACTION = "DURING_EXTRACTION"
    POST_EXTRACTION = "POST_EXTRACTION"


class BackgroundExtractionQueueFullBehavior(_CaseInsensitiveEnum):
    """What a BACKGROUND call does when the extraction queue is full (SDK: add_messages Notes).

    ``DROP`` (the SDK's default): continue at once without queueing (the messages wait for the
    thread's next extraction). ``WAIT_THEN_DROP``: wait up to
    ``background_extraction_queue_put_timeout_seconds`` for room, then drop. ``WAIT_THEN_RAISE``: wait
    as long, then raise ``TimeoutError``. In every case the raw messages are already stored. Values are
    the SDK's (``"DROP"`` ...); any case is accepted.
    ``SKIP``/``WAIT_THEN_SKIP`` (and the values ``skip``/``wait_then_skip`` of configs stored before)
    are the earlier names of DROP/WAIT_THEN_DROP.
    """

    DROP = "DROP"
    WAIT_THEN_DROP = "WAIT_THEN_DROP"
    WAIT_THEN_RAISE = "WAIT_THEN_RAISE"
    SKIP = "DROP"  # alias (earlier name)
    WAIT_THEN_SKIP = "WAIT_THEN_DROP"  # alias (earlier name)

    @classmethod
    def _LEGACY_VALUES(cls) -> dict[str, Any]:
        return {"skip": cls.DROP, "wait_then_skip": cls.WAIT_THEN_DROP}


def _enum(cls: type[enum.Enum], value: Any, field: str) -> enum.Enum:
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(m.name for m in cls)
        raise InvalidArgument(field, f"must be one of: {allowed}") from None


def _int(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, f"must be an int, not {type(value).__name__}")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidType(field, f"must be a bool, not {type(value).__name__}")
    return value


def _memory_types(value: Any, field: str) -> tuple[str, ...]:
    """A non-string sequence of memory types (``memory.models.MEMORY_TYPES``, read here from
    ``memory.core.types.MEMORY_RECORD_CLASSES``: configs are made before Django's models load), stored as a
    sorted tuple without repeats; empty: nothing needs review."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidType(field, "must be a list of memory types")
    for item in value:
        if not isinstance(item, str):
            raise InvalidType(field, "must be a list of memory types (strings)")
        if item not in MEMORY_TYPES:
            raise InvalidArgument(field, f"{item!r} is not a memory type; allowed: {', '.join(MEMORY_TYPES)}")
    return tuple(sorted(set(value)))


def _inherit(value: Any, field: str) -> bool | tuple[str, ...]:
    """True, False, or a non-string sequence of top-level metadata keys (stored as a tuple)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidType(field, "must be True, False or a non-string sequence of metadata keys")
    keys = tuple(value)
    for key in keys:
        if not isinstance(key, str) or not key:
            raise InvalidType(field, "metadata keys must be non-empty strings")
    return keys


#: The resolved default of each ``MemoryExtractionConfig`` field (the SDK 26.8.0 defaults, except
#: ``enable_context_summary``: the page says "Defaults to True for standalone OracleThread()").
EXTRACTION_DEFAULTS: dict[str, Any] = {
    "memory_extraction_window": -1,
    "context_summary_update_frequency": -1,
    "memory_extraction_frequency": -1,
    "memory_extraction_token_limit": 100_000,
    "extract_memories": True,
    "enable_context_summary": True,
    "memory_extraction_custom_instructions": None,
    "memory_link_extraction_custom_instructions": None,
    "memory_extraction_image_context": MemoryExtractionImageContext.DISABLED,
    "memory_extraction_inherit_message_metadata": True,
    "extraction_mode": MemoryExtractionMode.BACKGROUND,
    "memory_link_extraction_mode": MemoryLinkExtractionMode.POST_EXTRACTION,
    "memory_link_extraction_token_limit": 100_000,
    "background_extraction_queue_full_behavior": BackgroundExtractionQueueFullBehavior.DROP,
    "background_extraction_queue_put_timeout_seconds": 300.0,
    # Not the SDK's: the review policy (``memory.records.review_rules``), after the SDK's fields.
    "review_memory_types": ("guideline", "preference"),
    "review_added_memories": False,
}


@dataclass(frozen=True)
class MemoryExtractionConfig:
    """Thread-level automatic extraction settings (SDK 26.8.0: ``MemoryExtractionConfig``; the fields, their
    order and their resolved defaults are the SDK's).

    Every field defaults to ``NOTSET`` ("not given"); the instance reads the resolved default
    (``EXTRACTION_DEFAULTS``) in its place, and remembers which fields were given (``given_fields``), so
    that a thread's config laid over its client's takes from the thread only what the thread set, field
    by field (``merged_over``), as the SDK resolves them.

    * ``memory_extraction_window`` (-1): messages the LLM sees per call, the newest (target) ones
      included; <= 0: the batch alone. A longer range is split into calls of at most this many targets.
    * ``context_summary_update_frequency`` (-1) and ``enable_context_summary`` (True; the page: "Defaults
      to True for standalone OracleThread()"): the durable summary is refreshed after a due extraction
      (``memory.context.summaries``) and a summary from before the target messages is extraction context.
    * ``memory_extraction_frequency`` (-1): new messages after which extraction is due; <= 0 means once
      per ``add_messages`` call, over its whole batch.
    * ``memory_extraction_token_limit`` (100,000): prompt cap in tokens. A range that does not fit is
      split over several calls; only a single message larger than the cap is cut. <= 0 disables it.
    * ``extract_memories`` (True): extraction on at all. It also needs an LLM.
    * ``memory_extraction_custom_instructions`` / ``memory_link_extraction_custom_instructions`` (None):
      appended to the extraction / linking system prompt.
    * ``memory_extraction_image_context`` (DISABLED): ``MemoryExtractionImageContext``.
    * ``memory_extraction_inherit_message_metadata`` (True): extracted memories inherit their source
      messages' metadata: all keys (True), the listed top-level keys, or none (False), when it matches
      across all of a memory's source messages.
    * ``extraction_mode`` (BACKGROUND): ``MemoryExtractionMode``.
    * ``memory_link_extraction_mode`` (POST_EXTRACTION) and ``memory_link_extraction_token_limit``
      (100,000): ``MemoryLinkExtractionMode``.
    * ``background_extraction_queue_full_behavior`` (DROP) and
      ``background_extraction_queue_put_timeout_seconds`` (300.0): see
      ``BackgroundExtractionQueueFullBehavior``; the capacity is
      ``settings.OAM_EXTRACTION_QUEUE_CAPACITY`` queued jobs.

    Two fields after the SDK's are this service's review policy (``memory.records.review_rules``; an allowed difference
    in ``tests/memory/test_sdk_parity.py``), resolved per thread over the client's like the others:

    * ``review_memory_types`` (``("guideline", "preference")``): extracted memories of these types are
      stored *pending*: indexed, but returned by no search, context card, list or get until a reviewer
      approves them (the review queue: ``GET /api/review/memories``, the staff page
      ``/staff/projects/<slug>/review/``). Empty: nothing waits. Instructions and beliefs injected into an
      agent's prompt are what a poisoned conversation would plant, hence these two by default.
    * ``review_added_memories`` (False): when True, ``add_memory`` of those types waits for review too.
      By default a manual ``add_memory`` (a write key, Python code) is trusted and visible at once.

    Raises ValueError (naming the field) for a bad value, as the SDK does (TypeError for a non-bool
    ``extract_memories``/``enable_context_summary``, a non-int count, non-string instructions).
    """

    memory_extraction_window: int | NotSet = NOTSET
    context_summary_update_frequency: int | NotSet = NOTSET
    memory_extraction_frequency: int | NotSet = NOTSET
    memory_extraction_token_limit: int | NotSet = NOTSET
    extract_memories: bool | NotSet = NOTSET
    enable_context_summary: bool | NotSet = NOTSET
    memory_extraction_custom_instructions: str | None | NotSet = NOTSET
    memory_link_extraction_custom_instructions: str | None | NotSet = NOTSET
    memory_extraction_image_context: MemoryExtractionImageContext | NotSet = NOTSET
    memory_extraction_inherit_message_metadata: bool | tuple[str, ...] | NotSet = NOTSET
    extraction_mode: MemoryExtractionMode | NotSet = NOTSET
    memory_link_extraction_mode: MemoryLinkExtractionMode | NotSet = NOTSET
    memory_link_extraction_token_limit: int | NotSet = NOTSET
    background_extraction_queue_full_behavior: BackgroundExtractionQueueFullBehavior | NotSet = NOTSET
    background_extraction_queue_put_timeout_seconds: float | NotSet = NOTSET
    review_memory_types: tuple[str, ...] | NotSet = NOTSET
    review_added_memories: bool | NotSet = NOTSET

    def __post_init__(self):
        set_ = object.__setattr__  # frozen: normalise in place once
        given = frozenset(f.name for f in dataclasses.fields(self) if getattr(self, f.name) is not NOTSET)
        set_(self, "_given", given)
        for name in EXTRACTION_DEFAULTS:
            if getattr(self, name) is NOTSET:
                set_(self, name, EXTRACTION_DEFAULTS[name])
        _bool(self.extract_memories, "extract_memories")
        _bool(self.enable_context_summary, "enable_context_summary")
        _bool(self.review_added_memories, "review_added_memories")
        set_(self, "review_memory_types", _memory_types(self.review_memory_types, "review_memory_types"))
        set_(self, "extraction_mode", _enum(MemoryExtractionMode, self.extraction_mode, "extraction_mode"))
        set_(self, "memory_extraction_image_context",
             _enum(MemoryExtractionImageContext, self.memory_extraction_image_context,
                   "memory_extraction_image_context"))
        set_(self, "memory_link_extraction_mode",
             _enum(MemoryLinkExtractionMode, self.memory_link_extraction_mode, "memory_link_extraction_mode"))
        set_(self, "background_extraction_queue_full_behavior",
             _enum(BackgroundExtractionQueueFullBehavior, self.background_extraction_queue_full_behavior,
                   "background_extraction_queue_full_behavior"))
        for name in ("memory_extraction_frequency", "memory_extraction_window", "memory_extraction_token_limit",
                     "context_summary_update_frequency", "memory_link_extraction_token_limit"):
            _int(getattr(self, name), name)
        for name in ("memory_extraction_custom_instructions", "memory_link_extraction_custom_instructions"):
            instructions = getattr(self, name)
            if instructions is not None and not isinstance(instructions, str):
                raise InvalidType(name, "must be a string or None")
        set_(self, "memory_extraction_inherit_message_metadata",
             _inherit(self.memory_extraction_inherit_message_metadata, "memory_extraction_inherit_message_metadata"))
        timeout = self.background_extraction_queue_put_timeout_seconds
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout):
            raise InvalidType("background_extraction_queue_put_timeout_seconds", "must be a finite number")
        if timeout < 0:
            raise InvalidArgument("background_extraction_queue_put_timeout_seconds", "must be 0 or more")

    @property
    def given_fields(self) -> frozenset[str]:
        """Names of the fields the caller set (the others hold their resolved defaults)."""
        return self._given

    def merged_over(self, base: MemoryExtractionConfig | None) -> MemoryExtractionConfig:
        """This config laid over ``base`` field by field: each field from this config when it was given
        here, else from ``base`` when given there, else its default (the SDK's client + thread resolution:
        client ``extract_memories=False`` with thread ``extraction_mode=INLINE`` keeps extraction off)."""
        if base is None:
            return self
        values = {}
        for f in dataclasses.fields(self):
            if f.name in self._given:
                values[f.name] = getattr(self, f.name)
            elif f.name in base.given_fields:
                values[f.name] = getattr(base, f.name)
        return type(self)(**values)

    @property
    def is_background(self) -> bool:
        return self.extraction_mode is MemoryExtractionMode.BACKGROUND

    def review_types(self, *, extracted: bool) -> tuple[str, ...]:
        """The memory types that wait for review when stored by extraction (``extracted``) or by
        ``add_memory``: ``review_memory_types``, or none for ``add_memory`` unless ``review_added_memories``."""
        return self.review_memory_types if extracted or self.review_added_memories else ()

    def to_thread_config(self, *, given_only: bool = False) -> dict[str, Any]:
        """The config as JSON: one key per field, enums as their values, tuples as lists.

        ``given_only=True`` keeps only ``given_fields``: what is *stored* in ``Thread.config``, so an
        unset field stays unset and is resolved again on every read (``from_thread_config`` treats
        every stored key as given). Storing resolved defaults turned an omitted ``extract_memories``
        into a stored ``True``, which then needed an LLM on every later update (docs/python.md: an omitted
        ``extract_memories`` leaves extraction off without an LLM).
        """
        data = {}
        for f in dataclasses.fields(self):
            if given_only and f.name not in self._given:
                continue
            value = getattr(self, f.name)
            if isinstance(value, enum.Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            data[f.name] = value
        return data

    @classmethod
    def from_thread_config(cls, config: Mapping[str, Any] | None,
                           default: MemoryExtractionConfig | None = None) -> MemoryExtractionConfig:
        """Read the fields present in a ``Thread.config`` (other keys ignored) over ``default``."""
        known = {f.name for f in dataclasses.fields(cls)}
        given = {k: v for k, v in (config or {}).items() if k in known and v is not None}
        return cls(**given).merged_over(default)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryExtractionConfig:
        """Build from JSON input (the HTTP API); unknown keys raise ValueError naming them."""
        if not isinstance(data, Mapping):
            raise InvalidType("memory_extraction_config", "must be an object")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidArgument(f"memory_extraction_config.{unknown[0]}", "unknown extraction setting")
        return cls(**data)

    def stores_in(self, config: Mapping[str, Any] | None) -> bool:
        """True when ``config`` (a ``Thread.config``) holds an extraction setting."""
        known = {f.name for f in dataclasses.fields(self)}
        return bool(known & set(config or {}))


#: The deprecated inline parameters of OracleThread (spec: "Deprecated since 26.6.0 ... use
#: memory_extraction_config instead"), each a field of ``MemoryExtractionConfig``.
DEPRECATED_INLINE_PARAMETERS = (
    "memory_extraction_window",
    "context_summary_update_frequency",
    "memory_extraction_frequency",
    "memory_extraction_token_limit",
    "enable_context_summary",
    "memory_extraction_custom_instructions",
    "memory_extraction_inherit_message_metadata",
)


def resolve_extraction_config(
    config: MemoryExtractionConfig | None,
    inline: Mapping[str, Any],
    *,
    base: MemoryExtractionConfig | None = None,
    stacklevel: int = 3,
) -> MemoryExtractionConfig | None:
    """Return the effective config from a grouped ``config`` or deprecated ``inline`` parameters.

    ``inline`` holds only the inline parameters the caller actually passed.
    Both given: ValueError (spec: "Pass either this grouped config or the
    deprecated inline extraction parameters, not both"). Inline ones warn with
    ``DeprecationWarning`` and are laid over ``base`` (the client's config or
    the defaults). Neither: ``None`` (the caller keeps its default).
    """
    if config is not None and not isinstance(config, MemoryExtractionConfig):
        raise InvalidType("memory_extraction_config", "must be a MemoryExtractionConfig or None")
    if config is not None and inline:
        raise InvalidArgument(
            "memory_extraction_config",
            "pass either memory_extraction_config or the deprecated inline extraction parameters "
            f"({', '.join(sorted(inline))}), not both",
        )
    if inline:
        warnings.warn(
            f"{', '.join(sorted(inline))}: deprecated since 26.6.0 and removed in 27.1; "
            "use memory_extraction_config=MemoryExtractionConfig(...) instead",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
        return MemoryExtractionConfig(**inline).merged_over(base)
    return config
