"""MemoryTask: one row per unit of background work; the row is the outbox and the record."""

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.core.models import BaseModel
from apps.tenancy.models import requesting_client


class MemoryTask(BaseModel):
    class Priority(models.IntegerChoices):
        """Workers take due tasks in this order (then by due time): what a user is waiting for first."""

        URGENT = 0, "Urgent: what a user waits for (conversation turns searchable, skills evolved, erasure)"
        LEARN = 10, "Learning (distillation, memories and entities from conversations)"
        COMPILE = 20, "Compiling (profiles, topics, exports, task sessions' turns searchable)"
        MAINTENANCE = 30, "Maintenance (lint, expiry, retention)"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed (will retry)"
        DEAD = "dead", "Dead"
        CANCELLED = "cancelled", "Cancelled"

    # A task in one of these states still has work ahead of it; its idempotency key is taken.
    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING, Status.FAILED)
    # A worker may claim a task in one of these states once it is due.
    CLAIMABLE_STATUSES = (Status.QUEUED, Status.FAILED)

    task_type = models.CharField(max_length=64)
    organization = models.ForeignKey(
        "tenancy.Organization", on_delete=models.CASCADE, null=True, blank=True, related_name="memory_tasks"
    )
    # Who may see the task through the API (apps.pipeline.selectors.task_list): clients reading its
    # scope, and the client whose request created it. No scope = organisation-wide work (erasure).
    scope = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001  (NULL: no scope, not an empty one)
    client = requesting_client(
        help_text="The API client whose request created this task; empty for background follow-ups."
    )
    # Other clients whose requests were answered with this task's id (they asked for work it already
    # carried): the id keeps answering GET tasks/<id>/ for each of them.
    handed_to = ArrayField(models.UUIDField(), default=list, blank=True)
    payload = models.JSONField(default=dict, blank=True, help_text="Ids and small parameters only, never memory text.")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    priority = models.PositiveSmallIntegerField(choices=Priority.choices, default=Priority.COMPILE)
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001  (unique among non-NULL keys)
    attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=5)
    run_after = models.DateTimeField(default=timezone.now)
    claimed_by = models.CharField(max_length=255, blank=True, default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # Where the time went (apps.core.timing): `first_due_at` and `first_claimed_at`, and the seconds
    # of every attempt added up: `handler_s` (inside the handler), and within it `sql_s`,
    # `embedding_s`, `llm_s`, `lock_wait_s`; `failed_s` of the attempts that failed.
    timings = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["task_type", "idempotency_key"],
                condition=Q(status__in=["queued", "running", "failed"]) & Q(idempotency_key__isnull=False),
                name="memory_task_active_idempotency_key_unique",
                violation_error_message="An active task of this type already has this idempotency key.",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed", "dead", "cancelled"]),
                name="memory_task_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "run_after"], name="memory_task_due_idx"),
            # The claim's order: the most urgent due task first.
            models.Index(
                fields=["priority", "run_after"],
                condition=Q(status__in=["queued", "failed"]),
                name="memory_task_claim_order_idx",
            ),
            models.Index(fields=["organization", "status", "task_type"], name="memory_task_org_status_idx"),
        ]

    def __str__(self):
        return f"{self.task_type} {self.id} ({self.status})"


class ProcessHeartbeat(models.Model):
    """Written by the beat or worker process itself, so the machinery's health needs no broker."""

    class Kind(models.TextChoices):
        BEAT = "beat", "Beat"
        WORKER = "worker", "Worker"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    hostname = models.CharField(max_length=255)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "hostname"], name="process_heartbeat_kind_hostname_unique"),
            models.CheckConstraint(condition=Q(kind__in=["beat", "worker"]), name="process_heartbeat_kind_valid"),
        ]
        indexes = [models.Index(fields=["kind", "-seen_at"], name="process_heartbeat_newest_idx")]

    def __str__(self):
        return f"{self.kind} {self.hostname}"
