"""Derived memories follow their source: what happens to a memory when the messages it came from go.

A memory's ``source_message_ids`` (public message ids of its project) say
which messages it was extracted from (``memory.services.extraction``). When a
message is deleted or expires (every path: ``services.message_delete`` from
the API, the client, the staff pages and the admin, and the expiry purge, all
through ``memory.services.erasure.messages_erase``), each memory whose sources are
*all* among the messages going is invalidated (``OAM_DERIVED_MEMORY_POLICY =
"invalidate"``, the default: kept, hidden from search with
``include_invalid_results=False``) or deleted (``"delete"``); a memory with
another source that remains is left alone. Each memory touched gets a version
in its history (``memory.records.history``) whose reason names the source.

What was done is reported without changing the spec's return values: a
caller that wants the receipt wraps the call in ``collecting()`` (the API's
message delete answers it in the ``OAM-Derived-Memories`` header), and the
thread's WebSocket group gets a ``derived_memories`` event
(``memory.core.progress``).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db.models import Q

from memory.core import conf
from memory.core.ids import public_id, stored_id
from memory.models import Memory, Message

#: What ``OAM_DERIVED_MEMORY_POLICY`` may say.
POLICIES = ("invalidate", "delete")
#: Message ids matched per query (a disjunction of LIKE terms each).
MATCH_BATCH = 100


@dataclass
class DerivedReceipt:
    """What following deleted sources did: public ids of the memories ``invalidated`` and ``deleted``, and of
    the ``messages`` whose deletion caused it."""

    messages: list[str] = field(default_factory=list)
    invalidated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        """The receipt as JSON-ready lists."""
        return {"messages": list(self.messages), "invalidated": list(self.invalidated),
                "deleted": list(self.deleted)}

    @property
    def empty(self) -> bool:
        """True when no memory was touched."""
        return not (self.invalidated or self.deleted)


_collector: ContextVar[DerivedReceipt | None] = ContextVar("oam_derived_receipt", default=None)


@contextlib.contextmanager
def collecting() -> Iterator[DerivedReceipt]:
    """``with collecting() as receipt:`` every message delete inside adds what it did to ``receipt`` (also from
    ``memory.core.aio.in_worker`` threads, which copy the context and so share the object)."""
    receipt = DerivedReceipt()
    token = _collector.set(receipt)
    try:
        yield receipt
    finally:
        _collector.reset(token)


def note(receipt: DerivedReceipt) -> None:
    """Add ``receipt`` to the one the innermost ``collecting()`` holds, if any."""
    target = _collector.get()
    if target is not None and not receipt.empty:
        target.messages += receipt.messages
        target.invalidated += receipt.invalidated
        target.deleted += receipt.deleted


def policy() -> str:
    """``OAM_DERIVED_MEMORY_POLICY``: "invalidate" (default) or "delete" (``memory.core.conf``)."""
    return conf.get("OAM_DERIVED_MEMORY_POLICY")


def derived_only_from(message_keys: Iterable[str]) -> list[Memory]:
    """The memories (rows) of the messages' projects derived only from these messages (stored ids): at least
    one of their ``source_message_ids`` is among them and every other one is gone already (deleted or purged
    before). A memory with no sources, or with a source outside them that still exists, is not returned.

    Matching is a LIKE on the JSON text of ``source_message_ids`` for each id
    (as JSON encodes it), then an exact check of the whole list.
    """
    by_project: dict[int, set[str]] = {}
    for key in message_keys:
        project, _, _ = key.partition(":")
        by_project.setdefault(int(project), set()).add(public_id(key))
    found: dict[str, Memory] = {}
    for project, ids in by_project.items():
        ordered = sorted(ids)
        for start in range(0, len(ordered), MATCH_BATCH):
            terms = Q()
            for mid in ordered[start:start + MATCH_BATCH]:
                terms |= Q(source_message_ids__icontains=json.dumps(mid))
            for row in Memory.objects.filter(terms, project_id=project):
                sources = [s for s in (row.source_message_ids or []) if isinstance(s, str)]
                if not any(s in ids for s in sources):
                    continue  # the LIKE matched a longer id, or another case
                others = [stored_id(project, s) for s in sources if s not in ids]
                if others and Message.objects.filter(pk__in=others).exists():
                    continue  # another source remains
                found[row.pk] = row
    return sorted(found.values(), key=lambda row: row.pk)
