"""Thread writes: ``thread_create``, ``thread_update``, ``thread_delete``."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from memory.core.errors import Conflict
from memory.core.ids import stored_id
from memory.core.locking import lock_first
from memory.core.types import NOTSET, NotSet
from memory.extraction.tracker import detach
from memory.models import Project, Thread
from memory.records.validators import check_id, check_metadata, check_scope_id
from memory.services.common import lock_thread
from memory.services.erasure import threads_erase


def thread_create(
    *,
    project: Project,
    thread_id: str | None | NotSet = NOTSET,
    user_id: str | None | NotSet = NOTSET,
    agent_id: str | None | NotSet = NOTSET,
    metadata: Any = None,
    config: dict[str, Any] | None = None,
) -> Thread:
    """Create a thread in ``project``. Omitted ids are generated (UUID4), as the spec's OracleThread does.

    Raises ValueError (``Conflict``) when ``thread_id`` is taken in this project
    (another project's thread of that id is another thread).
    """
    tid = str(uuid.uuid4()) if thread_id is NOTSET or thread_id is None else check_id(thread_id, "thread_id")
    uid = str(uuid.uuid4()) if user_id is NOTSET else check_scope_id(user_id, "user_id")
    aid = str(uuid.uuid4()) if agent_id is NOTSET else check_scope_id(agent_id, "agent_id")
    meta = check_metadata(metadata)
    key = stored_id(project.pk, tid)
    if Thread.objects.filter(pk=key).exists():
        raise Conflict("thread_id", tid)
    thread = Thread(id=key, project=project, user_id=uid, agent_id=aid, metadata=meta, config=config or {})
    try:
        with transaction.atomic():
            thread.save(force_insert=True)
    except IntegrityError:
        raise Conflict("thread_id", tid) from None  # lost a race since the check
    return thread


def thread_update(*, thread: Thread, metadata: dict[str, Any] | None | NotSet = NOTSET,
                  config_changes: dict[str, Any] | None = None) -> Thread:
    """Replace a thread's metadata and/or set keys of its ``config`` (``config_changes``, already
    validated by the caller); return the row. KeyError when gone."""
    with transaction.atomic():
        thread = lock_thread(thread.pk)
        fields = []
        if metadata is not NOTSET:
            thread.metadata = check_metadata(metadata)
            fields.append("metadata")
        if config_changes:
            thread.config = {**(thread.config or {}), **config_changes}
            fields.append("config")
        if fields:
            thread.save(update_fields=[*fields, "updated_at"])
    return thread


def thread_delete(*, project: Project, thread_id: Any, spare: dict[str, str] | None = None) -> int:
    """Delete a thread of ``project`` with its messages, memories, their relations and all chunks; return 1 or 0.

    The history of every memory written while it was the thread's goes too
    (``memory.services.erasure.threads_erase``): after the delete nothing can read or
    restore it, and a thread created later under the same id must not.
    ``spare`` (a restricted caller's ``Tenant.row_filter()``, e.g.
    ``{"user_id": "u1"}``): memories of the thread scoped to another user or
    agent are not deleted but detached from it (stored in no thread, with
    their chunks and history), since a user-restricted key never changes
    another user's records (found by a security review); None (an
    unrestricted caller) deletes everything, as the spec's ``delete_thread``.
    Its extraction jobs go with it, running ones included: a worker still
    waiting for its LLM finds them gone at its commit and writes nothing
    (``memory.services.extraction._commit``), so nothing waits for it. After commit
    this process forgets the LLM and config a handle attached to the thread
    (``memory.extraction.tracker.detach``), whichever edge deleted it.
    """
    key = stored_id(project.pk, check_id(thread_id, "thread_id"))
    with transaction.atomic():
        if lock_first(Thread.objects.filter(pk=key)) is None:
            return 0
        threads_erase([key], spare=spare or None)
        transaction.on_commit(lambda: detach(key))
    return 1
