"""Tables of the memory engine (docs/architecture.md, "Tables").

Names follow the spec's vocabulary. Every table has an explicit short ``db_table`` because Django's Oracle backend
truncates identifiers to 30 characters (``django.db.backends.oracle``: ``max_name_length()`` is 30). Images
(``oam_images``, migration 0005), relations and summaries have their own tables; an image is searchable through a
``SearchChunk`` with ``source_kind`` and ``record_type`` ``image``.

Every row belongs to a ``Project`` (migration 0006) and record ids are stored as ``"<project pk>:<public id>"``
(``memory.records.tenancy``), so the caller's ids are unique within a project only.

A record's ``__str__`` is its kind and public id, never its content: the admin stores it in its history
(``django_admin_log.object_repr``) on every change and delete, where an erasure would otherwise have to find user text
(found by a security review; ``memory.records.admin_log.admin_log_erase`` deletes the history of what is erased). Lists
show content in columns of their own.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from memory.core.ids import public_id
from memory.fields import VectorField

MEMORY_TYPES = ("memory", "fact", "guideline", "preference")
RECORD_TYPES = ("message", *MEMORY_TYPES, "image")
STATUSES = ("valid", "invalid")
EXTRACTION_STATES = ("queued", "running", "done", "failed")
#: Why an extraction job last failed (``ExtractionJob.failure``, ``memory.extraction.jobs``): ``transient`` (the
#: LLM was unreachable, timed out, rate-limited or answered 5xx: retried until the horizon), ``permanent`` (the
#: LLM refused the request, its output stayed invalid, no LLM: not retried).
EXTRACTION_FAILURES = ("transient", "permanent")
#: Length of the id columns: a stored id is a public id (at most 255 characters, ``check_id`` of
#: ``memory.records.validators``) behind its project's pk and ``:`` (``memory.records.tenancy``).
STORED_ID_LENGTH = 300


class SearchTextField(models.TextField):
    """Text that a full-text index reads: ``CLOB`` on Oracle, plain ``text`` elsewhere.

    Django maps ``TextField`` to ``NCLOB`` on Oracle, and Oracle Text indexes (CONTEXT / SEARCH INDEX) take CHAR,
    VARCHAR2, CLOB and BLOB columns, not NCLOB. A 23ai database uses AL32UTF8 by default, so CLOB holds any text.
    """

    def db_type(self, connection):
        if connection.vendor == "oracle":
            return "CLOB"
        return super().db_type(connection)


def _choices(values):
    return [(v, v) for v in values]


class Project(models.Model):
    """A tenant: one application (or one environment of it) whose records are kept apart from all others.

    ``slug`` names it in URLs, commands and API keys (``threads.models.ApiKey``); the ``default`` project
    (``memory.records.tenancy.DEFAULT_PROJECT``) holds what was stored before projects existed. Rows of every other
    table point here with ``on_delete=PROTECT``: a project is deleted only once it is empty.

    ``members``: the staff users who may see and change it on the staff pages, the admin and the staff WebSocket;
    superusers see every project (``memory.records.tenancy.staff_projects``). Only superusers edit it
    (``memory.admin.ProjectAdmin``, ``manage.py add_project_member``).
    """

    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now)
    # Through table "oam_projects_members" (project_id, user_id): 20 characters, under Oracle's 30.
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="oam_projects",
                                     help_text="Staff users (not superusers) who may see this project.")

    class Meta:
        db_table = "oam_projects"
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class StoredIdModel(models.Model):
    """A table whose primary key ``id`` is a stored id (``"<project pk>:<public id>"``, ``memory.records.tenancy``)
    and whose ``public_id`` is the caller's."""

    id = models.CharField(primary_key=True, max_length=STORED_ID_LENGTH)

    class Meta:
        abstract = True

    @property
    def public_id(self) -> str:
        """The id the caller chose (``memory.core.ids.public_id``)."""
        return public_id(self.pk)


def _project_field(related_name: str = "+") -> models.ForeignKey:
    return models.ForeignKey(Project, on_delete=models.PROTECT, related_name=related_name)


class Thread(StoredIdModel):
    """A conversation thread: its scope, metadata and runtime configuration.

    ``config`` holds the thread's extraction/search/limit settings as JSON; ``extracted_through_seq`` is the extraction
    watermark (the highest message ``seq`` already handed to extraction), the truth a recovery sweep reads. ``id`` is
    the stored id (``memory.records.tenancy``); ``public_id`` the caller's.
    """

    project = _project_field("threads")
    user_id = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    agent_id = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    metadata = models.JSONField(default=dict, blank=True)
    config = models.JSONField(default=dict, blank=True)
    next_seq = models.BigIntegerField(default=1)
    extracted_through_seq = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "oam_threads"
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.public_id


