"""Thread summaries and context cards (spec: get_summary, get_context_card, OracleSummary, OracleContextCard).

The durable whole-thread summary lives in ``ThreadSummary``: its text, topics,
the last message ``seq`` it covers (``through_seq``) and a ``revision`` counting
refreshes. A refresh folds the messages after ``through_seq`` into the previous
summary with one LLM call returning ``{"summary", "topics"}`` (validated against
``SUMMARY_SCHEMA``); the prompt is cut to the thread's
``context_card_token_limit``, dropping the oldest new messages first.

Without an LLM (or when it fails) a summary is a transcript: ``"role: content"``
lines of the most recent messages that fit in 4,000 characters.

Thread settings read from ``Thread.config`` (keys named as the spec's
OracleThread parameters, defaults as the spec's):

* ``enable_context_summary`` (True): keep the durable summary;
* ``context_summary_update_frequency`` (-1): new messages after the summary
  before an automatic refresh (context cards, ``summary_refresh_if_due``);
  <= 0 refreshes whenever there is a new message;
* ``context_card_token_limit`` (100,000): token cap of the summary prompt;
  <= 0 disables truncation;
* ``context_card_type_search_concurrency`` (5): accepted; the per-type
  searches run one after another (Django's ORM is synchronous).

Tokens are estimated with ``memory.core.chunking.estimate_tokens`` (chars / 4).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.search.request import apply_token_budgets, build_request
from memory.search.ranking import search_records
from memory.core.chunking import estimate_tokens
from memory.llm.prompts import MAX_TOPICS, SUMMARY_SCHEMA, SUMMARY_SCHEMA_NAME, SUMMARY_SYSTEM_PROMPT
from memory.core.errors import MAX_QUERY_CHARS, InvalidArgument, InvalidType, check_sql_count
from memory.llm.adapters import Llm, LlmError, schema_instructions
from memory.models import MEMORY_TYPES, Message, Thread, ThreadSummary
from memory.records.selectors import live_q, message_dto
from memory.records.validators import reject_unknown
from memory.core.ids import public_id
from memory.core.types import (
    NOTSET,
    ContextCard,
    MemorySearchConfig,
    NotSet,
    SearchResult,
    SearchScope,
    Summary,
)

logger = logging.getLogger(__name__)

#: Transcript fallbacks never exceed this many characters (spec: get_summary).
TRANSCRIPT_CHAR_CAP = 4_000
#: ``get_summary`` token budget when omitted ("a bounded default"): about the transcript cap.
DEFAULT_SUMMARY_TOKEN_BUDGET = 1_000
DEFAULT_CONTEXT_CARD_TOKEN_LIMIT = 100_000
DEFAULT_UPDATE_FREQUENCY = -1
DEFAULT_FALLBACK_MESSAGE_COUNT = 5
DEFAULT_MAX_RELEVANT_RESULTS = 5
DEFAULT_MAX_RECENT_MESSAGES = 0
#: Reply cap for one summary call, in tokens.
SUMMARY_REPLY_TOKENS = 600
MAX_TOPIC_CHARS = 80
#: Record types a card's ``min_relevant_results_by_type`` accepts.
CARD_RECORD_TYPES = ("message", *MEMORY_TYPES)
#: Extra results asked of each search beyond what the card keeps, so that
#: excluded and already chosen records still leave enough.
SEARCH_MARGIN = 5



# --- thread settings and argument checks ----------------------------------------------


def thread_setting(thread: Thread, name: str, default: Any) -> Any:
    """A runtime setting of the thread from ``Thread.config``; ``default`` when absent or null."""
    value = (thread.config or {}).get(name)
    return default if value is None else value


def _check_count(value: Any, field: str, default: int) -> int:
    """A non-negative int argument of at most ``MAX_SQL_COUNT``; omitted gives ``default``.

    The bound keeps counts inside the 64-bit integers SQL ``LIMIT``/``OFFSET``
    take (a larger one was a database error, not a ValueError).
    """
    if value is NOTSET:
        return default
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType(field, "must be an int")
    if value < 0:
        raise InvalidArgument(field, "must be 0 or more")
    return check_sql_count(value, field)


def _check_minimums(value: Any) -> dict[str, int]:
    """``min_relevant_results_by_type``: a mapping of card record types to non-negative ints (None: none)."""
    if value is NOTSET or value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidType("min_relevant_results_by_type", "must be a mapping of record type to int, or None")
    minimums = {}
    for key, count in value.items():
        if key not in CARD_RECORD_TYPES:
            raise InvalidArgument(
                "min_relevant_results_by_type", f"unknown type {key!r}; allowed: {', '.join(CARD_RECORD_TYPES)}"
            )
        minimums[key] = _check_count(count, f"min_relevant_results_by_type.{key}", 0)
    return minimums


def _check_summary_budget(value: Any) -> int | None:
    """``get_summary``'s ``token_budget``: omitted gives the default; non-positive or None disables."""
    if value is NOTSET:
        return DEFAULT_SUMMARY_TOKEN_BUDGET
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidType("token_budget", "must be an int")
    return value if value > 0 else None


