"""LLM adapters: chat completions that return text or JSON validated against a schema.

The engine talks to a language model only through ``Llm`` (extraction, summaries).
``OpenAICompatibleLlm`` speaks the OpenAI chat-completions protocol, which OpenAI,
Ollama, vLLM, llama.cpp's server and OCI's compatible endpoint all answer;
``get_llm()`` builds one from ``settings.OAM_LLM_*`` (or returns None when no LLM
is configured). ``ScriptedLlm`` (``memory.llm.scripted``) is the test double:
queued replies run through the same parse/validate/retry path as real ones.
What a reply is and what a call cost (``Reply``, ``parse_json_reply``,
``LlmCallStats``) is ``memory.llm.replies``.

Why validate and retry here: servers differ in how well they enforce a schema
(llama.cpp's server rejects OpenAI's ``json_schema`` response format outright and
a small model sometimes writes text that is not JSON at all), so every reply is
parsed and checked with ``jsonschema``; a bad one is sent back with the
validation error, a bounded number of times, before ``LlmInvalidOutput``.

Transport errors (timeouts, refused connections, 5xx) are NOT retried here: the
caller is a Dramatiq actor with its own retries and backoff, and retrying in two
layers multiplies the wait.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Protocol

import jsonschema
from django.conf import settings

from memory.core import conf
from memory.core.types import NOTSET
from memory.llm.replies import (
    JsonValue,
    LlmCallStats,
    LlmTotals,
    Messages,
    Reply,
    excerpt,
    generated_text_fault,
    parse_json_reply,
    rejects_response_format,
    status_text,
    validation_errors,
)

# --- Errors ---------------------------------------------------------------------------


class LlmError(Exception):
    """Base class of every error an ``Llm`` raises."""


class LlmUnavailable(LlmError):
    """The endpoint could not be reached or answered 5xx/429: transient, worth a later retry."""


class LlmTimeout(LlmUnavailable):
    """No answer within the adapter's timeout (a kind of ``LlmUnavailable``)."""