class Message(StoredIdModel):
    """One raw message of a thread, in order (``seq`` is monotonic per thread).

    ``timestamp`` is the caller's event time exactly as given (may be None); ``event_at`` is its parsed UTC value when
    it is ISO-8601, used for timestamp-anchored TTL. ``parts`` keeps an ordered multimodal content list when the message
    was not plain text.
    """

    project = _project_field()
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="messages")
    seq = models.BigIntegerField()
    role = models.CharField(max_length=255)
    content = models.TextField(blank=True, default="")
    parts = models.JSONField(null=True, blank=True)
    timestamp = models.CharField(max_length=64, null=True, blank=True)
    event_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=_choices(STATUSES), default="valid")
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "oam_messages"
        ordering = ["thread", "seq"]
        constraints = [models.UniqueConstraint(fields=["thread", "seq"], name="oam_msg_thread_seq_uq")]

    def __str__(self) -> str:
        return f"message {self.public_id}"


class Memory(StoredIdModel):
    """A typed durable memory (memory, fact, guideline, preference).

    Scope is stored as plain columns because ``add_memory`` may override the user, agent or thread id; "owned by this
    exact thread" means ``thread_id`` equals the thread's id. ``source_message_ids`` records provenance for extracted
    memories (public message ids of the same project). ``pending`` (migration 0011): the memory awaits review
    (``memory.records.review_rules``: the review policy of ``MemoryExtractionConfig``); stored and indexed (its chunks
    carry the status ``pending``) but returned by no read an agent makes until a reviewer approves it: only the review
    queue and the staff pages show it.
    """

    project = _project_field()
    memory_type = models.CharField(max_length=16, choices=_choices(MEMORY_TYPES), default="memory")
    content = models.TextField()
    user_id = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    agent_id = models.CharField(max_length=255, null=True, blank=True)
    thread_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True, db_index=True)
    timestamp = models.CharField(max_length=64, null=True, blank=True)
    event_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=_choices(STATUSES), default="valid")
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    source_message_ids = models.JSONField(default=list, blank=True)
    pending = models.BooleanField(default=False)
    # Valid time (issue #32, migration 0015): when the fact holds in the world, distinct from when it was recorded
    # (``created_at`` and the history's times) and from TTL expiry (``expires_at``). None: open on that side.
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    # Dependants (issue #32): a memory derived from one that changed since (``MemoryDerivation``) is flagged, kept and
    # searchable; ``review_cause`` names the change that flagged it (None when not flagged).
    needs_review = models.BooleanField(default=False)
    review_cause = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "oam_memories"
        ordering = ["created_at"]
        verbose_name_plural = "memories"
        indexes = [
            models.Index(fields=["project", "pending", "created_at"], name="oam_mem_review_ix"),
            models.Index(fields=["project", "needs_review"], name="oam_mem_dependant_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.memory_type} {self.public_id}"


class SearchChunk(models.Model):
    """One searchable unit of a record: its text, scope, state and embedding.

    One table for every record kind means one vector index and one query for "search everything in this scope"
    (docs/architecture.md). Scope, status, expiry and metadata are copies kept in step with the record by the services,
    in the same transaction, so filters run here without joins. ``project`` comes first in the scope index: every search
    filters by it (``memory.search.query.filtered_chunks``). ``record_id`` and ``thread_id`` are stored ids.
    """

    project = _project_field()
    source_kind = models.CharField(max_length=16)  # message | memory | image
    record_id = models.CharField(max_length=STORED_ID_LENGTH)
    record_type = models.CharField(max_length=16, choices=_choices(RECORD_TYPES))
    chunk_index = models.IntegerField(default=0)
    user_id = models.CharField(max_length=255, null=True, blank=True)
    agent_id = models.CharField(max_length=255, null=True, blank=True)
    thread_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True)
    status = models.CharField(max_length=16, default="valid")
    expires_at = models.DateTimeField(null=True, blank=True)
    # Copies of a memory's validity window (``Memory.valid_from``/``valid_to``; None for messages and images).
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_to = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # What the keyword index reads: ``text`` is the record's own words ("<role>: <content>" for messages);
    # ``context`` adds the neighbouring turns of the same thread (two each side) for messages, and is the
    # content itself for memories. See memory.search for how both are used.
    text = SearchTextField()
    context = SearchTextField(blank=True, default="")
    embedding = VectorField(dimensions=settings.OAM_EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "oam_search_chunks"
        constraints = [models.UniqueConstraint(fields=["source_kind", "record_id", "chunk_index"],
                                               name="oam_chunk_record_uq")]
        indexes = [
            models.Index(fields=["project", "user_id", "agent_id", "thread_id"], name="oam_chunk_scope_ix"),
            models.Index(fields=["record_type", "status"], name="oam_chunk_type_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.record_type}:{self.record_id}#{self.chunk_index}"


class ThreadSummary(models.Model):
    """The durable whole-thread summary (spec: get_summary, context cards).

    ``through_seq`` is the last message ``seq`` the summary covers; ``revision`` counts refreshes. ``topics`` is a list
    of short strings for the context card's ``<topics>``.
    """

    thread = models.OneToOneField(Thread, on_delete=models.CASCADE, primary_key=True, related_name="summary")
    project = _project_field()
    content = models.TextField(blank=True, default="")
    topics = models.JSONField(default=list, blank=True)
    through_seq = models.BigIntegerField(default=0)
    revision = models.IntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "oam_thread_summaries"

    def __str__(self) -> str:
        return f"summary of thread {public_id(self.thread_id)}"



class ExtractionJob(models.Model):
    """One extraction pass over a range of a thread's messages.

    ``from_seq``..``to_seq`` (inclusive) is the range handed to the LLM; the thread's ``extracted_through_seq``
    watermark only moves when a job commits its memories, so a crashed or lost job is found by the sweep and no range is
    extracted twice. Counts and seconds feed progress events and the extraction-state endpoint.

    Quality counts (``memory.reports.quality``, the staff dashboard), set by a job's commit: ``messages_extracted``
    (target messages handed to the LLM), ``duplicates_skipped`` (candidates that restated a stored memory or one of the
    same job, ``memory.extraction.dedup``) and ``rejected_<reason>`` (candidates
    ``memory.extraction.candidates.parse_candidates`` refused, by ``REJECT_REASONS``). None on jobs that committed
    before migration 0011.

    Catching up after an outage (``memory.extraction.jobs``): ``failure`` is the kind of the last failure
    (``EXTRACTION_FAILURES``, "" when none), ``retry_since`` the first transient failure of the current run of
    them (the retry horizon counts from it), ``retry_at`` the earliest next claim, ``fences`` the claims a delete
    took back (``jobs_fence``), which ``OAM_EXTRACTION_MAX_ATTEMPTS`` does not count.
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="extraction_jobs")
    project = _project_field()
    from_seq = models.BigIntegerField()
    to_seq = models.BigIntegerField()
    trigger = models.CharField(max_length=32, default="add_messages")
    status = models.CharField(max_length=16, choices=_choices(EXTRACTION_STATES), default="queued", db_index=True)
    error = models.TextField(blank=True, default="")
    attempts = models.IntegerField(default=0)
    memories_created = models.IntegerField(default=0)
    memories_linked = models.IntegerField(default=0)
    messages_extracted = models.IntegerField(null=True, blank=True)
    duplicates_skipped = models.IntegerField(null=True, blank=True)
    rejected_not_text = models.IntegerField(null=True, blank=True)
    rejected_unknown_type = models.IntegerField(null=True, blank=True)
    rejected_no_source = models.IntegerField(null=True, blank=True)
    rejected_repeated = models.IntegerField(null=True, blank=True)
    llm_seconds = models.FloatField(default=0.0)
    seconds = models.FloatField(default=0.0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    failure = models.CharField(max_length=16, choices=_choices(EXTRACTION_FAILURES), blank=True, default="")
    retry_since = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True)
    fences = models.IntegerField(default=0)

    class Meta:
        db_table = "oam_extraction_jobs"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["project", "finished_at"], name="oam_job_finished_ix")]

    def __str__(self) -> str:
        return f"extraction {self.thread_id} {self.from_seq}-{self.to_seq} ({self.status})"


class RecordLink(StoredIdModel):
    """A directed relation between two memory-like records of one thread (spec: link_records).

    ``relation_type`` reads source -> target, ``opposite_relation_type`` target -> source. ``pair_key`` is the endpoint
    pair in sorted order, unique, so only one orientation can be stored per pair. Ids are stored ids of one project.
    """

    project = _project_field()
    thread_id = models.CharField(max_length=STORED_ID_LENGTH, db_index=True)
    source_id = models.CharField(max_length=STORED_ID_LENGTH, db_index=True)
    source_type = models.CharField(max_length=16)
    target_id = models.CharField(max_length=STORED_ID_LENGTH, db_index=True)
    target_type = models.CharField(max_length=16)
    relation_type = models.CharField(max_length=64)
    opposite_relation_type = models.CharField(max_length=64)
    pair_key = models.CharField(max_length=2 * STORED_ID_LENGTH + 8, unique=True)
    metadata = models.JSONField(default=dict, blank=True)
    timestamp = models.CharField(max_length=64, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_record_links"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"relation {self.public_id}"


class ImageQuerySet(models.QuerySet):
    """Image rows; ``with_bytes()`` loads the BLOB that the default manager leaves out."""

    def with_bytes(self) -> "ImageQuerySet":
        """The same rows with ``data`` loaded (clears the manager's ``defer("data")``)."""
        return self.defer(None)


class ImageManager(models.Manager.from_queryset(ImageQuerySet)):
    """Default manager of ``Image``: every queryset defers ``data``, so listings never read BLOBs."""

    def get_queryset(self) -> ImageQuerySet:
        return super().get_queryset().defer("data")


class Image(StoredIdModel):
    """An image owned by a thread (spec: add_image, ImageRecord).

    ``data`` holds the validated bytes (``BLOB`` on Oracle and SQLite) and is deferred by the default manager: read it
    with ``Image.objects.with_bytes()``. ``mime_type`` is ``image/png``, ``image/jpeg`` or ``image/webp``;
    ``width``/``height`` in pixels and ``size_bytes`` come from validation
    (``memory.records.image_rules.validate_image``). ``description`` is the searchable text (None: not described, then
    the image has no search chunk). ``message`` is set for an image part of a message: the image then shares the
    message's expiry and goes when the message goes. Scope columns copy the thread's.
    """

    project = _project_field()
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="images")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, null=True, blank=True, related_name="images")
    user_id = models.CharField(max_length=255, null=True, blank=True)
    agent_id = models.CharField(max_length=255, null=True, blank=True)
    mime_type = models.CharField(max_length=32)
    description = models.TextField(null=True, blank=True)
    data = models.BinaryField()
    size_bytes = models.BigIntegerField(default=0)
    width = models.IntegerField(default=0)
    height = models.IntegerField(default=0)
    metadata = models.JSONField(default=dict, blank=True)
    timestamp = models.CharField(max_length=64, null=True, blank=True)
    event_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ImageManager()

    class Meta:
        db_table = "oam_images"
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"image {self.public_id}"


class ErasureReceipt(models.Model):
    """A record that everything about one user or agent of a project was erased (GDPR Art. 17).

    The subject is kept only as ``subject_digest``, an HMAC of its id (``memory.services.erasure.subject_digest``): the
    receipt proves the erasure to whoever knows the id without keeping the id. ``counts`` are the rows deleted per kind,
    ``storage`` what was done to the storage afterwards (``memory.services.scrub.storage_scrub``; ``{"scrubbed": false,
    ...}`` when nothing was deleted), ``requested_by`` who asked (``api-key:<id>``, ``staff:<username>``, ``manage.py``,
    ``python``).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = _project_field()
    subject = models.CharField(max_length=8, choices=_choices(("user", "agent")))
    subject_digest = models.CharField(max_length=64, db_index=True)
    cascade = models.BooleanField(default=True)
    counts = models.JSONField(default=dict, blank=True)
    storage = models.JSONField(default=dict, blank=True)
    requested_by = models.CharField(max_length=200, blank=True, default="")
    requested_at = models.DateTimeField(default=timezone.now, db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "oam_erasure_receipts"
        ordering = ["-requested_at"]

    def __str__(self) -> str:
        return f"erasure of a {self.subject} of {self.project_id} at {self.requested_at:%Y-%m-%d %H:%M}"


class MemoryVersion(models.Model):
    """One entry of a memory's history (``memory.records.history``): who changed it, when, from what to what, and why.

    Appended on every create, content/type/metadata/status/TTL change, relation-driven (in)validation, restore and
    delete of a memory-like record, inside the writing transaction. ``memory_id`` is the record's stored id (no foreign
    key: after a single delete the history outlives the record until its user is erased,
    ``memory.services.erasure.subject_erase``, or its thread deleted; the expiry purge deletes it with the record);
    ``thread_id``, ``user_id`` and ``agent_id`` are the record's scope copies, for scoped reads and erasure.
    ``before``/``after`` are snapshots (``memory.records.history.snapshot``; None before a create and after a delete).
    ``actor_kind`` is one of ``memory.records.history.ACTOR_KINDS``; ``relation_id`` names the relation that drove an
    (in)validation (stored id).
    """

    id = models.BigAutoField(primary_key=True)
    project = _project_field()
    memory_id = models.CharField(max_length=STORED_ID_LENGTH)
    version = models.IntegerField()
    action = models.CharField(max_length=16)
    actor_kind = models.CharField(max_length=16)
    actor_id = models.CharField(max_length=200, blank=True, default="")
    reason = models.CharField(max_length=500, blank=True, default="")
    relation_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True)
    thread_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True, db_index=True)
    user_id = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    agent_id = models.CharField(max_length=255, null=True, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_memory_versions"
        ordering = ["memory_id", "version"]
        constraints = [models.UniqueConstraint(fields=["memory_id", "version"], name="oam_memver_uq")]
        # Recorded-time ("as of") reads (issue #32): one memory's state at an instant, and a project's changes
        # since an instant.
        indexes = [
            models.Index(fields=["memory_id", "created_at"], name="oam_memver_time_ix"),
            models.Index(fields=["project", "created_at"], name="oam_memver_project_time_ix"),
        ]

    def __str__(self) -> str:
        return f"memory version {public_id(self.memory_id)}#{self.version}"


class HistoryVector(models.Model):
    """One chunk vector of a memory's earlier content, kept with its history (issue #32, recorded time).

    What: the embedding of chunk ``chunk_index`` of the content whose SHA-256 (hex) is ``content_sha``, of memory
    ``memory_id`` (stored id, which carries the project; no foreign key, as ``MemoryVersion``). Copied, never
    embedded: when a memory's content changes or it is deleted keeping its history, its chunks' embeddings are
    copied here before the chunks go (``memory.index.writer.keep_history_vectors``, in the writing transaction);
    a memory never edited costs nothing.

    Why: an as-of search (``memory.search.as_of``) ranks a memory whose content changed since by its content then.
    Embedding those texts per query made a cold as-of search 12x a present-time hybrid search (``bench/as_of.py``,
    2 LoCoMo conversations: 501 ms against 41.7 ms p50, about 44 texts embedded per query; 48.9 ms warm, but the
    in-process cache is cold after every restart and in every other worker): the search reads these instead.

    Erasure: they go wherever the history goes (``memory.services.erasure``: a user's erasure, a thread's delete,
    the expiry purge), so no vector of an erased memory is left; a single delete keeps them with the history.
    """

    id = models.BigAutoField(primary_key=True)
    project = _project_field()
    memory_id = models.CharField(max_length=STORED_ID_LENGTH)
    content_sha = models.CharField(max_length=64)
    chunk_index = models.IntegerField(default=0)
    embedding = VectorField(dimensions=settings.OAM_EMBEDDING_DIMENSIONS)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_history_vectors"
        constraints = [models.UniqueConstraint(fields=["memory_id", "content_sha", "chunk_index"],
                                               name="oam_histvec_uq")]

    def __str__(self) -> str:
        return f"history vector {public_id(self.memory_id)}:{self.content_sha[:12]}#{self.chunk_index}"


class MemoryDerivation(models.Model):
    """A ``derived_from`` edge (issue #32): memory ``memory_id`` was inferred from memory ``source_id``.

    Extraction records which memories a new one was inferred from; ``add_memory`` and the API accept them. When a
    source is superseded, invalidated, edited or deleted, every memory derived from it, transitively, is flagged
    (``Memory.needs_review``). Stored ids without foreign keys, like ``MemoryVersion``: an edge outlives a single
    delete of either end (a change still passes through a deleted memory in a chain), goes when a new memory takes
    the id (``memory.links.dependants.derivations_reset``) and with the user's, agent's or thread's erasure.
    ``thread_id`` is the derived memory's thread (scope copy, for erasure).
    """

    id = models.BigAutoField(primary_key=True)
    project = _project_field()
    memory_id = models.CharField(max_length=STORED_ID_LENGTH)
    source_id = models.CharField(max_length=STORED_ID_LENGTH, db_index=True)
    thread_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_memory_derivations"
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["memory_id", "source_id"], name="oam_memderiv_uq")]

    def __str__(self) -> str:
        return f"memory {public_id(self.memory_id)} derived from {public_id(self.source_id)}"


class ContextCardLog(models.Model):
    """A context card the service returned (issue #32, part 3: card replay), kept so that
    ``get_context_card(as_of=T)`` answers the very card served at ``T``, byte for byte.

    A card is not re-rendered from reconstructed state: the keyword arm's statistics, the LLM-written summary and
    the ranking move, so the service keeps what it returned (``memory.services.cards``). ``parameters_digest`` is
    the sha256 of the canonical JSON of the call's effective parameters (``parameters``), so a replay with other
    parameters is not answered by this card; ``content`` is the rendered text and ``parts`` the card's parts
    (``memory.context.card_log.card_encode``) from which the returned object is rebuilt equal. One row stands for
    an unchanged run of identical cards: ``served_at`` is when it was first served, ``last_served_at`` the latest.
    ``thread_id``, ``user_id`` and ``agent_id`` are stored copies (no foreign key, like ``MemoryVersion``): the rows
    go with the thread's or the subject's erasure, and with the expiry purge after ``OAM_CONTEXT_CARD_LOG_DAYS``;
    a thread keeps its newest ``OAM_CONTEXT_CARD_LOG_MAX_PER_THREAD`` rows of at most
    ``OAM_CONTEXT_CARD_LOG_MAX_CHARS_PER_THREAD`` characters (``size``).
    """

    id = models.BigAutoField(primary_key=True)
    project = _project_field()
    thread_id = models.CharField(max_length=STORED_ID_LENGTH)
    user_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True)
    agent_id = models.CharField(max_length=STORED_ID_LENGTH, null=True, blank=True)
    parameters_digest = models.CharField(max_length=64)
    parameters = models.JSONField(default=dict, blank=True)
    content = models.TextField(blank=True, default="")
    parts = models.TextField(blank=True, default="")
    # Characters of ``content`` and ``parts``: what the per-thread bound counts (memory.services.cards).
    size = models.BigIntegerField(default=0)
    served_at = models.DateTimeField(default=timezone.now)
    last_served_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        db_table = "oam_context_cards"
        ordering = ["served_at", "id"]
        indexes = [models.Index(fields=["thread_id", "served_at"], name="oam_card_thread_time_ix")]

    def __str__(self) -> str:
        return f"context card of thread {public_id(self.thread_id)} served at {self.served_at:%Y-%m-%d %H:%M:%S}"


class Profile(models.Model):
    """A user or agent profile of a project (SDK: ``add_user``/``add_agent``, ``UserProfileRecord``/
    ``AgentProfileRecord``): free-form ``information`` about one user or agent, and its ``metadata``.

    One row per (project, kind, subject id); a second ``add_user`` of the same id replaces it. Profiles are not scoped
    to threads and are not searchable; ``delete_user``/``delete_agent`` (and an erasure,
    ``memory.services.profiles.erase_profiles``) delete them.
    """

    project = _project_field()
    kind = models.CharField(max_length=8, choices=_choices(("user", "agent")))
    subject_id = models.CharField(max_length=255)
    information = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "oam_profiles"
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["project", "kind", "subject_id"], name="oam_profile_subject_uq")]

    def __str__(self) -> str:
        return f"{self.kind} profile {self.pk}"


class EmbeddingSpace(models.Model):
    """Which embedder made this database's vectors: one row, written by migration 0013 (``memory.checks``).

    Vectors of two models are not comparable, so a database is searched with the embedder that filled it. ``embedder``
    is the ``OAM_EMBEDDER`` dotted path in force when the database was migrated (every database before 0013 was filled
    by ``memory.embedders.MiniLMEmbedder``, the only embedder until then), ``dimensions`` the VECTOR columns' size.
    ``memory.checks.check_embedding_space`` (``memory.E002``, run by ``manage.py migrate`` and so by ``make serve``, and
    by ``manage.py check --database default``) refuses a configured embedder that differs. Changing the embedder means a
    new database filled by ``manage.py import_memory`` from an export (the import embeds again).
    """

    embedder = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "oam_embedding_space"

    def __str__(self) -> str:
        return f"{self.embedder} ({self.dimensions}-d)"