# --- messages --------------------------------------------------------------------------


def _live_messages(thread: Thread):
    return Message.objects.filter(live_q(timezone.now()), thread_id=thread.pk)


def _split_tail(thread: Thread, except_last: int) -> tuple[list[str], int]:
    """Public ids of the last ``except_last`` live messages and the ``seq`` of the last one before them (0: none)."""
    rows = list(_live_messages(thread).order_by("-seq").values_list("id", "seq")[: except_last + 1])
    tail = [public_id(message_id) for message_id, _ in rows[:except_last]]
    cut_seq = rows[except_last][1] if len(rows) > except_last else 0
    return tail, cut_seq


def _line(role: str, content: str) -> str:
    return f"{role}: {content}"


def transcript(thread: Thread, *, through_seq: int, max_messages: int | None = None,
               max_chars: int = TRANSCRIPT_CHAR_CAP) -> str:
    """Return ``"role: content"`` lines of the newest live messages up to ``through_seq`` that fit ``max_chars``.

    Lines are in chronological order, joined by newlines; at most
    ``max_messages`` of them (None: no count limit). When even the newest line
    is longer than ``max_chars`` it is cut to fit, ending with "…".
    """
    if max_messages == 0 or through_seq <= 0 or max_chars <= 0:
        return ""
    # The shortest line is "r: " plus a newline: no more rows than this can fit.
    scan = max_chars // 4 + 1 if max_messages is None else min(max_messages, max_chars // 4 + 1)
    rows = _live_messages(thread).filter(seq__lte=through_seq).order_by("-seq").values_list("role", "content")
    kept: list[str] = []
    used = 0
    for role, content in rows[:scan]:
        line = _line(role, content)
        need = len(line) + (1 if kept else 0)
        if used + need > max_chars:
            if not kept:
                kept.append(line[: max_chars - 1] + "…")
            break
        kept.append(line)
        used += need
    return "\n".join(reversed(kept))


def _soft_truncate(text: str, budget: int | None) -> str:
    """Cut ``text`` to ``budget`` estimated tokens when it is longer (at a word boundary, ending with "…")."""
    if budget is None or estimate_tokens(text) <= budget:
        return text
    limit = budget * 4 - 1
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.8:
        cut = cut[:space]
    return cut.rstrip() + "…"


# --- the LLM summary -----------------------------------------------------------------------


def _user_prompt(previous: str, topics: list[str], lines: list[str], omitted: int) -> str:
    parts = [
        f"Previous summary:\n{previous or '(none)'}",
        f"Previous topics: {', '.join(topics) if topics else '(none)'}",
    ]
    note = f"({omitted} earlier new messages left out to fit the prompt limit)\n" if omitted else ""
    parts.append("New messages:\n" + note + "\n".join(lines))
    return "\n\n".join(parts)


