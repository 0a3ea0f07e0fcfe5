"""Writes of the memory engine: threads, messages, memories and images with their search chunks.

One module per entity: ``threads``, ``messages``, ``memories``, ``images``; ``review`` holds the review
queue's decisions (approve, edit-then-approve, reject: ``memory.review``);
``parts`` parses message input, ``common`` holds the thread lock, the TTL
refresh and fenced deletes. Argument checks are ``memory.validators``; the
search chunks are written only through ``memory.index``. Every public name
is re-exported here (``from memory.services import memory_add``).

Every function is keyword-only, validates everything before it writes, embeds
outside the transaction, and writes a record together with its ``SearchChunk``
rows in one transaction, so a batch with one bad item writes nothing and a
failure leaves nothing half-written (docs/architecture.md, "Flows").

Errors follow the spec: ``ValueError`` (``InvalidArgument``/``Conflict``) for bad
values, ``TypeError`` for bad types, ``KeyError`` (``NotFound``) for records
that are not there, expired, or owned by another thread.

Projects (``memory.tenancy``): a function works in the project of the thread
row it is given (or of ``project``), takes and returns the caller's public
ids, and stores rows under stored ids (``stored_id``) with their ``project``
column set, so nothing it does can reach another project's records.
"""

from memory.index import (  # noqa: F401  (re-exported: these lived here before memory.index)
    CONTEXT_NEIGHBOUR_WORDS,
    CONTEXT_TURNS,
    embedding_text,
    image_chunk_texts,
    message_chunk_text,
    refresh_message_contexts,
)
from memory.models import Image, Memory, Message, Project, RecordLink, SearchChunk, Thread  # noqa: F401
from memory.services.images import image_add, image_delete, image_update  # noqa: F401
from memory.services.memories import (  # noqa: F401
    PreparedMemory,
    memory_add,
    memory_delete,
    memory_delete_by_id,
    memory_insert,
    memory_prepare,
    memory_restore,
    memory_state_update,
    memory_update,
)
from memory.services.review import ReviewDecision, memory_approve, memory_edit_approve, memory_reject  # noqa: F401
from memory.services.messages import message_delete, message_state_update, message_update, messages_add  # noqa: F401
from memory.services.threads import thread_create, thread_delete, thread_update  # noqa: F401
from memory.validators import (  # noqa: F401  (re-exported: these lived here before memory.validators)
    MAX_ID_LENGTH,
    check_id,
    check_memory_type,
    check_metadata,
    check_scope_id,
    check_status,
    reject_unknown,
)
