"""``ScriptedLlm``: the LLM adapters' test double, answering with queued replies instead of a server.

Its replies go through ``BaseLlm``'s parse, validate and retry path (``memory.llm.adapters``), exactly as a
server's would, and it records every request as sent (``LlmRequest``). The test suite and the staff pages'
tests drive extraction, linking, summaries and captions with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from memory.llm.adapters import BaseLlm
from memory.llm.replies import Messages, Reply


@dataclass
class LlmRequest:
    """One request a ``ScriptedLlm`` received: the messages as a server would get them."""

    messages: Messages
    schema: dict | None
    schema_name: str | None
    max_tokens: int | None


class ScriptedLlm(BaseLlm):
    """A test double that answers with queued replies, for prompt-parsing unit tests.

    ``replies`` are consumed one per request (a retry consumes the next one): a
    ``str`` is the raw model text, a ``dict``/``list`` is sent as its JSON text, and
    an exception instance (e.g. ``LlmTimeout("slow")``) is raised instead. Replies
    go through the same parse/validate/retry path as ``OpenAICompatibleLlm``'s, so a
    schema failure behaves identically. ``requests`` records every request with the
    messages as sent (schema prompt and retry feedback included). Running out of
    replies raises ``AssertionError`` (deliberately not an ``LlmError``, so code
    under test cannot swallow it).
    """

    def __init__(self, replies: list | None = None, *, max_retries: int = 2):
        super().__init__(max_retries=max_retries)
        self.replies = list(replies or [])
        self.requests: list[LlmRequest] = []

    @property
    def last_messages(self) -> Messages:
        """The messages of the most recent request."""
        return self.requests[-1].messages

    def _request(
        self, messages: Messages, *, schema: dict | None, schema_name: str | None, max_tokens: int | None
    ) -> Reply:
        self.requests.append(LlmRequest(messages=messages, schema=schema, schema_name=schema_name,
                                        max_tokens=max_tokens))
        if schema is not None:
            self._stats().response_format = "scripted"
        if not self.replies:
            raise AssertionError(f"ScriptedLlm: no reply queued for request {len(self.requests)}")
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Reply(text=text, prompt_tokens=0, completion_tokens=0)
