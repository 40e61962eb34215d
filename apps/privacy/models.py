"""Erasure requests: the audit trail of what was erased, when and by whom, without any content."""

from django.db import models
from django.db.models import Q

from apps.core.models import BaseModel
from apps.tenancy.models import requesting_client


class ErasureRequest(BaseModel):
    class SubjectKind(models.TextChoices):
        USER = "user", "End user"
        CLIENT = "client", "Client"

    class Authorization(models.TextChoices):
        CLIENT_CAN_ERASE = "client_can_erase", "API client with can_erase"
        STAFF = "staff", "Staff in the admin"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed (will retry)"

    # One per subject; a second request while one has failed is harmless (a purge is idempotent, same locks).
    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="erasure_requests")
    subject_kind = models.CharField(max_length=8, choices=SubjectKind.choices)
    # The caller's user_id, or the client's id: the subject of the audit trail, never its data.
    subject_id = models.CharField(max_length=255)
    requested_by = requesting_client(
        help_text="The API client that asked; empty when a staff member asked in the admin."
    )
    requested_by_staff = models.CharField(max_length=150, blank=True, default="")
    authorized_by = models.CharField(
        max_length=32,
        choices=Authorization.choices,
        default=Authorization.CLIENT_CAN_ERASE,
        help_text="The permission the request was granted under, as it stood when it was made.",
    )
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # The MemoryTask id, not a foreign key: the audit record outlives pruned task rows.
    task_id = models.UUIDField(null=True, blank=True)
    counts = models.JSONField(default=dict, blank=True, help_text="Rows removed or changed, per table.")
    residual = models.JSONField(null=True, blank=True, help_text="What verification still found, per table.")
    error = models.CharField(max_length=255, blank=True, default="", help_text="The exception type only, never data.")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(condition=Q(subject_kind__in=["user", "client"]), name="erasure_subject_kind_valid"),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed"]), name="erasure_status_valid"
            ),
            models.UniqueConstraint(
                fields=["organization", "subject_kind", "subject_id"],
                condition=Q(status__in=["queued", "running"]),
                name="erasure_one_active_per_subject",
                violation_error_message="An erasure of this subject is already in progress.",
            ),
        ]
        indexes = [models.Index(fields=["organization", "-created_at"], name="erasure_org_recent_idx")]

    def __str__(self):
        return f"erasure of {self.subject_kind} {self.subject_id} ({self.status})"
