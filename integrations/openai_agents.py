"""``OamSession``: an OpenAI Agents SDK ``Session`` (``agents.memory.session.Session``) kept in one OAM thread.

``Runner.run(agent, input, session=OamSession("chat-42", AgentMemory(...)))`` reads the conversation with
``get_items`` before each turn and appends the turn's items with ``add_items``; here they are the messages of
the OAM thread whose id is the session id (created on first use with the given user, agent and metadata;
found again by any later session of that id). Everything goes through the client's ``_async`` twins
(``memory.client.Thread``), so the thread's extraction, summary, context card and search see the conversation
like any other.

**Item -> message.** Each item (a ``TResponseInputItem`` dict) is one message: ``role`` is the item's
``role``, else its ``type`` (``function_call``, ``function_call_output``, ``reasoning`` ...); ``content`` is
its text: a string ``content``, or the ``text`` (or ``refusal``) of its content parts joined by newlines, or
a tool result's string ``output``, else the item as JSON. The item is kept in the message's metadata under
``"openai_agents"`` so ``get_items`` returns it exactly; when the message's content is the item's only text (a
string ``content``, one text part, a string ``output``), that text is kept once, in the content, and put
back on reading. A message of the thread that no
session wrote (added through the API or the client) reads as ``{"role": <role>, "content": <text>}``. The
engine's limits apply (``memory.core.errors``): 100,000 characters a message, 64 KiB of JSON metadata,
1,000 messages and 200,000 characters in one ``add_items``.

**Bounded reads.** ``get_items(limit)`` reads only the last ``limit`` messages
(``Thread.get_recent_messages``); ``limit`` None (and no ``session_settings.limit``) reads them all, as the
protocol asks. ``pop_item`` reads and deletes the newest message. ``clear_session`` deletes the thread's
messages, newest first, in pages of ``CLEAR_PAGE``, and keeps the thread (its id, user, agent, metadata,
settings and the memories not derived only from those messages: ``memory.records.provenance``).

**Errors.** The engine's: TypeError/ValueError (``memory.core.errors``) for a bad session id (an OAM id:
``memory.records.validators.check_id``) or item, ``OutOfScope`` (a ValueError) when a restricted client
names another user or agent, ``Conflict`` (a ValueError) when the session id is another user's thread.
"""

from __future__ import annotations

import json
from typing import Any

from agents.memory.session_settings import SessionSettings, resolve_session_limit

from memory.client import AgentMemory, Message, Thread
from memory.core.errors import Conflict, NotFound
from memory.records.validators import check_id

#: The metadata key under which a message keeps its session item.
META_KEY = "openai_agents"
#: Messages ``clear_session`` reads and deletes at a time.
CLEAR_PAGE = 100


def _text_slot(item: dict[str, Any]) -> tuple[list[Any], str] | None:
    """Where the item's only text is (a path into the item) and that text, or None when it has no single text."""
    content = item.get("content")
    if isinstance(content, str):
        return ["content"], content
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict) \
            and isinstance(content[0].get("text"), str):
        return ["content", 0, "text"], content[0]["text"]
    if content is None and isinstance(item.get("output"), str):
        return ["output"], item["output"]
    return None


def _item_text(item: dict[str, Any]) -> str:
    """The text of an item: its string content, the text or refusal of its parts, else the item as JSON."""
    content = item.get("content")
    if isinstance(content, str) and content.strip():
        return content
    if isinstance(content, list):
        texts = [part.get("text") if isinstance(part.get("text"), str) else part.get("refusal")
                 for part in content if isinstance(part, dict)]
        joined = "\n".join(text for text in texts if isinstance(text, str) and text.strip())
        if joined:
            return joined
    if isinstance(item.get("output"), str) and item["output"].strip():
        return item["output"]
    return json.dumps(item, ensure_ascii=False, sort_keys=True)


