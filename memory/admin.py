"""Django admin for threads, messages and memories.

Edits made here go straight to the rows; the search chunks are kept in step
by ``save_model``/``delete_model`` through the same services the API uses, so
an edited memory is re-embedded.
"""

from django.contrib import admin

from memory import services
from memory.client import AgentMemory
from memory.models import Memory, Message, SearchChunk, Thread
from memory.types import NOTSET


class MessageInline(admin.TabularInline):
    model = Message
    fields = ("seq", "role", "content", "timestamp", "status", "expires_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    ordering = ("seq",)


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ("id", "user_id", "agent_id", "created_at", "updated_at")
    search_fields = ("id", "user_id", "agent_id")
    list_filter = ("created_at",)
    readonly_fields = ("next_seq", "extracted_through_seq", "created_at", "updated_at")
    inlines = [MessageInline]

    def delete_model(self, request, obj):
        services.thread_delete(thread_id=obj.pk)

    def delete_queryset(self, request, queryset):
        for pk in list(queryset.values_list("pk", flat=True)):
            services.thread_delete(thread_id=pk)


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ("id", "thread", "seq", "role", "short_content", "timestamp", "status", "expires_at")
    list_filter = ("status", "role")
    search_fields = ("id", "thread__id", "content")
    readonly_fields = ("id", "thread", "seq", "role", "timestamp", "event_at", "created_at", "updated_at")
    fields = ("id", "thread", "seq", "role", "content", "metadata", "timestamp", "status", "expires_at",
              "created_at", "updated_at")

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:80]

    def has_add_permission(self, request):
        return False  # messages are appended through the API, which embeds them

    def save_model(self, request, obj, form, change):
        thread = AgentMemory().get_thread(obj.thread_id)
        changed = set(form.changed_data)
        thread.update_message(
            obj.pk,
            content=obj.content if "content" in changed else NOTSET,
            metadata=obj.metadata if "metadata" in changed else NOTSET,
        )
        if changed & {"status", "expires_at"}:
            Message.objects.filter(pk=obj.pk).update(status=obj.status, expires_at=obj.expires_at)
            SearchChunk.objects.filter(source_kind="message", record_id=obj.pk).update(
                status=obj.status, expires_at=obj.expires_at)

    def delete_model(self, request, obj):
        services.message_delete(thread=obj.thread, message_id=obj.pk)


@admin.register(Memory)
class MemoryAdmin(admin.ModelAdmin):
    list_display = ("id", "memory_type", "short_content", "user_id", "thread_id", "status", "expires_at")
    list_filter = ("memory_type", "status")
    search_fields = ("id", "content", "user_id", "agent_id", "thread_id")
    readonly_fields = ("id", "user_id", "agent_id", "thread_id", "source_message_ids", "created_at", "updated_at")
    fields = ("id", "memory_type", "content", "metadata", "status", "timestamp", "expires_at", "user_id",
              "agent_id", "thread_id", "source_message_ids", "created_at", "updated_at")

    @admin.display(description="content")
    def short_content(self, obj):
        return obj.content[:80]

    def has_add_permission(self, request):
        return False  # memories are added through the API or extraction, which embed them

    def save_model(self, request, obj, form, change):
        thread = AgentMemory().get_thread(obj.thread_id)
        changed = set(form.changed_data)
        thread.update_memory(
            obj.pk,
            content=obj.content if "content" in changed else NOTSET,
            metadata=obj.metadata if "metadata" in changed else NOTSET,
            timestamp=obj.timestamp if "timestamp" in changed else NOTSET,
            status=obj.status if "status" in changed else NOTSET,
        )
        if "memory_type" in changed or "expires_at" in changed:
            Memory.objects.filter(pk=obj.pk).update(memory_type=obj.memory_type, expires_at=obj.expires_at)
            SearchChunk.objects.filter(source_kind="memory", record_id=obj.pk).update(
                record_type=obj.memory_type, expires_at=obj.expires_at)

    def delete_model(self, request, obj):
        Memory.objects.filter(pk=obj.pk).delete()
        SearchChunk.objects.filter(source_kind="memory", record_id=obj.pk).delete()
