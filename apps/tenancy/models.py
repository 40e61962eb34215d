"""Organisations (tenants), their API clients and keys, their end users, and staff membership."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q

from apps.core.models import BaseModel
from apps.tenancy.readers import Reader

SCOPE_PATTERN = r"^[A-Za-z0-9_.:-]{1,64}$"


class Organization(BaseModel):
    name = models.CharField(max_length=200, unique=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Client(BaseModel):
    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        DISABLED = "disabled", "Disabled"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="clients")
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    write_scope = models.CharField(  # noqa: DJ001  (NULL is the documented "read-only", distinct from a scope)
        max_length=64,
        null=True,
        blank=True,
        help_text="Scope stamped on everything this client writes; empty = read-only.",
    )
    read_scopes = ArrayField(
        models.CharField(max_length=64), default=list, blank=True, help_text="Scopes this client may read."
    )
    can_erase = models.BooleanField(
        default=False,
        help_text="May erase any end user or client of the organisation, in every scope (DELETE users/…/memories, "
        "clients/…/memories) and see the organisation's erasures.",
    )
    can_export = models.BooleanField(
        default=False,
        help_text="May export any end user's, client's or scope's data of the organisation, in every scope "
        "(POST exports); the archive is downloadable by this client only.",
    )
    can_manage_webhooks = models.BooleanField(
        default=False,
        help_text="May list, create, change and delete the organisation's webhook endpoints (/api/v1/webhooks/), "
        "which receive events of every scope.",
    )

    requests_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="API requests (REST and MCP) this client may make per minute; empty = the API_REQUESTS_PER_MINUTE "
        "setting, 0 = no limit.",
    )

    # DRF treats request.user as authenticated when this is true; the client is the API's principal.
    is_authenticated = True

    class Meta:
        ordering = ["organization__name", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "name"],
                name="client_name_unique_per_organization",
                violation_error_message="A client with this name already exists in the organisation.",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["active", "disabled"]),
                name="client_status_valid",
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.organization})"

    @property
    def is_active(self) -> bool:
        return self.status == self.Status.ACTIVE

    @property
    def reader(self) -> Reader:
        """What this client reads: its organisation, in its read scopes."""
        return Reader(organization_id=self.organization_id, read_scopes=tuple(self.read_scopes))


def requesting_client(*, help_text: str) -> models.ForeignKey:
    """A row's note of the API client whose request made it: emptied, not cascaded, when the client goes."""
    return models.ForeignKey(
        Client, on_delete=models.SET_NULL, null=True, blank=True, related_name="+", help_text=help_text
    )


class ClientAPIKey(BaseModel):
    """An API key: only its prefix (to find it) and a SHA-256 of the whole key are stored."""

    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(max_length=16, unique=True)
    hashed_key = models.CharField(max_length=64)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self):
        return f"{self.prefix}…"


class EndUser(BaseModel):
    """A person an agent talks to or works for, named by the caller's own `user_id`."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="end_users")
    user_id = models.CharField(max_length=255)

    class Meta:
        ordering = ["user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "user_id"],
                name="end_user_unique_per_organization",
                violation_error_message="This user id already exists in the organisation.",
            ),
        ]

    def __str__(self):
        return self.user_id


class StaffMembership(BaseModel):
    """Attaches a Django staff user to the one organisation whose rows the admin shows them."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="staff_membership")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="staff")

    def __str__(self):
        return f"{self.user} @ {self.organization}"


class TenancyGeneration(models.Model):
    """One row whose token is replaced in the transaction of every change to what an API key may do
    (apps.tenancy.keycache): a process keeps a key it authenticated only while the token it read then
    is still the committed one. Not a BaseModel: a single counter row has no identity or history."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    token = models.UUIDField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(id=1), name="tenancy_generation_single_row", violation_error_message="There is one row."
            ),
        ]

    def __str__(self):
        return str(self.token)
