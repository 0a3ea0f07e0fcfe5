"""Automatic memory extraction settings (spec: MemoryExtractionConfig, MemoryExtractionMode).

``MemoryExtractionConfig`` groups what the spec's OracleThread constructor
also accepts as deprecated inline parameters (``memory_extraction_window`` ...,
deprecated since 26.6.0): pass either the grouped config or the inline
parameters, never both (``resolve_extraction_config``).

A thread's config is stored flat in ``Thread.config`` under the spec's
parameter names (``to_thread_config``/``from_thread_config``), the same keys
``memory.context`` reads (``enable_context_summary``,
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

from memory.errors import InvalidArgument, InvalidType


class MemoryExtractionMode(str, enum.Enum):
    """When extraction runs (spec: MemoryExtractionMode).

    ``INLINE``: before ``add_messages``/``update_message`` return.
    ``BACKGROUND``: a Dramatiq actor runs it after the call returns.
    """

    INLINE = "inline"
    BACKGROUND = "background"


class BackgroundExtractionQueueFullBehavior(str, enum.Enum):
    """What a BACKGROUND call does when the extraction queue is full (spec: add_messages Notes).

    ``SKIP``: continue at once without queueing (the messages wait for the
    thread's next extraction). ``WAIT_THEN_SKIP``: wait up to
    ``background_extraction_queue_put_timeout_seconds`` for room, then skip.
    ``WAIT_THEN_RAISE``: wait as long, then raise ``TimeoutError``. In every
    case the raw messages are already stored.
    """

    SKIP = "skip"
    WAIT_THEN_SKIP = "wait_then_skip"
    WAIT_THEN_RAISE = "wait_then_raise"


def _enum(cls: type[enum.Enum], value: Any, field: str) -> enum.Enum:
    if isinstance(value, cls):
        return value
    if isinstance(value, str):
        for member in cls:
            if value.lower() in (member.value, member.name.lower()):
                return member
    allowed = ", ".join(m.name for m in cls)
    raise InvalidArgument(field, f"must be one of: {allowed}")


def _int(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, f"must be an int, not {type(value).__name__}")
    return value


def _bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidType(field, f"must be a bool, not {type(value).__name__}")
    return value


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


@dataclass(frozen=True)
class MemoryExtractionConfig:
    """Thread-level automatic extraction settings (spec: OracleThread ``memory_extraction_config``).

    * ``extract_memories`` (True): extraction on at all. It also needs an LLM
      (the thread's, its client's, or ``settings.OAM_LLM_*``).
    * ``extraction_mode`` (BACKGROUND): the spec gives no default; this is a
      server, where an HTTP ``add_messages`` should not wait for an LLM.
    * ``memory_extraction_frequency`` (-1): new messages after which extraction
      is due; <= 0 means once per ``add_messages`` call, over its whole batch.
    * ``memory_extraction_window`` (-1, spec): messages the LLM sees per call,
      the newest (target) ones included; <= 0: the batch alone. A longer range
      is split into calls of at most this many targets; earlier messages fill
      the rest of the window as context.
    * ``memory_extraction_token_limit`` (3000): prompt cap in tokens
      (``memory.chunking.estimate_tokens``). A range that does not fit is
      split over several calls; only a single message larger than the cap is
      cut. <= 0 disables the cap. 3000 leaves a 4096-token local model room to
      answer; the spec gives no default.
    * ``enable_context_summary`` (True, spec) and
      ``context_summary_update_frequency`` (-1, spec): the durable summary is
      refreshed after a due extraction (``memory.context``) and a summary from
      before the target messages is extraction context.
    * ``memory_extraction_custom_instructions`` (None): appended to the system prompt.
    * ``memory_extraction_inherit_message_metadata`` (True, spec): extracted
      memories inherit their source messages' metadata: all keys (True), the
      listed top-level keys, or none (False). A value is inherited only when it
      matches across all of a memory's source messages (the spec's rule, applied
      per memory since each memory records its own sources).
    * ``background_extraction_queue_full_behavior`` (WAIT_THEN_SKIP) and
      ``background_extraction_queue_put_timeout_seconds`` (10.0): see
      ``BackgroundExtractionQueueFullBehavior``; the capacity is
      ``settings.OAM_EXTRACTION_QUEUE_CAPACITY`` queued jobs.

    Raises TypeError/ValueError (naming the field) for bad values.
    """

    extract_memories: bool = True
    extraction_mode: MemoryExtractionMode = MemoryExtractionMode.BACKGROUND
    memory_extraction_frequency: int = -1
    memory_extraction_window: int = -1
    memory_extraction_token_limit: int = 3000
    enable_context_summary: bool = True
    context_summary_update_frequency: int = -1
    memory_extraction_custom_instructions: str | None = None
    memory_extraction_inherit_message_metadata: bool | tuple[str, ...] = True
    background_extraction_queue_full_behavior: BackgroundExtractionQueueFullBehavior = (
        BackgroundExtractionQueueFullBehavior.WAIT_THEN_SKIP
    )
    background_extraction_queue_put_timeout_seconds: float = 10.0

    def __post_init__(self):
        set_ = object.__setattr__  # frozen: normalise in place once
        _bool(self.extract_memories, "extract_memories")
        _bool(self.enable_context_summary, "enable_context_summary")
        set_(self, "extraction_mode", _enum(MemoryExtractionMode, self.extraction_mode, "extraction_mode"))
        set_(self, "background_extraction_queue_full_behavior",
             _enum(BackgroundExtractionQueueFullBehavior, self.background_extraction_queue_full_behavior,
                   "background_extraction_queue_full_behavior"))
        for name in ("memory_extraction_frequency", "memory_extraction_window", "memory_extraction_token_limit",
                     "context_summary_update_frequency"):
            _int(getattr(self, name), name)
        instructions = self.memory_extraction_custom_instructions
        if instructions is not None and not isinstance(instructions, str):
            raise InvalidType("memory_extraction_custom_instructions", "must be a string or None")
        set_(self, "memory_extraction_inherit_message_metadata",
             _inherit(self.memory_extraction_inherit_message_metadata, "memory_extraction_inherit_message_metadata"))
        timeout = self.background_extraction_queue_put_timeout_seconds
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout):
            raise InvalidType("background_extraction_queue_put_timeout_seconds", "must be a finite number")
        if timeout < 0:
            raise InvalidArgument("background_extraction_queue_put_timeout_seconds", "must be 0 or more")

    @property
    def is_background(self) -> bool:
        return self.extraction_mode is MemoryExtractionMode.BACKGROUND

    def to_thread_config(self) -> dict[str, Any]:
        """The JSON stored in ``Thread.config``: one key per field, enums as their values, tuples as lists."""
        data = {}
        for f in dataclasses.fields(self):
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
        return dataclasses.replace(default or cls(), **given)

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
        return dataclasses.replace(base or MemoryExtractionConfig(), **inline)
    return config
