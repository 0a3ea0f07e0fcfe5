from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from memory.core import conf
from memory.core.chunking import estimate_tokens
from memory.core.types import RecordStatus
from memory.core.valid_time import WINDOW_FIELDS, as_instant
from memory.extraction.config import MemoryExtractionConfig
from memory.extraction.settings import (
    MIN_MESSAGE_BUDGET,
    PROMPT_OVERHEAD_TOKENS,
    REEXTRACT_CONTEXT_MESSAGES,
    TRIGGER_EDIT,
)
from memory.llm.adapters import Llm
from memory.llm.prompts import extraction_schema, system_prompt
from memory.models import MEMORY_TYPES, ExtractionJob, Memory, Message, Thread, ThreadSummary
from memory.records.selectors import live_q, memory_live_q

# --- running a job ------------------------------------------------------------------------


@dataclass
class SourceMessage:
    """A message as shown to the LLM: ``ref`` ("m1" for targets, "c1" for context) maps replies back.

    ``id`` is the message's public id (what ``source_message_ids`` keeps).
    """

    ref: str
    id: str
    seq: int
    role: str
    text: str
    timestamp: str | None
    metadata: dict[str, Any]

    def line(self) -> str:
        when = f" ({self.timestamp})" if self.timestamp else ""
        return f"[{self.ref}]{when} {self.role}: {self.text}"


@dataclass
class KnownMemory:
    """A stored memory as shown to the LLM (issue #32): ``ref`` ("k1") maps a reply's ``derived_from`` back to
    ``key``, the memory's stored id."""

    ref: str
    key: str
    memory_type: str
    content: str
    timestamp: str | None

    def line(self) -> str:
        when = f" ({self.timestamp})" if self.timestamp else ""
        return f"[{self.ref}]{when} [{self.memory_type}] {self.content}"


@dataclass
class Slice:
    """One LLM call: the target messages, earlier context messages and the summary before them; ``known``, the
    stored memories a new one may say it was inferred from (``known_memories``)."""

    targets: list[SourceMessage]
    context: list[SourceMessage] = field(default_factory=list)
    summary: str | None = None
    known: list[KnownMemory] = field(default_factory=list)


@dataclass
class Candidate:
    """A memory the LLM proposed, with the target messages it cited, the validity window it stated (issue #32:
    aware UTC datetimes, None when not stated; ``candidate_window``) and the known memories (stored ids) it said
    it was inferred from (``derived_from``, issue #32)."""

    memory_type: str
    content: str
    sources: list[SourceMessage]
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    derived_from: list[str] = field(default_factory=list)


@dataclass
class Decision:
    """What happens to a candidate: ``new``, ``duplicate`` (skipped), ``updates`` or ``contradicts``.

    ``related_memory_id`` is the public id of the stored memory it was compared with.
    """

    candidate: Candidate
    action: str
    related_memory_id: str | None = None
    distance: float | None = None
    note: str | None = None


#: Why ``parse_candidates`` refuses an item, in the order it checks (the first that applies counts):
#: fewer than two words of text, a ``memory_type`` outside ``MEMORY_TYPES``, no target message cited,
#: the same text as an earlier item of the reply. Each has a column ``rejected_<reason>`` on
#: ``ExtractionJob`` (migration 0011), plotted by the staff quality dashboard (``memory.reports.quality``).
REJECT_REASONS = ("not_text", "unknown_type", "no_source", "repeated")


@dataclass
class JobResult:
    """Counts of a finished job (also in the ``extraction.finished`` event).

    ``messages_extracted``: target messages handed to the LLM (context
    messages not counted); ``rejected``: refused candidates by
    ``REJECT_REASONS`` (their sum is ``rejected_candidates``).
    """

    memories_created: int = 0
    memories_linked: int = 0
    duplicates_skipped: int = 0
    rejected_candidates: int = 0
    messages_extracted: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REJECT_REASONS, 0))
    llm_calls: int = 0
    failed_calls: int = 0
    llm_seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


def message_budget(config: MemoryExtractionConfig) -> int | None:
    """Prompt tokens left for messages and summary under ``memory_extraction_token_limit`` (None: no cap)."""
    limit = config.memory_extraction_token_limit
    if limit <= 0:
        return None
    window = config.memory_extraction_window
    fixed = (estimate_tokens(system_prompt(config.memory_extraction_custom_instructions))
             + estimate_tokens(json.dumps(extraction_schema(
                 [f"m{i}" for i in range(1, (window if window > 0 else 64) + 1)])))
             + PROMPT_OVERHEAD_TOKENS)
    return max(MIN_MESSAGE_BUDGET, limit - fixed)


