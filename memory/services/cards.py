"""Serving context cards, and the card log that replays them (issue #32, part 3).

``context_card_get`` is the one function every door reaches for a card (the client's ``get_context_card`` and
its ``_async`` twin, so the JSON API, MCP and the staff pages): it builds the card
(``memory.context.cards.context_card_build``) and logs what it returns (``memory.models.ContextCardLog``), or,
given ``as_of``, answers from the log. Replay is a log and not a re-render: see ``memory.context.card_log``.

Logging is part of the read: the card is logged in its own transaction, under the thread's lock
(``memory.core.locking``'s step 1, so an erasure running at the same time either precedes the row, and the read
answers "not found", or deletes it), and a failure to log raises: a card is never returned unlogged while
logging is on (``OAM_CONTEXT_CARD_LOG_DAYS`` > 0). Nothing is lost and nothing is silent. When the newest card
logged for the thread with the same parameters is identical (text and parts), its ``last_served_at`` moves
instead of a new row: that row stands for the unchanged run.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memory.context import card_log
from memory.context.cards import card_arguments_check, context_card_build
from memory.core import conf
from memory.core.errors import CardNotServed, InvalidArgument
from memory.core.types import NOTSET, ContextCard, MemorySearchConfig, NotSet, SearchScope
from memory.core.valid_time import check_instant
from memory.llm.adapters import Llm
from memory.models import ContextCardLog, Thread
from memory.records.as_of import check_as_of
from memory.services.common import lock_thread

#: The arguments of ``get_context_card`` that decide its card (the spec's, and ``valid_at``).
CARD_ARGUMENTS = ("fallback_message_count", "max_relevant_results", "token_budget", "soft_token_budget",
                  "max_recent_messages", "except_last_messages", "min_relevant_results_by_type", "metadata_filter",
                  "include_invalid_results")


def context_card_get(*, thread: Thread, scope: SearchScope, search_config: MemorySearchConfig, llm: Llm | None,
                     as_of: dt.datetime | dt.date | str | None | NotSet = NOTSET, **arguments: Any) -> ContextCard:
    """The context card of ``thread`` (spec: get_context_card): built and logged now, or with ``as_of`` (a datetime,
    date or ISO-8601 string; issue #32) the card served for it with the same effective parameters at the latest
    ``served_at`` at or before ``as_of``, an object equal to the one returned then (same ``content``, byte for byte).

    The returned card carries ``served_at`` (an attribute, not a dataclass field: the SDK's fields stay): when it
    was served (for a replay, the start of the unchanged run its row stands for).
    Raises what ``context_card_build`` raises; for ``as_of``: ``InvalidType``/``InvalidArgument`` naming it for a
    bad value or when the log is off (``OAM_CONTEXT_CARD_LOG_DAYS`` = 0), ``CardNotServed`` (a ``KeyError`` naming
    ``as_of``) when no such card was served then, or it was erased (thread delete, user or agent erasure) or
    purged after ``OAM_CONTEXT_CARD_LOG_DAYS``. Nothing is re-rendered in its place.
    """
    valid_at = arguments.pop("valid_at", None)
    card_arguments = {name: arguments.pop(name) for name in CARD_ARGUMENTS if name in arguments}
    if as_of is not NOTSET and as_of is not None:
        return _replay(thread=thread, scope=scope, search_config=search_config, as_of=as_of, valid_at=valid_at,
                       card_arguments=card_arguments, unknown=arguments)
    card = context_card_build(thread=thread, scope=scope, search_config=search_config, llm=llm, valid_at=valid_at,
                              **card_arguments, **arguments)
    if card_log.log_days():
        parameters = card_log.parameters_of(scope=scope, search_config=search_config, arguments=card_arguments,
                                            valid_at=check_instant(valid_at, "valid_at"))
        card.served_at = card_logged_insert(thread=thread, parameters=parameters, card=card)
    else:
        card.served_at = None
    return card


def _replay(*, thread: Thread, scope: SearchScope, search_config: MemorySearchConfig, as_of: Any, valid_at: Any,
            card_arguments: dict[str, Any], unknown: dict[str, Any]) -> ContextCard:
    card_arguments_check(thread=thread, scope=scope, search_config=search_config, valid_at=valid_at,
                         **card_arguments, **unknown)  # the errors a present-time card names
    at = check_as_of(as_of)  # a future instant is refused, as the other as-of reads refuse it
    if not card_log.log_days():
        raise InvalidArgument("as_of", "card replay is off here (OAM_CONTEXT_CARD_LOG_DAYS is 0): no card is logged")
    parameters = card_log.parameters_of(scope=scope, search_config=search_config, arguments=card_arguments,
                                        valid_at=check_instant(valid_at, "valid_at"))
    row = card_log.card_logged(thread=thread, digest=card_log.parameters_digest(parameters), at=at)
    if row is None:
        raise CardNotServed(at.isoformat())
    card = card_log.card_decode(row.parts)
    card.served_at = row.served_at
    return card


def card_logged_insert(*, thread: Thread, parameters: dict[str, Any], card: ContextCard):
    """Log ``card``, served now for ``thread`` with ``parameters``; return when it was served.

    In one transaction under the thread's lock (a thread erased meanwhile: ``NotFound``, nothing logged). An
    identical newest card of the same parameters gets its ``last_served_at`` moved instead of a new row. A new
    row prunes the thread's log to its bound (``card_log_bound``).
    """
    digest = card_log.parameters_digest(parameters)
    content, parts = card.content, card_log.card_encode(card)
    now = timezone.now()
    with transaction.atomic():
        lock_thread(thread.pk)
        newest = card_log.card_newest(thread=thread, digest=digest)
        if newest is not None and newest.content == content and newest.parts == parts:
            ContextCardLog.objects.filter(pk=newest.pk).update(last_served_at=now)
            return now
        ContextCardLog.objects.create(project_id=thread.project_id, thread_id=thread.pk, user_id=thread.user_id,
                                      agent_id=thread.agent_id, parameters_digest=digest, parameters=parameters,
                                      content=content, parts=parts, size=len(content) + len(parts),
                                      served_at=now, last_served_at=now)
        card_log_bound(thread)
    return now


def card_log_bound(thread: Thread) -> int:
    """Keep the thread's newest logged cards within ``OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD`` rows and
    ``OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD`` characters (``ContextCardLog.size``; the newest is kept whatever
    its size); delete the older ones and return how many. Call inside the logging transaction.

    Reading a card writes a row (card replay, issue #32), and a read key asking with ever new parameters made one
    row each: an outside attack stored 50.7 MB from 20 reads of 1.1 KB. A replay older than what is kept answers
    "no card was served", as one past ``OAM_CONTEXT_CARD_LOG_DAYS`` does. Bounded: reads at most the row bound
    plus one rows (a bound lowered since is met by deleting everything older than the kept rows too).
    """
    most = conf.get("OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD")
    budget = conf.get("OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD")
    rows = ContextCardLog.objects.filter(project_id=thread.project_id, thread_id=thread.pk)
    newest = list(rows.order_by("-served_at", "-id").values_list("pk", "size", "served_at")[: most + 1])
    kept, used = 0, 0
    for _pk, size, _served in newest:
        if kept and (kept >= most or used + size > budget):
            break
        kept, used = kept + 1, used + size
    if kept == len(newest):
        return 0
    drop = [pk for pk, _size, _served in newest[kept:]]
    oldest_kept = newest[kept - 1][2]
    deleted, _ = rows.filter(Q(pk__in=drop) | Q(served_at__lt=oldest_kept)).exclude(
        pk__in=[pk for pk, _size, _served in newest[:kept]]).delete()
    return deleted


def card_log_purge(*, now) -> int:
    """Delete the logged cards last served more than ``OAM_CONTEXT_CARD_LOG_DAYS`` before ``now`` (all of them when
    the log is off); return how many. Run by the expiry purge (``erasure.expired_purge``)."""
    days = card_log.log_days()
    rows = ContextCardLog.objects.all()
    if days:
        rows = rows.filter(last_served_at__lt=now - dt.timedelta(days=days))
    return rows.delete()[0]
