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
import unicodedata
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


#: What a server's error text may echo that a read key must not see (``status_text``): addresses (URLs, IPs,
#: host:port), credentials (``Bearer``/``Basic`` values, ``sk-`` keys, a base64 run), each shown as ``<hidden>``
#: (an outside attack saw a proxy echo the API key and an upstream's address into a job's error).
_SECRETS = re.compile(
    r"\b(?:https?|wss?|redis|amqps?|postgres(?:ql)?)://\S+"
    r"|\b(?:bearer|basic|token|api[-_ ]?key)[:=]?\s+\S+"
    r"|\bsk-[A-Za-z0-9_-]{6,}"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|\b[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+:\d{2,5}\b"
    r"|[A-Za-z0-9+/_-]{24,}={0,2}", re.IGNORECASE)


def status_text(exc) -> str:
    """Return ``"HTTP 500: <message>"`` for an ``openai.APIStatusError``, message cut short and any address or
    credential in it shown as ``<hidden>`` (``_SECRETS``: the text reaches a job's error, which every read key
    of the project sees)."""
    body = exc.body if exc.body is not None else getattr(exc.response, "text", "")
    if isinstance(body, dict):
        body = body.get("message") or body.get("error") or body
    text = body if isinstance(body, str) else json.dumps(body, default=str)
    return f"HTTP {exc.status_code}: {_SECRETS.sub('<hidden>', text[:500])}"


def rejects_response_format(exc) -> bool:
    """Tell whether a status error says the server does not support this response_format."""
    if exc.status_code not in _FORMAT_REJECTION_STATUSES:
        return False
    text = f"{exc.message} {exc.body} {getattr(exc.response, 'text', '')}".lower()
    return any(word in text for word in _FORMAT_REJECTION_WORDS)


# --- generated text: a caption or a summary ------------------------------------------------------------------

#: Share of a generated text's words that must read as words (``_wordlike``): a caption of random symbols
#: ("x#9@!kq0 ..."), base64 or a hex dump reads below it, any sentence of any script above it. Not tuned on data:
#: a sentence with a few part numbers or names in it stays far above 0.6.
MIN_WORD_SHARE = 0.6
#: Longest token that reads as a word (characters, punctuation aside): "a" x 1500 is not a caption.
MAX_WORD_CHARS = 40
#: A text of at least ``REPEAT_MIN_TOKENS`` tokens whose distinct tokens are under this share of them repeats
#: itself ("the the the ...", "cat" x 19, "The image shows" x 5, one sentence four times).
REPEAT_MIN_TOKENS = 8
MIN_DISTINCT_SHARE = 0.34
#: Bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): they reorder what a reader
#: sees (a "Trojan Source" trick). Other format characters (ZWJ in emoji, ZWNJ in Persian, a soft hyphen, a
#: leading BOM, LRM/RLM marks) are text.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_ERROR_BODY = re.compile(
    r"^\s*(?:\{\s*[\"'](?:error|detail|message|errors|code)[\"']|<!doctype|<html|<\?xml"
    r"|traceback \(most recent call last\)|\d{3}\s+(?:bad gateway|internal server error|service unavailable"
    r"|gateway time-?out|not found|forbidden|unauthorized|too many requests)\b|internal server error\b"
    r"|bad gateway\b|service unavailable\b|request failed with status code\b|upstream connect error\b)",
    re.IGNORECASE)
#: "Error: ..." or "Exception: ..." is an error body when that is all it says (at most this many words): "Error:
#: model overloaded" is, "Error: 404 page on a website with a lost astronaut illustration" is a caption.
ERROR_LINE_WORDS = 6
_ERROR_LINE = re.compile(r"^\s*(?:error|exception)\s*:", re.IGNORECASE)
_REFUSAL = re.compile(
    r"^\s*(?:i['\u2019]?m sorry|i am sorry|sorry,? (?:but )?i\b|i apologi[sz]e\b|unfortunately,? i\b"
    r"|i['\u2019]?m (?:unable|not able)\b|i am (?:unable|not able)\b|as an ai\b|as a (?:large )?language model\b"
    r"|i can(?:not|['\u2019]t) (?:help|see|view|describe|provide|assist|process|identify|access|comply|analy[sz]e"
    r"|determine|tell|do that)\b)", re.IGNORECASE)
#: Markup when the text starts with a tag, or holds a page's or a script's, or a model's special tokens.
_MARKUP = re.compile(r"^\s*(?:<[a-z][a-z0-9]*\b[^<>]*>|```)|<(?:html|body|head|script|style)\b|<\|[a-z_]+\|>",
                     re.IGNORECASE)
_PLACEHOLDER = re.compile(r"^\s*lorem ipsum\b|\[(?:insert|your|add)\b[^\]]*\]|\[object object\]", re.IGNORECASE)
_NOTHING = frozenset({"null", "none", "undefined", "nan", "n/a", "todo", "tbd", "(none)", "-", "..."})
#: A token that is one short unit over and over ("hahaha...", "aaaa...") is not a word.
_STUTTER = re.compile(r"^(.{1,3}?)\1{5,}$", re.IGNORECASE)
#: Longest run of a generated text that may repeat its prompt word for word (characters): a model that echoes
#: the instructions back repeats far more than this; a caption that happens to share a phrase with them does not.
ECHO_CHARS = 40


