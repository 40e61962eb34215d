"""Admin lists of episodic and semantic memories, each with its change history."""

from django.contrib import admin

from apps.core.extensions import holding, register_admin_holdings
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.tenancy.admin_base import HistoryInline, ReadOnlyAdmin

OWNER_FIELDS = ["organization", "scope", "end_user", "created_by"]
TAIL_FIELDS = ["source_message_ids", "embedding_model", "deleted_at", "created_at", "updated_at"]


class ChangeInline(HistoryInline):
    fields = ["created_at", "operation", "actor", "reason", "previous_value", "new_value"]
    readonly_fields = fields
    ordering = ["-created_at"]


class EpisodicMemoryChangeInline(ChangeInline):
    model = EpisodicMemoryChange


class SemanticMemoryChangeInline(ChangeInline):
    model = SemanticMemoryChange


class MemoryAdmin(ReadOnlyAdmin):
    """Memories change only through extraction, so every change has history; staff read them and may delete them."""

    list_select_related = ["organization", "end_user"]
    date_hierarchy = "created_at"

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding", "search_vector")

    @admin.display(description="summary", ordering="summary")
    def summary_short(self, memory):
        return memory.summary[:100]


@admin.register(EpisodicMemory)
class EpisodicMemoryAdmin(MemoryAdmin):
    list_display = [
        "summary_short",
        "occurred_at",
        "time_granularity",
        "actor",
        "event_type",
        "end_user",
        "scope",
        "deleted_at",
    ]
    list_filter = ["scope", "time_granularity", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["summary", "details", "actor", "=end_user__user_id"]
    fields = [
        *OWNER_FIELDS,
        "occurred_at",
        "time_granularity",
        "actor",
        "event_type",
        "summary",
        "details",
        *TAIL_FIELDS,
    ]
    inlines = [EpisodicMemoryChangeInline]


@admin.register(SemanticMemory)
class SemanticMemoryAdmin(MemoryAdmin):
    list_display = ["name", "summary_short", "end_user", "scope", "source", "updated_at", "deleted_at"]
    list_filter = ["scope", ("deleted_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "summary", "details", "=end_user__user_id"]
    fields = [*OWNER_FIELDS, "name", "summary", "details", "source", *TAIL_FIELDS]
    inlines = [SemanticMemoryChangeInline]


def end_user_memories(end_user) -> list:
    """Soft-deleted ones too: they are kept (with their history) until DELETED_MEMORY_RETENTION_DAYS."""
    return [
        holding(
            title,
            model.objects.filter(end_user=end_user).order_by("-created_at"),
            label=lambda memory: memory.summary[:80],
            filters={"end_user": end_user.pk},
        )
        for title, model in (("Episodic memories", EpisodicMemory), ("Semantic memories", SemanticMemory))
    ]


register_admin_holdings("tenancy.EndUser", end_user_memories)
