"""Webhook endpoints (where an organisation wants its events POSTed) and the delivery log."""

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from apps.core.events import EVENT_TYPES
from apps.core.models import BaseModel
from apps.tenancy.models import requesting_client

# The event a "send test event" request delivers; it is not one an endpoint subscribes to.
TEST_EVENT = "webhook.test"


class WebhookEndpoint(BaseModel):
    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="webhook_endpoints")
    # Validated by the API (apps.webhooks.serializers.http_url) as the delivering client parses URLs.
    url = models.URLField(max_length=2000, help_text="Where events are POSTed (http or https).")
    description = models.CharField(max_length=200, blank=True, default="")
    # Needed in clear to sign each delivery; the API shows it once, on create.
    secret = models.CharField(max_length=100, editable=False)
    events = ArrayField(
        models.CharField(max_length=64, choices=[(name, name) for name in EVENT_TYPES]),
        help_text="Event types delivered to this endpoint.",
    )
    include_content = models.BooleanField(
        default=False,
        help_text="Payloads also carry what the event is about (a skill's text); off: ids only.",
    )
    active = models.BooleanField(default=True)
    consecutive_failures = models.PositiveIntegerField(
        default=0, help_text="Deliveries failed in a row (after their retries); a success resets it."
    )
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=255, blank=True, default="")
    registered_by = requesting_client(
        help_text="The client whose request registered the endpoint (an audit note, like an export's requester)."
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(events__contained_by=list(EVENT_TYPES)) & ~Q(events=[]),
                name="webhook_endpoint_events_valid",
                violation_error_message="Events must be known event types, at least one.",
            ),
        ]
        indexes = [models.Index(fields=["organization", "active"], name="webhook_endpoint_active_idx")]

    def __str__(self):
        return f"{self.url} ({self.organization_id})"


class WebhookDelivery(BaseModel):
    """One event sent to one endpoint; errors name a status or an exception type only."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending (being sent or retried)"
        SUCCEEDED = "succeeded", "Delivered"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled (endpoint disabled)"

    organization = models.ForeignKey("tenancy.Organization", on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_type = models.CharField(max_length=64)
    event_id = models.CharField(max_length=64)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=255, blank=True, default="")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    task_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "event_id"],
                name="webhook_delivery_event_once_per_endpoint",
                violation_error_message="This event was already queued for this endpoint.",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "succeeded", "failed", "cancelled"]),
                name="webhook_delivery_status_valid",
            ),
        ]
        indexes = [models.Index(fields=["endpoint", "-created_at"], name="webhook_delivery_newest_idx")]

    def __str__(self):
        return f"{self.event_type} {self.event_id} ({self.status})"
