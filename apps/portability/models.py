"""Export requests made through the API: what was asked, by whom, and where its archive is until it expires."""

from django.db import models
from django.db.models import Q

from apps.core.models import BaseModel


class ExportRequest(BaseModel):
    class Selection(models.TextChoices):
        USER = "user", "End user"
        CLIENT = "client", "Client"
        SCOPE = "scope", "Scope"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Ready to download"
        FAILED = "failed", "Failed (will retry)"
        EXPIRED = "expired", "Expired (archive deleted)"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="export_requests")
    requested_by = models.ForeignKey(
        "tenancy.Client",
        on_delete=models.CASCADE,
        related_name="+",
        help_text="The API client that asked: the only one that may download the archive.",
    )
    selection = models.CharField(max_length=8, choices=Selection.choices)
    # The user_id, client id or scope name: what was exported, never its data.
    value = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    # The MemoryTask id, not a foreign key: the record outlives pruned task rows.
    task_id = models.UUIDField(null=True, blank=True)
    file_name = models.CharField(max_length=255, blank=True, default="", help_text="Under EXPORT_DIR.")
    size_bytes = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True, default="")
    counts = models.JSONField(default=dict, blank=True, help_text="Rows per kind.")
    error = models.CharField(max_length=255, blank=True, default="", help_text="The exception type only, never data.")
    finished_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Bumped by every erasure while the export is being written: an archive written across a bump is written again.
    generation = models.PositiveIntegerField(default=0)
    # False for archives written before the people were recorded: any erasure deletes them.
    people_recorded = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(selection__in=["user", "client", "scope"]), name="export_selection_valid"
            ),
            models.CheckConstraint(
                condition=Q(status__in=["queued", "running", "succeeded", "failed", "expired"]),
                name="export_status_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "-created_at"], name="export_org_recent_idx"),
            models.Index(fields=["status", "expires_at"], name="export_expiry_idx"),
        ]

    def __str__(self):
        return f"export of {self.selection} {self.value} ({self.status})"


class ExportPerson(models.Model):
    """Someone whose rows an export's archive holds: erasing them deletes it. Kept only while the archive exists."""

    class Kind(models.TextChoices):
        USER = "user", "End user"
        CLIENT = "client", "Client"

    id = models.BigAutoField(primary_key=True)
    export = models.ForeignKey(ExportRequest, on_delete=models.CASCADE, related_name="people")
    kind = models.CharField(max_length=8, choices=Kind.choices)
    # The user_id or the client's id, as the erasure's subject names them.
    subject_id = models.CharField(max_length=255)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["export", "kind", "subject_id"], name="export_person_unique"),
            models.CheckConstraint(condition=Q(kind__in=["user", "client"]), name="export_person_kind_valid"),
        ]
        indexes = [models.Index(fields=["kind", "subject_id"], name="export_person_subject_idx")]

    def __str__(self):
        return f"{self.kind} in export {self.export_id}"
