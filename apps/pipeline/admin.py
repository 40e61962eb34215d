from django.contrib import admin, messages

from apps.core.admin import OrganizationScopedAdmin
from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.services import task_mark_dead, task_retry_now


@admin.register(MemoryTask)
class MemoryTaskAdmin(OrganizationScopedAdmin):
    list_display = ["task_type", "status", "attempts", "max_attempts", "organization", "run_after", "short_error", "updated_at"]
    list_filter = ["status", "task_type"]
    list_select_related = ["organization"]
    search_fields = ["=id", "idempotency_key"]
    date_hierarchy = "created_at"
    actions = ["retry_now", "mark_dead"]
    readonly_fields = [
        "id", "task_type", "organization", "payload", "status", "idempotency_key", "attempts", "max_attempts",
        "run_after", "claimed_by", "claimed_at", "heartbeat_at", "finished_at", "result", "error", "created_at",
        "updated_at",
    ]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="error")
    def short_error(self, task):
        return task.error.splitlines()[0][:120] if task.error else ""

    @admin.action(description="Retry now")
    def retry_now(self, request, queryset):
        retried = 0
        for task in queryset:
            try:
                task_retry_now(task=task)
                retried += 1
            except ValueError as exc:
                self.message_user(request, f"{task.id}: {exc}", messages.WARNING)
        self.message_user(request, f"Queued {retried} task(s) to run now.")

    @admin.action(description="Mark dead")
    def mark_dead(self, request, queryset):
        for task in queryset:
            task_mark_dead(task=task, reason=f"Marked dead by {request.user}.")
        self.message_user(request, f"Marked {queryset.count()} task(s) dead.")


@admin.register(ProcessHeartbeat)
class ProcessHeartbeatAdmin(admin.ModelAdmin):
    """Beat and worker processes by their last sign of life (platform-wide, no tenant data)."""

    list_display = ["kind", "hostname", "pid", "started_at", "seen_at"]
    list_filter = ["kind"]
    ordering = ["kind", "-seen_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
