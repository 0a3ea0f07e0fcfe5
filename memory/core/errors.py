"""Domain errors. Each is the built-in type the spec names, carrying the field at fault.

Every one is a ``DomainError`` too, so an edge catches ``DomainError`` (a bad
input, shown to the caller) and lets any other ``ValueError``/``TypeError``/
``KeyError`` (a programming error) surface as a 500. The HTTP layer maps them:
``InvalidArgument`` -> 422, ``NotFound`` -> 404, ``Conflict`` -> 409, each with
a JSON body naming ``field`` and the rule.
"""

from __future__ import annotations

import json


class DomainError(Exception):
    """Base of the engine's errors about its input: each subclass is also the built-in type the spec names
    (``ValueError``, ``TypeError``, ``KeyError``) and has ``field`` (the argument at fault) and ``message``."""

    field: str
    message: str


class InvalidArgument(DomainError, ValueError):
    """A value breaks a rule of the spec (``ValueError``); ``field`` names the argument."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidType(DomainError, TypeError):
    """An argument has the wrong type, or is not an argument at all (``TypeError``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


#: Largest count or index a caller may pass (``max_results``, ``limit``, ``start``...):
#: they become SQL ``LIMIT``/``OFFSET`` values, 64-bit in SQLite and Oracle, and no
#: thread holds 2**31 records. One bound for every such argument.
MAX_SQL_COUNT = 2**31 - 1


def check_sql_count(value: int, field: str, rule: str = "") -> int:
    """``value`` unchanged if it is at most ``MAX_SQL_COUNT``; else ``InvalidArgument`` naming ``field``.

    ``rule`` is appended to the message (e.g. ", or None for no limit").
    """
    if value > MAX_SQL_COUNT:
        raise InvalidArgument(field, f"must be at most {MAX_SQL_COUNT}{rule}")
    return value


# --- bounds on the work one call may ask for (docs/api.md, "Limits") ---------------------
#
# Each is a ValueError (``InvalidArgument``) naming the field, a 422 over HTTP.

#: Characters of one message's or memory's text. Its chunks (``memory.core.chunking``: 180 words, 30
#: of overlap) are embedded in the request: 100,000 characters are about 120 chunks, a few seconds
#: of CPU; a 5 MB message made 5,826 chunks and ran 16 minutes.
MAX_CONTENT_CHARS = 100_000
#: Messages in one ``add_messages`` call, and characters of text in all of them: one call is one
#: transaction embedded at once (10,000 messages in one POST took 1.8 GB). 200,000 characters: under
#: ``MAX_EMBED_CHARS`` once chunked (chunk overlap and event times add about a fifth).
MAX_BATCH_MESSAGES = 1_000
MAX_BATCH_CHARS = 200_000
#: The per-request embedding budget: characters one call may send to the embedder (its chunks, with
#: their event times; a chunk counts at most ``memory.core.batching.TEXT_CHARS``, what the model
#: reads). all-MiniLM-L6-v2 embeds about 19,000 characters a second on one core (1,000-character
#: chunks), so 250,000 are about 13 CPU-seconds, 7 s on two idle cores; 1,000,000 (the old batch
#: limit) were 73.5 CPU-s in an attack on issue #29. Holds one ``MAX_CONTENT_CHARS`` record (about
#: 125,000 embedded characters) twice. Checked by ``memory.embedders.embed_records`` before any pass.
MAX_EMBED_CHARS = 250_000
#: Image parts in one call (``add_messages``, ``update_message``) and the pixels of all of them: every image is
#: verified and decoded before anything is stored, and a 2 KB lossless WEBP of 40 megapixels took 0.35 s of
#: CPU to check; 3,000 such parts in one message were accepted (an outside attack, issue #29). 100 is the
#: SDK's ``max_images_per_llm_request`` default; 120 megapixels are three images of the largest size a thread
#: may allow (``ImageInputLimitConfig.max_image_pixels``), about a second of decoding at worst. Counted from
#: each image's header, before it is decoded (``memory.records.image_rules.ImageBudget``).
MAX_BATCH_IMAGES = 100
MAX_BATCH_IMAGE_PIXELS = 120_000_000
#: Nesting levels of a metadata object (an object or list inside another is one level deeper).
#: Deeper JSON hits Python's recursion limit in ``json`` and in the staff and admin pages
#: that render it (depth 930 was stored, then those pages were a 500).
MAX_METADATA_DEPTH = 20
#: Bytes of one record's metadata as JSON (UTF-8). Metadata is copied onto every search chunk of the
#: record and returned with every list page: 10 MB of metadata on one thread made each page of the
#: thread list 10 MB (found by a security review).
MAX_METADATA_BYTES = 65_536
#: Characters of a search query. The embedder reads its first 256 word pieces and the keyword
#: arms its first 32 content words; the rest is only cost.
MAX_QUERY_CHARS = 32_768


def check_size(value: str, field: str, limit: int) -> str:
    """``value`` unchanged if it has at most ``limit`` characters; else ``InvalidArgument`` naming ``field``."""
    if len(value) > limit:
        raise InvalidArgument(field, f"is {len(value)} characters; the limit is {limit}")
    return value


def check_depth(value: object, field: str, limit: int = MAX_METADATA_DEPTH) -> object:
    """``value`` unchanged if its dicts and lists nest at most ``limit`` levels; else ``InvalidArgument``.

    Walks iteratively (no recursion), so any depth is measured without a
    ``RecursionError``. A scalar is level 0, ``{"a": 1}`` level 1.
    """
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth + 1 > limit:
            raise InvalidArgument(field, f"nests more than {limit} levels deep")
        stack.extend((child, depth + 1) for child in children)
    return value


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone UTF-16 surrogate in ``text`` (no UTF-8 form: see ``check_text``), or None
    when ``text`` is valid Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_text(value: str, field: str) -> str:
    """``value`` unchanged if it is valid Unicode text; else ``InvalidArgument`` naming ``field``.

    Python strings may hold lone UTF-16 surrogates (``"\\ud800"``) that no
    database can store as UTF-8 and the tokenizer refuses with a TypeError;
    they are refused here, before anything is written. So is U+0000 (NUL):
    PostgreSQL's ``text`` and ``jsonb`` cannot hold it ("text fields cannot contain
    NUL (0x00) bytes"), and one rule on every database keeps a record portable
    between them (``manage.py export_memory`` / ``import_memory``).
    """
    if (position := lone_surrogate(value)) is not None:
        raise InvalidArgument(field, f"is not valid Unicode text (a lone surrogate at position {position})")
    if (nul := value.find("\x00")) >= 0:
        raise InvalidArgument(field, f"must not hold U+0000 (NUL, at position {nul}): no database here stores it "
                                     "in text")
    return value


def check_json_text(value, field: str) -> None:
    """``InvalidArgument`` naming ``field`` when a key or string anywhere inside the JSON-like ``value``
    holds a lone UTF-16 surrogate (no UTF-8 form: SQLite's JSON functions and Oracle refuse it, and
    json.dumps writes it out as an escape that later reads fail on) or U+0000 (PostgreSQL's jsonb refuses
    ``\\u0000``). ``value`` must be JSON-serialisable."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(field, "is not valid Unicode text (a key or string holds a lone surrogate)") from None
    if "\\u0000" in text.replace("\\\\", ""):  # json.dumps writes NUL as \u0000 (jsonb refuses it); a typed
        # backslash is written \\ and dropped first, so the six characters "\u0000" in a string are not NUL
        raise InvalidArgument(field, "must not hold U+0000 (NUL) in a key or string: no database here stores it")


class NotFound(DomainError, KeyError):
    """A thread, message or memory does not exist here (``KeyError``, as the spec says)."""

    def __init__(self, field: str, value: str):
        super().__init__(f"{field} {value!r} not found")
        self.field = field
        self.value = value
        self.message = f"no {field.removesuffix('_id')} with id {value!r}"

    def __str__(self) -> str:  # KeyError's str() would add quotes
        return self.args[0]


class Conflict(DomainError, ValueError):
    """A caller-chosen id is already taken (``ValueError``; HTTP 409)."""

    def __init__(self, field: str, value: str):
        super().__init__(f"{field} {value!r} already exists")
        self.field = field
        self.value = value
        self.message = f"{field} {value!r} already exists"


class NotPending(Conflict):
    """A review decision (approve, reject) about a memory that does not await review (``ValueError``; HTTP 409)."""

    def __init__(self, field: str, value: str):
        super().__init__(field, value)
        self.message = f"memory {value!r} is not awaiting review"
        self.args = (f"{field}: {self.message}",)


class NotFlagged(Conflict):
    """Clearing the review flag of a memory that is not flagged (``needs_review`` false: issue #32's dependants;
    ``ValueError``; HTTP 409)."""

    def __init__(self, field: str, value: str):
        super().__init__(field, value)
        self.message = f"memory {value!r} is not flagged for review"
        self.args = (f"{field}: {self.message}",)


class OutOfScope(InvalidArgument):
    """A value reaches outside what the caller may touch: another end user or agent than the one a
    restricted client acts for (``memory.records.tenancy.Tenant``). A ``ValueError`` in Python,
    HTTP 403 naming the field."""


class CardNotServed(NotFound):
    """``get_context_card(as_of=T)`` (issue #32): no card with these parameters was served for the thread at or
    before ``T`` (or it was erased, or is past ``OAM_CONTEXT_CARD_LOG_DAYS``). A ``KeyError`` naming ``as_of``;
    no card is ever re-rendered in its place."""

    def __init__(self, value: str):
        super().__init__("as_of", value)
        self.message = f"no context card with these parameters was served for this thread at or before {value}"
        self.args = (self.message,)