def _clip(text: str, tokens: int | None) -> str:
    if tokens is None or estimate_tokens(text) <= tokens:
        return text
    return text[: max(0, tokens * 4 - 8)] + " …[cut]"


def _source(row: Message, ref: str, budget: int | None) -> SourceMessage:
    return SourceMessage(ref=ref, id=row.public_id, seq=row.seq, role=row.role, text=_clip(row.content, budget),
                         timestamp=row.timestamp, metadata=dict(row.metadata or {}))


def known_memories(thread: Thread, *, now=None, limit: int | None = None) -> list[KnownMemory]:
    """The stored memories an extraction prompt shows (issue #32), so that a new memory can name those it was
    inferred from: the ``OAM_EXTRACTION_KNOWN_MEMORIES`` (default 0: none) most recent live, valid memories of
    the thread's user and agent (exactly: ``memory.extraction.dedup``'s scope, any thread of the project), not
    awaiting review, newest first, each cut to about 75 tokens."""
    limit = conf.get("OAM_EXTRACTION_KNOWN_MEMORIES") if limit is None else limit
    if limit <= 0:
        return []
    rows = (Memory.objects.filter(memory_live_q(now or timezone.now()), project_id=thread.project_id,
                                  user_id=thread.user_id, agent_id=thread.agent_id, status=RecordStatus.VALID.value)
            .order_by("-created_at", "-id")[:limit])
    return [KnownMemory(ref=f"k{i}", key=row.pk, memory_type=row.memory_type, content=_clip(row.content, 75),
                        timestamp=row.timestamp) for i, row in enumerate(rows, 1)]


