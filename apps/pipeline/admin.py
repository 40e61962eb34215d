from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Count
from django.urls import reverse

from apps.core.extensions import Tile, admin_url, of_organization, register_dashboard_card
from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.selectors import machinery_status, queue_status
from apps.pipeline.services import task_mark_dead, task_retry_now
from apps.tenancy.admin_base import NoAddOrChange, ReadOnlyAdmin


@admin.register(MemoryTask)
class MemoryTaskAdmin(ReadOnlyAdmin):
    list_display = [
        "task_type",
        "status",
        "priority",
        "attempts",
        "max_attempts",
        "organization",
        "run_after",
        "short_error",
        "updated_at",
    ]
    list_filter = ["status", "task_type"]
    list_select_related = ["organization"]
    search_fields = ["=id", "idempotency_key"]
    date_hierarchy = "created_at"
    actions = ["retry_now", "mark_dead"]
    readonly_fields = [
        "id",
        "task_type",
        "organization",
        "payload",
        "status",
        "idempotency_key",
        "attempts",
        "max_attempts",
        "run_after",
        "claimed_by",
        "claimed_at",
        "heartbeat_at",
        "finished_at",
        "result",
        "error",
        "priority",
        "timings",
        "handed_to",
        "created_at",
        "updated_at",
    ]

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
class ProcessHeartbeatAdmin(NoAddOrChange, admin.ModelAdmin):
    """Beat and worker processes by their last sign of life (platform-wide, no tenant data)."""

    list_display = ["kind", "hostname", "pid", "started_at", "seen_at"]
    list_filter = ["kind"]
    ordering = ["kind", "-seen_at"]


def tasks_card(*, user, organization):
    if not user.has_perm("pipeline.view_memorytask"):
        return None
    by_status = dict(
        of_organization(MemoryTask.objects, organization)
        .filter(status__in=[MemoryTask.Status.FAILED, MemoryTask.Status.DEAD])
        .values_list("status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    return (
        "Tasks",
        [
            Tile(
                label,
                by_status.get(status, 0),
                admin_url("admin:pipeline_memorytask_changelist", status__exact=status),
                attention=by_status.get(status, 0) > 0,
            )
            for status, label in ((MemoryTask.Status.FAILED, "Failed, retrying"), (MemoryTask.Status.DEAD, "Dead"))
        ],
    )


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    return f"{seconds:.0f} s ago" if seconds < 120 else f"{seconds / 60:.0f} min ago"


def machinery_card(*, user, organization):
    """Platform-wide, not per organisation: beat and workers serve every tenant."""
    if not user.has_perm("pipeline.view_memorytask"):
        return None
    status, queue = machinery_status(), queue_status()
    beat, worker, waited = status["beat"], status["worker"], queue["oldest_due_age_seconds"]
    late = waited is not None and waited > settings.PROCESS_STALE_AFTER_SECONDS
    return (
        "Machinery",
        [
            Tile(
                "Beat: last tick",
                _age(beat["age_seconds"]),
                reverse("admin:django_celery_beat_periodictask_changelist"),
                attention=beat["status"] != "ok",
            ),
            Tile(
                f"Workers alive: {worker['alive']}, last heartbeat",
                _age(worker["age_seconds"]),
                reverse("admin:pipeline_processheartbeat_changelist"),
                attention=worker["status"] != "ok",
            ),
            Tile(
                "Tasks due now",
                queue["due"],
                admin_url("admin:pipeline_memorytask_changelist", status__exact=MemoryTask.Status.QUEUED),
                attention=late,
            ),
            Tile(
                "Oldest due task waiting since",
                _age(waited) if queue["due"] else "none waiting",
                admin_url("admin:pipeline_memorytask_changelist", status__exact=MemoryTask.Status.QUEUED),
                attention=late,
            ),
        ],
    )


register_dashboard_card(tasks_card, order=40)
register_dashboard_card(machinery_card, order=50)