def generated_text_fault(text: str, *, max_chars: int, prompts: tuple[str, ...] = ()) -> str | None:
    """Why ``text``, a model's reply meant to be stored as prose (an image's caption, a thread's summary), must not
    be stored, or None when it may. Pure. The reasons, in the order checked:

    * ``"empty"``: nothing but whitespace, or a word for nothing ("null", "None", "undefined");
    * ``"too long"``: over ``max_chars`` characters (a model ignoring ``max_tokens``);
    * ``"not printable text"``: a control, unassigned, private-use or surrogate character (tab and newline
      aside), U+FFFD (the mark of undecodable bytes) or a bidirectional override; other format characters
      (ZWJ, ZWNJ, a soft hyphen, a BOM) are text;
    * ``"an error body"``: a JSON error object, an HTML/XML page, a traceback, or "Error: ..." (a proxy's or
      server's error passed on as text);
    * ``"a JSON value"``: the text parses as a JSON object or array (a caption is prose, not data);
    * ``"a refusal"``: "I'm sorry, ...", "I can't ...", "As an AI ...";
    * ``"markup"``: HTML tags;
    * ``"placeholder text"``: lorem ipsum;
    * ``"an echo of the prompt"``: ``ECHO_CHARS`` or more characters of one of ``prompts`` repeated;
    * ``"repetitive"``: at least ``REPEAT_MIN_TOKENS`` tokens, under ``MIN_DISTINCT_SHARE`` of them distinct;
    * ``"not words"``: under ``MIN_WORD_SHARE`` of its whitespace-separated tokens read as words or numbers.

    Issue #34: garbage completions became an image's stored description; the list grew from an outside attack.
    """
    stripped = text.strip().lstrip("\ufeff").strip()
    if not stripped or stripped.lower().strip(" .") in _NOTHING or set(stripped.lower().split()) <= _NOTHING:
        return "empty"
    if len(stripped) > max_chars:
        return "too long"
    for ch in stripped:
        category = unicodedata.category(ch)
        if (ch in _BIDI_CONTROLS or ch == "\ufffd"
                or (category[0] == "C" and category != "Cf" and ch not in "\t\n\r")):
            return "not printable text"
    tokens = stripped.split()
    if _ERROR_BODY.match(stripped) or (_ERROR_LINE.match(stripped) and len(tokens) <= ERROR_LINE_WORDS):
        return "an error body"
    if stripped.startswith(('{"', "{'", '[{', '["', "[[")):  # an object or array, whole or cut short
        return "a JSON value"
    try:
        value = json.loads(stripped)
    except ValueError:
        pass
    else:
        if not isinstance(value, str):  # 42, true, {...}, [...]: data, not prose
            return "a JSON value"
    if _REFUSAL.match(stripped):
        return "a refusal"
    if _MARKUP.search(stripped):
        return "markup"
    if _PLACEHOLDER.search(stripped):
        return "placeholder text"
    folded = " ".join(stripped.lower().split())
    for prompt in prompts:
        prompt = " ".join(prompt.lower().split())
        if len(prompt) >= ECHO_CHARS and any(prompt[i:i + ECHO_CHARS] in folded
                                             for i in range(0, len(prompt) - ECHO_CHARS + 1, 8)):
            return "an echo of the prompt"
        if len(prompt) < ECHO_CHARS and folded.strip(" .!") == prompt.strip(" .!"):
            return "an echo of the prompt"
    if len(tokens) >= REPEAT_MIN_TOKENS and len({t.lower() for t in tokens}) < MIN_DISTINCT_SHARE * len(tokens):
        return "repetitive"
    if sum(_wordlike(t) for t in tokens) < MIN_WORD_SHARE * len(tokens):
        return "not words"
    return None


def _wordlike(token: str) -> bool:
    """A whitespace-separated token reads as a word: without its punctuation (Unicode P*) and format characters
    (Cf: ZWJ, ZWNJ, soft hyphens), letters with their marks (any script: "Kate's", "e-mail",
    "一只猫坐在窗台上，外面在下雨。"), digits ("9:30", "24/7"), or both ("topic12", "COVID-19", "74HC595N", "2N2222A");
    at most ``MAX_WORD_CHARS`` long; not symbols, not more marks than letters (zalgo), and a mix of letters and
    digits that switches more than once only when short (16 characters: part numbers, not base64)."""
    if _STUTTER.match(token):
        return False
    runs: list[str] = []
    letters = marks = length = 0
    latin = True
    digits = any(unicodedata.category(ch)[0] == "N" for ch in token)
    for ch in token:
        kind = unicodedata.category(ch)
        if kind[0] == "P" or kind == "Cf" or (kind == "Sc" and digits):  # "$3.50" is a number
            continue
        latin = latin and ord(ch) < 0x250
        if kind[0] not in "LMN":
            return False
        length += 1
        letters += kind[0] == "L"
        marks += kind[0] == "M"
        kind = "N" if kind[0] == "N" else "L"
        if not runs or runs[-1] != kind:
            runs.append(kind)
    # Scripts written without spaces (Chinese, Japanese, Thai) make long tokens of real words: the length cap is
    # for Latin letters ("a" x 1500).
    return (0 < length and (length <= MAX_WORD_CHARS or not latin) and marks <= letters
            and (len(runs) <= 2 or length <= 16))
