"""Every LLM prompt of the engine, with the JSON schema its reply must match.

One module so that a prompt can be read, compared and changed in one place
(``memory.llm.adapters`` sends them and validates replies against the schemas):

* extraction (``memory.extraction``): ``SYSTEM_PROMPT``/``system_prompt``,
  ``extraction_schema``, ``extraction_prompt``, and the judge that compares a
  candidate with a stored memory (``JUDGE_SYSTEM_PROMPT``, ``JUDGE_SCHEMA``);
* autonomous linking (``memory.links.autonomous.propose_links``): ``LINK_GUIDE``,
  ``link_schema``, ``link_prompt``;
* the running thread summary (``memory.context.summaries``): ``SUMMARY_SYSTEM_PROMPT``,
  ``SUMMARY_SCHEMA``;
* image captions (``memory.records.image_rules.generate_caption``): ``CAPTION_SYSTEM_PROMPT``,
  ``CAPTION_USER_PROMPT``.

This module imports nothing of the engine but its types, so any module can use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory.models import MEMORY_TYPES

if TYPE_CHECKING:
    from memory.models import Memory


#: Judge answers and what they make of a candidate.
RELATIONS = {"restates": "duplicate", "updates": "updates", "contradicts": "contradicts", "unrelated": "new"}

SCHEMA_NAME = "extracted_memories"
JUDGE_SCHEMA_NAME = "memory_relation"


#: Bounds on one reply, enforced by the schema: memories per call, characters per
#: memory, source messages per memory. A small model fills whatever room it gets
#: (SmolLM2 ran into a 1,024-token cap with 8 x 240 characters, and the cut reply
#: cost two retries), so the reply cap is derived from them: ~120 tokens per
#: memory at most, and ~30 more for its optional validity window (issue #32: two
#: dates of at most ``DATE_MAX_CHARS``), so a grammar-constrained reply always closes.
MAX_MEMORIES_PER_CALL = 6
CONTENT_MAX_CHARS = 200
MAX_SOURCES_PER_MEMORY = 4
DATE_MAX_CHARS = 25
MAX_OUTPUT_TOKENS = MAX_MEMORIES_PER_CALL * 150 + 40


# --- prompts ----------------------------------------------------------------------------------

SYSTEM_PROMPT = """You maintain the long-term memory of an AI agent. Read the TARGET messages of a conversation and \
write down what is worth remembering later, as short self-contained statements.

Memory types:
- fact: a stable fact about a person or the world ("Caroline lives in Boston.")
- preference: what someone likes, dislikes or wants ("Melanie prefers tea to coffee.")
- guideline: an instruction on how the agent should behave ("Answer in French.")
- memory: an event or experience ("Caroline went to a support group on 7 May 2023.")