def summary_prompt(previous: str, topics: list[str], lines: list[str], token_limit: int) -> list[dict[str, str]]:
    """Return the chat messages of a summary refresh, cut to ``token_limit`` estimated tokens.

    ``lines`` are the new messages as ``"role: content"``, oldest first. When
    the prompt (system text, schema instructions and user text) would exceed
    the limit, the oldest lines are dropped first; if not even the newest
    fits, it is cut, and then the previous summary too. ``token_limit`` <= 0
    disables truncation.
    """
    if token_limit > 0:
        fixed = (len(SUMMARY_SYSTEM_PROMPT) + 2 + len(schema_instructions(SUMMARY_SCHEMA, SUMMARY_SCHEMA_NAME))
                 + len(_user_prompt(previous, topics, [], omitted=len(lines))))
        room = token_limit * 4 - fixed
        kept: list[str] = []
        for line in reversed(lines):
            need = len(line) + (1 if kept else 0)
            if need > room:
                break
            kept.append(line)
            room -= need
        kept.reverse()
        if lines and not kept:
            newest_room = 200  # characters of the newest message worth keeping over the previous summary
            if room < newest_room and previous:
                cut = min(len(previous), newest_room - room)
                previous, room = previous[: len(previous) - cut], room + cut
            kept = [lines[-1][: max(room, 0)]]
        omitted, lines = len(lines) - len(kept), kept
    else:
        omitted = 0
    return [
        {"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
        {"role": "user", "content": _user_prompt(previous, topics, lines, omitted)},
    ]


def _clean_topics(topics: list[str]) -> list[str]:
    cleaned: list[str] = []
    for topic in topics:
        topic = " ".join(str(topic).split())[:MAX_TOPIC_CHARS]
        if topic and topic.lower() not in (t.lower() for t in cleaned):
            cleaned.append(topic)
    return cleaned[:MAX_TOPICS]


def llm_summarize(llm: Llm, *, previous: str, topics: list[str], lines: list[str],
                  token_limit: int) -> tuple[str, list[str]]:
    """Fold ``lines`` into ``previous`` with one LLM call; return (summary, topics).

    The reply must match ``SUMMARY_SCHEMA`` (the adapter validates and
    retries); topics are whitespace-normalised, de-duplicated and capped at
    ``MAX_TOPICS`` of ``MAX_TOPIC_CHARS`` characters. Raises ``LlmError``.
    """
    reply = llm.complete_json(summary_prompt(previous, topics, lines, token_limit), SUMMARY_SCHEMA,
                              schema_name=SUMMARY_SCHEMA_NAME, max_tokens=SUMMARY_REPLY_TOKENS)
    return reply["summary"].strip(), _clean_topics(reply["topics"])


def _new_lines(thread: Thread, after_seq: int, through_seq: int) -> list[str]:
    rows = (_live_messages(thread).filter(seq__gt=after_seq, seq__lte=through_seq).order_by("seq")
            .values_list("role", "content"))
    return [_line(role, content) for role, content in rows]


def _durable(thread: Thread) -> ThreadSummary | None:
    return ThreadSummary.objects.filter(thread_id=thread.pk).first()


def _covers_exactly(thread: Thread, durable: ThreadSummary, through_seq: int) -> bool:
    """Whether ``durable`` summarizes exactly the live messages up to ``through_seq``."""
    if durable.through_seq < through_seq:
        return False
    return not _live_messages(thread).filter(seq__gt=through_seq, seq__lte=durable.through_seq).exists()


def summary_refresh(*, thread: Thread, llm: Llm, through_seq: int | None = None) -> ThreadSummary | None:
    """Fold the messages after the durable summary into it and store it; return the stored row.

    Covers live messages up to ``through_seq`` (None: the latest). The LLM call
    runs outside the transaction; the write upserts ``ThreadSummary`` with the
    new ``through_seq`` and ``revision + 1`` unless a concurrent refresh got as
    far already (then that row is returned unchanged). Returns the current
    row (or None when there is none) when there is nothing new to fold in.
    Raises ``LlmError`` when the LLM fails; nothing is written then.
    """
    durable = _durable(thread)
    start = durable.through_seq if durable else 0
    if through_seq is None:
        through_seq = _live_messages(thread).order_by("-seq").values_list("seq", flat=True).first() or 0
    lines = _new_lines(thread, start, through_seq)
    if not lines:
        return durable
    content, topics = llm_summarize(
        llm, previous=durable.content if durable else "", topics=list(durable.topics or []) if durable else [],
        lines=lines, token_limit=thread_setting(thread, "context_card_token_limit", DEFAULT_CONTEXT_CARD_TOKEN_LIMIT),
    )
    with transaction.atomic():
        ThreadSummary.objects.get_or_create(thread_id=thread.pk, defaults={"project_id": thread.project_id})
        row = ThreadSummary.objects.select_for_update().get(thread_id=thread.pk)
        if row.through_seq >= through_seq:
            return row
        row.content, row.topics, row.through_seq = content, topics, through_seq
        row.revision += 1
        row.save()
    return row


def _pending(thread: Thread, durable: ThreadSummary | None, through_seq: int) -> int:
    start = durable.through_seq if durable else 0
    return _live_messages(thread).filter(seq__gt=start, seq__lte=through_seq).count()


def summary_refresh_if_due(*, thread: Thread, llm: Llm | None, through_seq: int | None = None) -> ThreadSummary | None:
    """Refresh the durable summary when the thread's settings say it is due; return the row or None.

    Due: ``enable_context_summary`` is on, there is an LLM, and the live
    messages after the summary (up to ``through_seq``, None: the latest) number
    at least ``context_summary_update_frequency`` (any, when that is <= 0).
    Meant for the add_messages/extraction hook; raises ``LlmError``.
    """
    if llm is None or not thread_setting(thread, "enable_context_summary", True):
        return None
    if through_seq is None:
        through_seq = _live_messages(thread).order_by("-seq").values_list("seq", flat=True).first() or 0
    durable = _durable(thread)
    pending = _pending(thread, durable, through_seq)
    frequency = thread_setting(thread, "context_summary_update_frequency", DEFAULT_UPDATE_FREQUENCY)
    if pending == 0 or (frequency > 0 and pending < frequency):
        return None
    return summary_refresh(thread=thread, llm=llm, through_seq=through_seq)


def _llm_summary_through(thread: Thread, through_seq: int, llm: Llm, *, store: bool) -> str:
    """The LLM summary of the live messages up to ``through_seq``.

    Extends the durable summary when it ends before ``through_seq`` (stored
    when ``store``); starts from scratch, unstored, when it already covers
    later messages. Raises ``LlmError``.
    """
    durable = _durable(thread)
    if durable is not None and durable.through_seq > through_seq:
        durable = None  # it covers messages after the prefix: of no use here
    if store:
        row = summary_refresh(thread=thread, llm=llm, through_seq=through_seq)
        return row.content if row else ""
    start = durable.through_seq if durable else 0
    content, _ = llm_summarize(
        llm, previous=durable.content if durable else "", topics=list(durable.topics or []) if durable else [],
        lines=_new_lines(thread, start, through_seq),
        token_limit=thread_setting(thread, "context_card_token_limit", DEFAULT_CONTEXT_CARD_TOKEN_LIMIT),
    )
    return content


def summary_get(*, thread: Thread, except_last: int | NotSet = NOTSET, token_budget: int | None | NotSet = NOTSET,
                llm: Llm | None = None) -> Summary:
    """Return a summary of the thread, or of all but its last ``except_last`` messages (spec: get_summary).

    Whole thread: the durable summary when it covers the latest message, else
    (with an LLM) refreshed and stored. With ``except_last``: that prefix is
    summarized (reusing the durable summary when it covers exactly the prefix,
    extending it otherwise) without changing the durable one. Without an LLM,
    or when the LLM fails: the transcript fallback, capped at 4,000 characters.
    ``token_budget`` (estimated tokens): omitted -> ``DEFAULT_SUMMARY_TOKEN_BUDGET``;
    positive -> the text is cut only when longer; non-positive or None -> no
    cut (the transcript cap stays). An empty thread gives ``content == ""``.
    Raises TypeError/ValueError for bad arguments.
    """
    count = _check_count(except_last, "except_last", 0)
    budget = _check_summary_budget(token_budget)
    _, cut_seq = _split_tail(thread, count)
    if cut_seq == 0:
        return Summary(content="")
    text = None
    durable = _durable(thread)
    if durable is not None and durable.content and _covers_exactly(thread, durable, cut_seq):
        text = durable.content
    elif llm is not None:
        store = count == 0 and thread_setting(thread, "enable_context_summary", True)
        try:
            text = _llm_summary_through(thread, cut_seq, llm, store=store) or None
        except LlmError as exc:
            logger.warning("summary of thread %s: LLM failed, using the transcript (%s)", thread.pk, exc)
    if text is None:
        cap = TRANSCRIPT_CHAR_CAP if budget is None else min(TRANSCRIPT_CHAR_CAP, budget * 4)
        return Summary(content=transcript(thread, through_seq=cut_seq, max_chars=cap))
    return Summary(content=_soft_truncate(text, budget))


# --- context cards ---------------------------------------------------------------------------


def _card_summary(thread: Thread, cut_seq: int, llm: Llm | None) -> tuple[str, list[str]] | None:
    """The durable summary and topics usable for a card ending at ``cut_seq``, refreshed first when due.

    None when summaries are off, there is none, or it covers messages after
    ``cut_seq`` (it would leak the excluded tail).
    """
    if cut_seq == 0 or not thread_setting(thread, "enable_context_summary", True):
        return None
    if llm is not None:
        try:
            summary_refresh_if_due(thread=thread, llm=llm, through_seq=cut_seq)
        except LlmError as exc:
            logger.warning("context card of thread %s: summary refresh failed (%s)", thread.pk, exc)
    durable = _durable(thread)
    if durable is None or not durable.content:
        return None
    if durable.through_seq > cut_seq and not _covers_exactly(thread, durable, cut_seq):
        return None
    return durable.content, list(durable.topics or [])


def _query_text(thread: Thread, cut_seq: int, count: int, summary: str | None) -> str:
    """Search query of a card: contents of the last ``count`` prefix messages, newest first, then the summary.

    Newest first because the embedder reads only the start of a long query
    and the keyword arms its first 32 content words.
    """
    parts: list[str] = []
    if count and cut_seq:
        rows = (_live_messages(thread).filter(seq__lte=cut_seq).order_by("-seq")
                .values_list("content", flat=True)[:count])
        parts += [content for content in rows if content.strip()]
    if summary:
        parts.append(summary)
    return "\n".join(parts)[:MAX_QUERY_CHARS]  # a search query's bound; the embedder reads less


def _result_key(result: SearchResult) -> tuple[str, str]:
    return ("message" if result.record_type == "message" else "memory", result.record_id)


def context_card_build(
    *,
    thread: Thread,
    scope: SearchScope,
    search_config: MemorySearchConfig,
    llm: Llm | None = None,
    fallback_message_count: int | NotSet = NOTSET,
    max_relevant_results: int | NotSet = NOTSET,
    token_budget: int | None | NotSet = NOTSET,
    soft_token_budget: int | None | NotSet = NOTSET,
    max_recent_messages: int | NotSet = NOTSET,
    except_last_messages: int | NotSet = NOTSET,
    min_relevant_results_by_type: Mapping[str, int] | None | NotSet = NOTSET,
    metadata_filter: Any = None,
    include_invalid_results: Any = True,
    **kwargs: Any,
) -> ContextCard:
    """Build a context card for ``thread`` (spec: get_context_card).

    * Summary: the durable summary (refreshed first when due and an LLM is
      given) with its topics, unless it reaches into the excluded tail; else
      the transcript of the last ``fallback_message_count`` (5) messages
      before the tail, capped at 4,000 characters, and no topics.
    * Relevant results: searched with ``scope`` (the thread's default,
      ``exact_thread_match=False``) for the query of ``_query_text``. Types in
      ``min_relevant_results_by_type`` are searched first, each for its
      minimum ("message" within this thread only); remaining slots of
      ``max_relevant_results`` are filled from the memory-like types. That
      maximum is ``max(max_relevant_results, sum(minimums))``, with
      ``max_relevant_results`` 5 when omitted. Records are unique;
      messages of the tail or of ``<recent_messages>``, and memories whose
      source messages all lie in the tail, are left out. ``metadata_filter``
      and ``include_invalid_results`` (default True) go to every search;
      ``token_budget``/``soft_token_budget`` (omitted: ``search_config``'s)
      trim the formatted results in order (minimum picks first, then the fill).
    * Recent messages: the last ``max_recent_messages`` (0) live messages.

    Raises TypeError for unknown keywords or wrong types; ValueError for
    negative counts, unknown record types, a non-dict ``metadata_filter``, or
    a nonzero ``except_last_messages`` with ``max_recent_messages`` neither 0
    nor equal to it.
    """
    reject_unknown(kwargs, "get_context_card")
    fallback_count = _check_count(fallback_message_count, "fallback_message_count", DEFAULT_FALLBACK_MESSAGE_COUNT)
    recent_count = _check_count(max_recent_messages, "max_recent_messages", DEFAULT_MAX_RECENT_MESSAGES)
    except_last = _check_count(except_last_messages, "except_last_messages", 0)
    minimums = _check_minimums(min_relevant_results_by_type)
    max_relevant = max(_check_count(max_relevant_results, "max_relevant_results", DEFAULT_MAX_RELEVANT_RESULTS),
                       sum(minimums.values()))
    if except_last and recent_count not in (0, except_last):
        raise InvalidArgument(
            "max_recent_messages", "must be 0 or equal to except_last_messages when except_last_messages is nonzero"
        )
    # Validates metadata_filter, include_invalid_results and the budgets the way search does.
    base = build_request(
        "", project_id=thread.project_id, scope=scope, config=search_config, token_budget=token_budget,
        soft_token_budget=soft_token_budget, metadata_filter=metadata_filter,
        include_invalid_results=include_invalid_results,
    )

    tail, cut_seq = _split_tail(thread, except_last)
    durable = _card_summary(thread, cut_seq, llm)
    if durable is not None:
        summary, topics = durable
    else:
        summary = transcript(thread, through_seq=cut_seq, max_messages=fallback_count)
        topics = []
    recent = []
    if recent_count:
        rows = _live_messages(thread).order_by("-seq")[:recent_count]
        recent = [message_dto(row) for row in reversed(rows)]

    query = _query_text(thread, cut_seq, fallback_count, summary if durable is not None else None)
    hidden_messages = set(tail) | {m.id for m in recent}
    tail_ids = set(tail)
    chosen: list[SearchResult] = []
    seen: set[tuple[str, str]] = set()

    def take(results: list[SearchResult], wanted: int) -> None:
        added = 0
        for result in results:
            if added >= wanted:
                break
            key = _result_key(result)
            if key in seen:
                continue
            if key[0] == "message" and result.record_id in hidden_messages:
                continue
            sources = getattr(result.record, "source_message_ids", None)
            if key[0] == "memory" and sources and set(sources) <= tail_ids:
                continue
            seen.add(key)
            chosen.append(result)
            added += 1

    def run(record_types: list[str], wanted: int, search_scope: SearchScope) -> list[SearchResult]:
        request = dataclasses.replace(
            base, query=query, scope=search_scope, record_types=record_types, token_budget=None,
            soft_token_budget=None, max_results=wanted + len(seen) + len(hidden_messages) + SEARCH_MARGIN,
        )
        return search_records(request)

    if query.strip() and max_relevant:
        for record_type, minimum in minimums.items():
            if minimum:
                type_scope = dataclasses.replace(scope, exact_thread_match=True) if record_type == "message" else scope
                take(run([record_type], minimum, type_scope), minimum)
        remaining = max_relevant - len(chosen)
        if remaining > 0:
            take(run(list(MEMORY_TYPES), remaining, scope), remaining)
    chosen = apply_token_budgets(chosen, base.token_budget, base.soft_token_budget)
    return ContextCard(summary=summary, topics=topics, relevant_results=chosen, recent_messages=recent)