class LlmRequestRejected(LlmError):
    """The endpoint refused the request (4xx: bad key, unknown model, bad parameters).

    Permanent until configuration changes; retrying the same request will not help.
    ``status_code`` is the HTTP status.
    """

    def __init__(self, message: str, *, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class LlmInvalidOutput(LlmError):
    """Every attempt returned text that was not JSON or did not match the schema.

    ``raw`` is the last reply's text, ``errors`` one message per attempt (the parse
    or validation error), ``attempts`` how many requests were made.
    """

    def __init__(self, message: str, *, raw: str, errors: list[str], attempts: int):
        super().__init__(message)
        self.raw = raw
        self.errors = errors
        self.attempts = attempts


#: Characters per token a stored generated text may average before it is "too long" (``checked_text``): English
#: averages about 4 per token; 8 leaves room for long words and other scripts while catching a model that
#: ignored ``max_tokens``.
MAX_CHARS_PER_TOKEN = 8


class LlmBadText(LlmError):
    """A reply meant to be stored as prose (a caption, a summary) failed ``replies.generated_text_fault``: it is a
    failed attempt with its ``reason``, never stored data. ``what`` names the text ("caption", "summary")."""

    def __init__(self, what: str, reason: str):
        super().__init__(f"the model's {what} was refused: {reason}")
        self.what = what
        self.reason = reason


def checked_text(text: str | None, *, what: str, max_chars: int, prompts: tuple[str, ...] = ()) -> str:
    """``text`` stripped, when ``replies.generated_text_fault`` finds nothing wrong with it; ``LlmBadText``
    (an ``LlmError``) naming ``what`` and the reason otherwise."""
    text = text or ""
    if (reason := generated_text_fault(text, max_chars=max_chars, prompts=prompts)) is not None:
        raise LlmBadText(what, reason)
    return text.strip()


# --- Interface ------------------------------------------------------------------------


class Llm(Protocol):
    """What the engine needs from a language model.

    ``messages`` are chat messages ``[{"role": "system"|"user"|"assistant", "content": str}]``.
    ``max_tokens`` caps the reply length in tokens (None: the server's default).
    """

    totals: LlmTotals  # sums over every call of this instance

    @property
    def last_call(self) -> LlmCallStats | None:  # pragma: no cover - protocol
        """Stats of the calling thread's most recent call (None before the first)."""
        ...

    def complete_json(
        self, messages: Messages, schema: dict, *, schema_name: str, max_tokens: int | None = None
    ) -> JsonValue:  # pragma: no cover - protocol
        """Return the model's reply parsed as JSON and valid against ``schema``.

        ``schema`` is a JSON Schema (draft 2020-12) whose root is an object or array;
        ``schema_name`` names it to the server (``[A-Za-z0-9_-]``, up to 64 chars).
        Raises ``LlmInvalidOutput`` after the bounded retries, ``LlmTimeout``,
        ``LlmUnavailable`` or ``LlmRequestRejected`` for transport problems, and
        ``jsonschema.SchemaError`` when ``schema`` itself is not a valid schema.
        """
        ...

    def complete_text(self, messages: Messages, *, max_tokens: int | None = None) -> str:  # pragma: no cover
        """Return the model's reply as text (possibly empty); same transport errors as above."""
        ...


# --- JSON handling shared by every adapter -------------------------------------------

def schema_instructions(schema: dict, schema_name: str) -> str:
    """Return the system-prompt paragraph that shows the model the schema."""
    return (
        f"Reply with one JSON value that conforms to this JSON schema (named {schema_name!r}). "
        "Output only the JSON: no prose, no code fences.\n"
        f"{json.dumps(schema, ensure_ascii=False)}"
    )


def with_schema_prompt(messages: Messages, schema: dict, schema_name: str) -> Messages:
    """Return a copy of ``messages`` whose system message ends with the schema instructions."""
    instructions = schema_instructions(schema, schema_name)
    messages = [dict(m) for m in messages]
    if messages and messages[0].get("role") == "system":
        messages[0]["content"] = f"{messages[0].get('content', '')}\n\n{instructions}".lstrip()
    else:
        messages.insert(0, {"role": "system", "content": instructions})
    return messages


class BaseLlm:
    """The parse/validate/retry loop and the call statistics, shared by every adapter.

    Subclasses implement ``_request(messages, *, schema, schema_name, max_tokens)``,
    which returns a ``Reply`` (``schema`` None means plain text) and sets
    ``self._stats().response_format`` when a JSON form is used.
    """

    max_retries: int = 2

    def __init__(self, *, max_retries: int = 2):
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.max_retries = max_retries
        self.totals = LlmTotals()
        self._totals_lock = threading.Lock()
        # The cached adapter is shared by a process's worker threads: each thread
        # sees the stats of its own last call.
        self._local = threading.local()

    @property
    def last_call(self) -> LlmCallStats | None:
        """Stats of this thread's most recent call (None before the first)."""
        return getattr(self._local, "last_call", None)

    def _stats(self) -> LlmCallStats:
        return self._local.last_call

    def _request(
        self, messages: Messages, *, schema: dict | None, schema_name: str | None, max_tokens: int | None
    ) -> Reply:  # pragma: no cover - abstract
        raise NotImplementedError

    def _timed_request(self, messages: Messages, **kwargs) -> Reply:
        stats = self._stats()
        stats.attempts += 1
        started = time.perf_counter()
        try:
            reply = self._request(messages, **kwargs)
        finally:
            stats.seconds += time.perf_counter() - started
        stats.prompt_tokens += reply.prompt_tokens
        stats.completion_tokens += reply.completion_tokens
        return reply

    def _begin(self, kind: str) -> LlmCallStats:
        self._local.last_call = stats = LlmCallStats(kind=kind)
        return stats

    def _finish(self, stats: LlmCallStats) -> None:
        with self._totals_lock:
            self.totals.calls += 1
            self.totals.attempts += stats.attempts
            self.totals.prompt_tokens += stats.prompt_tokens
            self.totals.completion_tokens += stats.completion_tokens
            self.totals.seconds += stats.seconds

    def complete_json(
        self, messages: Messages, schema: dict, *, schema_name: str, max_tokens: int | None = None
    ) -> JsonValue:
        """Return the reply parsed as JSON and valid against ``schema`` (see ``Llm.complete_json``).

        Makes at most ``max_retries + 1`` requests. After a bad reply the next
        request is the original conversation plus that reply and a user message
        quoting the parse or validation error (only the latest failure, so the
        context does not grow with each retry).
        """
        validator_cls = jsonschema.validators.validator_for(schema)
        validator_cls.check_schema(schema)
        validator = validator_cls(schema)
        prompt = with_schema_prompt(messages, schema, schema_name)
        stats = self._begin("json")
        errors: list[str] = []
        raw = ""
        try:
            attempt_messages = prompt
            for _attempt in range(self.max_retries + 1):
                reply = self._timed_request(
                    attempt_messages, schema=schema, schema_name=schema_name, max_tokens=max_tokens
                )
                raw = reply.text
                try:
                    value = parse_json_reply(raw)
                except ValueError as exc:
                    problem = str(exc)
                    if reply.truncated:
                        problem += "; the reply was cut off at the token limit, so keep it shorter"
                else:
                    problems = validation_errors(value, validator)
                    if not problems:
                        stats.ok = True
                        return value
                    problem = "the JSON does not match the schema: " + "; ".join(problems)
                errors.append(problem)
                attempt_messages = [
                    *prompt,
                    {"role": "assistant", "content": excerpt(raw)},
                    {
                        "role": "user",
                        "content": f"That reply was rejected: {problem}. "
                        "Reply again with only a JSON value that conforms to the schema.",
                    },
                ]
            raise LlmInvalidOutput(
                f"{schema_name}: no valid JSON after {stats.attempts} attempts; last error: {errors[-1]}",
                raw=raw,
                errors=errors,
                attempts=stats.attempts,
            )
        finally:
            self._finish(stats)

    def complete_text(self, messages: Messages, *, max_tokens: int | None = None) -> str:
        """Return the model's reply as text (see ``Llm.complete_text``); one request, no retries."""
        stats = self._begin("text")
        try:
            reply = self._timed_request(
                [dict(m) for m in messages], schema=None, schema_name=None, max_tokens=max_tokens
            )
            stats.ok = True
            return reply.text
        finally:
            self._finish(stats)


# --- OpenAI-compatible endpoint ---------------------------------------------------------

class OpenAICompatibleLlm(BaseLlm):
    """An ``Llm`` on any OpenAI-compatible chat-completions endpoint.

    ``base_url`` includes the API prefix (``http://127.0.0.1:8012/v1``,
    ``https://api.openai.com/v1``); ``model`` is sent as is (llama.cpp's server
    ignores it); ``api_key`` may be None for local servers; ``timeout`` is seconds
    per request; ``max_retries`` counts extra requests after invalid JSON;
    ``temperature`` defaults to 0 for repeatable extraction.

    Structured output: the first request asks for OpenAI's
    ``{"type": "json_schema", "json_schema": {..., "strict": True}}``. If the server
    rejects that form (llama.cpp's server does, with a 500), the adapter switches
    to ``{"type": "json_object", "schema": ...}`` (llama.cpp's grammar-constrained
    form) and keeps using whichever form worked for the rest of its life. The schema
    is always in the system prompt too, for servers that ignore both. With OpenAI
    itself, strict mode wants every object to list all its properties in
    ``required`` and to set ``additionalProperties: false``.
    """

    FORMS = ("json_schema", "json_object")

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float = 0.0,
    ):
        super().__init__(max_retries=max_retries)
        import openai  # deferred: heavy (pydantic models, httpx), and only a configured LLM needs it

        self.base_url = base_url
        self.model = model
        self.timeout = timeout
        self.temperature = temperature
        self.json_form = self.FORMS[0]  # switches to "json_object" once a server rejects json_schema
        self._openai = openai
        self._client = openai.OpenAI(
            base_url=base_url,
            # A placeholder keeps the client from reading OPENAI_API_KEY behind
            # the settings' back; local servers ignore the header.
            api_key=api_key or "not-needed",
            timeout=timeout,
            max_retries=0,  # see the module docstring: the caller owns transport retries
        )

    def __repr__(self) -> str:
        return f"<OpenAICompatibleLlm {self.model!r} at {self.base_url} ({self.json_form})>"

    def _response_format(self, form: str, schema: dict, schema_name: str) -> dict:
        if form == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": schema_name, "schema": schema, "strict": True}}
        return {"type": "json_object", "schema": schema}

    def _request(
        self, messages: Messages, *, schema: dict | None, schema_name: str | None, max_tokens: int | None
    ) -> Reply:
        if schema is None:
            return self._create(messages, max_tokens=max_tokens, response_format=None)
        form = self.json_form
        self._stats().response_format = form
        try:
            return self._create(
                messages, max_tokens=max_tokens, response_format=self._response_format(form, schema, schema_name)
            )
        except self._openai.APIStatusError as exc:
            if form != "json_schema" or not rejects_response_format(exc):
                raise _translate(exc) from exc
            first_error = exc
        self.json_form = form = "json_object"
        self._stats().response_format = form
        try:
            return self._create(
                messages, max_tokens=max_tokens, response_format=self._response_format(form, schema, schema_name)
            )
        except self._openai.APIStatusError as exc:
            error = _translate(exc)
            error.args = (f"{error.args[0]} (after the server rejected json_schema: {status_text(first_error)})",)
            raise error from exc

    def _create(self, messages: Messages, *, max_tokens: int | None, response_format: dict | None) -> Reply:
        openai = self._openai
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if response_format is not None:
            kwargs["response_format"] = response_format
        try:
            completion = self._client.chat.completions.create(**kwargs)
        # The messages never name the endpoint: they reach a job's error, GET .../extraction and the staff page,
        # which any read key of the project sees, and OAM_LLM_BASE_URL is the operator's (it may hold a
        # user:password). The log keeps the cause (``from exc``).
        except openai.APITimeoutError as exc:  # before APIConnectionError: it is a subclass
            raise LlmTimeout(f"the LLM endpoint gave no answer within {self.timeout:g} s") from exc
        except openai.APIConnectionError as exc:
            raise LlmUnavailable("the LLM endpoint could not be reached") from exc
        except openai.APIStatusError as exc:
            if response_format is not None:
                raise  # _request decides whether this is a response_format rejection
            raise _translate(exc) from exc
        if not completion.choices:
            raise LlmUnavailable("the LLM endpoint's reply had no choices")
        choice = completion.choices[0]
        usage = completion.usage
        return Reply(
            text=choice.message.content or "",
            prompt_tokens=(usage.prompt_tokens or 0) if usage else 0,
            completion_tokens=(usage.completion_tokens or 0) if usage else 0,
            truncated=choice.finish_reason == "length",
        )


