"""Django admin for every table of the memory engine ("Django admin stays complete").

Threads, messages, memories, images and relations are edited and deleted through the same services the API
uses (``save_model``/``delete_model``), so an edited memory is re-embedded and its chunks and relations stay
in step. Single and bulk ("Delete selected") deletes of messages, memories and images go through
``memory.services.erasure``: their search text, embeddings, relations and attached images go with them,
expired records included (a memory's history stays, as after any single delete: ``memory.records.history``);
then ``storage_scrub`` makes the deletes final in the database file (its keyword index rewritten, the WAL
emptied), as do thread deletes here. Derived rows (search chunks, summaries, extraction jobs) are read-only
here: the engine writes them. Each list has filters and a search box. Values the services would refuse
(``checked_form``) are errors next to their field.

Every list shows and filters by project. Ids are shown as the caller's (public) ids; the admin's own URLs use
the stored ids (``memory.records.tenancy``), which are the primary keys.

Staff by project: every admin here (and in ``threads.admin``) is a ``ProjectScopedAdmin``: a superuser sees
every row; another staff user only rows of the projects they are a member of
(``memory.records.tenancy.staff_projects``): lists, change pages, actions and deletes, the project filter and
the project choices of a form alike. A row of another project is "not there" (the admin's "doesn't exist"
redirect, as for a deleted row). Only superusers add projects and edit their members.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction

from memory.client import AgentMemory
from memory.client import Thread as ThreadHandle
from memory.core.errors import DomainError
from memory.core.ids import public_id
from memory.core.types import NOTSET
from memory.core.valid_time import check_window
from memory.links.writes import link_delete, link_update
from memory.models import (
    ContextCardLog,
    EmbeddingSpace,
    ErasureReceipt,
    ExtractionJob,
    HistoryVector,
    Image,
    Memory,
    MemoryDerivation,
    MemoryVersion,
    Message,
    Profile,
    Project,
    RecordLink,
    SearchChunk,
    Thread,
    ThreadSummary,
)
from memory.records.tenancy import DEFAULT_PROJECT, get_project, staff_projects
from memory.records.validators import check_id, check_metadata, check_relation_type, check_scope_id
from memory.services import erasure
from memory.services.memories import memory_delete_by_id, memory_state_update, memory_update
from memory.services.messages import message_delete, message_state_update
from memory.services.scrub import storage_scrub
from memory.services.threads import thread_create, thread_delete, thread_update


def _handle(row: Thread) -> ThreadHandle:
    """The spec handle on a stored thread, through a client of its project."""
    return ThreadHandle(row, AgentMemory(project=row.project))


@admin.display(description="id", ordering="id")
def shown_id(obj) -> str:
    """A record's public id (the caller's), for list columns."""
    return obj.public_id


@admin.display(description="content")
def short_content(obj) -> str:
    """A message's or memory's content cut to 80 characters, for list columns."""
    return obj.content[:80]


class MemberProjectFilter(admin.RelatedFieldListFilter):
    """A list's project filter offering only the projects the user may see (``staff_projects``)."""

    def field_choices(self, field, request, model_admin):
        return [(row.pk, str(row)) for row in staff_projects(request.user)]


class ProjectScopedAdmin(admin.ModelAdmin):
    """Rows of the projects the signed-in user may see (``memory.records.tenancy.staff_projects``).

    ``project_path`` is the lookup from a row to its ``Project`` (``"pk"`` for
    projects themselves). A superuser sees every row; another staff user the
    rows of their projects only, in lists, change pages, actions and bulk
    deletes (all read ``get_queryset``); a ``project`` list filter and a
    foreign key to ``Project`` in a form offer only those projects.
    """

    project_path = "project"

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.project_path}__in": staff_projects(request.user)})

    def get_list_filter(self, request):
        return [(name, MemberProjectFilter) if name == "project" else name
                for name in super().get_list_filter(request)]

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.related_model is Project:
            kwargs["queryset"] = staff_projects(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Project)
