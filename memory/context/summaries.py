"""The running thread summary (spec: get_summary, OracleSummary), also the summary of a context card.

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
  <= 0 disables truncation.

Tokens are estimated with ``memory.core.chunking.estimate_tokens`` (chars / 4).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from memory.core.chunking import estimate_tokens
from memory.core.errors import InvalidArgument, InvalidType, check_sql_count
from memory.core.ids import public_id
from memory.core.types import NOTSET, NotSet, Summary
from memory.llm.adapters import MAX_CHARS_PER_TOKEN, Llm, LlmError, checked_text, schema_instructions
from memory.llm.prompts import MAX_TOPICS, SUMMARY_SCHEMA, SUMMARY_SCHEMA_NAME, SUMMARY_SYSTEM_PROMPT
from memory.models import Message, Thread, ThreadSummary
from memory.records.selectors import live_q

logger = logging.getLogger(__name__)

#: Transcript fallbacks never exceed this many characters (spec: get_summary).
TRANSCRIPT_CHAR_CAP = 4_000
#: ``get_summary`` token budget when omitted ("a bounded default"): about the transcript cap.
DEFAULT_SUMMARY_TOKEN_BUDGET = 1_000
DEFAULT_CONTEXT_CARD_TOKEN_LIMIT = 100_000
DEFAULT_UPDATE_FREQUENCY = -1
#: Reply cap for one summary call, in tokens.
SUMMARY_REPLY_TOKENS = 600
MAX_TOPIC_CHARS = 80


# --- thread settings and argument checks ----------------------------------------------


def thread_setting(thread: Thread, name: str, default: Any) -> Any:
    """A runtime setting of the thread from ``Thread.config``; ``default`` when absent or null."""
    value = (thread.config or {}).get(name)
    return default if value is None else value


def check_count(value: Any, field: str, default: int) -> int:
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


def live_messages(thread: Thread):
    """The thread's live (unexpired) messages, unordered: a ``Message`` queryset."""
    return Message.objects.filter(live_q(timezone.now()), thread_id=thread.pk)


def split_tail(thread: Thread, except_last: int) -> tuple[list[str], int]:
    """Public ids of the last ``except_last`` live messages and the ``seq`` of the last one before them (0: none)."""
    rows = list(live_messages(thread).order_by("-seq").values_list("id", "seq")[: except_last + 1])
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
    rows = live_messages(thread).filter(seq__lte=through_seq).order_by("-seq").values_list("role", "content")
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
    retries) and its summary must read as prose (``memory.llm.adapters.checked_text``: not empty, not control
    characters, not an error body, not the instructions echoed, mostly words; ``LlmBadText`` otherwise); topics
    are whitespace-normalised, de-duplicated and capped at ``MAX_TOPICS`` of ``MAX_TOPIC_CHARS`` characters.
    Raises ``LlmError``.
    """
    reply = llm.complete_json(summary_prompt(previous, topics, lines, token_limit), SUMMARY_SCHEMA,
                              schema_name=SUMMARY_SCHEMA_NAME, max_tokens=SUMMARY_REPLY_TOKENS)
    # Checked before it is stored (issue #34): garbage is a failed refresh (LlmBadText), the old summary stays.
    # The echo check reads the instructions only: a summary rightly repeats the messages' words.
    # Longer than the context card it is written for is "too long" (a scripted or misbehaving model may ignore
    # max_tokens; a longer summary is soft-truncated on read, so it is only refused past that).
    summary = checked_text(reply["summary"], what="summary", prompts=(SUMMARY_SYSTEM_PROMPT,),
                           max_chars=max(SUMMARY_REPLY_TOKENS, token_limit) * MAX_CHARS_PER_TOKEN)
    return summary, _clean_topics(reply["topics"])


def _new_lines(thread: Thread, after_seq: int, through_seq: int) -> list[str]:
    rows = (live_messages(thread).filter(seq__gt=after_seq, seq__lte=through_seq).order_by("seq")
            .values_list("role", "content"))
    return [_line(role, content) for role, content in rows]


def durable_summary(thread: Thread) -> ThreadSummary | None:
    """The thread's stored ``ThreadSummary``, or None before its first refresh."""
    return ThreadSummary.objects.filter(thread_id=thread.pk).first()


def covers_exactly(thread: Thread, durable: ThreadSummary, through_seq: int) -> bool:
    """Whether ``durable`` summarizes exactly the live messages up to ``through_seq``."""
    if durable.through_seq < through_seq:
        return False
    return not live_messages(thread).filter(seq__gt=through_seq, seq__lte=durable.through_seq).exists()


def summary_refresh(*, thread: Thread, llm: Llm, through_seq: int | None = None) -> ThreadSummary | None:
    """Fold the messages after the durable summary into it and store it; return the stored row.

    Covers live messages up to ``through_seq`` (None: the latest). The LLM call
    runs outside the transaction; the write upserts ``ThreadSummary`` with the
    new ``through_seq`` and ``revision + 1`` unless a concurrent refresh got as
    far already (then that row is returned unchanged). Returns the current
    row (or None when there is none) when there is nothing new to fold in.
    Raises ``LlmError`` when the LLM fails; nothing is written then.
    """
    durable = durable_summary(thread)
    start = durable.through_seq if durable else 0
    if through_seq is None:
        through_seq = live_messages(thread).order_by("-seq").values_list("seq", flat=True).first() or 0
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
    return live_messages(thread).filter(seq__gt=start, seq__lte=through_seq).count()


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
        through_seq = live_messages(thread).order_by("-seq").values_list("seq", flat=True).first() or 0
    durable = durable_summary(thread)
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
    durable = durable_summary(thread)
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
    count = check_count(except_last, "except_last", 0)
    budget = _check_summary_budget(token_budget)
    _, cut_seq = split_tail(thread, count)
    if cut_seq == 0:
        return Summary(content="")
    text = None
    durable = durable_summary(thread)
    if durable is not None and durable.content and covers_exactly(thread, durable, cut_seq):
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