def _translate(exc) -> LlmError:
    """Map an ``openai.APIStatusError`` to ours: 5xx/429 transient, other 4xx permanent."""
    if exc.status_code >= 500 or exc.status_code in (408, 429):
        return LlmUnavailable(status_text(exc))
    return LlmRequestRejected(status_text(exc), status_code=exc.status_code)


# --- Process-wide adapter from settings -------------------------------------------------

_llm: Llm | None = None
_llm_built = False
_llm_lock = threading.Lock()


class GenerateLlm(BaseLlm):
    """An ``Llm`` over an object with the SDK's ``ILlm.generate()`` (``oracleagentmemory.Llm`` or any
    object of that shape), so ``llm=`` takes what an SDK application already has.

    ``generate(prompt, *, response_json_schema=None, **kwargs)`` returns an ``LlmResponse`` (its
    ``text``; a plain ``str`` is accepted too). A JSON request passes the schema as
    ``response_json_schema`` (it is also in the system prompt) and gets ``BaseLlm``'s parse, validate
    and retry loop; ``max_tokens``, when set, is passed as a keyword (``ILlm.generate`` forwards extra
    keywords to its backend). Any exception of ``generate`` is an ``LlmUnavailable`` (the extraction
    job fails and is recorded, as for the site's own adapter); token counts are unknown (0).
    """

    def __init__(self, inner: Any, *, max_retries: int = 2):
        super().__init__(max_retries=max_retries)
        self.inner = inner

    def __repr__(self) -> str:
        return f"GenerateLlm({self.inner!r})"

    def _request(
        self, messages: Messages, *, schema: dict | None, schema_name: str | None, max_tokens: int | None
    ) -> Reply:
        kwargs: dict[str, Any] = {"response_json_schema": schema}
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        try:
            reply = self.inner.generate([dict(m) for m in messages], **kwargs)
        except Exception as exc:  # noqa: BLE001 - a foreign LLM's failure is a transport failure here
            raise LlmUnavailable(f"{type(self.inner).__name__}.generate failed: {type(exc).__name__}: {exc}") from exc
        text = reply if isinstance(reply, str) else getattr(reply, "text", None)
        if not isinstance(text, str):
            raise LlmUnavailable(f"{type(self.inner).__name__}.generate returned {type(reply).__name__} "
                                 "without a text attribute")
        return Reply(text=text)


