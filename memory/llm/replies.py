"""What a language model server answered and what the call cost: replies, their JSON, status errors, statistics.

Pure (no network). ``memory.llm.adapters.BaseLlm`` reads each ``Reply`` through ``parse_json_reply`` and
``validation_errors`` (the parse and schema check behind its retries), quotes a bad one with ``excerpt``, and
keeps a ``LlmCallStats`` per call (``llm.last_call``) and ``LlmTotals`` per adapter (``llm.totals``).
``OpenAICompatibleLlm`` reads an HTTP error with ``status_text`` and ``rejects_response_format`` (whether the
server refused the structured-output form, not the request).

Shapes: ``Messages`` are chat messages ``[{"role": ..., "content": ...}]``; a ``JsonValue`` reply is an
object or an array.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any

import jsonschema

Messages = list[dict[str, str]]
JsonValue = dict | list

# Raw model output quoted in errors and fed back to the model is cut to this many
# characters: enough to see what went wrong, small enough for a 4k context.
RAW_EXCERPT_CHARS = 2000


@dataclass
class LlmCallStats:
    """What one ``complete_json``/``complete_text`` call cost, retries included.

    ``seconds`` is wall-clock time spent waiting on the endpoint (float seconds);
    tokens are as the server reports them in ``usage`` (0 where it reports none).
    Read right after a call (``llm.last_call``), e.g. to report the share of an
    extraction's wall time spent in the LLM. ``response_format`` is the form of
    the last request: ``"json_schema"``, ``"json_object"``, ``"scripted"``
    (``ScriptedLlm``) or None (plain text). ``ok`` is False when the call raised.
    """

    kind: str  # "json" | "text"
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    response_format: str | None = None
    ok: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class LlmTotals:
    """Sums over every call an adapter instance has made (all threads)."""

    calls: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Reply:
    """One raw answer from the endpoint (an adapter's ``_request``): its text, the tokens the server counted,
    and whether it was cut at the token limit."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    truncated: bool = False  # finish_reason == "length"


_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def parse_json_reply(text: str) -> JsonValue:
    """Parse a model's reply as JSON; raise ``ValueError`` saying why not.

    Tolerated: surrounding whitespace, a Markdown code fence (```json ... ```),
    and prose before or after a single JSON object/array (the first one is taken).
    Scalars are rejected: a schema root here is an object or an array.
    """
    candidate = text.strip()
    fenced = _FENCE.search(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
    if not candidate:
        raise ValueError("the reply was empty")
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError as exc:
        value = None
        starts = [i for i in (candidate.find("{"), candidate.find("[")) if i >= 0]
        if starts:
            try:
                value, _ = json.JSONDecoder().raw_decode(candidate, min(starts))
            except json.JSONDecodeError:
                value = None
        if value is None:
            raise ValueError(
                f"the reply is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(value, (dict, list)):
        raise ValueError(f"the reply is a JSON {type(value).__name__}, not an object or array")
    return value


def validation_errors(value: JsonValue, validator: jsonschema.protocols.Validator, limit: int = 3) -> list[str]:
    """Return up to ``limit`` readable messages for where ``value`` breaks the schema."""
    errors = sorted(validator.iter_errors(value), key=jsonschema.exceptions.relevance)
    messages = []
    for error in errors[:limit]:
        where = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        messages.append(f"at {where}: {error.message}")
    return messages


def excerpt(text: str) -> str:
    """``text`` cut to ``RAW_EXCERPT_CHARS`` characters (marked), for errors and retry prompts."""
    return text if len(text) <= RAW_EXCERPT_CHARS else text[:RAW_EXCERPT_CHARS] + " …[cut]"


# --- a server's status errors (``openai.APIStatusError``) ---------------------------------------

# Words in an error body that say the server did not accept the response_format
# itself (llama.cpp's server: 500 "Input should be 'text' or 'json_object'" at
# ('body', 'response_format', 'type'); others answer 400/422).
_FORMAT_REJECTION_WORDS = ("response_format", "json_schema", "json_object")
_FORMAT_REJECTION_STATUSES = {400, 422, 500, 501}


def status_text(exc) -> str:
    """Return ``"HTTP 500: <message>"`` for an ``openai.APIStatusError``, message cut short."""
    body = exc.body if exc.body is not None else getattr(exc.response, "text", "")
    if isinstance(body, dict):
        body = body.get("message") or body.get("error") or body
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    return f"HTTP {exc.status_code}: {text[:500]}"


def rejects_response_format(exc) -> bool:
    """Tell whether a status error says the server does not support this response_format."""
    if exc.status_code not in _FORMAT_REJECTION_STATUSES:
        return False
    text = f"{exc.message} {exc.body} {getattr(exc.response, 'text', '')}".lower()
    return any(word in text for word in _FORMAT_REJECTION_WORDS)


# --- generated text: a caption or a summary ------------------------------------------------------------------

#: Share of a generated text's words that must read as words (``_wordlike``: letters, digits, or one run of
#: each, once punctuation is set aside): a caption of random symbols ("x#9@!kq0 ..."), base64 or a hex dump reads below
#: it, any sentence of any script above it. Not tuned on data: a sentence with a few codes or names in it
#: stays far above 0.6.
MIN_WORD_SHARE = 0.6
_ERROR_BODY = re.compile(r"^\s*(?:\{\s*\"(?:error|detail|message|errors)\"|<!doctype|<html|<\?xml)", re.IGNORECASE)
#: Longest run of a generated text that may repeat its prompt word for word (characters): a model that echoes
#: the instructions back repeats far more than this; a caption that happens to share a phrase with them does not.
ECHO_CHARS = 40


def generated_text_fault(text: str, *, max_chars: int, prompts: tuple[str, ...] = ()) -> str | None:
    """Why ``text``, a model's reply meant to be stored as prose (an image's caption, a thread's summary), must not
    be stored, or None when it may. Pure. The reasons, in the order checked:

    * ``"empty"``: nothing but whitespace;
    * ``"too long"``: over ``max_chars`` characters (a model ignoring ``max_tokens``);
    * ``"not printable text"``: a control, unassigned, private-use or surrogate character (tab and newline aside)
      or U+FFFD, the mark of undecodable bytes;
    * ``"an error body"``: a JSON error object or an HTML/XML page (a proxy's or server's error passed on as text);
    * ``"an echo of the prompt"``: ``ECHO_CHARS`` or more characters of one of ``prompts`` repeated;
    * ``"not words"``: under ``MIN_WORD_SHARE`` of its whitespace-separated tokens read as words or numbers.

    Issue #34: garbage completions became an image's stored description.
    """
    import unicodedata

    stripped = text.strip()
    if not stripped:
        return "empty"
    if len(stripped) > max_chars:
        return "too long"
    if any((unicodedata.category(ch)[0] == "C" and ch not in "\t\n\r") or ch == "\ufffd" for ch in stripped):
        return "not printable text"
    if _ERROR_BODY.match(stripped):
        return "an error body"
    folded = " ".join(stripped.lower().split())
    for prompt in prompts:
        prompt = " ".join(prompt.lower().split())
        if len(prompt) >= ECHO_CHARS and any(prompt[i:i + ECHO_CHARS] in folded
                                             for i in range(0, len(prompt) - ECHO_CHARS + 1, 8)):
            return "an echo of the prompt"
        if len(prompt) < ECHO_CHARS and folded.strip(" .!") == prompt.strip(" .!"):
            return "an echo of the prompt"
    tokens = stripped.split()
    if sum(_wordlike(t, unicodedata) for t in tokens) < MIN_WORD_SHARE * len(tokens):
        return "not words"
    return None


def _wordlike(token: str, unicodedata) -> bool:
    """A whitespace-separated token reads as a word: without its punctuation (Unicode P*), letters and marks (any
    script: "Kate's", "e-mail", "一只猫坐在窗台上，外面在下雨。"), digits ("9:30", "24/7"), or one run of each
    ("topic12", "2nd", "COVID-19"); not symbols, and not letters and digits mixed back and forth ("x9kq0",
    "0x7f3a", base64)."""
    runs: list[str] = []
    for ch in token:
        kind = unicodedata.category(ch)[0]
        if kind == "P":
            continue
        if kind not in "LMN":
            return False
        kind = "N" if kind == "N" else "L"
        if not runs or runs[-1] != kind:
            runs.append(kind)
    return 0 < len(runs) <= 2
