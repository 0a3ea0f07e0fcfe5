"""``OamStore``: a LangGraph ``BaseStore`` (``langgraph.store.base``) whose items are OAM memories.

A graph compiled with ``store=OamStore(AgentMemory(...))`` reads and writes its long-term memory through the
client (``memory.client``): ``put`` is ``add_memory``/``update_memory``, ``delete`` is ``delete_memory``,
``search(query=...)`` is the project search (HYBRID unless the client's ``search_config`` says otherwise),
``search`` without a query and ``list_namespaces`` are ``list_memories``. ``batch`` runs the ops in order;
``abatch`` runs the same code in the client's worker thread (``memory.core.aio.in_worker``, as every ``_async``
twin of the client). ``put/get/search/delete/list_namespaces`` and their ``a*`` twins are ``BaseStore``'s.

**Namespace -> scope.** A namespace names the OAM user, agent and thread its items belong to through a rule
(``scope=``): by default ``labelled_scope``, which reads the label/value pairs ``"users", <user_id>``,
``"agents", <agent_id>`` and ``"threads", <thread_id>`` wherever they stand, other labels being free
(``("users", "u1", "memories")`` is user ``u1``; ``("users", "u1", "agents", "a1")`` user ``u1`` and agent
``a1``; ``("memories",)`` no user). LangGraph's common ``("memories", user_id)`` is
``scope=positional_scope(user_id=1)``. A dimension the namespace leaves out is the restricted client's fixed
user or agent (``Tenant``), else none. Items of a namespace naming a thread live in that OAM thread (created on
first put with the namespace's user and agent); the others in one thread per user and agent that the store
creates on first put, ``"langgraph"``, ``"langgraph:users:<user_id>"``, ``"langgraph:users:<user_id>:agents:
<agent_id>"`` (``%``, ``:`` and ``/`` in an id escaped as ``%25``, ``%3A``, ``%2F``: one segment of an HTTP
path, docs/projects-and-keys.md, "Another known limit"). A search prefix narrows the search to
the scope it names, and the namespace prefix itself is matched exactly on the stored namespace.

**Key -> memory id.** A key must be a valid OAM id (``memory.records.validators.check_id``: a non-empty string
of at most 255 characters, no control character; TypeError/ValueError naming ``key``). The memory id is
``"langgraph-"`` and 40 hex digits of the SHA-256 of the item's thread, namespace and key (``memory_id``):
deterministic, always a valid id, and distinct for two tenants' items of the same namespace and key. Thread
and memory ids starting with ``langgraph`` are reserved: the JSON API and MCP refuse to create them
(``threads.api.common.RESERVED_ID_PREFIXES``), so another key of the project cannot take the store's ids first.

**Value -> memory.** ``content`` (what search embeds and matches) is the text at the paths of the put's
``index`` list or of the store's ``fields`` (LangGraph's path syntax, ``langgraph.store.base.get_text_at_path``),
else the value's first non-blank string field among ``content``, ``text``, ``memory``, else the value as JSON.
``index=False`` cannot keep an item out of search: OAM indexes every memory. The value itself, the namespace,
the key and the TTL are kept in the memory's metadata under ``"langgraph"``, so ``get`` returns exactly what
was put (the engine's limits apply: content 100,000 characters, metadata 64 KiB of JSON). ``created_at`` is
the record's; ``updated_at`` is its ``timestamp`` (the event time), which every put sets to the put's time.

**Filters.** ``search(filter=...)`` is translated to the engine's metadata filter grammar
(``memory.records.metadata_filter``) on the stored value and runs in SQL: a scalar or list is an exact match,
``{"$eq": v}`` the same, ``{"$ne": v}`` is ``{"$not": v}`` (true where the key is missing too, as in
LangGraph), ``$gt``, ``$gte``, ``$lt`` and ``$lte`` are the grammar's range operators, a plain object a nested
filter. Operators in one dict are ANDed, as in LangGraph (``{"$gte": 1, "$lt": 5}``); it may hold the ranges
and one of ``$eq``/``$ne`` (``$eq`` beside ranges becomes ``{"$not": {"$not": v}}``), not both. Equality is
type-exact JSON equality (``1`` does not match ``"1"`` or ``True``) and ``None`` matches a stored ``null`` only,
not a missing key (LangGraph's in-memory store matches both). Ranges are type-strict too: a number bound
matches stored numbers only, a string bound stored strings only (by code point: ISO-8601 dates order as
time); an item without the key, or with another type there, is no match and no error (LangGraph's in-memory
store converts both sides with ``float()``, so ``{"$gt": "3"}`` matches ``5`` there and a missing key raises).

**TTL.** LangGraph's ``ttl`` is in minutes; OAM keeps whole days counted from the memory's creation
(``ttl_days`` with ``TimeToLiveAnchor.CREATED_AT``, ``memory.core.ttl``), so a put's TTL becomes
``floor((age + ttl minutes) / 1440) + 1`` days from the creation (``ttl_days``): the first whole day after
``ttl`` minutes from now, so an item never expires before its LangGraph TTL and lives at most a day longer
(``ttl=60``: 1 day; ``ttl=7 * 1440``: 8 days); ``ttl=0`` expires at once; ``ttl=None`` is ``ttl_days=None``
(no expiry, or the client's ``max_ttl_days``). ``refresh_ttl`` on ``get`` and ``search`` extends the expiry
the same way, writing only when the day count grows: at most one write (and memory history version) a day
per item read. An expired item is invisible at once; the engine's purge deletes it (``TTLConfig``'s
``sweep_interval_minutes`` is not used).

**Errors.** ``InvalidNamespaceError`` (a ValueError) for namespaces LangGraph refuses and those the scope rule
cannot read; the engine's ValueError/TypeError (``memory.core.errors``) for bad keys, values, filters and
limits; ``OutOfScope`` (a ValueError) when a restricted client names another user or agent.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    get_text_at_path,
    validate_op_namespace,
)

from memory.client import AgentMemory, MemoryRecord, Thread, TimeToLiveAnchor
from memory.core.aio import in_worker
from memory.core.errors import Conflict, NotFound, lone_surrogate
from memory.core.ttl import parse_timestamp
from memory.core.types import NOTSET
from memory.models import MEMORY_TYPES
from memory.records.validators import check_id

#: The metadata key under which a memory keeps its LangGraph item (namespace, key, value, TTL).
META_KEY = "langgraph"
#: The value's fields whose first non-blank string is the memory's content when no index paths are given.
TEXT_FIELDS = ("content", "text", "memory")
#: Minutes in one day of ``ttl_days``.
MINUTES_PER_DAY = 1440
#: The OAM thread of items whose namespace names none, before its ``:users:...`` and ``:agents:...``.
HOLDING_THREAD = "langgraph"
_MAX_ID = 255
_RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
_OPERATORS = ("$eq", "$ne", *_RANGE_OPERATORS)


@dataclass(frozen=True)
class NamespaceScope:
    """The OAM scope a namespace names: ``user_id``, ``agent_id``, ``thread_id`` (None: not named)."""

    user_id: str | None = None
    agent_id: str | None = None
    thread_id: str | None = None


#: A namespace -> scope rule: ``rule(namespace, prefix)``; ``prefix`` is True for a search prefix, which may
#: stop before a value (that dimension is then open). Raises ``InvalidNamespaceError`` for what it cannot read.
ScopeRule = Callable[[tuple[str, ...], bool], NamespaceScope]

_LABELS = {"users": "user_id", "agents": "agent_id", "threads": "thread_id"}


def labelled_scope(namespace: tuple[str, ...], prefix: bool = False) -> NamespaceScope:
    """The default rule: the pairs ``"users", <id>``, ``"agents", <id>``, ``"threads", <id>`` wherever they stand.

    ``("users", "u1", "agents", "a1", "notes")`` -> user ``u1``, agent ``a1``. Other labels are free. A label
    ending a namespace (no value after it) or given twice raises ``InvalidNamespaceError``; a label ending a
    search prefix leaves its dimension open.
    """
    found: dict[str, str] = {}
    i = 0
    while i < len(namespace):
        field = _LABELS.get(namespace[i])
        if field is None:
            i += 1
            continue
        if i + 1 == len(namespace):
            if prefix:
                break
            raise InvalidNamespaceError(f"namespace {namespace!r}: the label {namespace[i]!r} needs an id after it "
                                        "(labelled_scope reads 'users', 'agents' and 'threads' as label/id pairs)")
        if field in found:
            raise InvalidNamespaceError(f"namespace {namespace!r} names {namespace[i]!r} twice")
        found[field] = namespace[i + 1]
        i += 2
    return NamespaceScope(**found)


def positional_scope(*, user_id: int | None = None, agent_id: int | None = None,
                     thread_id: int | None = None) -> ScopeRule:
    """A rule reading ids at fixed positions: ``positional_scope(user_id=1)`` reads ``("memories", <user_id>)``.

    Positions are 0-based ints (TypeError/ValueError otherwise). A namespace too short for a position raises
    ``InvalidNamespaceError``; a search prefix too short leaves that dimension open.
    """
    positions = {name: position for name, position in
                 (("user_id", user_id), ("agent_id", agent_id), ("thread_id", thread_id)) if position is not None}
    for name, position in positions.items():
        if not isinstance(position, int) or isinstance(position, bool):
            raise TypeError(f"{name}: must be an int position")
        if position < 0:
            raise ValueError(f"{name}: must be a position of 0 or more")

    def rule(namespace: tuple[str, ...], prefix: bool = False) -> NamespaceScope:
        found = {}
        for name, position in positions.items():
            if position < len(namespace):
                found[name] = namespace[position]
            elif not prefix:
                raise InvalidNamespaceError(f"namespace {namespace!r} has no position {position} ({name})")
        return NamespaceScope(**found)

    return rule


@dataclass(frozen=True)
class _Target:
    """Where an item of one namespace lives: its OAM thread, and the user and agent the namespace names."""

    thread_id: str
    user_id: str | None
    agent_id: str | None


def _escape(text: str) -> str:
    """``text`` with ``%``, ``:``, ``/`` and control characters percent-escaped (a part of a holding thread's id)."""
    return "".join(quote(c, safe="") if c in "%:/" or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F else c for c in text)


def holding_thread_id(user_id: str | None, agent_id: str | None) -> str:
    """The id of the thread holding the items of a user and agent whose namespace names no thread.

    ``"langgraph"``, then ``:users:<user_id>`` and ``:agents:<agent_id>`` for those given (escaped: ``_escape``);
    longer than an id may be (255 characters), ``"langgraph-"`` and the SHA-256 of the two ids.
    """
    parts = [HOLDING_THREAD]
    if user_id is not None:
        parts += ["users", _escape(user_id)]
    if agent_id is not None:
        parts += ["agents", _escape(agent_id)]
    thread_id = ":".join(parts)
    if len(thread_id) <= _MAX_ID:
        return thread_id
    return f"{HOLDING_THREAD}-{_digest([user_id, agent_id])}"


def _digest(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _check_ttl(ttl: Any) -> float | None:
    """A TTL in minutes: None, or an int or float of at least 0 (TypeError/ValueError naming ``ttl``)."""
    if ttl is None:
        return None
    if not isinstance(ttl, (int, float)) or isinstance(ttl, bool):
        raise TypeError(f"ttl: must be a number of minutes or None, not {type(ttl).__name__}")
    try:
        finite = math.isfinite(ttl)
    except OverflowError:  # an int too large for a float
        finite = False
    if not finite or ttl < 0:
        raise ValueError("ttl: must be a finite number of minutes, 0 or more")
    return ttl


def ttl_days(ttl: float | None, created_at: datetime, now: datetime) -> int | None:
    """OAM's ``ttl_days``, counted from ``created_at``, for an item to live ``ttl`` minutes from ``now``.

    ``floor((now - created_at + ttl) / 1 day) + 1``: the first whole day (from the creation) after ``ttl``
    minutes from now, so that reads soon after (a refresh asks the same) need no new expiry until that day
    count grows. ``ttl`` None: None (no expiry); 0: 0 (expires at once).
    """
    if ttl is None:
        return None
    if ttl == 0:
        return 0
    age = max(0.0, (now - created_at).total_seconds() / 60)
    return math.floor((age + ttl) / MINUTES_PER_DAY) + 1


def metadata_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """A LangGraph ``filter`` on an item's value as the engine's ``metadata_filter`` on the stored value.

    See the module docstring ("Filters"); the result goes under ``{"langgraph": {"value": ...}}``. Raises
    ValueError for a filter that is not a dict, an operator other than ``$eq``/``$ne``/``$gt``/``$gte``/``$lt``/
    ``$lte``, operators beside plain keys or ``$eq`` beside ``$ne`` in one dict, or an object given to
    ``$eq``/``$ne``; the engine checks the rest (keys, values, range bounds, depth) when it compiles the filter.
    """
    if filter is None:
        return {}
    if not isinstance(filter, Mapping):
        raise ValueError(f"filter: must be a dict or None, not {type(filter).__name__}")
    operators = [key for key in filter if isinstance(key, str) and key.startswith("$")]
    if operators:  # an operator applies to a field of the value, never to the value itself
        raise ValueError(f"filter: {operators[0]} needs a field: {{field: {{{operators[0]}: ...}}}}")
    return {key: _expression(value, f"filter.{key}") for key, value in filter.items()}


def _expression(value: Any, where: str) -> Any:
    if not isinstance(value, Mapping):
        return list(value) if isinstance(value, tuple) else value
    operators = [k for k in value if isinstance(k, str) and k.startswith("$")]
    if not operators:
        return {key: _expression(item, f"{where}.{key}") for key, item in value.items()}
    if len(operators) < len(value):
        plain = [k for k in value if k not in operators]
        raise ValueError(f"{where}: cannot mix operators {operators} with plain keys {plain} in one dict")
    unknown = [k for k in operators if k not in _OPERATORS]
    if unknown:
        raise ValueError(f"{where}: unsupported operator: {unknown[0]} (allowed: {', '.join(_OPERATORS)})")
    ranges = {op: value[op] for op in operators if op in _RANGE_OPERATORS}  # their bounds: the engine checks them
    equality = [op for op in operators if op in ("$eq", "$ne")]
    if not equality:
        return ranges
    if len(equality) == 2:
        raise ValueError(f"{where}: give $eq or $ne, not both, in one operator dict")
    operator = equality[0]
    operand = value[operator]
    if isinstance(operand, Mapping):
        raise ValueError(f"{where}.{operator}: compares a scalar or a list; match an object with a nested "
                         "filter ({field: {key: value}})")
    operand = list(operand) if isinstance(operand, tuple) else operand
    if operator == "$ne":
        return {**ranges, "$not": operand}
    return {**ranges, "$not": {"$not": operand}} if ranges else operand  # beside operators, exact match is $not $not


def _namespace_path(labels: Sequence[str]) -> dict[str, str]:
    """A namespace prefix as the stored ``path`` object it must be a subset of (``"*"``: any label there)."""
    return {str(i): label for i, label in enumerate(labels) if label != "*"}


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's namespace match: ``prefix`` or ``suffix``, ``"*"`` matching any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(want == "*" or label == want for label, want in pairs)


def _check_count(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name}: must be an int")
    if value < 0:
        raise ValueError(f"{name}: must be 0 or more")
    return value


class OamStore(BaseStore):
    """A LangGraph ``BaseStore`` over the memories of one ``AgentMemory`` client's project (and tenant).

    ``client``: the ``memory.client.AgentMemory`` every call goes through (its project, its restricted user
    and agent, its retention and search settings). ``scope``: the namespace -> scope rule (``labelled_scope``,
    ``positional_scope(...)`` or any ``ScopeRule``). ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` in
    minutes for puts that give none; ``refresh_on_read``, default True). ``fields``: the value paths whose text
    is a memory's content when a put gives no ``index`` list (default: the ``TEXT_FIELDS`` rule).
    ``memory_type``: the OAM type of new memories (memory, fact, guideline, preference). ``autonomous_linking``:
    let the thread's LLM relate each new memory to its neighbours (default False: a put makes no LLM call).
    The mappings are the module docstring's.
    """

    supports_ttl = True

    def __init__(self, client: AgentMemory, *, scope: ScopeRule = labelled_scope, ttl: TTLConfig | None = None,
                 fields: Sequence[str] | None = None, memory_type: str = "memory",
                 autonomous_linking: bool = False):
        if not isinstance(client, AgentMemory):
            raise TypeError("client: must be a memory.client.AgentMemory")
        if not callable(scope):
            raise TypeError("scope: must be a namespace -> NamespaceScope rule")
        if memory_type not in MEMORY_TYPES:
            raise ValueError(f"memory_type: must be one of {', '.join(MEMORY_TYPES)}")
        if isinstance(fields, str):
            raise TypeError("fields: must be a list of paths, not one string")
        self.client = client
        self.scope = scope
        self.ttl_config = ttl
        self.fields = list(fields) if fields is not None else None
        self.memory_type = memory_type
        self.autonomous_linking = bool(autonomous_linking)

    # --- the ops -------------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; one result per op. Every op's namespace and key are checked first, so a batch
        holding a bad one runs none (``InvalidNamespaceError``; TypeError/ValueError naming ``key``)."""
        ops = list(ops)
        for op in ops:
            self._check(op)
        threads: dict[str, Thread | None] = {}
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op, threads))
            elif isinstance(op, PutOp):
                results.append(self._put(op, threads))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            else:
                results.append(self._list_namespaces(op))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch`` awaited in the client's worker thread (``memory.core.aio.in_worker``)."""
        return await in_worker(self.batch, list(ops))

    def memory_id(self, namespace: tuple[str, ...], key: str) -> str:
        """The OAM memory id of the item ``key`` of ``namespace`` for this store's client (module docstring)."""
        return self._memory_id(self._target(tuple(namespace)), tuple(namespace), key)

    # --- mapping -------------------------------------------------------------------------------------------

    def _check(self, op: Op) -> None:
        """LangGraph's namespace rules (a put's too), the scope rule's reading, and the key's OAM id rule."""
        if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
            raise ValueError(f"Unknown operation type: {type(op)}")
        validate_op_namespace(op)
        labels = op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())
        for label in labels if isinstance(labels, tuple) else ():
            if isinstance(label, str) and lone_surrogate(label) is not None:
                raise InvalidNamespaceError(f"Namespace labels must be valid Unicode (no lone surrogates). Got: "
                                            f"{ascii(tuple(labels))}")
        if isinstance(op, SearchOp):
            self.scope(tuple(op.namespace_prefix), True)
        elif isinstance(op, (GetOp, PutOp)):
            namespace = tuple(op.namespace)
            if isinstance(op, PutOp) and not namespace:
                raise InvalidNamespaceError("Namespace cannot be empty.")
            if isinstance(op, PutOp) and namespace[0] == "langgraph":
                raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')
            self.scope(namespace, False)
            check_id(op.key, "key")

    def _target(self, namespace: tuple[str, ...]) -> _Target:
        scope = self.scope(namespace, False)
        tenant = self.client.tenant
        user_id = scope.user_id if scope.user_id is not None else tenant.user_id
        agent_id = scope.agent_id if scope.agent_id is not None else tenant.agent_id
        thread_id = scope.thread_id if scope.thread_id is not None else holding_thread_id(user_id, agent_id)
        return _Target(thread_id=thread_id, user_id=user_id, agent_id=agent_id)

    @staticmethod
    def _memory_id(target: _Target, namespace: tuple[str, ...], key: Any) -> str:
        key = check_id(key, "key")
        return f"langgraph-{_digest([target.thread_id, list(namespace), key])}"

    def _thread(self, target: _Target, threads: dict[str, Thread | None], *, create: bool) -> Thread | None:
        """The handle on the target's thread (None when absent and not ``create``); created on first put."""
        handle = threads.get(target.thread_id)
        if handle is not None or (target.thread_id in threads and not create):
            return handle
        try:
            handle = self.client.get_thread(target.thread_id)
        except NotFound:
            handle = None
            if create:
                try:
                    handle = self.client.create_thread(
                        thread_id=target.thread_id, user_id=target.user_id, agent_id=target.agent_id,
                        metadata={META_KEY: {"store": True}})
                except Conflict as taken:  # created meanwhile, or another user's thread (invisible here)
                    try:
                        handle = self.client.get_thread(target.thread_id)
                    except NotFound:
                        raise taken from None
        threads[target.thread_id] = handle
        return handle

    def _content(self, value: dict[str, Any], index: Any) -> str:
        paths = index if isinstance(index, list) else self.fields
        if paths:
            texts = [text for path in paths for text in get_text_at_path(value, path)]
            joined = "\n".join(text for text in texts if text.strip())
            if joined:
                return joined
        for name in TEXT_FIELDS:
            text = value.get(name)
            if isinstance(text, str) and text.strip():
                return text
        return json.dumps(value, ensure_ascii=False, sort_keys=True)

    def _item(self, record: MemoryRecord, cls: type[Item] = Item, score: float | None = None) -> Item | None:
        meta = (record.metadata or {}).get(META_KEY)
        if not isinstance(meta, dict) or not {"namespace", "key", "value"} <= meta.keys():
            return None  # not a memory this store wrote
        created = parse_timestamp(record.created_at)
        updated = parse_timestamp(record.timestamp) or created
        fields = {"namespace": tuple(meta["namespace"]), "key": meta["key"], "value": meta["value"],
                  "created_at": created, "updated_at": updated}
        return SearchItem(**fields, score=score) if cls is SearchItem else Item(**fields)

    def _refresh(self, record: MemoryRecord) -> None:
        """Extend the expiry of an item with a TTL to ``ttl`` minutes from now (``ttl_days``), when it grows."""
        ttl = ((record.metadata or {}).get(META_KEY) or {}).get("ttl")
        if ttl is None:
            return
        created, now = parse_timestamp(record.created_at), datetime.now(timezone.utc)
        days = ttl_days(ttl, created, now)
        ceiling = self.client.retention_config.max_ttl_days
        if ceiling is not None:
            days = min(days, ceiling)  # the engine clamps to it (with a warning); asking again each read helps nothing
        current = parse_timestamp(record.expires_at)
        if current is not None and current >= created + timedelta(days=days):
            return
        self.client.update_memory(record.id, ttl_days=days, ttl_anchor=TimeToLiveAnchor.CREATED_AT)

    # --- each op -------------------------------------------------------------------------------------------

    def _get(self, op: GetOp, threads: dict[str, Thread | None]) -> Item | None:
        namespace = tuple(op.namespace)
        target = self._target(namespace)
        memory_id = self._memory_id(target, namespace, op.key)
        handle = self._thread(target, threads, create=False)
        if handle is None:
            return None
        try:
            record = handle.get_memory(memory_id)
        except NotFound:
            return None
        if op.refresh_ttl:
            self._refresh(record)
        return self._item(record)

    def _put(self, op: PutOp, threads: dict[str, Thread | None]) -> None:
        namespace = tuple(op.namespace)
        target = self._target(namespace)
        memory_id = self._memory_id(target, namespace, op.key)
        if op.value is None:
            self.client.delete_memory(memory_id)
            return None
        if not isinstance(op.value, Mapping):
            raise TypeError(f"value: must be a dict or None, not {type(op.value).__name__}")
        value = dict(op.value)
        ttl = _check_ttl(op.ttl)
        now = datetime.now(timezone.utc)
        content = self._content(value, op.index)
        metadata = {META_KEY: {"namespace": list(namespace), "path": _namespace_path(namespace), "key": op.key,
                               "value": value, "ttl": ttl}}
        handle = self._thread(target, threads, create=True)
        try:
            existing = handle.get_memory(memory_id)
        except NotFound:
            existing = None
        if existing is not None:
            self.client.update_memory(memory_id, content=content, metadata=metadata, timestamp=now.isoformat(),
                                      ttl_days=ttl_days(ttl, parse_timestamp(existing.created_at), now),
                                      ttl_anchor=TimeToLiveAnchor.CREATED_AT)
            return None
        arguments = dict(memory_type=self.memory_type, memory_id=memory_id, metadata=metadata,
                         timestamp=now.isoformat(), ttl_days=ttl_days(ttl, now, now),
                         ttl_anchor=TimeToLiveAnchor.CREATED_AT, autonomous_linking=self.autonomous_linking,
                         user_id=target.user_id if target.user_id is not None else NOTSET,
                         agent_id=target.agent_id if target.agent_id is not None else NOTSET)
        try:
            handle.add_memory(content, **arguments)
        except Conflict:  # the id is still held by an expired memory the purge has not deleted yet
            self.client.delete_memory(memory_id)
            handle.add_memory(content, **arguments)
        return None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        limit, offset = _check_count(op.limit, "limit"), _check_count(op.offset, "offset")
        if limit == 0:
            return []
        scope = self.scope(prefix, True)
        wanted: dict[str, Any] = {}
        if prefix:
            wanted["path"] = _namespace_path(prefix)
        if op.filter:
            wanted["value"] = metadata_filter(op.filter)
        ids = {name: getattr(scope, name) for name in ("user_id", "agent_id", "thread_id")
               if getattr(scope, name) is not None}
        if isinstance(op.query, str) and op.query.strip():
            results = self.client.search_project(op.query, **ids, record_types=list(MEMORY_TYPES),
                                                 metadata_filter={META_KEY: wanted}, max_results=offset + limit)
            found = [(result.record, result.score) for result in results[offset:]]
        else:
            records = self.client.list_memories(**ids, metadata_filter={META_KEY: wanted}, limit=offset + limit)
            found = [(record, None) for record in records[offset:]]
        items = []
        for record, score in found:
            item = self._item(record, SearchItem, score)
            if item is not None:
                if op.refresh_ttl:
                    self._refresh(record)
                items.append(item)
        return items

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """Reads every store memory under the conditions' fixed prefix labels (``list_memories``, no limit):
        LangGraph's listing has no counterpart in the engine, so its cost grows with the items listed."""
        limit, offset = _check_count(op.limit, "limit"), _check_count(op.offset, "offset")
        conditions = tuple(op.match_conditions or ())
        path: dict[str, str] = {}
        for condition in conditions:
            if condition.match_type == "prefix":
                path.update(_namespace_path(condition.path))
        records = self.client.list_memories(metadata_filter={META_KEY: {"path": path} if path else {}}, limit=None)
        namespaces = set()
        for record in records:
            item = self._item(record)
            if item is not None and all(_matches(condition, item.namespace) for condition in conditions):
                namespaces.add(item.namespace if op.max_depth is None else item.namespace[:op.max_depth])
        return sorted(namespaces)[offset:offset + limit]