class ProjectAdmin(ProjectScopedAdmin):
    """Projects (tenants). A project with records cannot be deleted (``on_delete=PROTECT``).

    Only superusers add projects and edit ``members`` (who may see a project);
    other staff see and rename the projects they are members of, without their
    member list.
    """

    project_path = "pk"
    list_display = ("slug", "name", "created_at")
    list_filter = ("created_at",)
    search_fields = ("slug", "name")
    readonly_fields = ("created_at",)
    filter_horizontal = ("members",)

    def get_readonly_fields(self, request, obj=None):
        """The slug names the project in URLs and API keys: fixed once created."""
        return (("slug",) if obj is not None else ()) + self.readonly_fields

    def get_exclude(self, request, obj=None):
        """``members`` only for superusers: nobody else can grant themselves (or anyone) a project."""
        return None if request.user.is_superuser else ("members",)

    def has_add_permission(self, request):
        return request.user.is_superuser

    def formfield_for_manytomany(self, db_field, request, **kwargs):
        if db_field.name == "members":  # membership matters for staff users only
            kwargs["queryset"] = db_field.related_model._default_manager.filter(is_staff=True)
        return super().formfield_for_manytomany(db_field, request, **kwargs)


def checked_form(*, together: tuple[tuple[tuple[str, ...], Any], ...] = (), **checks):
    """A ModelForm class running the engine's argument checks on the fields a save changes.

    ``checks`` maps a field name to ``check(value, field)`` (``services.check_metadata``,
    ``links.check_relation_type`` ...). The ``ValueError``/``TypeError`` it raises
    becomes an error next to that field, before anything is written: ``save_model``
    calls the services, and an error there would be a server error instead. ``together`` holds
    ``(names, check)`` pairs for rules between fields, run as ``check(*values)`` when any of ``names`` changed
    (the validity window's ``memory.core.valid_time.check_window``: an inverted window had answered 500); the
    error lands on the field it names.
    """

    class CheckedForm(forms.ModelForm):
        def clean(self):
            data = super().clean()
            for name, check in checks.items():
                if name in data and name in self.changed_data:
                    try:
                        check(data[name], name)
                    except DomainError as exc:
                        self.add_error(name, getattr(exc, "message", None) or str(exc))
            for names, check in together:
                if all(name in data for name in names) and set(names) & set(self.changed_data):
                    try:
                        check(*(data[name] for name in names))
                    except DomainError as exc:
                        field = getattr(exc, "field", None)
                        self.add_error(field if field in names else names[-1],
                                       getattr(exc, "message", None) or str(exc))
            return data

    return CheckedForm