Rules:
- Extract only from the TARGET messages; the summary and CONTEXT messages only help you understand them.
- Name people instead of using pronouns; turn relative dates into dates using the message time.
- source_message_ids lists the ids of the TARGET messages each memory comes from.
- valid_from / valid_to (optional): only when the messages say when the fact starts or stops holding \
("since March", "until June"): ISO dates (YYYY-MM-DD), relative ones resolved with the message time \
("until June" said on 2026-03-02 -> valid_to 2026-07-01). Leave them out when no date is stated.
- Skip greetings and small talk. Reply {"memories": []} when nothing is worth keeping."""


def system_prompt(custom_instructions: str | None) -> str:
    """The system prompt, with the thread's custom instructions appended
    (spec: memory_extraction_custom_instructions)."""
    extra = (custom_instructions or "").strip()
    return f"{SYSTEM_PROMPT}\n\nAdditional instructions:\n{extra}" if extra else SYSTEM_PROMPT


def extraction_schema(refs: Sequence[str], known: Sequence[str] = ()) -> dict:
    """The reply's JSON schema; ``source_message_ids`` may only name ``refs`` (the call's targets).

    ``valid_from``/``valid_to`` (issue #32) are optional strings, the memory's validity window as ISO dates: not
    in ``required``, so replies without them stay valid, and no pattern, so a badly written date is dropped by
    ``memory.extraction.candidates.parse_candidates`` instead of failing the reply. (The one schema here that is
    not strict-mode complete: a server that insists on every property being required rejects the
    ``json_schema`` form and the adapter falls back to ``json_object``, ``memory.llm.adapters``.)

    With ``known`` (the refs of the KNOWN memories the prompt shows, ``extraction_prompt``; issue #32) each
    memory also lists ``derived_from``: the known memories it was inferred from (may be empty; required).
    Without, the schema has no ``derived_from``.
    """
    schema = {
        "type": "object",
        "properties": {
            "memories": {
                "type": "array",
                "maxItems": MAX_MEMORIES_PER_CALL,
                "items": {
                    "type": "object",
                    "properties": {
                        "memory_type": {"type": "string", "enum": list(MEMORY_TYPES)},
                        "content": {"type": "string", "minLength": 3, "maxLength": CONTENT_MAX_CHARS},
                        "source_message_ids": {
                            "type": "array", "minItems": 1, "maxItems": min(len(refs), MAX_SOURCES_PER_MEMORY),
                            "items": {"type": "string", "enum": list(refs)},
                        },
                        "valid_from": {"type": "string", "maxLength": DATE_MAX_CHARS},
                        "valid_to": {"type": "string", "maxLength": DATE_MAX_CHARS},
                    },
                    "required": ["memory_type", "content", "source_message_ids"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["memories"],
        "additionalProperties": False,
    }
    if known:
        item = schema["properties"]["memories"]["items"]
        item["properties"]["derived_from"] = {
            "type": "array", "maxItems": min(len(known), MAX_SOURCES_PER_MEMORY),
            "items": {"type": "string", "enum": list(known)},
        }
        item["required"].append("derived_from")
    return schema


#: What the prompt says of KNOWN memories (issue #32: a new memory names those it was inferred from).
KNOWN_GUIDE = ("KNOWN memories (already stored; do not repeat them). derived_from lists the ids of the KNOWN "
               "memories a new memory was inferred from, or [] when it comes from the messages alone:")


def extraction_prompt(*, summary: str, context: Sequence[str], targets: Sequence[str],
                      custom_instructions: str | None, known: Sequence[str] = ()) -> list[dict[str, str]]:
    """Chat messages for one call: the system prompt, then the summary, the KNOWN memories, the CONTEXT and the
    TARGET messages.

    ``context`` and ``targets`` are the messages' prompt lines (``memory.extraction.candidates.SourceMessage.line``);
    ``custom_instructions`` is the thread's ``memory_extraction_custom_instructions``; ``known`` the prompt lines
    of stored memories a new one may be derived from (``memory.extraction.candidates.KnownMemory.line``; none by
    default, ``OAM_EXTRACTION_KNOWN_MEMORIES``; issue #32), with ``extraction_schema(refs, known=...)``.
    """
    parts = []
    if summary:
        parts.append(f"Summary of the conversation before these messages:\n{summary}")
    if known:
        parts.append(KNOWN_GUIDE + "\n" + "\n".join(known))
    if context:
        parts.append("CONTEXT messages (for understanding only):\n" + "\n".join(context))
    parts.append("TARGET messages (extract memories from these):\n" + "\n".join(targets))
    return [{"role": "system", "content": system_prompt(custom_instructions)},
            {"role": "user", "content": "\n\n".join(parts)}]


# --- duplicates, updates and contradictions ------------------------------------------------

JUDGE_SYSTEM_PROMPT = (
    "Compare a NEW memory with an EXISTING memory of an AI agent. Answer with one word: "
    "restates (the same information), updates (newer or more precise information about the same thing), "
    "contradicts (both cannot be true), or unrelated."
)


JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"relation": {"type": "string", "enum": list(RELATIONS)}},
    "required": ["relation"],
    "additionalProperties": False,
}


# --- autonomous linking ---------------------------------------------------------------------

#: Built-in relation types and their fixed reverse labels (spec: link_records).
BUILTIN_RELATIONS: dict[str, str] = {
    "supersedes": "is_superseded_by",
    "contradicts": "contradicts",
    "refines": "is_refined_by",
    "supports": "is_supported_by",
    "duplicates": "duplicates",
}

LINK_GUIDE = """You maintain the memory of an AI agent. A NEW memory was just stored. Decide how it relates \
to each numbered EXISTING memory. Every relation reads: NEW <relation_type> EXISTING.

- supersedes: NEW replaces EXISTING; same subject, EXISTING is outdated (a changed preference, a moved \
address, a corrected fact). Example: NEW "now prefers coffee" supersedes EXISTING "likes tea".
- refines: NEW says what EXISTING says, more precisely or completely, so EXISTING is no longer needed.
- duplicates: NEW says the same thing as EXISTING.
- contradicts: NEW conflicts with EXISTING and it is unclear which one holds.
- supports: NEW is evidence for EXISTING; both stay true.

Most memories are unrelated: leave them out. Propose a relation only when it clearly holds, at most one \
per EXISTING memory. Reply {"links": []} when none does."""

def link_schema(labels: list[str]) -> dict:
    """JSON schema of the LLM's answer: ``{"links": [{"candidate": label, "relation_type": built-in}]}``.

    Strict-mode friendly (every property required, no additional ones).
    """
    return {
        "type": "object",
        "properties": {
            "links": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "candidate": {"type": "string", "enum": labels},
                        "relation_type": {"type": "string", "enum": list(BUILTIN_RELATIONS)},
                    },
                    "required": ["candidate", "relation_type"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["links"],
        "additionalProperties": False,
    }

def _describe(memory: Memory) -> str:
    when = f" (at {memory.timestamp})" if memory.timestamp else ""
    return f"[{memory.memory_type}]{when} {memory.content}"

def link_prompt(memory: Memory, candidates: list[Memory]) -> list[dict[str, str]]:
    """Chat messages asking how ``memory`` relates to ``candidates`` (labelled M1, M2, ...)."""
    listing = "\n".join(f"M{i}: {_describe(c)}" for i, c in enumerate(candidates, 1))
    return [
        {"role": "system", "content": LINK_GUIDE},
        {"role": "user", "content": f"NEW: {_describe(memory)}\n\nEXISTING:\n{listing}"},
    ]


# --- thread summary -------------------------------------------------------------------------

#: Topics a summary lists at most.
MAX_TOPICS = 8
SUMMARY_SCHEMA_NAME = "thread_summary"
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "minLength": 1},
        "topics": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TOPICS},
    },
    "required": ["summary", "topics"],
    "additionalProperties": False,
}
SUMMARY_SYSTEM_PROMPT = (
    "You keep a running summary of a conversation between a user and an AI assistant. "
    "Given the previous summary (possibly empty) and the new messages, write an updated summary of the "
    "whole conversation so far: who is involved, what the user wants, decisions, facts, preferences and "
    "open questions. Use at most 200 words and only information from the input. "
    f"Also list up to {MAX_TOPICS} short topics (two to four words each)."
)


# --- image captions -------------------------------------------------------------------------

CAPTION_SYSTEM_PROMPT = (
    "You describe images for a searchable memory store. Write one or two plain sentences that say what the "
    "image shows: objects, people (without guessing identities), any readable text, and the setting. "
    "No preamble, no markdown."
)
CAPTION_USER_PROMPT = "Describe this image."
