"""``manage.py import_realtalk [path] [--samples realtalk-1 ...]``: import REALTALK chats.

The LoCoMo importer (``import_locomo``) reading ``memory.dev.realtalk``: one user per chat (``user_id``
"realtalk-<n>", ``agent_id`` "realtalk"), one thread per session ("realtalk-1-s3"), one ``add_messages`` per
session with each message's own timestamp, deterministic message ids ("realtalk-1:D3:5"), so a rerun adds only
what is missing. ``path`` is the folder of ``Chat_<n>_*.json`` files or one of them (default
``$OAM_REALTALK_PATH``, else ``../shared/data/realtalk`` next to the repository).
"""

from __future__ import annotations

from memory.dev import realtalk
from memory.management.commands import import_locomo


class Command(import_locomo.Command):
    corpus = realtalk
    corpus_name = "REALTALK"
    path_help = ("folder of REALTALK Chat_<n>_*.json files, or one file (default: $OAM_REALTALK_PATH, else "
                 "../shared/data/realtalk next to the repository)")
    help = ("Import REALTALK chats as threads and messages: one user per chat, one thread per session, each "
            "message with its own timestamp. Reruns add only what is missing.")