def plan_slices(thread: Thread, job: ExtractionJob, config: MemoryExtractionConfig) -> list[Slice]:
    """Split the job's live messages into LLM calls.

    Each call has at most ``memory_extraction_window`` targets (no limit when
    <= 0) whose lines fit the token budget (one message bigger than the whole
    budget is cut); with a window, earlier messages fill the rest of it as
    context while they fit. A re-extraction (``update_message``) job targets
    its one message with up to ``window - 1`` (else ``REEXTRACT_CONTEXT_MESSAGES``)
    earlier messages. A stored summary that ends before a call's first target
    leads its prompt when ``enable_context_summary`` is on. Every call shows the same ``known_memories``
    (issue #32), whose lines come out of the message budget first.
    """
    now = timezone.now()
    budget = message_budget(config)
    known = known_memories(thread, now=now)
    if budget is not None and known:
        budget = max(MIN_MESSAGE_BUDGET, budget - sum(estimate_tokens(k.line()) for k in known))
    live = Message.objects.filter(live_q(now), thread_id=thread.pk)
    rows = list(live.filter(seq__gte=job.from_seq, seq__lte=job.to_seq).order_by("seq"))
    window = config.memory_extraction_window
    groups: list[list[Message]] = []
    used = 0
    for row in rows:
        cost = estimate_tokens(_source(row, "m00", budget).line())
        if groups and ((window > 0 and len(groups[-1]) >= window)
                       or (budget is not None and used + cost > budget)):
            groups.append([])
            used = 0
        if not groups:
            groups.append([])
        groups[-1].append(row)
        used += cost
    summary = None
    if config.enable_context_summary:
        summary = ThreadSummary.objects.filter(thread_id=thread.pk).values_list("content", "through_seq").first()
    slices = []
    for group in groups:
        targets = [_source(row, f"m{i}", budget) for i, row in enumerate(group, 1)]
        room = None if budget is None else budget - sum(estimate_tokens(t.line()) for t in targets)
        text = None
        if summary and summary[0] and summary[1] < group[0].seq:
            text = _clip(summary[0], None if room is None else max(0, room // 4))
            room = None if room is None else room - estimate_tokens(text)
        if job.trigger == TRIGGER_EDIT:
            want = window - 1 if window > 0 else REEXTRACT_CONTEXT_MESSAGES
        else:
            want = window - len(group) if window > 0 else 0
        earlier = list(live.filter(seq__lt=group[0].seq).order_by("-seq")[:max(0, want)])
        context: list[SourceMessage] = []
        for row in earlier:  # newest first, while they fit
            line = _source(row, "c0", budget)
            cost = estimate_tokens(line.line())
            if room is not None and cost > room:
                break
            room = None if room is None else room - cost
            context.insert(0, line)
        for i, item in enumerate(context, 1):
            item.ref = f"c{i}"
        slices.append(Slice(targets=targets, context=context, summary=text, known=known))
    return slices


_WORD = re.compile(r"[^\W\d_]{2,}")


def reject_reason(content: str, memory_type: Any, sources: list, seen: set[str]) -> str | None:
    """Why an extracted item is refused (one of ``REJECT_REASONS``, the first that applies), or None.

    ``content`` is the whitespace-normalised text; ``sources`` the target
    messages it cites; ``seen`` the casefolded texts accepted before it.
    """
    if len(_WORD.findall(content)) < 2:
        return "not_text"
    if memory_type not in MEMORY_TYPES:
        return "unknown_type"
    if not sources:
        return "no_source"
    if content.casefold() in seen:
        return "repeated"
    return None


def parse_candidates(reply: dict, piece: Slice, reasons: dict[str, int] | None = None) -> tuple[list[Candidate], int]:
    """Turn a schema-valid reply into candidates; return them and how many items were rejected.

    Whitespace is normalised; an item is rejected when it is not text (fewer
    than two words of two or more letters: a small model sometimes fills the
    string with symbols), has an unknown type, names no target message, or
    repeats an earlier one (``reject_reason``); ``reasons``, when given, counts
    each rejection under its reason. Sources are kept in message order, so the
    last is the latest. The item's validity window is read by ``candidate_window``; ``derived_from`` refs
    (issue #32) become the known memories' stored ids.
    """
    seen: set[str] = set()
    out, rejected = [], 0
    for item in reply.get("memories", []):
        content = " ".join(str(item.get("content", "")).split())
        refs = set(item.get("source_message_ids", []))
        sources = [m for m in piece.targets if m.ref in refs]
        reason = reject_reason(content, item.get("memory_type"), sources, seen)
        if reason is not None:
            rejected += 1
            if reasons is not None:
                reasons[reason] = reasons.get(reason, 0) + 1
            continue
        seen.add(content.casefold())
        cited = set(item.get("derived_from") or [])
        out.append(Candidate(memory_type=item["memory_type"], content=content, sources=sources,
                             derived_from=[k.key for k in piece.known if k.ref in cited], **candidate_window(item)))
    return out, rejected


def candidate_window(item: dict) -> dict[str, datetime | None]:
    """The validity window an extracted item states (issue #32): ``valid_from``/``valid_to`` read as ISO-8601
    dates or date-times (no zone: UTC; ``memory.core.valid_time.as_instant``). The prompt asks the LLM to resolve
    relative dates with the message time; a value that is not a readable date is dropped (that bound stays open),
    and a window whose end is before its start is dropped whole: a bad date never fails a memory."""
    window = {name: as_instant(item.get(name)) if isinstance(item.get(name), str) else None
              for name in WINDOW_FIELDS}
    start, end = window["valid_from"], window["valid_to"]
    if start is not None and end is not None and end < start:
        return {name: None for name in WINDOW_FIELDS}
    return window


_MISSING = object()


def inherited_metadata(sources: Sequence[SourceMessage],
                       rule: bool | tuple[str, ...]) -> tuple[dict[str, Any], list[str]]:
    """Return (metadata a memory inherits from its source messages, keys left out because they differ).

    ``rule``: True (every key), a tuple of top-level keys, or False (none). A
    key is inherited when every source message has it with the same value
    (spec: "the selected metadata must match across those messages"); a key
    some sources lack or disagree on is reported instead.
    """
    if rule is False or not sources:
        return {}, []
    keys = list(dict.fromkeys(k for m in sources for k in m.metadata)) if rule is True else list(rule)
    inherited, conflicts = {}, []
    for key in keys:
        values = [m.metadata.get(key, _MISSING) for m in sources]
        if all(v is _MISSING for v in values):
            continue
        if all(v is not _MISSING and v == values[0] for v in values):
            inherited[key] = values[0]
        else:
            conflicts.append(key)
    return inherited, conflicts


def _last_seconds(llm: Llm) -> float:
    stats = getattr(llm, "last_call", None)
    return float(stats.seconds) if stats is not None else 0.0
