"""The context-card log's reads and its codec (issue #32, part 3: card replay).

``get_context_card(as_of=T)`` answers the card the service *returned* for the thread, with the same effective
parameters, at the latest ``served_at`` at or before ``T``. A card is never re-rendered from reconstructed
state: the keyword arm's statistics (BM25 over the whole store at query time), the LLM-written durable summary
and any ranking change in a later release move, so a re-render could not be byte-exact. The service keeps the
cards it returns instead (``memory.models.ContextCardLog``, written by ``memory.services.cards``).

* ``parameters_of``: the call's effective parameters (omitted ones as their defaults, the thread's scope and search
  configuration, ``valid_at`` as an instant), and ``parameters_digest`` the sha256 of their canonical JSON;
* ``card_encode``/``card_decode``: a ``ContextCard`` as JSON text and back, an equal object (dataclasses, enums,
  bytes and tuples tagged; only the value types of ``memory.core.types`` are rebuilt);
* ``card_logged``: the log row a replay answers with.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from memory.core import conf
from memory.core import types as value_types
from memory.core.types import NOTSET, ContextCard, MemorySearchConfig, SearchScope
from memory.models import ContextCardLog, Thread

#: The value types ``card_decode`` rebuilds, by class name (dataclasses and enums of ``memory.core.types``).
_TYPES = {name: cls for name, cls in vars(value_types).items()
          if isinstance(cls, type) and (dataclasses.is_dataclass(cls) or issubclass(cls, enum.Enum))
          and cls.__module__ == value_types.__name__}

#: What an omitted count of ``get_context_card`` is (``memory.context.cards``' defaults).
_COUNT_DEFAULTS = {"fallback_message_count": 5, "max_relevant_results": 5, "max_recent_messages": 0,
                   "except_last_messages": 0}


def log_days() -> int:
    """``OAM_CONTEXT_CARD_LOG_DAYS``: how long a served card is kept; 0: cards are not logged, no replay."""
    return conf.get("OAM_CONTEXT_CARD_LOG_DAYS")


def _plain(value: Any) -> Any:
    """A parameter as canonical JSON data: ``NOTSET`` is ``"<default>"``, datetimes ISO-8601, mappings sorted."""
    if value is NOTSET:
        return "<default>"
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return value


def parameters_of(*, scope: SearchScope, search_config: MemorySearchConfig, arguments: Mapping[str, Any],
                  valid_at: dt.datetime | None) -> dict[str, Any]:
    """The effective parameters of one ``get_context_card`` call: what decides its card besides the store."""
    given = {name: value for name, value in arguments.items() if value is not NOTSET}
    effective = {**_COUNT_DEFAULTS, "token_budget": NOTSET, "soft_token_budget": NOTSET,
                 "min_relevant_results_by_type": {}, "metadata_filter": None, "include_invalid_results": True, **given}
    if effective["min_relevant_results_by_type"] is None:
        effective["min_relevant_results_by_type"] = {}
    effective.update(valid_at=valid_at, scope=scope, search_config=search_config)
    return _plain(effective)


def parameters_digest(parameters: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no spaces) of ``parameters``."""
    text = json.dumps(parameters, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return {"__enum__": type(value).__name__, "value": value.value}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"__type__": type(value).__name__,
                "fields": {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}}
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(item) for item in value]}
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, Mapping):
        return {"__dict__": [[_encode(key), _encode(item)] for key, item in value.items()]}
    raise TypeError(f"a context card holds a {type(value).__name__}, which the card log cannot keep")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    if "__type__" in value:
        cls = _TYPES[value["__type__"]]
        return cls(**{name: _decode(item) for name, item in value["fields"].items()})
    if "__enum__" in value:
        return _TYPES[value["__enum__"]](value["value"])
    if "__bytes__" in value:
        return base64.b64decode(value["__bytes__"])
    if "__tuple__" in value:
        return tuple(_decode(item) for item in value["__tuple__"])
    return {_decode(key): _decode(item) for key, item in value["__dict__"]}


def card_encode(card: ContextCard) -> str:
    """``card`` as JSON text (``card_decode`` gives back an equal object)."""
    return json.dumps(_encode(card), ensure_ascii=False, separators=(",", ":"))


def card_decode(text: str) -> ContextCard:
    """The ``ContextCard`` ``card_encode`` wrote."""
    return _decode(json.loads(text))


def card_logged(*, thread: Thread, digest: str, at: dt.datetime) -> ContextCardLog | None:
    """The card logged for ``thread`` with ``digest`` at the latest ``served_at`` at or before ``at``: the one
    query of a replay (index ``oam_card_thread_time_ix``)."""
    return (ContextCardLog.objects.filter(project_id=thread.project_id, thread_id=thread.pk,
                                          parameters_digest=digest, served_at__lte=at)
            .order_by("-served_at", "-id").first())


def card_newest(*, thread: Thread, digest: str) -> ContextCardLog | None:
    """The newest card logged for ``thread`` with ``digest`` (the one an identical card extends)."""
    return (ContextCardLog.objects.filter(project_id=thread.project_id, thread_id=thread.pk, parameters_digest=digest)
            .order_by("-served_at", "-id").first())


def cards_of_thread(thread: Thread, *, limit: int = 200) -> list[ContextCardLog]:
    """The cards logged for ``thread``, newest first (the staff page's list), at most ``limit``."""
    return list(ContextCardLog.objects.filter(project_id=thread.project_id, thread_id=thread.pk)
                .order_by("-served_at", "-id").defer("parts")[:limit])


def card_at(thread: Thread, at: dt.datetime) -> ContextCardLog | None:
    """The card served for ``thread`` at the latest ``served_at`` at or before ``at``, whatever its parameters
    (the staff page's "card at a moment")."""
    return (ContextCardLog.objects.filter(project_id=thread.project_id, thread_id=thread.pk, served_at__lte=at)
            .order_by("-served_at", "-id").first())