class NoEditing:
    """Admin mixin: rows are listed and shown, never added, changed or deleted here."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(NoEditing, ProjectScopedAdmin):
    """Rows the engine derives and keeps in step itself: listed and shown, never edited here."""


class ErasingAdmin(ProjectScopedAdmin):
    """Deletes, single and bulk, through an erase function of ``memory.services.erasure`` (stored ids -> counts), then
    ``storage_scrub``: the deleted text does not survive in the database file."""

    erase = None  # a staticmethod: memory.services.erasure.messages_erase, memories_erase ...

    def delete_model(self, request, obj):
        self._erase([obj.pk])

    def delete_queryset(self, request, queryset):
        self._erase(list(queryset.values_list("pk", flat=True)))

    def _erase(self, keys: list[str]) -> None:
        with transaction.atomic():
            type(self).erase(keys)
        storage_scrub()


class ServiceDeletes:
    """Admins whose deletes go through a service that removes what the record owns (jobs, chunks, summaries).

    A single delete is a bulk delete of one row (``delete_queryset``, which calls the service). Django's
    delete page would otherwise refuse (403) a record that owns rows whose admin is read-only (an
    ``ExtractionJob`` of a thread being extracted): those rows are the service's to delete, not the user's.
    """

    def delete_model(self, request, obj):
        self.delete_queryset(request, self.model.objects.filter(pk=obj.pk))

    def get_deleted_objects(self, objs, request):
        deleted, model_count, _perms_needed, protected = super().get_deleted_objects(objs, request)
        return deleted, model_count, set(), protected


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("seq", "role", "content", "timestamp", "status", "expires_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ("seq",)


@admin.register(Thread)
class ThreadAdmin(ServiceDeletes, ProjectScopedAdmin):
    """Threads. A new thread's ``id`` is the caller's id in the chosen project (``services.thread_create``)."""

    list_display = (shown_id, "project", "user_id", "agent_id", "created_at", "updated_at")
    search_fields = ("id", "user_id", "agent_id")
    list_filter = ("project", "created_at", "updated_at", "agent_id")
    readonly_fields = ("config", "next_seq", "extracted_through_seq", "created_at", "updated_at")
    inlines = [MessageInline]
    form = checked_form(id=check_id, user_id=check_scope_id, agent_id=check_scope_id, metadata=check_metadata)

    def get_changeform_initial_data(self, request):
        """A new thread goes to the default project (else the user's first) unless another is chosen."""
        get_project(None)  # created on first use
        mine = staff_projects(request.user)
        first = mine.filter(slug=DEFAULT_PROJECT).first() or mine.first()
        return {**({"project": first.pk} if first else {}), **super().get_changeform_initial_data(request)}

    def get_readonly_fields(self, request, obj=None):
        """A stored thread's ids are fixed (its records carry them): only metadata changes (``thread_update``)."""
        return (("id", "project", "user_id", "agent_id") if obj is not None else ()) + self.readonly_fields

    def save_model(self, request, obj, form, change):
        if not change:
            row = thread_create(project=obj.project, thread_id=obj.pk, user_id=obj.user_id,
                                agent_id=obj.agent_id, metadata=obj.metadata)
            obj.pk = row.pk  # the admin's redirect goes to the stored thread
        elif "metadata" in form.changed_data:
            thread_update(thread=obj, metadata=obj.metadata)

    def delete_queryset(self, request, queryset):
        """``services.thread_delete`` each thread, then ``storage_scrub`` once (as ``ErasingAdmin``)."""
        for row in list(queryset.select_related("project")):
            thread_delete(project=row.project, thread_id=row.public_id)
        storage_scrub()


@admin.register(Message)
class MessageAdmin(ServiceDeletes, ErasingAdmin):
    list_display = (shown_id, "project", "thread", "seq", "role", short_content, "timestamp", "status",
                    "expires_at")
    list_filter = ("project", "status", "role", "created_at")
    search_fields = ("id", "thread__id", "content")
    readonly_fields = ("id", "thread", "seq", "role", "timestamp", "event_at", "created_at", "updated_at")
    fields = ("id", "thread", "seq", "role", "content", "metadata", "timestamp", "status", "expires_at",
              "created_at", "updated_at")
    form = checked_form(metadata=check_metadata)

    def has_add_permission(self, request):
        return False  # messages are appended through the API, which embeds them

    def save_model(self, request, obj, form, change):
        thread = _handle(obj.thread)
        changed = set(form.changed_data)
        thread.update_message(
            obj.public_id,
            content=obj.content if "content" in changed else NOTSET,
            metadata=obj.metadata if "metadata" in changed else NOTSET,
        )
        if changed & {"status", "expires_at"}:
            message_state_update(thread=obj.thread, message_id=obj.public_id, status=obj.status,
                                 expires_at=obj.expires_at)

    def delete_queryset(self, request, queryset):
        """``services.message_delete`` each message (the thread's running extraction fenced, as through the
        API; expired ones too), then ``storage_scrub`` once."""
        for row in list(queryset.select_related("thread")):
            message_delete(thread=row.thread, message_id=row.public_id, include_expired=True)
        storage_scrub()


@admin.register(Memory)
class MemoryAdmin(ServiceDeletes, ErasingAdmin):
    list_display = (shown_id, "project", "memory_type", short_content, "user_id", "thread_id", "status",
                    "pending", "expires_at", "valid_from", "valid_to")
    list_filter = ("project", "memory_type", "status", "pending", "needs_review", "created_at")
    search_fields = ("id", "content", "user_id", "agent_id", "thread_id")
    # needs_review/review_cause (issue #32): set by a change to a memory it was derived from, cleared on the staff
    # review page (memory.services.review.dependant_clear); shown here, never edited.
    readonly_fields = ("id", "user_id", "agent_id", "thread_id", "source_message_ids", "pending", "needs_review",
                       "review_cause", "created_at", "updated_at")
    fields = ("id", "memory_type", "content", "metadata", "status", "timestamp", "expires_at", "valid_from",
              "valid_to", "user_id", "agent_id", "thread_id", "source_message_ids", "pending", "needs_review",
              "review_cause", "created_at",
              "updated_at")
    form = checked_form(metadata=check_metadata, together=((("valid_from", "valid_to"), check_window),))

    def get_readonly_fields(self, request, obj=None):
        """A memory awaiting review is decided on the staff review page (``memory.services.review``), not edited
        here: every field is read-only while it waits (``update_memory`` does not reach it either)."""
        if obj is not None and obj.pending:
            return self.fields
        return self.readonly_fields

    def has_add_permission(self, request):
        return False  # memories are added through the API or extraction, which embed them

    def save_model(self, request, obj, form, change):
        changed = set(form.changed_data)
        given = {name: getattr(obj, name) for name in ("content", "metadata", "timestamp", "status", "memory_type",
                                                       "valid_from", "valid_to")  # the window: issue #32
                 if name in changed}
        # services.memory_update is what update_memory calls; it also takes memory_type (not a spec parameter).
        # By project, as delete by id: a memory stored with no thread is editable too.
        memory_update(project=obj.project, memory_id=obj.public_id,
                      retention=AgentMemory(project=obj.project).retention_config, **given)
        if "expires_at" in changed:
            memory_state_update(project=obj.project, memory_id=obj.public_id, expires_at=obj.expires_at)

    def delete_queryset(self, request, queryset):
        """``services.memory_delete_by_id`` each record (its thread's running extraction fenced, as through the
        API; relations go, the records they invalidated revalidate), then ``storage_scrub`` once.

        Each is a single delete, so each keeps its history with a ``delete`` version, as through the API
        (decided after a security review): the text stays in ``oam_memory_versions`` until the user is
        erased or the thread deleted, which is what erasure is for."""
        for row in list(queryset.select_related("project")):
            memory_delete_by_id(project=row.project, memory_id=row.public_id)
        storage_scrub()


@admin.register(Image)
class ImageAdmin(ErasingAdmin):
    """Images: description and metadata edited through ``Thread.update_image`` (re-embeds)."""

    list_display = (shown_id, "project", "thread", "message", "mime_type", "width", "height", "size_bytes",
                    "short_description", "expires_at")
    list_filter = ("project", "mime_type", "created_at")
    search_fields = ("id", "thread__id", "message__id", "description")
    fields = ("id", "thread", "message", "mime_type", "width", "height", "size_bytes", "description", "metadata",
              "timestamp", "expires_at", "created_at", "updated_at")
    readonly_fields = ("id", "thread", "message", "mime_type", "width", "height", "size_bytes", "timestamp",
                       "expires_at", "created_at", "updated_at")
    form = checked_form(metadata=check_metadata)

    @admin.display(description="description")
    def short_description(self, obj):
        return (obj.description or "")[:80]

    def has_add_permission(self, request):
        return False  # images are validated and embedded by add_image / add_messages

    def save_model(self, request, obj, form, change):
        changed = {name: getattr(obj, name) for name in ("description", "metadata") if name in form.changed_data}
        if changed:
            _handle(obj.thread).update_image(obj.public_id, **changed)

    erase = staticmethod(erasure.images_erase)
    PART_OF_A_MESSAGE = "An image part of a message goes with its message: delete or edit the message instead."

    def delete_model(self, request, obj):
        if obj.message_id:  # spec: delete_image refuses message parts
            self.message_user(request, self.PART_OF_A_MESSAGE, level="error")
            return
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        if queryset.filter(message__isnull=False).exists():
            self.message_user(request, f"{self.PART_OF_A_MESSAGE} Those were left.", level="warning")
        super().delete_queryset(request, queryset.filter(message__isnull=True))


@admin.register(RecordLink)
class RecordLinkAdmin(ProjectScopedAdmin):
    """Relations (spec: link_records): edited and deleted through ``memory.links`` (status lifecycle kept)."""

    list_display = (shown_id, "project", "thread_id", "source_id", "relation_type", "target_id",
                    "opposite_relation_type", "created_at")
    list_filter = ("project", "relation_type", "source_type", "target_type")
    search_fields = ("id", "thread_id", "source_id", "target_id", "relation_type")
    fields = ("id", "thread_id", "source_id", "source_type", "target_id", "target_type", "relation_type",
              "opposite_relation_type", "metadata", "timestamp", "created_at")
    readonly_fields = ("id", "thread_id", "source_id", "source_type", "target_id", "target_type", "created_at")
    form = checked_form(relation_type=check_relation_type, opposite_relation_type=check_relation_type,
                        metadata=check_metadata)

    def has_add_permission(self, request):
        return False  # link_records checks the endpoints; use the staff thread page or the API

    def save_model(self, request, obj, form, change):
        given = {name: getattr(obj, name) for name in ("relation_type", "opposite_relation_type", "timestamp",
                                                       "metadata") if name in form.changed_data}
        link_update(thread=Thread.objects.get(pk=obj.thread_id), relation_id=obj.public_id, **given)

    def delete_model(self, request, obj):
        link_delete(thread=Thread.objects.get(pk=obj.thread_id), relation_id=obj.public_id)

    def delete_queryset(self, request, queryset):
        for pk, thread_id in list(queryset.values_list("pk", "thread_id")):
            link_delete(thread=Thread.objects.get(pk=thread_id), relation_id=public_id(pk))


@admin.register(SearchChunk)
class SearchChunkAdmin(ReadOnlyAdmin):
    """Search units (derived from records by the services); the embedding column is not shown."""

    list_display = ("id", "project", "record_type", "record_id", "chunk_index", "thread_id", "status", "expires_at",
                    "short_text")
    list_filter = ("project", "record_type", "source_kind", "status")
    search_fields = ("record_id", "thread_id", "user_id", "agent_id", "text")
    exclude = ("embedding",)

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:80]