def item_message(item: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The message (``{"role", "content"}``) and metadata that store one session item (module docstring).

    TypeError for an item that is not a dict; the engine checks the rest when the message is stored.
    """
    if not isinstance(item, dict):
        raise TypeError(f"items: each item must be a dict, not {type(item).__name__}")
    role = item.get("role") or item.get("type") or "item"
    slot = _text_slot(item)
    if slot is not None and slot[1].strip():
        path, text = slot
        kept = json.loads(json.dumps(item))  # a copy whose text slot is emptied: the text is the content
        holder = kept
        for step in path[:-1]:
            holder = holder[step]
        holder[path[-1]] = None
        return {"role": role, "content": text}, {META_KEY: {"item": kept, "text_at": path}}
    return {"role": role, "content": _item_text(item)}, {META_KEY: {"item": item}}


def message_item(message: Message) -> dict[str, Any]:
    """The session item a stored message holds (``item_message`` inverted); a message no session wrote reads as
    ``{"role", "content"}`` with its text."""
    meta = (message.metadata or {}).get(META_KEY)
    text = message.content if isinstance(message.content, str) else "\n".join(
        getattr(part, "text", "") or "" for part in message.content)
    if not isinstance(meta, dict) or not isinstance(meta.get("item"), dict):
        return {"role": message.role, "content": text}
    item = meta["item"]
    path = meta.get("text_at")
    if path:
        holder = item
        for step in path[:-1]:
            holder = holder[step]
        holder[path[-1]] = text
    return item


class OamSession:
    """An OpenAI Agents ``Session`` (the protocol of ``agents.memory.session``) over the OAM thread ``session_id``.

    ``session_id``: the thread's id (an OAM id: TypeError/ValueError otherwise, at once). ``client``: the
    ``memory.client.AgentMemory`` every call goes through (its project and restricted user/agent). ``user_id``,
    ``agent_id``, ``metadata``: the thread's, when this session creates it (a restricted client's fixed user and
    agent fill those omitted); an existing thread keeps its own. ``session_settings``: the SDK's
    ``SessionSettings`` (its ``limit`` is ``get_items``' default). The mappings are the module docstring's.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, client: AgentMemory, *, user_id: str | None = None,
                 agent_id: str | None = None, metadata: dict[str, Any] | None = None,
                 session_settings: SessionSettings | None = None):
        if not isinstance(client, AgentMemory):
            raise TypeError("client: must be a memory.client.AgentMemory")
        self.session_id = check_id(session_id, "session_id")
        self.client = client
        self._user_id, self._agent_id, self._metadata = user_id, agent_id, metadata
        self.session_settings = session_settings if session_settings is not None else SessionSettings()
        self._thread: Thread | None = None

    async def thread(self) -> Thread:
        """The session's OAM thread handle: found by id, else created (module docstring)."""
        if self._thread is None:
            try:
                self._thread = await self.client.get_thread_async(self.session_id)
            except NotFound:
                try:
                    tenant = self.client.tenant  # a restricted client's user and agent fill those not given
                    self._thread = await self.client.create_thread_async(
                        thread_id=self.session_id,
                        user_id=self._user_id if self._user_id is not None else tenant.user_id,
                        agent_id=self._agent_id if self._agent_id is not None else tenant.agent_id,
                        metadata=self._metadata)
                except Conflict as taken:  # created meanwhile, or another user's thread (invisible here)
                    try:
                        self._thread = await self.client.get_thread_async(self.session_id)
                    except NotFound:
                        raise taken from None
        return self._thread

    async def get_items(self, limit: int | None = None) -> list[dict[str, Any]]:
        """The session's items, oldest first: the last ``limit`` (default ``session_settings.limit``; None: all).

        ``limit`` 0 gives none; a negative one is a ValueError, a non-int a TypeError.
        """
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None:
            if not isinstance(limit, int) or isinstance(limit, bool):
                raise TypeError("limit: must be an int or None")
            if limit < 0:
                raise ValueError("limit: must be 0 or more, or None for all items")
            if limit == 0:
                return []
        thread = await self.thread()
        if limit is None:
            messages = await thread.get_messages_async(start=0, end=None)
        else:
            messages = await thread.get_recent_messages_async(limit)
        return [message_item(message) for message in messages]

    async def add_items(self, items: list[dict[str, Any]]) -> None:
        """Append ``items`` as messages in one atomic ``add_messages`` (nothing stored when one is refused)."""
        if not items:
            return
        stored = [item_message(item) for item in items]
        thread = await self.thread()
        await thread.add_messages_async([message for message, _ in stored],
                                        metadata=[metadata for _, metadata in stored])

    async def pop_item(self) -> dict[str, Any] | None:
        """Delete the newest message and return its item; None when the session has none."""
        thread = await self.thread()
        while True:
            newest = await thread.get_recent_messages_async(1)
            if not newest:
                return None
            if await thread.delete_message_async(newest[0].id):
                return message_item(newest[0])
            # deleted meanwhile by another caller: the next newest is this call's

    async def clear_session(self) -> None:
        """Delete every message of the thread, newest first; the thread stays (module docstring)."""
        thread = await self.thread()
        while page := await thread.get_recent_messages_async(CLEAR_PAGE):
            for message in reversed(page):
                await thread.delete_message_async(message.id)
