"""Render records as the XML-like text agents paste into prompts.

The element layout is the context card's ``<relevant_information>`` entries
(issue 4): an element named after the record type holding ``<record_id>``,
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