@admin.register(ThreadSummary)
class ThreadSummaryAdmin(ReadOnlyAdmin):
    """Durable summaries (refreshed by the LLM, memory.context.summaries)."""

    list_display = ("thread", "project", "revision", "through_seq", "updated_at")
    list_filter = ("project", "updated_at")
    search_fields = ("thread__id", "content")


@admin.register(ExtractionJob)
class ExtractionJobAdmin(ReadOnlyAdmin):
    """Extraction jobs (memory.extraction): state, counts, timings and errors."""

    list_display = ("id", "project", "thread", "trigger", "status", "failure", "from_seq", "to_seq", "attempts",
                    "memories_created", "memories_linked", "seconds", "created_at")
    list_filter = ("project", "status", "failure", "trigger", "created_at")
    search_fields = ("thread__id", "error")


@admin.register(ErasureReceipt)
class ErasureReceiptAdmin(ReadOnlyAdmin):
    """Receipts of user and agent erasures (``memory.services.erasure``): the subject only as a keyed digest."""

    list_display = ("id", "project", "subject", "cascade", "requested_by", "requested_at", "completed_at")
    list_filter = ("project", "subject", "requested_at")
    search_fields = ("subject_digest", "requested_by")


@admin.register(MemoryVersion)
class MemoryVersionAdmin(ReadOnlyAdmin):
    """The history of memories (``memory.records.history``): appended by the services; deleted by an erasure, a
    thread's delete and the expiry purge, never here."""

    list_display = ("memory_id", "version", "action", "actor_kind", "actor_id", "project", "created_at")
    list_filter = ("project", "action", "actor_kind", "created_at")
    search_fields = ("memory_id", "thread_id", "actor_id", "reason")


