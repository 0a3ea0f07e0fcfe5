"""Render records and context cards as the XML-like text agents paste into prompts.

The element layout is the context card's ``<relevant_information>`` entries:
an element named after the record type holding ``<record_id>``,
``<timestamp>`` when known, ``<role>`` for messages, ``<status>`` and
``<content>``; two-space indentation; text escaped so content cannot close a tag.
"""

from __future__ import annotations

from xml.sax.saxutils import escape


def render_record(record, indent: int = 0) -> str:
    """Return ``record`` (a ``Message`` or ``MemoryRecord``) as an XML-like element."""
    pad = " " * indent
    inner = pad + "  "
    tag = record.record_type
    lines = [f"{pad}<{tag}>", f"{inner}<record_id>{escape(record.id or '')}</record_id>"]
    if record.timestamp:
        lines.append(f"{inner}<timestamp>{escape(record.timestamp)}</timestamp>")
    if tag == "message":
        lines.append(f"{inner}<role>{escape(record.role)}</role>")
    lines.append(f"{inner}<status>{escape(record.status)}</status>")
    lines.append(f"{inner}<content>{escape(record.text)}</content>")
    lines.append(f"{pad}</{tag}>")
    return "\n".join(lines)


def render_recent_message(message, indent: int = 0) -> str:
    """Return a ``Message`` as a ``<recent_messages>`` entry: timestamp (``-`` when unknown), role, content."""
    pad = " " * indent
    inner = pad + "  "
    return "\n".join([
        f"{pad}<message>",
        f"{inner}<timestamp>{escape(message.timestamp or '-')}</timestamp>",
        f"{inner}<role>{escape(message.role)}</role>",
        f"{inner}<content>{escape(message.text)}</content>",
        f"{pad}</message>",
    ])


def render_context_card(card) -> str:
    """Return a ``ContextCard`` as ``<context_card>`` text, or '' when it holds nothing.

    Sections, in this order and each only when it has something:
    ``<topics>`` (one ``<topic>`` each), ``<summary>``, ``<relevant_information>``
    (``render_record`` per result, best first) and ``<recent_messages>``
    (``render_recent_message`` per message, oldest first).
    """
    sections: list[str] = []
    topics = [t for t in (card.topics or []) if t]
    if topics:
        sections.append("\n".join(["  <topics>", *(f"    <topic>{escape(t)}</topic>" for t in topics), "  </topics>"]))
    if card.summary:
        sections.append(f"  <summary>{escape(card.summary)}</summary>")
    if card.relevant_results:
        records = [render_record(getattr(r, "record", r), indent=4) for r in card.relevant_results]
        sections.append("\n".join(["  <relevant_information>", *records, "  </relevant_information>"]))
    if card.recent_messages:
        messages = [render_recent_message(m, indent=4) for m in card.recent_messages]
        sections.append("\n".join(["  <recent_messages>", *messages, "  </recent_messages>"]))
    if not sections:
        return ""
    return "\n".join(["<context_card>", *sections, "</context_card>"])
