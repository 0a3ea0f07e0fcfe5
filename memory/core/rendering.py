"""Render records and context cards as the XML-like text agents paste into prompts.

The element layout is the context card's ``<relevant_information>`` entries:
an element named after the record type holding ``<record_id>``,
``<timestamp>`` when known, ``<role>`` for messages, ``<status>`` and
``<content>``; two-space indentation; text escaped so content cannot close a tag.
"""

from __future__ import annotations

from xml.sax.saxutils import escape


def _status(value) -> str:
    return value.value if hasattr(value, "value") else str(value)


def _indent(text: str, pad: str) -> str:
    """Prefix every line of ``text`` with ``pad`` (empty lines too, as the SDK's renderer does)."""
    return "\n".join(pad + line for line in text.split("\n"))


#: What a context card puts before a memory flagged because a memory it was derived from changed (issue #32).
NEEDS_REVIEW_MARK = "[needs review]"


def render_record(record, indent: int = 0, *, mark_review: bool = False) -> str:
    """Return ``record`` (a ``Message``, ``MemoryRecord`` or ``ImageRecord``) as an XML-like element.

    ``indent`` spaces prefix every line, those inside a multi-line content included (the SDK's layout).
    ``mark_review`` (the context card): a memory flagged as a dependant (its ``needs_review``, issue #32) shows
    ``NEEDS_REVIEW_MARK`` and a space before its content; only here, never in the record's own content.
    """
    tag = record.record_type
    lines = [f"<{tag}>", f"  <record_id>{escape(record.id or '')}</record_id>"]
    if record.timestamp:
        lines.append(f"  <timestamp>{escape(record.timestamp)}</timestamp>")
    if tag == "message":
        lines.append(f"  <role>{escape(record.role)}</role>")
    lines.append(f"  <status>{escape(_status(record.status))}</status>")
    text = record.text
    if mark_review and getattr(record, "needs_review", False):
        text = f"{NEEDS_REVIEW_MARK} {text}"
    lines.append(f"  <content>{escape(text)}</content>")
    lines.append(f"</{tag}>")
    return _indent("\n".join(lines), " " * indent)


def render_recent_message(message, indent: int = 0) -> str:
    """Return a ``Message`` as a ``<recent_messages>`` entry: timestamp (``-`` when unknown), role, and its
    text with runs of whitespace (newlines included) made single spaces."""
    return _indent("\n".join([
        "<message>",
        f"  <timestamp>{escape(message.timestamp or '-')}</timestamp>",
        f"  <role>{escape(message.role)}</role>",
        f"  <content>{escape(' '.join(message.text.split()))}</content>",
        "</message>",
    ]), " " * indent)


def render_context_card(card) -> str:
    """Return a ``ContextCard`` as ``<context_card>`` text, or '' when it holds nothing: the layout of the
    SDK 26.8.0 renderer (``OracleContextCard.content``), compared in tests/memory/test_sdk_parity.py.

    Empty means no summary text, no topics list, no relevant results and no recent messages (empty lists
    count as none). Otherwise, in this order: ``<topics>`` always (one ``<topic>`` per non-blank topic,
    ``<topics></topics>`` when there is none); ``<summary>`` always (the stripped summary, each line
    indented, on lines of its own; ``<summary></summary>`` when blank); ``<relevant_information>`` always
    (``render_record`` per result, best first); ``<recent_messages>`` only when there are some
    (``render_recent_message`` per message, oldest first).
    """
    if not card.summary and not card.topics and not card.relevant_results and not card.recent_messages:
        return ""
    sections: list[str] = []
    topics = [t for t in (card.topics or []) if t and t.strip()]
    if topics:
        sections.append("\n".join(["  <topics>", *(f"    <topic>{escape(t)}</topic>" for t in topics), "  </topics>"]))
    else:
        sections.append("  <topics></topics>")
    summary = (card.summary or "").strip()
    if summary:
        sections.append("\n".join(["  <summary>", _indent(escape(summary), "    "), "  </summary>"]))
    else:
        sections.append("  <summary></summary>")
    if card.relevant_results:
        records = [render_record(getattr(r, "record", r), indent=4, mark_review=True) for r in card.relevant_results]
        sections.append("\n".join(["  <relevant_information>", *records, "  </relevant_information>"]))
    else:
        sections.append("  <relevant_information></relevant_information>")
    if card.recent_messages:
        messages = [render_recent_message(m, indent=4) for m in card.recent_messages]
        sections.append("\n".join(["  <recent_messages>", *messages, "  </recent_messages>"]))
    return "\n".join(["<context_card>", *sections, "</context_card>"])