@admin.register(MemoryDerivation)
class MemoryDerivationAdmin(ReadOnlyAdmin):
    """``derived_from`` edges between memories (issue #32, ``memory.links.dependants``): written with the derived
    memory; deleted with the user, agent or thread and by the expiry purge, never here."""

    list_display = ("memory_id", "source_id", "thread_id", "project", "created_at")
    list_filter = ("project", "created_at")
    search_fields = ("memory_id", "source_id", "thread_id")


@admin.register(HistoryVector)
class HistoryVectorAdmin(ReadOnlyAdmin):
    """Chunk vectors of memories' earlier contents (issue #32, ``memory.index.writer.keep_history_vectors``): copied
    when an edit or a single delete replaces a memory's chunks; read by as-of searches; deleted with the memory's
    history, never here. The embedding column is not shown."""

    list_display = ("memory_id", "content_sha", "chunk_index", "project", "created_at")
    list_filter = ("project", "created_at")
    search_fields = ("memory_id", "content_sha")
    exclude = ("embedding",)


@admin.register(ContextCardLog)
class ContextCardLogAdmin(ReadOnlyAdmin):
    """The context cards the service returned (issue #32, ``memory.services.cards``): written by every card read;
    replayed by ``get_context_card(as_of=...)``; deleted with the thread or subject and by the expiry purge, never
    here."""

    list_display = ("thread_id", "served_at", "last_served_at", "parameters_digest", "project")
    list_filter = ("project", "served_at")
    search_fields = ("thread_id", "user_id", "agent_id", "parameters_digest")


@admin.register(Profile)
class ProfileAdmin(ProjectScopedAdmin):
    """User and agent profiles (``memory.services.profiles``; the SDK's ``add_user``/``add_agent``). A delete
    scrubs the storage afterwards (``storage_scrub``): the information is about a person."""

    list_display = ("subject_id", "kind", "project", "updated_at")
    list_filter = ("project", "kind", "updated_at")
    search_fields = ("subject_id", "information")
    readonly_fields = ("created_at", "updated_at")

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        storage_scrub()

    def delete_queryset(self, request, queryset):
        super().delete_queryset(request, queryset)
        storage_scrub()


@admin.register(EmbeddingSpace)
class EmbeddingSpaceAdmin(NoEditing, admin.ModelAdmin):
    """The embedder that made this database's vectors (one site-wide row, no project): shown to superusers only,
    never edited here (editing it would not change the vectors; ``memory.checks.check_embedding_space``)."""

    list_display = ("embedder", "dimensions", "recorded_at")
    list_filter = ("dimensions",)
    search_fields = ("embedder",)

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_active and request.user.is_superuser
