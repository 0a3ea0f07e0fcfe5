"""The injection scan under the name the issues use, ``memory.review.scan``: ``scan``, its ``Flag`` and
``FLAG_KINDS``, and how a context card shows a flagged text (``quoted_if_flagged``, ``QUOTED_KINDS``) and any
memory-like record (``card_text``: flagged text quoted, several lines joined on one).

They live in ``memory.records.review_rules`` with the review queue's rules; this module only names them (a floor
above ``records``, beside ``client``).
"""

from memory.records.review_rules import FLAG_KINDS, QUOTED_KINDS, Flag, card_text, quoted_if_flagged, scan

__all__ = ["FLAG_KINDS", "QUOTED_KINDS", "Flag", "card_text", "quoted_if_flagged", "scan"]