def as_llm(value: Any, field: str = "llm") -> Any:
    """What ``llm=`` may be, as the engine's ``Llm``: ``None`` (no LLM) and an unset marker pass through;
    an object with ``complete_json`` and ``complete_text`` (this module's adapters) is used as is; an
    object with a callable ``generate`` (the SDK's ``ILlm``, e.g. ``oracleagentmemory.Llm``) is wrapped in
    ``GenerateLlm``. Anything else raises TypeError naming ``field`` at construction, not later in a
    background job.
    """
    if value is None or value is NOTSET:
        return value
    if callable(getattr(value, "complete_json", None)) and callable(getattr(value, "complete_text", None)):
        return value
    if isinstance(value, type):
        raise TypeError(f"{field}: must be an LLM instance, not the class {value.__name__}")
    if callable(getattr(value, "generate", None)):
        return GenerateLlm(value)
    raise TypeError(f"{field}: must be None, a memory.llm.adapters adapter (complete_json/complete_text, e.g. "
                    f"OpenAICompatibleLlm) or an object with the SDK's ILlm.generate(), not {type(value).__name__}")


def get_llm() -> Llm | None:
    """Return the process-wide ``Llm`` from ``settings.OAM_LLM_*``, or None when none is set.

    ``OAM_LLM_BASE_URL`` empty means "no LLM" (extraction off). Built once per
    process; ``reset_llm()`` forgets it (tests that change settings call it).
    """
    global _llm, _llm_built
    if not _llm_built:
        with _llm_lock:
            if not _llm_built:
                base_url = conf.get("OAM_LLM_BASE_URL")
                _llm = (
                    OpenAICompatibleLlm(
                        base_url=base_url,
                        model=settings.OAM_LLM_MODEL,
                        api_key=settings.OAM_LLM_API_KEY or None,
                        timeout=settings.OAM_LLM_TIMEOUT,
                        max_retries=settings.OAM_LLM_MAX_RETRIES,
                    )
                    if base_url
                    else None
                )
                _llm_built = True
    return _llm


def reset_llm() -> None:
    """Forget the cached adapter so the next ``get_llm()`` reads settings again."""
    global _llm, _llm_built
    with _llm_lock:
        _llm, _llm_built = None, False
